"""Sharded finalize of the clustering scores over a label table (``num_clusters=None``: the labels are kept).

With ``n_ij`` the table's cells (target label ``i``, predicted label ``j``), ``a_i`` / ``b_j`` its row and
column sums and ``N`` the rows:

1. Each rank folds its (target, pred) rows into cells with counts; a cell goes to rank ``hash(i, j) mod
   world`` (one `comm.route`), which merges equal cells: every cell is whole on one rank.
2. Marginals: each rank's partial row (column) sums go to ``hash(i)`` (``hash(j)``), which owns the label's
   ``a_i`` (``b_j``); every cell asks the owners of its two labels for them (a route there and back).
3. One ``all_reduce`` of the int64 sums ``N, R, C, sum n_ij^2, sum a_i^2, sum b_j^2`` (R, C: the labels)
   and one of the float64 sums ``sum a_i log a_i``-style entropies and the cells' mutual-information terms
   (scikit-learn's per-cell formula and clipping). Rand, adjusted Rand, Fowlkes-Mallows (pair counts, exact
   integers), MI, NMI, homogeneity, completeness and V-measure follow from these scalars.
4. AMI's expected mutual information is a sum ``sum_i sum_j f(a_i, b_j, N)`` over the label pairs: every
   rank gathers the column sums ``b`` (O(labels), not O(rows)), adds up the terms of the rows it owns
   (`fmetrics`' own formula, on its ``a_i`` and every ``b_j``; no label owned: 0) and one float64
   ``all_reduce`` sums the parts: each rank does about ``1 / world`` of one process's work, less where
   labels share a size (each distinct pair of sizes is evaluated once, weighted by its multiplicities).

The deferred value records (non-finite labels) are reduced on the state without its rows and reported by
the family's shared step, as one process reports them. A table with known ``num_clusters`` is a summed
state: the gather path already reduces it in one ``all_reduce``.
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist

from adapters._shard import comm
from adapters._shard.retrieval import owner
from fmetrics.clustering.mutual_info import expected_mutual_info_terms
from fmetrics.state import cat_chunks

NAMES = frozenset({"rand_score", "adjusted_rand_score", "fowlkes_mallows_index", "mutual_info_score",
                   "normalized_mutual_info_score", "adjusted_mutual_info_score", "homogeneity_score",
                   "completeness_score", "v_measure_score"})
_EPS = torch.finfo(torch.float64).eps
_MIX = -7046029254386353131  # as `retrieval.owner`'s multiplier


def applies(metric) -> bool:
    r = metric.recipe
    return (r is not None and r.module.startswith("fmetrics.clustering") and r.qualname in NAMES
            and r.arguments.get("num_clusters") is None)


def finalize(ctx: comm.Ctx, metric, state, reduce):
    base = reduce(metric, state._replace(preds=(), target=()))
    metric.shared(base)  # reports the non-finite labels as one process
    empty = torch.zeros(0, dtype=torch.int64)
    p, t = cat_chunks(state.preds, empty), cat_chunks(state.target, empty)
    dp, dt = comm.promoted(ctx, [p.dtype if state.preds else None, t.dtype if state.target else None])
    if dp is None:
        return metric.finalize(base)
    p, t = p.to(ctx.comm, dp), t.to(ctx.comm, dt)
    if p.is_floating_point():  # dropped rows (NaN) are left out, as one process does
        keep = ~(p.isnan() | t.isnan())
        p, t = p[keep], t[keep]
    ti, pj = _bits(t), _bits(p)
    cells, n = _merge(*route_cells(ctx, ti, pj))
    a_keys, a = _marginal(ctx, cells[:, 0], n)
    b_keys, b = _marginal(ctx, cells[:, 1], n)
    labels = torch.tensor([a_keys.shape[0], b_keys.shape[0]], device=ctx.comm)
    ints = torch.cat([n.sum()[None], labels, torch.stack([(n * n).sum(), (a * a).sum(), (b * b).sum()])])
    dist.all_reduce(ints, group=ctx.group)
    total, rows, cols, sum_sq, sum_a2, sum_b2 = (int(v) for v in ints)
    if total == 0:
        return metric.finalize(base)
    a_of = _lookup(ctx, cells[:, 0], a_keys, a)
    b_of = _lookup(ctx, cells[:, 1], b_keys, b)
    floats = torch.stack([_plogp(a, total), _plogp(b, total), _mi_terms(n, a_of, b_of, total)])
    dist.all_reduce(floats, group=ctx.group)
    s = dict(n=total, r=rows, c=cols, sum_sq=sum_sq, sum_a2=sum_a2, sum_b2=sum_b2,
             h_a=_entropy(rows, float(floats[0])), h_b=_entropy(cols, float(floats[1])),
             mi=0.0 if rows <= 1 or cols <= 1 else max(float(floats[2]), 0.0))
    args = metric.recipe.arguments
    if metric.recipe.qualname == "adjusted_mutual_info_score" and not (rows == cols == 1 or rows == 1 or cols == 1):
        s["emi"] = _expected_mi(ctx, a, b, total)
    return torch.tensor(_VALUES[metric.recipe.qualname](s, args), dtype=torch.float64)


def _bits(x: torch.Tensor) -> torch.Tensor:
    """int64 keys of labels: integers as they are, floats as their bits (``-0.0`` as ``0.0``)."""
    return (x + 0.0).view(torch.int64) if x.is_floating_point() else x.to(torch.int64)


def _owner(keys: torch.Tensor, world: int) -> torch.Tensor:
    """`retrieval.owner` of int64 keys with their high half folded onto the low one: a float label's bits
    (``0.5 * k``, integers as floats) end in tens of zeros, which that hash alone sends to one rank of two."""
    return owner(keys ^ (keys >> 32), world)


def _merge(keys: torch.Tensor, counts: torch.Tensor):
    """Distinct rows of ``keys`` (``(M, 2)`` or ``(M,)``), ascending (lexicographic), with their summed int64
    counts. Pairs: each column renumbered densely, then one 1-D ``unique`` of ``i * J + j`` (``torch.unique``
    with ``dim=0`` is ~10x slower)."""
    if keys.dim() == 2:
        (ui, ii), (uj, ij) = (torch.unique(keys[:, c], return_inverse=True) for c in (0, 1))
        packed, inverse = torch.unique(ii * uj.shape[0] + ij, return_inverse=True)
        uniq = torch.stack([ui[packed // uj.shape[0]], uj[packed % uj.shape[0]]], 1)
    else:
        uniq, inverse = torch.unique(keys, return_inverse=True)
    return uniq, torch.zeros(uniq.shape[0], dtype=torch.int64, device=keys.device).index_add_(0, inverse, counts)


def route_cells(ctx: comm.Ctx, ti: torch.Tensor, pj: torch.Tensor):
    """This rank's rows folded into cells and routed to ``hash(i, j)``: ``((M, 2) keys, counts)`` received."""
    cells, n = _merge(torch.stack([ti, pj], 1), torch.ones(ti.shape[0], dtype=torch.int64, device=ti.device))
    keys, counts = comm.route(ctx, [cells, n], _owner(cells[:, 0] * _MIX + cells[:, 1], ctx.world))
    return keys, counts


