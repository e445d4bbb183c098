"""Is system B better than system A? `paired_bootstrap` and `permutation_test` over any row-weightable metric."""
from __future__ import annotations

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.wrappers import _pairs
from fmetrics.wrappers._pairs import PairedState

__all__ = ["paired_bootstrap", "permutation_test", "PairedState"]


def _check(name: str, num: int, arg: str, seed: int, sample_ids: bool) -> None:
    if isinstance(num, bool) or not isinstance(num, int) or num < 1:
        raise validation.fail(name, arg, "an integer >= 1", repr(num))
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise validation.fail(name, "seed", "an integer", repr(seed))
    if not isinstance(sample_ids, bool):
        raise validation.fail(name, "sample_ids", "True or False", repr(sample_ids))


def _p_value(stats: torch.Tensor, observed: torch.Tensor) -> torch.Tensor:
    """``(#{stats >= observed} + 1) / (R + 1)``, ties within 1e-9 relative counted as extreme (NaN never)."""
    extreme = stats >= observed - 1e-9 * observed.abs().clamp(min=1.0)
    return (extreme.sum(0) + 1).to(torch.float64) / (stats.shape[0] + 1)


def _crossing(d: torch.Tensor) -> torch.Tensor:
    """Two-sided bootstrap p-value: twice the share of replicate deltas on the far side of 0 (ties count half),
    ``min(1, (2 min(#{d < 0}, #{d > 0}) + 1) / (R + 1))``; NaN replicates never count."""
    count = lambda mask: mask.sum(0).to(torch.float64)  # noqa: E731
    tie = 0.5 * count(d == 0)
    low, high = count(d < 0) + tie, count(d > 0) + tie
    return ((2 * torch.minimum(low, high) + 1) / (d.shape[0] + 1)).clamp(max=1.0)


@factory
def paired_bootstrap(metric: Metric, *, num_samples: int = 1000, alpha: float = 0.05, seed: int = 0,
                     sample_ids: bool = False) -> Metric:
    """Paired bootstrap of ``delta = metric(B) - metric(A)`` over the same resampled rows (Koehn 2004).

    Replicate ``r`` weights row ``i`` by ``c_ri ~ Poisson(1)`` for BOTH systems, so the
    replicate deltas ``d_r = m_r(B) - m_r(A)`` carry the pairing. The interval is the
    percentile interval ``[q_{alpha/2}(d), q_{1-alpha/2}(d)]``; the two-sided p-value is
    twice the share of replicates whose delta crosses 0,
    ``min(1, (2 min(#{d_r < 0}, #{d_r > 0}) + 1) / (R + 1))`` (ties count half), so
    ``p_value < alpha`` exactly when the percentile interval leaves 0 out (up to the +1).
    sacrebleu's ``paired_bs`` p-value, ``(#{|d_r| - mean|d| > |delta|} + 1) / (R + 1)``,
    estimates the one-sided share: about half of this one (it rejects a true null
    about twice as often as its level; docs/comparing.md).

    Args:
      metric: the `fmetrics.Metric` compared (positional), with per-sample rows
        (every tensor input has the samples on dim 0); its state must be row-weightable
        as for `fmetrics.wrappers.bootstrap`.
      num_samples: bootstrap replicates, an int ``>= 1`` (default 1000).
      alpha: the interval's level is ``1 - alpha``; a float in (0, 1) (default 0.05).
      seed: int seed of the counter-based draws (default 0).
      sample_ids: ``False`` (default): a row's draws are keyed by its arrival
        offset, the rank and its input values; ``True``: the first input is an integer
        tensor ``(B,)`` of sample ids keying the draws, so the result is independent of
        batching, sharding and rank count. A retrieval metric is always resampled by
        whole queries, keyed by its query ids (``indexes``, its last input): a query
        drawn ``c`` times counts as ``c`` queries (leave ``sample_ids`` False).

    Inputs:
      ``update(state, [ids,] preds_a, preds_b, *rest)``: both systems' predictions for
      the same samples, then the wrapped metric's other inputs (target, ...).

    Returns:
      ``{"a", "b", "delta", "ci_low", "ci_high", "p_value"}`` float64 (per key for a
      dict-valued metric).

    Example::

        >>> target = torch.arange(200) % 2
        >>> a = torch.where(torch.arange(200) % 5 == 0, 1 - target, target)     # 80% right
        >>> b = torch.where(torch.arange(200) % 10 == 0, 1 - target, target)    # 90% right
        >>> out = paired_bootstrap(fmetrics.binary_accuracy(), num_samples=500)(a, b, target)
        >>> [round(float(out[k]), 3) for k in ("a", "b", "delta", "p_value")]
        [0.8, 0.9, 0.1, 0.002]
        >>> bool(out["ci_low"] > 0)
        True
    """
    name = "paired_bootstrap"
    _check(name, num_samples, "num_samples", seed, sample_ids)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise validation.fail(name, "alpha", "a float in (0, 1)", repr(alpha))

    def summary(va, vb, ra, rb):
        def one(va, vb, ra, rb):
            d = rb - ra
            q = torch.tensor([alpha / 2, 1 - alpha / 2], dtype=torch.float64, device=d.device)
            # an empty value (detection's `classes` on no data) has an empty interval
            low, high = torch.quantile(d, q, dim=0) if d.numel() else (d[0], d[0])
            return {"a": va, "b": vb, "delta": vb - va, "ci_low": low, "ci_high": high, "p_value": _crossing(d)}

        return _pairs.per_key(one, va, vb, ra, rb)

    return _pairs.two_systems(name, metric, num=num_samples, seed=seed, sample_ids=sample_ids, swap=False,
                              summary=summary)


