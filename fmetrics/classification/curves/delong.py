"""DeLong's test of two correlated AUROCs and DeLong's AUROC interval (DeLong, DeLong & Clarke-Pearson 1988).

For ``m`` positives ``X_i`` and ``n`` negatives ``Y_j`` scored by system ``k``, the
structural components (placements) are
``V10_k(X_i) = (#{Y_j < X_i} + #{Y_j = X_i} / 2) / n`` and
``V01_k(Y_j) = (#{X_i > Y_j} + #{X_i = Y_j} / 2) / m``; the AUROC is their mean and
``S = cov(V10) / m + cov(V01) / n`` (sample covariances over the positives, resp. the
negatives) estimates the covariance of the AUROCs. The placements come from ONE sort
of each system's scores (tie groups counted by cumulative sums), the ``O(N log N)``
form of Sun & Xu (2014).
"""
from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
import torch

from fmetrics import _keys, validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.state import cat_chunks

__all__ = ["delong_test", "binary_auroc_ci", "DelongState"]

_RULE = "target must be 0 or 1 and scores finite"


class DelongState(NamedTuple):
    scores: tuple  # float64 chunks (B, K): each sample's score by each of the K systems
    labels: tuple  # int8 chunks (B,): 1 positive, 0 negative, -1 an entry that broke the rule (left out)
    invalid: validation.Invalid  # deferred record of such entries


def _sorted(score: torch.Tensor, dest: torch.Tensor):
    """``(keys, dest)`` in increasing score order: ONE sort of ``score``'s order-preserving integer keys
    (`fmetrics._keys`), carrying each sample's destination index ``dest`` along.

    On CPU, float32-exact scores (any float32 / 16-bit input) pack ``key << b | dest`` into one int64 sorted
    in place by numpy (no argsort, no gather: ~20x faster than ``torch.sort`` of the floats); wider scores
    take an argsort of their float64 keys. Elsewhere ``torch.sort`` of the keys with its permutation.
    """
    b = max(int(dest.shape[0] - 1).bit_length(), 1)
    if score.device.type != "cpu":
        keys, order = torch.sort(_keys.float_key(score))
        return keys, dest[order]
    host = score.numpy()
    narrow = host.astype(np.float32)
    wide = not np.array_equal(narrow, host)  # NaN counts as wide: the argsort of float64 keys sorts it last
    key = _keys.ascending64(host) if wide else _keys.ascending32(narrow)
    if wide or not _keys.fits(32, b):
        order = np.argsort(key)
        return torch.from_numpy(key[order]), dest[torch.from_numpy(order)]
    key -= key.min()
    packed = _keys.pack_into(key, [(key, 32), (dest.numpy(), b)])  # in place: key's buffer
    packed.sort()
    d = _keys.field(packed, 0, b)
    packed >>= b
    return torch.from_numpy(packed), torch.from_numpy(d)


