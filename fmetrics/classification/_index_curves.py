"""Re-exports of the score-ranking (curve family) metrics."""
from fmetrics.classification.curves import *  # noqa: F401,F403
from fmetrics.classification.curves import __all__ as _curves_all

__all__: list[str] = list(_curves_all)
