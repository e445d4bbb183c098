"""The memory-bounded internals of the sharded finalize (adapters/_shard) against independent oracles.

Routing runs in many small rounds (`comm.ROUND_BYTES` shrunk to a few rows, the round shares lifted) and the
per-range arithmetic in many steps, over states of many update chunks: binary AUROC / AP against scikit-learn,
Spearman against SciPy on the pooled rows (rtol 1e-12), with heavy ties, a value shared by most rows, -0.0 next
to 0.0 and an empty rank; `comm.route` keeps the one-process order (rows placed by masks or by a sort; a
counting pass that reads only the destinations sends integer columns unnarrowed); a heavily tied value is
counted at its cut, so no rank receives far more than its share of the rows.
"""
import math

import pytest
import torch

import fmetrics as fm
from adapters import distributed
from tests._dist import spawn

N = 1200  # still over a hundred routing rounds of `ROUND_BYTES` = 96 on each rank (was 3000: the same paths)


def _shrunk():
    from adapters._shard import comm, curves, spearman

    comm.ROUND_BYTES, comm.ROUND_SHARE, spearman.SHARE, curves.STEP, spearman.STEP = 96, 10**9, 10**9, 37, 53


def _pooled(seed: int, kind: str):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, generator=g)
    y = x + torch.randn(N, generator=g)
    target = (torch.rand(N, generator=g) < 0.35).long()
    if kind == "ties":
        x, y = torch.round(x * 2) / 2, torch.round(y)
    elif kind == "heavy":  # 70 % of the rows share one value, zeros of both signs
        x = torch.where(torch.rand(N, generator=g) < 0.7, 0.0, x)
        y = torch.where(torch.rand(N, generator=g) < 0.5, -0.0, y)
    preds = torch.sigmoid(x + target)
    if kind == "heavy":
        preds = torch.where(x == 0, 0.5, preds)
    return preds, target, x, y


def _shard(rank: int, world: int):
    """Rows of rank ``rank``: rank 1 has none, the others uneven blocks."""
    edges = [0, N // 3, N // 3, N] if world == 3 else [0, N // 5, N]
    return edges[rank], edges[rank + 1]


def _fed(m, lo, hi, *columns):
    s = m.init()
    for a in range(lo, hi, 97):  # many update chunks
        s = m.update(s, *(c[a: min(a + 97, hi)] for c in columns))
    return s


def _values_body(rank, world):
    _shrunk()
    lo, hi = _shard(rank, world)
    out = []
    for seed, kind in enumerate(("random", "ties", "heavy")):
        preds, target, x, y = _pooled(seed, kind)
        row = [kind]
        for m in (fm.binary_auroc(), fm.binary_average_precision()):
            row.append(float(distributed.finalize(m, _fed(m, lo, hi, preds, target))))
        m = fm.spearman_corrcoef()
        row.append(float(distributed.finalize(m, _fed(m, lo, hi, x, y))))
        m = fm.spearman_corrcoef(num_outputs=2)
        both = torch.stack([x, y], 1), torch.stack([y, -x * x], 1)
        row.append(distributed.finalize(m, _fed(m, lo, hi, *both)).tolist())
        out.append(row)
    return out


@pytest.mark.distributed
@pytest.mark.parametrize("world", [2, pytest.param(3, marks=pytest.mark.slow)])  # 3 ranks: the slow job
def test_many_rounds_match_sklearn_and_scipy(world):
    from scipy.stats import spearmanr
    from sklearn.metrics import average_precision_score, roc_auc_score

    results = spawn(_values_body, world, timeout=200)
    assert all(r == results[0] for r in results[1:])  # the same value on every rank
    for seed, (kind, auroc, ap, rho, rho2) in enumerate(results[0]):
        preds, target, x, y = _pooled(seed, kind)
        assert math.isclose(auroc, roc_auc_score(target.numpy(), preds.numpy()), rel_tol=1e-12), kind
        assert math.isclose(ap, average_precision_score(target.numpy(), preds.numpy()), rel_tol=1e-12), kind
        assert math.isclose(rho, spearmanr(x.numpy(), y.numpy()).statistic, rel_tol=1e-12), kind
        expected = [spearmanr(x.numpy(), y.numpy()).statistic, spearmanr(y.numpy(), (-x * x).numpy()).statistic]
        assert all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(rho2, expected)), kind


