"""`confidence_interval`: analytic intervals where the field uses them (Wilson, Clopper-Pearson, Fisher z), the
bootstrap (percentile, BCa) for anything."""
from __future__ import annotations

import math
from typing import Any, Literal, NamedTuple

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.state import accum_dtype, cat_chunks
from fmetrics.wrappers import _draws, _rows
from fmetrics.wrappers.bootstrap import _stream_id, bootstrap

__all__ = ["confidence_interval", "IntervalState"]

METHODS = ("bootstrap", "wilson", "clopper_pearson", "fisher_z")
INTERVALS = ("percentile", "bca")
JACKKNIFE_BLOCKS = 64  # BCa's acceleration: a delete-a-block jackknife over 64 hashed blocks of rows

# proportions k / n read from a stat-scores metric's shared `Counts` (tp, fp, tn, fn; class axis last)
_PROPORTIONS = {
    "accuracy": (lambda c: c.tp + c.tn, lambda c: c.tp + c.fp + c.tn + c.fn),
    "recall": (lambda c: c.tp, lambda c: c.tp + c.fn),
    "precision": (lambda c: c.tp, lambda c: c.tp + c.fp),
    "specificity": (lambda c: c.tn, lambda c: c.tn + c.fp),
}


class IntervalState(NamedTuple):
    value: Any  # the wrapped metric's state (all rows once)
    boot: Any  # bootstrap replicates (method "bootstrap"), else ()
    jack: Any  # BCa: leave-one-block-out replicate states (JACKKNIFE_BLOCKS, ...), else ()
    blocks: tuple  # BCa with a cat state: each batch's (B,) block numbers
    rows: torch.Tensor  # int64 rows seen (Fisher z's n; the offsets that key draws without sample ids)


def _normal_quantile(p: float) -> float:
    return math.sqrt(2.0) * float(torch.special.erfinv(torch.tensor(2 * p - 1, dtype=torch.float64)))


def _proportion(name: str, metric: Metric):
    """``(k, n)`` functions of the wrapped stat-scores state, or a ValueError naming what is supported."""
    recipe = metric.recipe
    qualname = recipe.qualname if recipe is not None else ""
    task, _, kind = qualname.partition("_")
    args = recipe.arguments if recipe is not None else {}
    micro = task == "binary" or (task == "multiclass" and args.get("average") == "micro"
                                 and args.get("top_k", 1) == 1 and kind != "specificity")
    if kind not in _PROPORTIONS or task not in ("binary", "multiclass") or not micro \
            or args.get("multidim_average", "global") != "global" or metric.shared is None:
        raise validation.fail(name, "metric", "a proportion at a fixed threshold: binary_accuracy / _recall / "
                              "_precision / _specificity, or multiclass_accuracy / _recall / _precision with "
                              "average='micro'", repr(metric))
    k, n = _PROPORTIONS[kind]
    if task == "multiclass" and kind == "accuracy":  # every sample counted once: n = sum(tp + fn)
        k, n = _PROPORTIONS["recall"]
    return lambda s: (k(metric.shared(s)).sum(), n(metric.shared(s)).sum())


def wilson(k: torch.Tensor, n: torch.Tensor, z: float):
    """Wilson's score interval of ``k`` successes in ``n`` trials."""
    p = k / n
    center = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * torch.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return center - half, center + half


def clopper_pearson(k: torch.Tensor, n: torch.Tensor, alpha: float):
    """The exact binomial interval: Beta quantiles ``B(alpha/2; k, n-k+1)``, ``B(1-alpha/2; k+1, n-k)``."""
    from scipy import stats  # noqa: PLC0415 (SciPy: only for this method)

    kf, nf = float(k), float(n)
    low = stats.beta.ppf(alpha / 2, kf, nf - kf + 1) if kf > 0 else 0.0
    high = stats.beta.ppf(1 - alpha / 2, kf + 1, nf - kf) if kf < nf else 1.0
    return k.new_tensor(low), k.new_tensor(high)


