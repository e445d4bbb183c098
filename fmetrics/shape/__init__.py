"""Shape metrics: Procrustes disparity. See docs/clustering.md (shape section)."""
from fmetrics.shape.procrustes import procrustes_disparity

__all__ = ["procrustes_disparity"]