@factory
def permutation_test(metric: Metric, *, num_permutations: int = 1000, seed: int = 0,
                     sample_ids: bool = False) -> Metric:
    """Paired approximate randomization: swap the two systems' outputs of each sample with probability 1/2.

    Under the null hypothesis (A and B exchangeable per sample) every swap is as
    likely as the observed assignment. Permutation ``r`` gives pseudo-systems
    ``A_r, B_r`` and the two-sided p-value is
    ``(#{|m(B_r) - m(A_r)| >= |delta|} + 1) / (R + 1)``: sacrebleu's ``paired_ar``, except
    that a tie counts as extreme (``>=``, the exact-test rule; sacrebleu's ``>`` rejects a
    true null too often for metrics with few distinct values, such as accuracy).

    Args:
      metric: the `fmetrics.Metric` compared (positional), row-weightable as for
        `fmetrics.wrappers.bootstrap`.
      num_permutations: random swaps drawn, an int ``>= 1`` (default 1000).
      seed: int seed of the counter-based draws (default 0).
      sample_ids: as for `paired_bootstrap` (default ``False``); a retrieval metric
        swaps whole queries, keyed by its query ids.

    Inputs:
      ``update(state, [ids,] preds_a, preds_b, *rest)``.

    Returns:
      ``{"a", "b", "delta", "p_value"}`` float64 (per key for a dict-valued metric).

    Example::

        >>> target = torch.arange(200) % 2
        >>> a = torch.where(torch.arange(200) % 5 == 0, 1 - target, target)
        >>> b = torch.where(torch.arange(200) % 10 == 0, 1 - target, target)
        >>> out = permutation_test(fmetrics.binary_accuracy(), num_permutations=500)(a, b, target)
        >>> round(float(out["delta"]), 3), float(out["p_value"]) < 0.01
        (0.1, True)
    """
    name = "permutation_test"
    _check(name, num_permutations, "num_permutations", seed, sample_ids)

    def summary(va, vb, ra, rb):
        def one(va, vb, ra, rb):
            return {"a": va, "b": vb, "delta": vb - va, "p_value": _p_value((rb - ra).abs(), (vb - va).abs())}

        return _pairs.per_key(one, va, vb, ra, rb)

    return _pairs.two_systems(name, metric, num=num_permutations, seed=seed, sample_ids=sample_ids, swap=True,
                              summary=summary)
