"""Aggregation metrics: sum, mean, min, max, cat (torchmetrics' semantics)."""
from fmetrics.aggregation.cat import CatState, cat
from fmetrics.aggregation.extrema import ExtremumState, max, min
from fmetrics.aggregation.mean import MeanState, mean
from fmetrics.aggregation.sum import SumState, sum

__all__ = ["sum", "mean", "min", "max", "cat"]
