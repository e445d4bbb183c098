"""Classification metrics: binary / multiclass / multilabel factories and task facades."""
from fmetrics.classification._index_counts import *  # noqa: F401,F403
from fmetrics.classification._index_counts import __all__ as _counts_all
from fmetrics.classification._index_curves import *  # noqa: F401,F403
from fmetrics.classification._index_curves import __all__ as _curves_all

__all__ = [*_counts_all, *_curves_all]