def _empty(shape, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """An uninitialized buffer; on CPU numpy's (large arrays on huge pages: far fewer page faults than torch's)."""
    if device.type == "cpu":
        return torch.from_numpy(np.empty(shape, dtype=torch.empty(0, dtype=dtype).numpy().dtype))
    return torch.empty(shape, dtype=dtype, device=device)


def _cumsum(flag: torch.Tensor) -> torch.Tensor:
    """int64 inclusive cumulative count of a bool tensor (numpy's on CPU: ~3x faster than torch's at 1 thread)."""
    if flag.device.type == "cpu":
        return torch.from_numpy(np.cumsum(flag.numpy(), dtype=np.int64))
    return torch.cumsum(flag, 0)


def _scatter(out: torch.Tensor, at: torch.Tensor, values: torch.Tensor) -> None:
    """``out[at] = values`` (numpy's on CPU: ~2x faster than ``index_put_`` at 1 thread)."""
    if out.device.type == "cpu":
        out.numpy()[at.numpy()] = values.numpy()
    else:
        out.index_put_((at,), values)


def placements(scores: torch.Tensor, positive: torch.Tensor):
    """``(V10, V01)``: ``(K, m)`` positive and ``(K, n)`` negative placements, in sample order.

    ONE sort per system (`_sorted`). With ``C_neg`` / ``C_pos`` the class counts before a sorted position
    and ``[lo, hi)`` its tie group, a positive's placement is ``(C_neg[lo] + C_neg[hi]) / 2n`` (the
    negatives below it, half those tied) and a negative's ``(2m - C_pos[lo] - C_pos[hi]) / 2m``. Without
    ties ``[lo, hi) = [i, i + 1)``: that count is computed for every position, then the members of tie
    groups (found from the few equal neighbouring keys) are corrected from their groups' first and last
    positions. The counts go back by one scatter to their sample's slot (positives first), so they pair
    across systems, and are divided by ``n`` / ``m`` once.
    """
    total, device = positive.shape[0], positive.device
    m = int(positive.sum())
    n = total - m
    ranks = _cumsum(positive)  # positives up to i included
    neg_dest = torch.arange(m, m + total, out=_empty(total, torch.int64, device)).sub_(ranks)
    dest = torch.where(positive, ranks.sub_(1), neg_dest)
    after = torch.arange(1, total + 1, out=_empty(total, torch.int64, device))  # i + 1
    pos, count = _empty(total, torch.bool, device), neg_dest  # buffers reused by every system
    counts = _empty((scores.shape[1], total), torch.int64, device)
    fixes = []
    for score, c in zip(scores.unbind(1), counts):
        key, d = _sorted(score, dest)
        torch.lt(d, m, out=pos)
        upto_pos = _cumsum(pos)  # C_pos[i + 1]: positives up to i included
        # a positive's C_neg[i + 1] (= C_neg[i]), a negative's m - C_pos[i + 1]
        torch.where(pos, after, after.new_tensor(m), out=count).sub_(upto_pos)
        _scatter(c, d, count)
        fixes.append(_tie_counts(key, d, pos, upto_pos, m))
    out = _empty(counts.shape, torch.float64, device).copy_(counts)
    out[:, :m] /= max(n, 1)
    out[:, m:] /= max(m, 1)
    for v, (at, count) in zip(out, fixes):
        v[at] = count / torch.where(at < m, max(n, 1), max(m, 1))
    return out[:, :m], out[:, m:]


def _tie_counts(key, d, pos, upto_pos, m: int):
    """``(slots, counts)``: the tied entries' sample slots and their half-integer counts (see `placements`)."""
    same = torch.nonzero(key[1:] == key[:-1]).squeeze(1)  # i and i + 1 tied
    tied = torch.unique(torch.cat([same, same + 1]))  # members of runs of 2 or more, increasing
    k = key[tied]
    first = torch.ones_like(tied, dtype=torch.bool)
    torch.ne(k[1:], k[:-1], out=first[1:])
    last = torch.ones_like(first)
    last[:-1] = first[1:]
    group = torch.cumsum(first, 0) - 1
    lo, end = tied[first][group], tied[last][group]
    pos_lo = upto_pos[lo] - pos[lo].to(torch.int64)  # C_pos[lo]
    pos_hi = upto_pos[end]  # C_pos[hi], hi = end + 1
    neg = (lo - pos_lo + end + 1 - pos_hi).to(torch.float64) / 2  # (C_neg[lo] + C_neg[hi]) / 2
    return d[tied], torch.where(pos[tied], neg, m - (pos_lo + pos_hi).to(torch.float64) / 2)


def delong(state: DelongState, name: str, systems: int):
    """``(auroc (K,), covariance (K, K))`` of the state's valid entries; NaN with a warning without both
    classes."""
    validation.invalid_report(name, _RULE, state.invalid)
    scores, labels = cat_chunks(state.scores, None), cat_chunks(state.labels, None)
    if scores is None:
        scores, labels = torch.zeros(0, systems, dtype=torch.float64), torch.zeros(0, dtype=torch.int8)
    positive = labels == 1  # entries that broke the rule (label -1) raised in `invalid_report`
    m, n = int(positive.sum()), int((~positive).sum())
    k = scores.shape[1]
    if m < 2 or n < 2:
        warnings.warn(f"{name}: {m} positive and {n} negative samples; DeLong's variance needs at least 2 of "
                      "each; the value is undefined and set to NaN", UserWarning, stacklevel=3)
        nan = torch.full((k,), float("nan"), dtype=torch.float64)
        return nan, torch.full((k, k), float("nan"), dtype=torch.float64)
    v10, v01 = placements(scores, positive)
    return v10.mean(1), torch.cov(v10).reshape(k, k) / m + torch.cov(v01).reshape(k, k) / n


def _normal_quantile(p: float) -> float:
    return math.sqrt(2.0) * float(torch.special.erfinv(torch.tensor(2 * p - 1, dtype=torch.float64)))


def _metric(name: str, systems: int, finalize) -> Metric:
    def init():
        return DelongState((), (), validation.invalid_init())

    def shapes(inputs):
        if len(inputs) != systems + 1:
            raise validation.fail(name, "inputs", f"{systems} score tensor(s) and target",
                                  f"{len(inputs)} input(s)")
        *preds, target = inputs
        for arg, x in zip(["preds_a", "preds_b", "target"] if systems == 2 else ["preds", "target"],
                          [*preds, target]):
            if not isinstance(x, torch.Tensor) or x.dim() != 1 or x.is_complex():
                raise validation.fail(name, arg, "a 1-D real tensor (N,)",
                                      f"{type(x).__name__} {tuple(getattr(x, 'shape', ()))}")
            if x.shape != target.shape:
                raise validation.fail(name, arg, f"{target.shape[0]} entries (as target)", f"{x.shape[0]}")
        return preds, target

    def screen(preds, target):
        """``(bad target (N,), float64 scores, their half-sum (N,))``: the half-sum (of halves: no overflow) is
        finite exactly when every system's score is."""
        wide = [p.to(torch.float64) for p in preds]
        half = wide[0] * 0.5
        for p in wide[1:]:
            half = half.add_(p, alpha=0.5)
        return (target != 0) & (target != 1), wide, half

    def check(*inputs):
        preds, target = shapes(inputs)
        bad_t = (target != 0) & (target != 1)
        if bool(bad_t.any()):
            raise validation.fail(name, "target", "values 0 or 1", validation.quote(target[bad_t]))
        bad_s = ~torch.isfinite(preds[0])
        for p in preds[1:]:
            bad_s |= ~torch.isfinite(p)
        if bool(bad_s.any()):
            raise validation.fail(name, "preds", "finite scores",
                                  validation.quote(torch.stack(preds, 1)[bad_s].reshape(-1)))

    def update(state, *inputs):
        preds, target = shapes(inputs)
        bad_t, wide, half = screen(preds, target)
        bad = bad_t | ~torch.isfinite(half)
        labels = target.to(torch.int8).masked_fill(bad, -1)
        invalid = validation.invalid_flag(state.invalid, bad, torch.where(bad_t, target.to(torch.float64), half))
        return DelongState(state.scores + (torch.stack(wide, 1),), state.labels + (labels,), invalid)

    def merge(a, b):
        return DelongState(a.scores + b.scores, a.labels + b.labels, validation.invalid_merge(a.invalid, b.invalid))

    return Metric(init=init, update=update, merge=merge, finalize=finalize, name=name, check=check,
                  reductions=DelongState("cat", "cat", None), is_differentiable=False,
                  **({"bounds": (0.0, 1.0), "higher_is_better": True} if systems == 1 else {}))


@factory
def delong_test() -> Metric:
    """DeLong's paired test of two AUROCs on the same samples: ``z = (A_b - A_a) / sqrt(S_aa + S_bb - 2 S_ab)``.

    ``S`` is DeLong's covariance of the two AUROCs (see the module); the p-value is
    two-sided, ``erfc(|z| / sqrt(2))``. Ties count one half (the exact, trapezoidal AUROC).
    With fewer than 2 positives or 2 negatives every value is NaN with a warning; when both
    systems rank identically (variance 0) ``z = 0`` and ``p_value = 1``.

    Args:
      none: the test has no options (the p-value is two-sided).

    Inputs:
      ``update(state, preds_a, preds_b, target)``: ``preds_a``, ``preds_b`` float
      scores ``(N,)`` (probabilities or logits: only the order counts); ``target``
      ``(N,)`` 0 / 1 (int, bool or float).

    Returns:
      ``{"auroc_a", "auroc_b", "delta", "covariance", "z", "p_value"}`` float64,
      ``covariance`` the ``(2, 2)`` matrix ``S``, ``delta = auroc_b - auroc_a``.

    Example::

        >>> target = torch.tensor([0, 0, 1, 1, 0, 1, 0, 1])
        >>> a = torch.tensor([0.1, 0.4, 0.35, 0.8, 0.3, 0.5, 0.6, 0.7])
        >>> b = torch.tensor([0.1, 0.2, 0.6, 0.9, 0.3, 0.5, 0.4, 0.7])
        >>> out = fmetrics.delong_test()(a, b, target)
        >>> round(float(out["auroc_a"]), 4), round(float(out["auroc_b"]), 4), round(float(out["p_value"]), 4)
        (0.8125, 1.0, 0.2679)
    """
    name = "delong_test"

    def finalize(state):
        auc, cov = delong(state, name, 2)
        delta = auc[1] - auc[0]
        var = cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]
        z = torch.where(var > 0, delta / var.clamp(min=0).sqrt(), torch.where(delta == 0, 0.0, delta * math.inf))
        return {"auroc_a": auc[0], "auroc_b": auc[1], "delta": delta, "covariance": cov, "z": z,
                "p_value": torch.erfc(z.abs() / math.sqrt(2.0))}

    return _metric(name, 2, finalize)


