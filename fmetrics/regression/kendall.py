"""`kendall_rank_corrcoef`: Kendall's tau (variants a, b, c) with an optional asymptotic test."""
from __future__ import annotations

import math
import warnings
from typing import Literal, NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.regression import _inputs, _paired
from fmetrics.regression._pairs import runs
from fmetrics.recipe import factory

VARIANTS = ("a", "b", "c")
ALTERNATIVES = ("two-sided", "less", "greater")


class _Ties(NamedTuple):
    pairs: torch.Tensor  # sum t(t-1)/2 over runs of t equal values (int64)
    p1: torch.Tensor  # sum t(t-1)(t-2) (float64)
    p2: torch.Tensor  # sum t(t-1)(2t+5) (float64)
    distinct: int


def _ties(sorted_x: torch.Tensor) -> _Ties:
    start = runs(sorted_x[:, None])[:, 0]
    t = torch.diff(torch.nonzero(start)[:, 0], append=torch.tensor([sorted_x.shape[0]], device=start.device))
    tf = t.double()
    return _Ties((t * (t - 1) // 2).sum(), (tf * (tf - 1) * (tf - 2)).sum(), (tf * (tf - 1) * (2 * tf + 5)).sum(),
                 int(t.numel()))


def _inversions(y: torch.Tensor) -> torch.Tensor:
    """Pairs ``i < j`` with ``y_i > y_j`` by a bottom-up merge sort (O(n log^2 n), batched per level)."""
    n = y.shape[0]
    if n < 2:
        return torch.zeros((), dtype=torch.int64, device=y.device)
    m = 1 << (n - 1).bit_length()
    a = torch.cat([y, torch.full((m - n,), float("inf"), dtype=y.dtype, device=y.device)])  # pads never invert
    total = torch.zeros((), dtype=torch.int64, device=y.device)
    size = 1
    while size < m:
        blocks = a.view(-1, 2, size)
        left, right = blocks[:, 0].contiguous(), blocks[:, 1].contiguous()
        total = total + (size - torch.searchsorted(left, right, right=True)).sum()
        a = torch.sort(blocks.reshape(-1, 2 * size), dim=1).values.reshape(-1)
        size *= 2
    return total


def _column(x: torch.Tensor, y: torch.Tensor, variant: str, alternative: Optional[str]):
    """tau (and the p-value) of one column pair, float64 1-d inputs."""
    n = x.shape[0]
    o = torch.sort(y, stable=True).indices
    o = o[torch.sort(x[o], stable=True).indices]  # lexicographic (x, y)
    xs, ys = x[o], y[o]
    tx, ty = _ties(xs), _ties(torch.sort(y).values)
    joint = runs(xs[:, None])[:, 0] | runs(ys[:, None])[:, 0]
    t_xy = torch.diff(torch.nonzero(joint)[:, 0], append=torch.tensor([n], device=x.device))
    n_xy = (t_xy * (t_xy - 1) // 2).sum()
    total = n * (n - 1) // 2
    dis = _inversions(ys)  # ties in x are sorted by y: only strictly discordant pairs invert
    con = total - tx.pairs - ty.pairs + n_xy - dis
    s = (con - dis).double()
    if variant == "a":
        tau = s / (con + dis).double()
    elif variant == "b":
        tau = s / torch.sqrt((total - tx.pairs).double() * (total - ty.pairs).double())
    else:
        m = min(tx.distinct, ty.distinct)
        tau = 2 * s / (n * n * (m - 1) / m) if m > 0 else s * torch.nan
    tau = torch.clamp(tau, -1, 1)
    if alternative is None:
        return tau, None
    v0 = n * (n - 1) * (2 * n + 5)
    if variant == "a":
        z = 3 * s / math.sqrt(v0 / 2)
    else:
        mm = n * (n - 1)
        var = (v0 - tx.p2 - ty.p2) / 18 + 2 * tx.pairs.double() * ty.pairs.double() / mm
        var = var + tx.p1 * ty.p1 / (9 * mm * (n - 2)) if n > 2 else var
        z = s / torch.sqrt(var)
    if alternative == "two-sided":
        p = 2 * torch.special.ndtr(-z.abs())
    elif alternative == "greater":
        p = torch.special.ndtr(-z)
    else:
        p = torch.special.ndtr(z)
    return tau, p


@factory
def kendall_rank_corrcoef(*, variant: Literal["a", "b", "c"] = "b", t_test: bool = False,
                          alternative: Optional[Literal["two-sided", "less", "greater"]] = "two-sided",
                          num_outputs: int = 1,
                          nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error") -> Metric:
    """Kendall's tau from concordant ``C`` and discordant ``D`` pairs (ties as SciPy / torchmetrics).

    Pairs are counted in ``O(n log^2 n)`` in `finalize` (torchmetrics: O(n^2)).
    Constant input (or fewer than 2 samples): NaN and a warning.

    Args:
      variant: ``"b"`` (default): ``(C - D) / sqrt((n0 - T_x)(n0 - T_y))``,
        SciPy's tau-b; ``"a"``: ``(C - D) / (C + D)`` (torchmetrics' tau-a);
        ``"c"``: ``2 (C - D) / (n^2 (m - 1) / m)``, ``m`` the fewer distinct values.
      t_test: ``False`` (default); ``True`` also returns the asymptotic
        (normal, tie-corrected) p-value.
      alternative: the test's alternative with ``t_test=True``:
        ``"two-sided"`` (default), ``"less"`` or ``"greater"``.
      num_outputs: number of columns (default ``1``: inputs ``(N,)``).
      nan_strategy: NaN/inf in preds or target: ``"error"`` (default),
        ``"warn"``/``"ignore"`` (the row is left out) or ``"disable"`` (a
        column holding one gives NaN).

    Inputs:
      ``update(state, preds, target)``: real tensors ``(N,)`` or ``(N, num_outputs)``.

    Returns:
      float64 tau in ``[-1, 1]``, 0-d or ``(num_outputs,)``; with ``t_test``
      the tuple ``(tau, p_value)``.

    Example::

        >>> fmetrics.kendall_rank_corrcoef()(torch.tensor([2.5, 0.0, 2, 8]), torch.tensor([3, -0.5, 2, 1]))
        tensor(0.3333, dtype=torch.float64)
    """
    name = "kendall_rank_corrcoef"
    _inputs.check_choice(name, "variant", variant, VARIANTS)
    _inputs.check_bool(name, "t_test", t_test)
    if t_test:
        if alternative is None:
            raise validation.fail(name, "alternative", "one of ('two-sided', 'less', 'greater') when t_test=True",
                                  "None")
        _inputs.check_choice(name, "alternative", alternative, ALTERNATIVES)
    test = alternative if t_test else None
    _inputs.check_nan_strategy(name, nan_strategy)
    fam = _paired.family(num_outputs, name, check=nan_strategy == "error")

    def finish(joined):
        x, y = _paired.data(name, joined, nan_strategy)
        x, y = x.double(), y.double()
        nan = torch.tensor(torch.nan, dtype=torch.float64, device=x.device)
        taus, ps, constant = [], [], 0
        for j in range(x.shape[1]):
            xj, yj = x[:, j], y[:, j]
            if x.shape[0] < 2 or bool((xj.amax() == xj.amin()) | (yj.amax() == yj.amin())):
                constant += 1
                tau, p = nan, nan
            elif bool(torch.isnan(xj).any() | torch.isnan(yj).any()):
                tau, p = nan, nan
            else:
                tau, p = _column(xj, yj, variant, test)
            taus.append(tau)
            ps.append(p)
        if constant:
            warnings.warn(f"{name}: preds or target is constant (or there are fewer than 2 samples) for "
                          f"{constant} of {num_outputs} outputs; tau is undefined there and set to NaN",
                          UserWarning, stacklevel=3)
        tau = taus[0] if num_outputs == 1 else torch.stack(taus)
        if test is None:
            return tau
        return tau, (ps[0] if num_outputs == 1 else torch.stack(ps))

    return fam.metric(name, finish, higher_is_better=None, is_differentiable=False, bounds=(-1.0, 1.0))
