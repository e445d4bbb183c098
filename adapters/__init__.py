"""Adapters: torch.distributed reduction and the torchmetrics wrapper for fmetrics metrics.

* `adapters.distributed` -- ``reduce(metric, state, group=None)`` and ``EvalSampler``
  (needs only torch).
* `adapters.TorchMetric` -- any fmetrics `Metric` as a ``torchmetrics.Metric``
  (imported on first use: torchmetrics is an optional dependency).
"""
from adapters import distributed

__all__ = ["TorchMetric", "distributed"]


def __getattr__(name):
    if name == "TorchMetric":
        from adapters.torch_metric import TorchMetric

        return TorchMetric
    raise AttributeError(f"module 'adapters' has no attribute {name!r}")
