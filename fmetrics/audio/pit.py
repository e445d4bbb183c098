"""`permutation_invariant_training` (a ``Metric -> Metric`` wrapper) and `pit_permutate`.

For separation outputs ``(batch, speakers, ...)`` the wrapper scores every
example under its best assignment of estimated to reference speakers and
averages the best values over the stream. The inner metric is any audio
metric of this package (or any `fmetrics.Metric` over ``(preds, target)``):
its value on one example is its one-shot value on a batch of that example,
computed for all examples, speaker pairs (or permutations) at once by
``torch.func.vmap`` -- one batched kernel per operation instead of
torchmetrics' Python loop over ``speakers^2`` calls.

The best assignment is an exhaustive search over the ``S!`` permutations in
torch (one gather and one max; traceable, no host sync) for ``S <= 8``; for
more speakers ``speaker-wise`` mode uses the Hungarian algorithm
(``scipy.optimize.linear_sum_assignment``) on the host, which syncs the device.

Bad input (docs/audio.md): inputs must be ``(batch, speakers, time, ...)``
with at least one speaker and sample; NaN / inf follow the wrapper's own
``nan_strategy`` (the inner metric only ever sees finite signals, or, with
``"disable"``, the raw ones).
"""
from __future__ import annotations

import itertools
from typing import Literal, NamedTuple

import torch

from fmetrics import validation
from fmetrics.audio import _mean
from fmetrics.audio._mean import NanStrategy, check_bool, check_choice, signal_pair
from fmetrics.metric import Metric
from fmetrics.wrappers._rows import init_on
from fmetrics.recipe import factory
from fmetrics.state import accum_dtype, cat_chunks

__all__ = ["permutation_invariant_training", "pit_permutate"]

EXHAUSTIVE_MAX = 8


class PITState(NamedTuple):
    total: torch.Tensor  # float64 (): sum of the best per-example values
    count: torch.Tensor  # int64 (): examples
    invalid: validation.Invalid  # non-finite input entries (nan_strategy)


class PITValues(NamedTuple):
    values: tuple  # chunks of float64 (n,) best values (NaN: left out)
    perms: tuple  # chunks of int64 (n, speakers) best permutations
    invalid: validation.Invalid  # non-finite input entries (nan_strategy)


def _merge_state(a: PITState, b: PITState) -> PITState:
    return PITState(a.total + b.total, a.count + b.count, validation.invalid_merge(a.invalid, b.invalid))


def _merge_values(a: PITValues, b: PITValues) -> PITValues:
    return PITValues(tuple(a.values) + tuple(b.values), tuple(a.perms) + tuple(b.perms),
                     validation.invalid_merge(a.invalid, b.invalid))


def _speaker_inputs(name: str, preds, target) -> None:
    """``(batch, speakers, time, ...)`` tensors of one shape, at least one speaker and one sample (metadata only)."""
    what = "(batch, speakers, time, ...)"
    for arg, x in (("preds", preds), ("target", target)):
        if not isinstance(x, torch.Tensor):
            raise validation.fail(name, arg, f"a tensor of shape {what}", type(x).__name__)
        if x.dim() < 3:
            raise validation.fail(name, arg, f"a tensor of shape {what}: a {x.dim()}-d input has no speaker or "
                                  "no time axis (one speaker: x.unsqueeze(1))", f"shape {tuple(x.shape)}")
    if preds.shape != target.shape:
        raise validation.fail(name, "target", f"the shape of preds {tuple(preds.shape)}", tuple(target.shape))
    _mean.nonempty(name, "preds", preds, what, axes=preds.dim() - 1)


def _permutations(s: int, device) -> torch.Tensor:
    """All ``s!`` permutations of ``range(s)`` in lexicographic order (``itertools.permutations``' order: ties
    go to the first), ``(s!, s)`` int64. Off the CPU they are built by torch ops on ``device`` (a pageable
    host-to-device copy would synchronize a GPU)."""
    device = torch.device(device)
    if device.type == "cpu":
        return torch.tensor(list(itertools.permutations(range(s))), dtype=torch.int64).reshape(-1, s)
    return permutations_built_on(s, device)