def _marginal(ctx: comm.Ctx, labels: torch.Tensor, n: torch.Tensor):
    """The labels this rank owns (``hash(label)``), ascending, with their global sums of ``n``."""
    keys, sums = _merge(labels, n)
    got, got_n = comm.route(ctx, [keys, sums], _owner(keys, ctx.world))
    return _merge(got, got_n)


def _lookup(ctx: comm.Ctx, labels: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Per entry of ``labels``: the value its owner holds for it (a route to the owners and back)."""
    dest = _owner(labels, ctx.world)
    (asked,), sources = comm.route(ctx, [labels], dest, sources=True)
    (answers,) = comm.route(ctx, [values[torch.searchsorted(keys, asked)]], sources)
    out = torch.empty_like(answers)
    out[torch.argsort(dest, stable=True)] = answers  # answers come back grouped by owner, in this rank's order
    return out


def _plogp(sizes: torch.Tensor, total: int) -> torch.Tensor:
    """``sum (p / N) (log p - log N)`` over this rank's labels (the entropy's terms, scikit-learn's form)."""
    s = sizes.double()
    return ((s / total) * (torch.log(s) - math.log(total))).sum()


def _entropy(labels: int, plogp: float) -> float:
    """scikit-learn's conventions: no label -> 1, one label -> 0."""
    return 1.0 if labels == 0 else 0.0 if labels == 1 else -plogp


def _mi_terms(n: torch.Tensor, a: torch.Tensor, b: torch.Tensor, total: int) -> torch.Tensor:
    """This rank's cells' terms of `fmetrics.clustering.mutual_info.mutual_info` (clipped as there)."""
    nz = n.double()
    c_nm = nz / total
    log_outer = -torch.log(a.double() * b.double()) + 2 * math.log(total)
    mi = c_nm * (torch.log(nz) - math.log(total)) + c_nm * log_outer
    return torch.where(mi.abs() < _EPS, torch.zeros_like(mi), mi).sum()


def _expected_mi(ctx: comm.Ctx, a: torch.Tensor, b: torch.Tensor, total: int) -> float:
    """E[MI]: this rank's rows' terms (its ``a`` against every rank's ``b``; equal sizes once, weighted by their
    multiplicities), summed over the ranks; a rank whose terms raise makes every rank raise (`comm.agree`)."""
    (sa, ca), (sb, cb) = (torch.unique(x, return_counts=True) for x in (a, comm.gather_rows(ctx, b)))
    part = comm.agree(ctx, lambda: expected_mutual_info_terms(sa, sb, float(total), counts=(ca, cb)))
    emi = torch.tensor([part], dtype=torch.float64, device=ctx.comm)
    dist.all_reduce(emi, group=ctx.group)
    return float(emi)


def _pairs(s):
    """scikit-learn's pair confusion matrix ``(tn, fp, fn, tp)`` from the sums (as `fmetrics.clustering.rand`)."""
    n, sq = s["n"], s["sum_sq"]
    fp, fn = s["sum_b2"] - sq, s["sum_a2"] - sq
    return n * n - fp - fn - sq, fp, fn, sq - n


def _rand(s, args):
    tn, fp, fn, tp = _pairs(s)
    num, den = tn + tp, tn + fp + fn + tp
    return 1.0 if num == den or den == 0 else num / den


def _adjusted_rand(s, args):
    tn, fp, fn, tp = _pairs(s)
    if fn == 0 and fp == 0:
        return 1.0
    return 2.0 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn))


