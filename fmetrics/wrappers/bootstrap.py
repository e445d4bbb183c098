"""`bootstrap`: confidence intervals from replicate states updated together under `torch.func.vmap`."""
from __future__ import annotations

import warnings
from typing import Any, Literal, NamedTuple, Sequence, Union

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.state import accum_dtype, cat_chunks
from fmetrics.wrappers import _draws, _rows
from fmetrics.recipe import factory

SAMPLINGS = ("poisson", "multinomial")


class BootstrapState(NamedTuple):
    replicates: Any  # the wrapped state; sum/min/max fields stacked (num_samples, ...), cat fields hold rows once
    rows: tuple  # per stored row (cat metrics only): its draw hash (poisson) or its (num_samples,) counts
    seen: torch.Tensor  # int64: rows this state has seen (the running offset that keys draws without ids)


def _stream_id() -> int:
    """The distributed rank (0 without a process group): the stream id of draws keyed by offsets."""
    dist = torch.distributed
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


@factory
def bootstrap(
    metric: Metric,
    *,
    num_samples: int = 100,
    sampling: Literal["poisson", "multinomial"] = "poisson",
    quantiles: Union[float, Sequence[float], None] = (0.025, 0.975),
    seed: int = 0,
    sample_ids: bool = False,
    raw: bool = False,
) -> Metric:
    """Bootstrap distribution of ``metric``: mean, standard deviation and quantiles over replicates.

    Replicate ``r`` sees every row ``i`` ``c_ri`` times, and its value is
    ``metric`` on that resample. All replicates live in ONE stacked state
    updated by ``torch.func.vmap`` over the per-replicate counts (see
    `fmetrics.wrappers._rows`: the metric must be row-decomposable, as count,
    sum and concatenating states are).

    * ``sampling="poisson"``: ``c_ri ~ Poisson(1)`` independently per row
      (the streaming bootstrap; the default, as in torchmetrics).
    * ``sampling="multinomial"``: each batch of ``B`` rows is resampled with
      ``B`` draws with replacement (torchmetrics' per-batch scheme; the value
      then depends on how the data is batched).

    Draws are a counter-based hash of ``(seed, replicate, row key)``; no global
    RNG is touched. With ``sample_ids=True`` the update is
    ``update(state, ids, *inputs)`` and a row's key is its integer id (e.g. its
    dataset index): the result is then independent of batching, sharding and
    rank count. Otherwise the key hashes the row's position in this state
    (``state.seen``), the distributed rank of the process running ``update``
    and the row's input values: ranks draw independently, and so do batches
    updated from fresh states and merged (torchmetrics' ``forward``).

    Args:
      metric: the `fmetrics.Metric` to resample (positional); its rows must be
        weightable (every field tagged sum/min/max/cat, or no cat field).
      num_samples: number of bootstrap replicates, an int ``>= 1`` (default 100).
      sampling: ``"poisson"`` (default) or ``"multinomial"``, see above.
      quantiles: a float in ``[0, 1]``, a sequence of them (default
        ``(0.025, 0.975)``), or ``None`` for no quantiles.
      seed: int seed of the counter-based draws (default 0).
      sample_ids: ``False`` (default); ``True``: the first input of ``update``
        is an integer tensor ``(B,)`` of sample ids keying the draws.
      raw: ``False`` (default); ``True`` adds the replicate values.

    Inputs:
      ``update(state, [ids,] *inputs)``: the wrapped metric's inputs, every
      tensor with the batch's rows on dim 0 (with ``sample_ids``, ``ids`` of
      shape ``(B,)`` first). A length mismatch raises naming the short input.

    Returns:
      ``{"mean", "std", "quantile"}`` (``std`` with Bessel's correction,
      ``quantile`` of shape ``(len(quantiles), ...)`` or the value's shape for a
      single float), plus ``"raw"`` (``(num_samples, ...)``) if ``raw=True``. A
      dict-valued metric gets these statistics per key. Metadata
      (``higher_is_better``, ``bounds``) is the wrapped metric's.

    Example::

        >>> ci = bootstrap(fmetrics.mean(), num_samples=200, seed=1)
        >>> ci(torch.arange(100.))["quantile"]       # 95% interval of the mean
        tensor([44.2156, 55.6661], dtype=torch.float64)
    """
    name = "bootstrap"
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
        raise validation.fail(name, "num_samples", "an integer >= 1", repr(num_samples))
    validation.check_policy(name, "sampling", sampling, SAMPLINGS)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise validation.fail(name, "seed", "an integer", repr(seed))
    qs = [] if quantiles is None else [quantiles] if isinstance(quantiles, (int, float)) else list(quantiles)
    if any(isinstance(q, bool) or not isinstance(q, (int, float)) or not 0.0 <= q <= 1.0 for q in qs):
        raise validation.fail(name, "quantiles", "numbers in [0, 1]", repr(quantiles))
    tags = _rows.decomposable_tags(name, metric)
    keeps_rows = _rows.has_cat(tags, metric.init())
    poisson = sampling == "poisson"

    who = f"{name}({metric.name})"  # input errors name the wrapped metric too
    def init():
        return BootstrapState(_rows.stack_init(metric, tags, num_samples), (), torch.zeros((), dtype=torch.int64))

    def update(state, *inputs, **kwargs):
        if sample_ids:
            if not inputs:
                raise validation.fail(who, "ids", "a first input of integer sample ids")
            ids, inputs = inputs[0], inputs[1:]
        n = _rows.num_rows(who, inputs, kwargs)
        if sample_ids:
            if not isinstance(ids, torch.Tensor) or ids.is_floating_point() or ids.is_complex() \
                    or tuple(ids.shape) != (n,):
                raise validation.fail(who, "ids", f"an integer tensor of shape ({n},), one id per row of the "
                                      "other inputs", f"{type(ids).__name__} {tuple(getattr(ids, 'shape', ()))}")
        if n == 0:  # static shape: nothing to add (vmap cannot run the metric on zero rows)
            return state
        if sample_ids:
            keys = _draws.sample_keys(seed, ids)
        else:
            offsets = state.seen + torch.arange(n, dtype=torch.int64, device=state.seen.device)
            keys = _draws.sample_keys(seed, offsets, _stream_id()) ^ _draws.content_hash(inputs, n)
        dtype = accum_dtype(keys.device)
        if poisson:
            counts = _draws.poisson1_counts(keys, num_samples, dtype)
        else:
            counts = _draws.multinomial(_draws.replicate_hashes(keys, num_samples), dtype)
        # the largest count, for weighting by merges only: 7 (Poisson table) or n (not read otherwise, so a
        # compiled update does not specialize on the batch size's bit length)
        bits = 3 if poisson else n.bit_length() if tags is None else 0
        replicates = _rows.add_rows_shared(metric, tags, state.replicates, inputs, kwargs, counts, bits)
        stored = state.rows
        if keeps_rows:
            stored = stored + ((keys,) if poisson else (counts.transpose(-1, -2).to(torch.int32),))
        return BootstrapState(replicates, stored, state.seen + n)

    def replicate_counts(state):
        """Each replicate's counts of the stored rows (cat metrics), four replicates at a time."""
        if not state.rows:
            yield from [None] * num_samples
            return
        stored = cat_chunks(state.rows, None)
        for first in range(0, num_samples, 4):
            n = min(4, num_samples - first)
            if poisson:
                yield from _draws.poisson1_counts(stored, n, torch.float64, first).to(torch.int64).unbind(0)
            else:
                yield from stored[:, first:first + n].to(torch.int64).unbind(-1)

    def finalize(state):
        values = [metric.finalize(_rows.select(tags, state.replicates, r, counts))
                  for r, counts in enumerate(replicate_counts(state))]
        return _summary(_rows.stack_values(name, values))

    def _summary(values):
        if isinstance(values, dict):
            return {k: _summary(v) for k, v in values.items()}
        v = values.to(accum_dtype(values.device)) if not values.is_floating_point() else values
        if bool(torch.isinf(v).any()):  # (a NaN value was announced by the metric's own finalize)
            warnings.warn(f"{who}: replicate values are infinite (e.g. max on no data: -inf); their std and "
                          "quantiles are undefined and NaN", UserWarning, stacklevel=3)
        out = {"mean": v.mean(0), "std": v.std(0)}
        if qs:
            q = torch.quantile(v, torch.tensor(qs, dtype=v.dtype, device=v.device), dim=0)
            out["quantile"] = q[0] if isinstance(quantiles, (int, float)) else q
        if raw:
            out["raw"] = v
        return out

    inner_check = _rows.eager_check(metric)

    def check(*inputs, **kwargs):  # the wrapped metric's eager check, on the rows before resampling
        inputs = inputs[1:] if sample_ids else inputs
        _rows.num_rows(who, inputs, kwargs)  # a length mismatch is named by the wrapper, not the metric
        inner_check(*inputs, **kwargs)

    merge_replicates = _rows.stacked_merge(metric, tags)

    def merge(a, b):
        return BootstrapState(merge_replicates(a.replicates, b.replicates), tuple(a.rows) + tuple(b.rows),
                              a.seen + b.seen)

    reductions = BootstrapState(replicates=metric.reductions, rows="cat", seen="sum")
    key = None if metric.state_key is None else (
        name, metric.state_key, num_samples, sampling, seed, sample_ids)
    return Metric(init=init, update=update, merge=merge, finalize=finalize,
                  name=f"{name}({metric.name})", state_key=key, reductions=reductions,
                  check=check,
                  higher_is_better=metric.higher_is_better, is_differentiable=False, bounds=metric.bounds)