def _route_body(rank, world):
    from adapters._shard import comm

    _shrunk()
    ctx = comm.context(None)
    g = torch.Generator().manual_seed(rank)
    n = 50 + 40 * rank
    rows = torch.arange(n) + 1000 * rank
    labels = torch.randint(-3, 100, (n,), generator=g)  # travel as int8
    dest = torch.randint(0, world, (n,), generator=g)
    routed = [comm.route(ctx, [rows, labels], dest, sources=True)]
    comm.FEW_DESTINATIONS = 0  # every destination count takes the argsort placement
    routed.append(comm.route(ctx, [rows, labels], dest, sources=True))
    # a counting pass that reads only the destinations: int32-sized values travel, and arrive, as int64
    skip = torch.where(torch.arange(n) % 7 == 0, -1, dest)
    [(unread,)] = comm.deliver(ctx, lambda sending: [([labels * 1000] if sending else None, skip)],
                               [labels[:0]], narrow=True)
    return rows, labels, dest, routed, skip, unread


@pytest.mark.distributed
def test_route_in_rounds_keeps_the_one_process_order():
    results = spawn(_route_body, 3, timeout=120)
    for me, (_, _, _, routed, _, unread) in enumerate(results):
        want = [(r, lab, src) for src, (rows, labels, dest, *_) in enumerate(results)
                for r, lab, d in zip(rows.tolist(), labels.tolist(), dest.tolist()) if d == me]
        for (got_rows, got_labels), sources in routed:  # placed by masks, then by a sort
            assert list(zip(got_rows.tolist(), got_labels.tolist(), sources.tolist())) == want
            assert got_rows.dtype == torch.int64 and got_labels.dtype == torch.int64
        kept = [lab * 1000 for _, labels, _, _, skip, _ in results
                for lab, d in zip(labels.tolist(), skip.tolist()) if d == me]
        assert unread.tolist() == kept and unread.dtype == torch.int64


def _balance_body(rank, world):
    from adapters._shard import comm

    received = []
    deliver = comm.deliver

    def counting(*args, **kwargs):
        outs = deliver(*args, **kwargs)
        received.append(sum(c[0].shape[0] for c in outs))
        return outs

    comm.deliver = counting
    g = torch.Generator().manual_seed(rank)
    n = 4000
    x = torch.where(torch.rand(n, generator=g) < 0.8, 1.0, torch.rand(n, generator=g))  # 80 % share one value
    y = torch.where(torch.rand(n, generator=g) < 0.6, -2.0, torch.randn(n, generator=g))
    target = (torch.rand(n, generator=g) < 0.5).long()
    for m, columns in ((fm.binary_auroc(), (x, target)), (fm.spearman_corrcoef(), (x, y))):
        distributed.finalize(m, m.update(m.init(), *columns))
    return received, n


@pytest.mark.distributed
def test_a_heavily_tied_value_is_counted_not_piled_on_one_rank():
    """Without the cut counts, the rows of the shared value (80 % of 4 x 4000 = 3.2 x a rank's rows) would all
    go to one rank; with them, every rank receives at most about its own rows (each range between cuts holds
    about 1 / world of the rows)."""
    for received, n in spawn(_balance_body, 4, timeout=120):
        assert len(received) == 3 and max(received) <= 1.2 * n, received


@pytest.mark.parametrize("width", [3, 40])
def test_send_buffer_positions_on_every_path(width):
    """A row's place in the send buffer is its destination's cursor plus the rows before it with that destination
    (a plain loop), by the CPU's masks (few destinations) or radix argsort (many), and by the accelerators'
    ``torch.argsort`` path, run here on the CPU."""
    from adapters._shard import comm

    g = torch.Generator().manual_seed(width)
    dest = torch.randint(0, width, (5000,), generator=g, dtype=torch.int32)
    cursor = torch.randint(0, 10**6, (width,), generator=g)
    seen, want = [0] * width, []
    for d in dest.tolist():
        want.append(int(cursor[d]) + seen[d])
        seen[d] += 1
    assert comm._positions(dest, cursor).tolist() == want
    assert comm._torch_positions(dest, cursor).tolist() == want