def _fowlkes_mallows(s, args):
    tk, pk, qk = s["sum_sq"] - s["n"], s["sum_b2"] - s["n"], s["sum_a2"] - s["n"]
    return 0.0 if tk == 0 else (tk / pk) ** 0.5 * (tk / qk) ** 0.5


def _average(u: float, v: float, method: str) -> float:
    return {"min": min(u, v), "max": max(u, v), "geometric": math.sqrt(u * v), "arithmetic": (u + v) / 2}[method]


def _nmi(s, args):
    if s["r"] == s["c"] == 1:
        return 1.0
    return 0.0 if s["mi"] == 0 else s["mi"] / _average(s["h_a"], s["h_b"], args["average_method"])


def _ami(s, args):
    if s["r"] == s["c"] == 1:
        return 1.0
    if s["r"] == 1 or s["c"] == 1:
        return 0.0
    den = _average(s["h_a"], s["h_b"], args["average_method"]) - s["emi"]
    num = s["mi"] - s["emi"]
    den = min(den, -_EPS) if den < 0 else max(den, _EPS)
    num = min(num, -_EPS) if num < 0 else max(num, _EPS)
    return num / den


def _hcv(s, beta: float = 1.0):
    h = s["mi"] / s["h_a"] if s["h_a"] else 1.0
    c = s["mi"] / s["h_b"] if s["h_b"] else 1.0
    return h, c, 0.0 if h + c == 0.0 else (1 + beta) * h * c / (beta * h + c)


_VALUES = {
    "rand_score": _rand, "adjusted_rand_score": _adjusted_rand, "fowlkes_mallows_index": _fowlkes_mallows,
    "mutual_info_score": lambda s, args: s["mi"], "normalized_mutual_info_score": _nmi,
    "adjusted_mutual_info_score": _ami, "homogeneity_score": lambda s, args: _hcv(s)[0],
    "completeness_score": lambda s, args: _hcv(s)[1],
    "v_measure_score": lambda s, args: _hcv(s, args["beta"])[2],
}