@factory
def binary_auroc_ci(*, alpha: float = 0.05) -> Metric:
    """AUROC with DeLong's Wald interval ``A -/+ z_{1-alpha/2} sqrt(S)``, clipped to ``[0, 1]``.

    Args:
      alpha: the interval's level is ``1 - alpha``; a float in (0, 1) (default 0.05).

    Inputs:
      ``update(state, preds, target)``: float scores ``(N,)`` and 0 / 1 targets ``(N,)``.

    Returns:
      ``{"value", "std", "ci_low", "ci_high"}`` float64 (``std = sqrt(S)``); NaN with a
      warning with fewer than 2 positives or 2 negatives.

    Example::

        >>> target = torch.tensor([0, 0, 1, 1, 0, 1, 0, 1])
        >>> out = fmetrics.binary_auroc_ci()(torch.tensor([0.1, 0.4, 0.35, 0.8, 0.3, 0.5, 0.6, 0.7]), target)
        >>> [round(float(out[k]), 4) for k in ("value", "std", "ci_low", "ci_high")]
        [0.8125, 0.1693, 0.4808, 1.0]
    """
    name = "binary_auroc_ci"
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise validation.fail(name, "alpha", "a float in (0, 1)", repr(alpha))
    z = _normal_quantile(1 - alpha / 2)

    def finalize(state):
        auc, cov = delong(state, name, 1)
        std = cov[0, 0].clamp(min=0).sqrt()
        return {"value": auc[0], "std": std, "ci_low": (auc[0] - z * std).clamp(0, 1),
                "ci_high": (auc[0] + z * std).clamp(0, 1)}

    return _metric(name, 1, finalize)