def permutations_built_on(s: int, device) -> torch.Tensor:
    """`_permutations` by torch ops on ``device`` (no host-to-device copy)."""
    perms = torch.zeros(1, 1, dtype=torch.int64, device=device)[:, :min(s, 1)]
    for k in range(1, s):  # insert k at every position of the permutations of range(k)
        new = torch.full((perms.shape[0], 1), k, dtype=torch.int64, device=device)
        perms = torch.cat([torch.cat([perms[:, :i], new, perms[:, i:]], 1) for i in range(k + 1)], 0)
    key = torch.zeros(perms.shape[0], dtype=torch.int64, device=device)
    for i in range(s):
        key = key * s + perms[:, i]
    return perms[torch.argsort(key)]


def _one_value(metric: Metric):
    def value(p, t):
        state = init_on(metric, p.device)  # built on the device (no host-to-device copy)
        out = metric.finalize(metric.update(state, p.unsqueeze(0), t.unsqueeze(0)))
        return torch.as_tensor(out).to(accum_dtype(p.device)).mean()
    return value


def _pairwise_plan(metric: Metric):
    """``(kind, zero_mean)`` when ``metric`` is one of this package's SNR / SI-SDR / SI-SNR factories, else None."""
    from fmetrics.audio import snr

    recipe = metric.recipe
    if recipe is None or recipe.module != snr.__name__ or recipe.qualname not in snr.PAIRWISE:
        return None
    kind, zero_mean = snr.PAIRWISE[recipe.qualname]
    return kind, recipe.arguments.get("zero_mean", False) if zero_mean is None else zero_mean


def best_permutation(mtx: torch.Tensor, maximize: bool):
    """``(best mean over speakers, best permutation)`` of a ``(batch, S, S)`` matrix ``mtx[b, target, pred]``."""
    b, s = mtx.shape[:2]
    if s <= EXHAUSTIVE_MAX:
        perms = _permutations(s, mtx.device)  # (P, S)
        # score[b, p] = mean_i mtx[b, i, perms[p, i]]
        picked = mtx[:, torch.arange(s, device=mtx.device), perms]  # (B, P, S)
        score = picked.mean(-1)
        best, idx = score.max(-1) if maximize else score.min(-1)
        return best, perms[idx]
    try:
        from scipy.optimize import linear_sum_assignment
    except ModuleNotFoundError:
        raise ModuleNotFoundError(f"permutation_invariant_training: {s} speakers (more than {EXHAUSTIVE_MAX}) are "
                                  "matched by SciPy's Hungarian algorithm; install SciPy: pip install scipy"
                                  ) from None

    host = mtx.detach().cpu().numpy()
    perm = torch.stack([torch.as_tensor(linear_sum_assignment(m, maximize)[1]) for m in host]).to(mtx.device)
    perm = perm.reshape(b, s).to(torch.int64)
    return torch.gather(mtx, 2, perm[:, :, None]).mean((-1, -2)), perm


