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
_FINITE = "logits with a finite log-normalizer at every counted position (no NaN or +inf; -inf masks, not a whole row)"


class PerplexityState(NamedTuple):
    total: torch.Tensor  # float64 sum of -log p(target)
    count: torch.Tensor  # int64 tokens counted
    invalid: validation.Invalid
    nonfinite: validation.Invalid  # counted positions whose logsumexp of the logits is NaN or +-inf


def _merge(a: PerplexityState, b: PerplexityState) -> PerplexityState:
    return PerplexityState(a.total + b.total, a.count + b.count, validation.invalid_merge(a.invalid, b.invalid),
                           validation.invalid_merge(a.nonfinite, b.nonfinite))


def _flat(preds: torch.Tensor) -> torch.Tensor:
    """Logits as ``(positions, vocab)`` in the input precision (fp16 / bf16 promoted to float32)."""
    x = preds.reshape(-1, preds.shape[-1])
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


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
      A float64 scalar >= 1 (``nan`` with a warning before any counted
      token; ``inf`` when a target token has a ``-inf`` logit). Target ids
      outside ``[0, vocab_size)`` and NaN or ``+inf`` logits (or a row of
      ``-inf``) at a counted position raise at once on CPU, or in `finalize`
      where checks are deferred (GPU, compile, vmap).

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
        lse = torch.logsumexp(_flat(preds), dim=-1)
        bad = keep.reshape(-1) & ~torch.isfinite(lse)
        if bad.any():
            raise ValueError(f"{name}: argument `preds` expected {_FINITE}; found the log-normalizer "
                             f"{validation.quote(lse[bad])}")

    def init() -> PerplexityState:
        z = lambda: torch.zeros((), dtype=torch.int64)  # noqa: E731 - distinct tensors: no aliasing guards
        invalid = validation.Invalid(z(), torch.full((), float("nan"), dtype=torch.float64), z(), z())
        return PerplexityState(torch.zeros((), dtype=accum_dtype()), z(), invalid, validation.invalid_init())

    def update(s: PerplexityState, preds: torch.Tensor, target: torch.Tensor) -> PerplexityState:
        shapes(preds, target)
        v = preds.shape[-1]
        x = _flat(preds.detach())
        lse = torch.logsumexp(x, dim=-1)  # log p(t) = x_t - lse: no (positions, vocab) log-softmax
        t = target.reshape(-1)
        keep = t != ignore_index if ignore_index is not None else torch.ones_like(t, dtype=torch.bool)
        bad = keep & ((t < 0) | (t >= v))
        nonfinite = keep & ~bad & ~torch.isfinite(lse)
        ok = keep & ~bad & ~nonfinite
        picked = torch.gather(x, 1, torch.where(ok, t, torch.zeros_like(t)).unsqueeze(1)).squeeze(1) - lse
        nll = -torch.where(ok, picked, torch.zeros_like(picked)).to(s.total.dtype).sum()
        return PerplexityState(s.total + nll, s.count + validation.count(ok),
                               validation.invalid_flag(s.invalid, bad, t),
                               validation.invalid_flag(s.nonfinite, nonfinite, lse))

    def finalize(s: PerplexityState) -> torch.Tensor:
        validation.invalid_report(name, _RULE, s.invalid)
        validation.invalid_report(name, "`preds`: " + _FINITE, s.nonfinite)
        if int(s.count) == 0:
            validation.warn_empty(name, stacklevel=2)
        return torch.exp(s.total / s.count.to(s.total.dtype))

    return Metric(init=init, update=update, merge=_merge, finalize=finalize, name=name, check=check,
                  reductions=PerplexityState("sum", "sum", None, None), higher_is_better=False,
                  is_differentiable=True, bounds=(1.0, None))