def bca(value: torch.Tensor, reps: torch.Tensor, jack: torch.Tensor, alpha: float):
    """Efron's bias-corrected and accelerated percentile interval (``jack``: leave-one-block-out values)."""
    below = ((reps < value).sum(0) + 0.5 * (reps == value).sum(0)).to(torch.float64) / reps.shape[0]
    z0 = torch.special.ndtri(below)
    d = jack.mean(0) - jack
    spread = (d ** 2).sum(0)
    accel = torch.where(spread > 0, (d ** 3).sum(0) / (6 * spread.clamp(min=1e-300) ** 1.5), 0.0)
    out = []
    for q in (alpha / 2, 1 - alpha / 2):
        zq = _normal_quantile(q)
        level = torch.special.ndtr(z0 + (z0 + zq) / (1 - accel * (z0 + zq)))
        q = level.nan_to_num(0.5)  # a NaN value (no data) has a NaN interval
        q = torch.quantile(reps, q.reshape(-1), dim=0).diagonal().reshape(value.shape) if value.dim() \
            else torch.quantile(reps, q)
        out.append(torch.where(level.isnan(), torch.nan, q))
    return out


@factory
def confidence_interval(metric: Metric, *, method: Literal["bootstrap", "wilson", "clopper_pearson", "fisher_z"] =
                        "bootstrap", alpha: float = 0.05, interval: Literal["percentile", "bca"] = "percentile",
                        num_samples: int = 1000, seed: int = 0, sample_ids: bool = False) -> Metric:
    """The metric's value with a ``1 - alpha`` confidence interval.

    * ``"wilson"``: Wilson's score interval of a proportion ``p = k / n``:
      ``(p + z^2/2n -/+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)``, ``z = Phi^-1(1 - alpha/2)``.
    * ``"clopper_pearson"``: the exact binomial interval (Beta quantiles; needs SciPy).
      Both read ``k, n`` from a stat-scores metric at a fixed threshold: binary accuracy,
      recall, precision or specificity, or micro multiclass accuracy / recall / precision.
    * ``"fisher_z"``: Pearson's ``r``: ``tanh(atanh(r) -/+ z / sqrt(n - 3))``, ``n`` the rows seen
      (wrap `fmetrics.pearson_corrcoef`).
    * ``"bootstrap"``: any row-weightable metric, Poisson bootstrap as in
      `fmetrics.wrappers.bootstrap`; ``interval="percentile"`` or ``"bca"`` (Efron's BCa:
      bias from the share of replicates under the value, acceleration from a
      delete-a-block jackknife over 64 hashed blocks of rows).

    Args:
      metric: the `fmetrics.Metric` (positional).
      method: ``"bootstrap"`` (default), ``"wilson"``, ``"clopper_pearson"`` or ``"fisher_z"``.
      alpha: the interval's level is ``1 - alpha``; a float in (0, 1) (default 0.05).
      interval: for ``"bootstrap"``: ``"percentile"`` (default) or ``"bca"``.
      num_samples: bootstrap replicates, an int ``>= 1`` (default 1000).
      seed: int seed of the bootstrap draws (default 0).
      sample_ids: bootstrap only: ``True``, the first input is ``(B,)`` integer sample ids keying
        the draws (results independent of batching and ranks); default ``False``.

    Inputs:
      the wrapped metric's (with ``[ids,]`` first when ``sample_ids``).

    Returns:
      ``{"value", "ci_low", "ci_high"}`` float64 (per key for a dict-valued metric).

    Example::

        >>> m = confidence_interval(fmetrics.binary_accuracy(), method="wilson")
        >>> out = m(torch.tensor([1, 1, 0, 1, 0, 1, 1, 1]), torch.tensor([1, 1, 0, 0, 0, 1, 1, 0]))
        >>> [round(float(out[k]), 4) for k in ("value", "ci_low", "ci_high")]
        [0.75, 0.4093, 0.9285]
    """
    name = "confidence_interval"
    validation.check_policy(name, "method", method, METHODS)
    validation.check_policy(name, "interval", interval, INTERVALS)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise validation.fail(name, "alpha", "a float in (0, 1)", repr(alpha))
    if not isinstance(metric, Metric):
        raise validation.fail(name, "metric", "a fmetrics.Metric", type(metric).__name__)
    if method != "bootstrap" and (interval != "percentile" or sample_ids):
        raise validation.fail(name, "interval" if interval != "percentile" else "sample_ids",
                              "its default with an analytic method", repr(interval if interval != "percentile"
                                                                        else sample_ids))
    z = _normal_quantile(1 - alpha / 2)
    counts = _proportion(name, metric) if method in ("wilson", "clopper_pearson") else None
    if method == "fisher_z" and (metric.recipe is None or metric.recipe.qualname != "pearson_corrcoef"
                                 or metric.recipe.arguments.get("num_outputs", 1) != 1):
        raise validation.fail(name, "metric", "fmetrics.pearson_corrcoef() (one output) for method='fisher_z'",
                              repr(metric))
    boot = bootstrap(metric, num_samples=num_samples, quantiles=None, seed=seed, sample_ids=sample_ids,
                     raw=True) if method == "bootstrap" else None
    jackknife = boot is not None and interval == "bca"
    tags = _rows.decomposable_tags(name, metric) if jackknife else None
    keeps_blocks = jackknife and _rows.has_cat(tags, metric.init())

    def init():
        jack = _rows.stack_init(metric, tags, JACKKNIFE_BLOCKS) if jackknife else ()
        return IntervalState(metric.init(), boot.init() if boot else (), jack, (), torch.zeros((), dtype=torch.int64))

    def update(state, *inputs):
        boot_state = boot.update(state.boot, *inputs) if boot else ()  # first: it checks the ids' shape
        rest = inputs[1:] if sample_ids else inputs
        value = metric.update(state.value, *rest)
        n = _rows.num_rows(name, rest) if (boot or method == "fisher_z") else 0
        jack, blocks = state.jack, state.blocks
        if jackknife and n:
            if sample_ids:
                keys = _draws.sample_keys(seed + 1, inputs[0])
            else:
                offsets = state.rows + torch.arange(n, dtype=torch.int64, device=state.rows.device)
                keys = _draws.sample_keys(seed + 1, offsets, _stream_id()) ^ _draws.content_hash(rest, n)
            block = keys.remainder(JACKKNIFE_BLOCKS)
            others = torch.arange(JACKKNIFE_BLOCKS, device=keys.device).unsqueeze(-1) != block
            jack = _rows.add_rows_shared(metric, tags, jack, rest, {}, others.to(accum_dtype(keys.device)), 1)
            blocks = blocks + ((block,) if keeps_blocks else ())
        return IntervalState(value, boot_state, jack, blocks, state.rows + n)

    def jack_values(state):
        stored = cat_chunks(state.blocks, None)
        values = []
        for g in range(JACKKNIFE_BLOCKS):
            keep = None if stored is None else (stored != g).to(torch.int64)
            values.append(metric.finalize(_rows.select(tags, state.jack, g, keep)))
        return _rows.stack_values(name, values)

    def finalize(state):
        value = metric.finalize(state.value)
        if counts is not None:
            k, n = (x.to(torch.float64) for x in counts(state.value))
            low, high = wilson(k, n, z) if method == "wilson" else clopper_pearson(k, n, alpha)
            return {"value": value, "ci_low": low, "ci_high": high}
        if method == "fisher_z":
            half = z / (state.rows.to(torch.float64) - 3).sqrt()
            r = value.to(torch.float64).atanh()
            return {"value": value, "ci_low": torch.tanh(r - half), "ci_high": torch.tanh(r + half)}
        reps = boot.finalize(state.boot)
        jack = jack_values(state) if jackknife else None
        return _summary(value, reps, jack)

    def _summary(value, reps, jack):
        if isinstance(value, dict):
            return {k: _summary(value[k], reps[k], None if jack is None else jack[k]) for k in value}
        value, raw = torch.as_tensor(value).to(torch.float64), reps["raw"].to(torch.float64)
        if jack is None:
            q = torch.tensor([alpha / 2, 1 - alpha / 2], dtype=torch.float64, device=raw.device)
            low, high = torch.quantile(raw, q, dim=0)
        else:
            low, high = bca(value, raw, jack.to(torch.float64), alpha)
        return {"value": value, "ci_low": low, "ci_high": high}

    def merge(a, b):
        jack = _rows.stacked_merge(metric, tags)(a.jack, b.jack) if jackknife else ()
        return IntervalState(metric.merge(a.value, b.value), boot.merge(a.boot, b.boot) if boot else (), jack,
                             a.blocks + b.blocks, a.rows + b.rows)

    check = metric.check if boot is None else boot.check
    reductions = IntervalState(metric.reductions, boot.reductions if boot else (),
                               metric.reductions if jackknife else (), "cat", "sum")
    key = None if metric.state_key is None else (name, metric.state_key, method, interval, num_samples, seed,
                                                 sample_ids)
    return Metric(init=init, update=update, merge=merge, finalize=finalize, name=f"{name}({metric.name})",
                  state_key=key, reductions=reductions, check=check, is_differentiable=False,
                  higher_is_better=metric.higher_is_better, bounds=metric.bounds)