@factory
def permutation_invariant_training(metric: Metric, *, mode: Literal["speaker-wise", "permutation-wise"] = "speaker-wise",
                                   eval_func: Literal["max", "min"] = "max", per_example: bool = False,
                                   nan_strategy: NanStrategy = "error") -> Metric:
    """Permutation-invariant training (PIT): ``metric`` under each example's best speaker assignment.

    ``speaker-wise``: the ``S x S`` matrix ``M[i, j] = metric(preds[j], target[i])``
    of one example is computed once and the best permutation ``pi`` maximizes
    (``eval_func="max"``) or minimizes ``mean_i M[i, pi(i)]``.
    ``permutation-wise``: ``metric(preds[pi], target)`` on the whole
    ``(S, ...)`` example for every permutation (for metrics that couple the
    speakers, e.g. SA-SDR). The value is the mean over examples of the best value.

    Args:
      metric: an `fmetrics.Metric` over ``(preds, target)`` whose value on a
        batch of one example is that example's score, e.g.
        ``fmetrics.scale_invariant_signal_noise_ratio()``.
      mode: ``"speaker-wise"`` (default) or ``"permutation-wise"``.
      eval_func: ``"max"`` (default: higher is better) or ``"min"``.
      per_example: ``False`` (default): the mean of the best values;
        ``True``: a tuple ``(best values (N,), best permutations (N, S))``,
        torchmetrics' functional output (``preds[n, perm[n]]`` matches
        ``target[n]``; see `pit_permutate`).
      nan_strategy: NaN / inf in ``preds`` or ``target``: ``"error"`` (default:
        raised at once on CPU in eager mode, quoting the values, the state
        untouched; elsewhere counted and raised by ``finalize``), ``"warn"`` /
        ``"ignore"`` (the example is left out, with / without a warning from
        ``finalize``: value NaN and the identity permutation with
        ``per_example``) or ``"disable"`` (no check: NaN propagates). The
        inner metric's own ``nan_strategy`` plays no part.

    Inputs:
      ``update(state, preds, target)``: tensors of one shape ``(batch,
      speakers, time, ...)`` (at least 3-d: a 2-d ``(batch, time)`` input has
      no speaker axis and is rejected) that ``metric`` accepts per speaker
      (``speaker-wise``) or per example (``permutation-wise``).

    Returns:
      A float64 0-d tensor, or the per-example tuple.

    Example::

        >>> target = torch.tensor([[[1.0, 2.0, -1.0, 0.5], [0.0, -1.0, 1.0, 1.0]]])
        >>> preds = torch.tensor([[[0.1, -0.9, 1.2, 0.9], [1.1, 2.0, -0.8, 0.4]]])
        >>> pit = fmetrics.permutation_invariant_training(
        ...     fmetrics.scale_invariant_signal_distortion_ratio(), per_example=True)
        >>> pit(preds, target)
        (tensor([18.2776], dtype=torch.float64), tensor([[1, 0]]))
    """
    name = "permutation_invariant_training"
    if not isinstance(metric, Metric):
        raise validation.fail(name, "metric", "a fmetrics.Metric", type(metric).__name__)
    check_choice(name, "mode", mode, ("speaker-wise", "permutation-wise"))
    check_choice(name, "eval_func", eval_func, ("max", "min"))
    check_bool(name, "per_example", per_example)
    _mean.check_nan_strategy(name, nan_strategy)
    maximize = eval_func == "max"
    full = f"{name}({metric.name})"  # the metric's name, in its update and finalize errors
    one = torch.func.vmap(_one_value(metric))
    pairwise = _pairwise_plan(metric) if mode == "speaker-wise" else None

    def best(preds, target):
        b, s = preds.shape[:2]
        rest = preds.shape[2:]
        if b == 0:  # static shape: no examples (vmap does not take empty batches)
            return (torch.zeros(0, dtype=accum_dtype(preds.device), device=preds.device),
                    torch.zeros(0, s, dtype=torch.int64, device=preds.device))
        if pairwise is not None and len(rest) == 1:
            # SNR / SI-SDR / SI-SNR: all S^2 pairs from one Gram product, then the chosen pairs scored exactly
            from fmetrics.audio import snr

            kind, zero_mean = pairwise
            signal_pair(metric.name, preds, target)
            mtx, stats = snr.pairwise_values(preds, target, kind, zero_mean)
            _, perm = best_permutation(mtx, maximize)
            value = snr.matched_values(preds, target, perm, stats, kind).mean(-1)
            return value.to(accum_dtype(preds.device)), perm
        if mode == "speaker-wise":
            # mtx[b, i, j] = metric(preds[b, j], target[b, i]): one vmapped call per pair on strided views
            # (vmapping all b * s * s pairs at once copies the signals s times: measured 4x slower)
            mtx = torch.stack([torch.stack([one(preds[:, j], target[:, i]) for j in range(s)], -1)
                               for i in range(s)], -2)
            return best_permutation(mtx, maximize)
        if s > EXHAUSTIVE_MAX:
            raise validation.fail(full, "preds", f"at most {EXHAUSTIVE_MAX} speakers in permutation-wise mode",
                                  f"{s} speakers")
        perms = _permutations(s, preds.device)
        n_p = perms.shape[0]
        p = preds[:, perms].reshape(b * n_p, s, *rest)
        t = target.unsqueeze(1).expand(b, n_p, s, *rest).reshape(b * n_p, s, *rest)
        score = one(p, t).reshape(b, n_p)
        value, idx = score.max(-1) if maximize else score.min(-1)
        return value, perms[idx]

    def screened(state, preds, target):
        """``(best values, best permutations, kept, invalid)``: ``kept`` None when every example is kept; the
        others are scored on zeroed non-finite entries (the search and the inner metric see finite signals)."""
        _speaker_inputs(full, preds, target)
        if not _mean.screens(nan_strategy, preds, target):
            return (*best(preds, target), None, _mean.unflagged(state.invalid))
        kept, invalid = _mean.nonfinite(state.invalid, 1, preds, target)
        clean = [torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0) for x in (preds, target)]
        return (*best(*clean), kept, invalid)

    if per_example:
        def init():
            return PITValues((), (), validation.invalid_init())

        def update(state, preds, target):
            value, perm, kept, invalid = screened(state, preds, target)
            value = value.to(accum_dtype(value.device))
            if kept is not None:
                value = torch.where(kept, value, torch.nan)
                perm = torch.where(kept.unsqueeze(1), perm, torch.arange(perm.shape[1], device=perm.device))
            return PITValues((value,), (perm,), invalid)

        def finalize(state):
            _mean.report(full, nan_strategy, state.invalid)
            dev_perm = torch.zeros(0, 0, dtype=torch.int64)
            return cat_chunks(state.values, torch.zeros(0, dtype=accum_dtype())), cat_chunks(state.perms, dev_perm)

        tags, merge = PITValues(values="cat", perms="cat", invalid=None), _merge_values
    else:
        def init():
            return PITState(torch.zeros((), dtype=accum_dtype()), torch.zeros((), dtype=torch.int64),
                            validation.invalid_init())

        def update(state, preds, target):
            value, _, kept, invalid = screened(state, preds, target)
            if kept is None:
                return PITState(state.total + value.sum(dtype=state.total.dtype), state.count + value.numel(),
                                invalid)
            return PITState(state.total + torch.where(kept, value, 0).sum(dtype=state.total.dtype),
                            state.count + validation.count(kept), invalid)

        def finalize(state):
            _mean.report(full, nan_strategy, state.invalid, state.count)
            return state.total / state.count

        tags, merge = PITState(total="sum", count="sum", invalid=None), _merge_state
    key = None if metric.state_key is None else (name, metric.state_key, mode, eval_func, nan_strategy, per_example)
    return Metric(init=init, update=update, merge=merge, finalize=finalize, name=full,
                  state_key=key, reductions=tags, check=_mean.finite_check(full) if nan_strategy == "error" else None,
                  higher_is_better=maximize, is_differentiable=metric.is_differentiable, bounds=metric.bounds)


def pit_permutate(preds: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """``preds`` reordered by the best permutations: ``out[b, i] = preds[b, perm[b, i]]``.

    Args:
      preds: ``(batch, speakers, ...)``.
      perm: int64 ``(batch, speakers)``, e.g. from
        ``permutation_invariant_training(..., per_example=True)``.

    Example::

        >>> pit_permutate(torch.tensor([[[1.0], [2.0]]]), torch.tensor([[1, 0]]))
        tensor([[[2.],
                 [1.]]])
    """
    if not isinstance(preds, torch.Tensor) or preds.dim() < 2:
        raise validation.fail("pit_permutate", "preds", "a tensor of shape (batch, speakers, ...)")
    if not isinstance(perm, torch.Tensor) or tuple(perm.shape) != tuple(preds.shape[:2]):
        raise validation.fail("pit_permutate", "perm", f"an integer tensor of shape {tuple(preds.shape[:2])}",
                              tuple(getattr(perm, "shape", ())))
    rows = torch.arange(preds.shape[0], device=preds.device).unsqueeze(1)
    return preds[rows, perm]
