"""Builder for the audio metrics: the stream mean of a per-example value.

Every audio metric computes one value per example (per signal, per
``(..., time)`` row): SNR, SI-SDR, SDR, STOI, PESQ, ... The metric is the mean
of those values over the stream (torchmetrics' classes do the same), kept as a
float64 ``total`` and an int64 ``count``: sum-mergeable, so the distributed
reducer all-reduces it. With ``per_example=True`` the state instead keeps the
values themselves (a concatenating field) and `finalize` returns them,
concatenated along the first axis: the per-example output of torchmetrics'
functional form.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.state import accum_dtype, cat_chunks, merge_fields


class MeanState(NamedTuple):
    total: torch.Tensor  # float64 (): sum of the per-example values
    count: torch.Tensor  # int64 (): number of examples


class ValuesState(NamedTuple):
    values: tuple  # chunks of float64 per-example values, concatenated along dim 0


def check_bool(name: str, arg: str, value) -> bool:
    if not isinstance(value, bool):
        raise validation.fail(name, arg, "a bool", repr(value))
    return value


def check_choice(name: str, arg: str, value, allowed: tuple):
    if value not in allowed:
        raise validation.fail(name, arg, f"one of {allowed}", repr(value))
    return value


def signal_pair(name: str, preds, target, min_dim: int = 1, what: str = "(..., time)"):
    """Two real floating tensors of one shape with at least ``min_dim`` dims (metadata checks only)."""
    for arg, x in (("preds", preds), ("target", target)):
        if not isinstance(x, torch.Tensor):
            raise validation.fail(name, arg, "a tensor", type(x).__name__)
        if not x.is_floating_point():
            raise validation.fail(name, arg, "a real floating-point tensor", f"dtype {x.dtype}")
        if x.dim() < min_dim:
            raise validation.fail(name, arg, f"a tensor of shape {what}", f"shape {tuple(x.shape)}")
    if preds.shape != target.shape:
        raise validation.fail(name, "target", f"the shape of preds {tuple(preds.shape)}", tuple(target.shape))
    return preds, target


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """float32 for half inputs, else the input's dtype (float32 / float64)."""
    return x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32


def per_example_mean(name: str, values: Callable[..., torch.Tensor], per_example: bool, key: tuple,
                     **metadata) -> Metric:
    """The stream mean (or, with ``per_example``, the list) of ``values(*inputs)``.

    ``values`` checks its inputs and returns one float value per example,
    shape ``(...,)`` (it may carry autograd history: the one-shot call stays
    differentiable). ``key`` names the state (equal keys share one state).
    """
    check_bool(name, "per_example", per_example)
    if per_example:
        def init():
            return ValuesState(())

        def update(state, *inputs):
            v = values(*inputs).to(accum_dtype(inputs[0].device))
            return ValuesState((v.reshape(1) if v.dim() == 0 else v,))

        def finalize(state):
            return cat_chunks(state.values, torch.zeros(0, dtype=accum_dtype()))

        tags = ValuesState(values="cat")
    else:
        def init():
            return MeanState(torch.zeros((), dtype=accum_dtype()), torch.zeros((), dtype=torch.int64))

        def update(state, *inputs):
            v = values(*inputs)
            total = v.sum(dtype=state.total.dtype)
            return MeanState(state.total + total, state.count + v.numel())

        def finalize(state):
            return state.total / state.count

        tags = MeanState(total="sum", count="sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  state_key=("audio", *key, per_example), reductions=tags, **metadata)
