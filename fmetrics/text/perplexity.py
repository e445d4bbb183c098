"""`perplexity`: ``exp(mean negative log-likelihood)`` of target tokens under logits (a tensor metric)."""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.state import accum_dtype

__all__ = ["perplexity"]

_RULE = "target token ids in [0, vocab_size) (or ignore_index)"


class PerplexityState(NamedTuple):
    total: torch.Tensor  # float64 sum of -log p(target)
    count: torch.Tensor  # int64 tokens counted
    invalid: validation.Invalid


def _merge(a: PerplexityState, b: PerplexityState) -> PerplexityState:
    return PerplexityState(a.total + b.total, a.count + b.count, validation.invalid_merge(a.invalid, b.invalid))


@factory
def perplexity(*, ignore_index: Optional[int] = None) -> Metric:
    """Perplexity ``exp(-1/N sum_t log softmax(preds_t)[target_t])`` over all counted tokens.

    Args:
      ignore_index: a target id whose positions are not counted (e.g. padding),
        default ``None``.

    Inputs:
      ``update(state, preds, target)``: ``preds`` float logits (unnormalized
      scores) of shape ``(batch, seq_len, vocab_size)``; ``target`` int64 token
      ids of shape ``(batch, seq_len)``.

    Returns:
      A float64 scalar >= 1 (``nan`` before any counted token). Target ids
      outside ``[0, vocab_size)`` raise at once on CPU, or in `finalize` where
      checks are deferred (GPU, compile, vmap).

    Example::

        >>> logits = torch.tensor([[[2.0, 0.5, 0.1], [0.2, 1.5, 0.3]]])
        >>> fmetrics.perplexity()(logits, torch.tensor([[0, 1]]))
        tensor(1.4698, dtype=torch.float64)
    """
    name = "perplexity"
    if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, int)):
        raise validation.fail(name, "ignore_index", "an integer or None", repr(ignore_index))

    def shapes(preds, target):
        if not isinstance(preds, torch.Tensor) or preds.dim() != 3:
            raise validation.fail(name, "preds", "logits of shape (batch, seq_len, vocab_size)",
                                  getattr(preds, "shape", type(preds).__name__))
        if not preds.is_floating_point():
            raise validation.fail(name, "preds", "a floating point tensor", preds.dtype)
        if not isinstance(target, torch.Tensor) or target.dim() != 2 or target.shape != preds.shape[:2]:
            raise validation.fail(name, "target", f"int64 ids of shape {tuple(preds.shape[:2])}",
                                  getattr(target, "shape", type(target).__name__))
        if target.dtype != torch.int64:
            raise validation.fail(name, "target", "an int64 tensor", target.dtype)

    def check(preds, target):
        shapes(preds, target)
        keep = target != ignore_index if ignore_index is not None else torch.ones_like(target, dtype=torch.bool)
        bad = keep & ((target < 0) | (target >= preds.shape[-1]))
        if bad.any():
            raise ValueError(f"{name}: argument `target` expected {_RULE}; found "
                             f"{validation.quote(target[bad])}")

    def init() -> PerplexityState:
        z = lambda: torch.zeros((), dtype=torch.int64)  # noqa: E731 - distinct tensors: no aliasing guards
        invalid = validation.Invalid(z(), torch.full((), float("nan"), dtype=torch.float64), z(), z())
        return PerplexityState(torch.zeros((), dtype=accum_dtype()), z(), invalid)

    def update(s: PerplexityState, preds: torch.Tensor, target: torch.Tensor) -> PerplexityState:
        shapes(preds, target)
        v = preds.shape[-1]
        logp = torch.log_softmax(preds.detach().reshape(-1, v).to(torch.float32 if preds.dtype in (
            torch.float16, torch.bfloat16) else preds.dtype), dim=-1)
        t = target.reshape(-1)
        keep = t != ignore_index if ignore_index is not None else torch.ones_like(t, dtype=torch.bool)
        bad = keep & ((t < 0) | (t >= v))
        ok = keep & ~bad
        picked = torch.gather(logp, 1, torch.where(ok, t, torch.zeros_like(t)).unsqueeze(1)).squeeze(1)
        nll = -torch.where(ok, picked, torch.zeros_like(picked)).to(s.total.dtype).sum()
        return PerplexityState(s.total + nll, s.count + validation.count(ok),
                               validation.invalid_flag(s.invalid, bad, t))

    def finalize(s: PerplexityState) -> torch.Tensor:
        validation.invalid_report(name, _RULE, s.invalid)
        return torch.exp(s.total / s.count.to(s.total.dtype))

    return Metric(init=init, update=update, merge=_merge, finalize=finalize, name=name, check=check,
                  reductions=PerplexityState("sum", "sum", None), higher_is_better=False,
                  is_differentiable=True, bounds=(1.0, None))
