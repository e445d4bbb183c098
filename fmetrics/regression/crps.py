"""`continuous_ranked_probability_score`: CRPS of an ensemble forecast."""
from __future__ import annotations

from typing import Literal, NamedTuple

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.regression import _inputs
from fmetrics.state import accum_dtype, merge_fields
from fmetrics.recipe import factory


class CRPSState(NamedTuple):
    total: torch.Tensor  # float64 (): sum of per-sample CRPS
    count: torch.Tensor  # int64 (): counted samples
    nonfinite: torch.Tensor  # int64 (): samples with a NaN/inf member or observation


@factory
def continuous_ranked_probability_score(*, nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error") -> Metric:
    """Mean CRPS ``1/M sum_i |x_i - y| - 1/(2 M^2) sum_ij |x_i - x_j|`` of ensembles ``x`` against observations ``y``.

    The ensemble spread is ``sum_ij |x_i - x_j| = 2 sum_k (2k - M + 1) x_(k)``
    over the sorted members (O(M log M) per sample instead of O(M^2)).

    Args:
      nan_strategy: NaN/inf in the inputs: ``"error"`` (default; raised at
        once on CPU, else by `finalize`), ``"warn"``/``"ignore"`` (left out)
        or ``"disable"`` (propagate); see docs/regression.md.

    Inputs:
      ``update(state, preds, target)``: ``preds`` ``(N, M)`` ensembles with
      ``M >= 2`` members, ``target`` ``(N,)`` observations.

    Returns:
      float64 0-d tensor (``>= 0``); NaN with a warning on no data.

    Example::

        >>> m = fmetrics.continuous_ranked_probability_score()
        >>> m(torch.tensor([[0., 1., 2.], [1., 2., 3.]]), torch.tensor([1., 4.]))
        tensor(0.8889, dtype=torch.float64)
    """
    name = "continuous_ranked_probability_score"
    _inputs.check_nan_strategy(name, nan_strategy)
    drop = nan_strategy != "disable"

    def init():
        z = torch.zeros((), dtype=torch.int64)
        return CRPSState(torch.zeros((), dtype=accum_dtype()), z, z.clone())

    def update(state, preds, target):
        preds, target = _inputs.real(name, "preds", preds), _inputs.real(name, "target", target)
        if preds.dim() != 2 or preds.shape[1] < 2:
            raise validation.fail(name, "preds", "ensembles of shape (N, M) with M >= 2 members",
                                  tuple(preds.shape))
        if target.shape != preds.shape[:1]:
            raise validation.fail(name, "target", f"shape (N,) = {tuple(preds.shape[:1])}", tuple(target.shape))
        x = torch.sort(_inputs.as_acc(preds, state.total), dim=1).values
        y = _inputs.as_acc(target, state.total)
        m = x.shape[1]
        k = torch.arange(m, dtype=x.dtype, device=x.device)
        spread = 2 * (x * (2 * k - m + 1)).sum(1)
        crps = (x - y[:, None]).abs().mean(1) - spread / (2 * m * m)
        if not drop:
            return CRPSState(state.total + crps.sum(), state.count + x.shape[0], state.nonfinite)
        w = _inputs.row_weights(torch.cat((x, y[:, None]), 1))
        kept = w.sum().to(torch.int64)
        return CRPSState(state.total + torch.nan_to_num(crps, nan=0.0, posinf=0.0, neginf=0.0).mul_(w).sum(),
                         state.count + kept, state.nonfinite + (x.shape[0] - kept))

    def finalize(state):
        _inputs.report_count(name, nan_strategy, state.nonfinite)
        if _inputs.empty(name, state.count):
            return torch.full_like(state.total, float("nan"))
        return state.total / state.count

    tags = CRPSState(total="sum", count="sum", nonfinite="sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  reductions=tags, check=_inputs.finite_check(name) if nan_strategy == "error" else None,
                  higher_is_better=False, is_differentiable=True, bounds=(0.0, None))
