"""fmetrics: PyTorch metrics as pure functions over immutable states.

Every metric is ``init / update / merge / finalize``; see DESIGN.md.
"""
from fmetrics import state, testing, validation, wrappers
from fmetrics.aggregation import *  # noqa: F401,F403
from fmetrics.aggregation import __all__ as _aggregation_all
from fmetrics.classification import *  # noqa: F401,F403
from fmetrics.classification import __all__ as _classification_all
from fmetrics.collection import collection
from fmetrics.metric import Metric
from fmetrics.regression import *  # noqa: F401,F403
from fmetrics.regression import __all__ as _regression_all
from fmetrics.retrieval import *  # noqa: F401,F403
from fmetrics.retrieval import __all__ as _retrieval_all
from fmetrics.state import to_device

__version__ = "0.1.0"

__all__ = [
    "Metric",
    "collection",
    "to_device",
    "state",
    "testing",
    "validation",
    "wrappers",
    *_aggregation_all,
    *_classification_all,
    *_regression_all,
    *_retrieval_all,
]
