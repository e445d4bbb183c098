"""`adapters.distributed.finalize` (sharded finalize) in real gloo groups against the one-process value.

Every rank builds the same random data, keeps its shard (uneven shards, an empty rank, every row on one
rank, a query split across ranks and batches, heavy score ties, every score equal) and the sharded value
must equal ``metric.finalize`` of one state holding all rows: floats within 1e-12, the same bits on every
rank. Binary AUROC / AP are also checked against scikit-learn on the pooled rows.
"""
import math
import random
import warnings

import pytest
import torch

import fmetrics as fm
from adapters import distributed
from tests._dist import count_collectives, spawn

RETRIEVAL = [
    ("retrieval_normalized_dcg", dict(top_k=10)),
    ("retrieval_normalized_dcg", dict(aggregation="median")),
    ("retrieval_map", dict()),
    ("retrieval_map", dict(empty_target_action="skip", aggregation="min")),
    ("retrieval_mrr", dict(aggregation="max")),
    ("retrieval_precision", dict(top_k=3, empty_target_action="pos")),
    ("retrieval_recall", dict(top_k=2, aggregation="none", empty_target_action="skip")),
    ("retrieval_hit_rate", dict(top_k=2, ignore_index=-1)),
    ("retrieval_r_precision", dict(empty_target_action="skip")),
    ("retrieval_fall_out", dict(top_k=4)),
    ("retrieval_auroc", dict(aggregation="none")),
]
CURVES = [("binary_auroc", {}), ("binary_average_precision", {}), ("binary_auroc", dict(ignore_index=-1)),
          ("binary_average_precision", dict(ignore_index=-1))]
SPEARMAN = [dict(), dict(num_outputs=3)]
KENDALL = [dict(), dict(variant="a", t_test=True), dict(variant="c", num_outputs=2, t_test=True, alternative="less")]
SCENARIOS = ("uneven", "empty_rank", "one_rank")


def _cuts(n: int, world: int, scenario: str, rng: random.Random) -> list[int]:
    """Shard boundaries ``[0, ..., n]`` (world + 1 of them)."""
    if scenario == "one_rank":
        at = rng.randrange(world)
        return [0] * (at + 1) + [n] * (world - at)
    if scenario == "empty_rank":  # world - 1 shards with data, an empty one inserted at a random rank
        edges = [0, *sorted(rng.randint(0, n) for _ in range(world - 2)), n]
        at = rng.randrange(world)
        edges.insert(at, edges[min(at, len(edges) - 1)])
        return sorted(edges)
    return [0, *sorted(rng.randint(0, n) for _ in range(world - 1)), n]


def _retrieval_data(seed: int, graded: bool, ignore: bool):
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(40, 400, (1,), generator=g))
    preds = torch.randint(0, 6, (n,), generator=g).double() / 5  # heavy ties within queries
    target = torch.randint(0, 4 if graded else 2, (n,), generator=g)
    if not graded:
        target = (torch.rand(n, generator=g) < 0.3).long()
    indexes = torch.randint(0, max(n // 8, 1), (n,), generator=g) * 7 + 3  # sparse ids, queries of ~8 rows
    if ignore:
        target = torch.where(torch.rand(n, generator=g) < 0.1, -1, target)
    return preds.float(), target, indexes


def _curve_data(seed: int, kind: str, ignore: bool):
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(30, 600, (1,), generator=g))
    target = (torch.rand(n, generator=g) < 0.4).long()
    if kind == "ties":
        preds = torch.randint(0, 7, (n,), generator=g).float() / 6
    elif kind == "one_key":
        preds = torch.full((n,), 0.3)
    elif kind == "no_pos":
        preds, target = torch.rand(n, generator=g), torch.zeros(n, dtype=torch.long)
    elif kind == "hard":
        preds = torch.randint(0, 2, (n,), generator=g).float()
    elif kind == "logits":
        preds = torch.randn(n, generator=g) * 3
    else:
        preds = torch.rand(n, generator=g)
    return preds, torch.where(torch.rand(n, generator=g) < 0.05, -1, target) if ignore else target


def _local_state(m, data, lo, mid, hi):
    s = m.init()
    for a, b in ((lo, mid), (mid, hi)):  # two updates: a query's rows arrive over batches
        if b > a:
            s = m.update(s, *(x[a:b] for x in data))
    return s


def _run(m, data, world, rank, scenario, rng):
    """(sharded value, one-process value, its warnings, the sharded warnings). The one-process value is one
    state fed the same batches (logits are detected per batch, so batching is part of the input)."""
    cuts = _cuts(data[0].shape[0], world, scenario, rng)
    mids = [rng.randint(cuts[r], cuts[r + 1]) for r in range(world)]
    states = [_local_state(m, data, cuts[r], mids[r], cuts[r + 1]) for r in range(world)]
    with warnings.catch_warnings(record=True) as one_w:
        warnings.simplefilter("always")
        one_state = states[0]
        for other in states[1:]:
            one_state = m.merge(one_state, other)
        one = m.finalize(one_state)
    with warnings.catch_warnings(record=True) as shard_w:
        warnings.simplefilter("always")
        got = distributed.finalize(m, states[rank])
    return got, one, sorted({str(w.message) for w in one_w}), sorted({str(w.message) for w in shard_w})


def _covered(i: int, j: int, k: int, every: bool) -> bool:
    """Whether case (metric ``i``, data kind ``j``, scenario ``k``) runs: all of them when ``every`` (the slow
    job), else one scenario per (metric, kind) pair, rotating, so that every metric still meets every data kind
    and every scenario (the default run: a third of those cases, the same seeds)."""
    return every or k == (i + j) % len(SCENARIOS)


def _body(rank, world, seed, every=True):
    """Every retrieval metric under every scenario; curves, Spearman and Kendall over data kinds x scenarios
    (`_covered`)."""
    out = []
    for i, (name, kw) in enumerate(RETRIEVAL):
        m = getattr(fm, name)(**kw)
        for j, scenario in enumerate(SCENARIOS):
            rng = random.Random(f"{seed}/{i}/{j}")  # the same on every rank
            data = _retrieval_data(seed * 100 + i * 10 + j, name == "retrieval_normalized_dcg", "ignore_index" in kw)
            out.append((f"{name}{kw}/{scenario}", *_run(m, data, world, rank, scenario, rng)))
    for i, (name, kw) in enumerate(CURVES):
        m = getattr(fm, name)(**kw)
        for j, kind in enumerate(("random", "ties", "one_key", "no_pos", "hard", "logits")):
            for k, scenario in enumerate(SCENARIOS):
                if not _covered(i, j, k, every):
                    continue
                rng = random.Random(f"{seed}/c{i}/{j}/{k}")
                data = _curve_data(seed * 1000 + i * 100 + j * 10 + k, kind, "ignore_index" in kw)
                out.append((f"{name}{kw}/{kind}/{scenario}", *_run(m, data, world, rank, scenario, rng)))
    for i, kw in enumerate(SPEARMAN):
        m = fm.spearman_corrcoef(**kw)
        for j, kind in enumerate(("random", "ties", "one_key", "constant_target")):
            for k, scenario in enumerate(SCENARIOS):
                if not _covered(i, j, k, every):
                    continue
                rng = random.Random(f"{seed}/s{i}/{j}/{k}")
                data = _pairs_data(seed * 1000 + i * 100 + j * 10 + k, kind, kw.get("num_outputs", 1))
                out.append((f"spearman{kw}/{kind}/{scenario}", *_run(m, data, world, rank, scenario, rng)))
    for i, kw in enumerate(KENDALL):
        m = fm.kendall_rank_corrcoef(**kw)
        for j, kind in enumerate(("random", "ties", "one_key", "constant_target")):
            for k, scenario in enumerate(SCENARIOS):
                if not _covered(i, j, k, every):
                    continue
                rng = random.Random(f"{seed}/k{i}/{j}/{k}")
                data = _pairs_data(seed * 1000 + i * 100 + j * 10 + k + 7, kind, kw.get("num_outputs", 1))
                for value, one, *warned in [_run(m, data, world, rank, scenario, rng)]:
                    for part, (v, o) in enumerate(zip(value, one) if isinstance(value, tuple) else [(value, one)]):
                        out.append((f"kendall{kw}/{kind}/{scenario}/{part}", v, o, *warned))
    return out


def _pairs_data(seed: int, kind: str, width: int):
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(2, 500, (1,), generator=g))
    x = torch.randn(n, width, generator=g)
    y = x + torch.randn(n, width, generator=g)
    if kind == "ties":
        x, y = torch.round(x * 2), torch.round(y)
    elif kind == "one_key":
        x = torch.full_like(x, 0.5)
    elif kind == "constant_target":
        y[:, 0] = 2.0
    return (x[:, 0], y[:, 0]) if width == 1 else (x, y)


def _close(a, b) -> bool:
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True))


def _check(results):
    failures = []
    for per_rank in zip(*results):
        cid = per_rank[0][0]
        got0, one = per_rank[0][1], per_rank[0][2]
        if not _close(got0, one):
            failures.append(f"{cid}: sharded {got0} != one-process {one}")
        if any(not torch.equal(torch.as_tensor(r[1]).nan_to_num(7.0), torch.as_tensor(got0).nan_to_num(7.0))
               for r in per_rank[1:]):
            failures.append(f"{cid}: ranks differ: {[r[1] for r in per_rank]}")
        if torch.as_tensor(got0).dtype != torch.as_tensor(one).dtype:
            failures.append(f"{cid}: dtype {torch.as_tensor(got0).dtype} != {torch.as_tensor(one).dtype}")
        # a warning of the one-process value (empty input, no positives, hard scores) is given by the sharded one
        warned = set().union(*(set(r[4]) for r in per_rank))
        missing = set(per_rank[0][3]) - warned
        if missing:
            failures.append(f"{cid}: warnings not given: {sorted(missing)}")
    assert not failures, "\n".join(failures)


# the default run: 2 ranks, each (metric, data kind) pair under one rotating scenario (`_covered`); the slow job:
# every (metric, kind, scenario) on 2 and 3 ranks (same seed on 2 ranks: the default cases are a subset)
@pytest.mark.distributed
@pytest.mark.parametrize("world, every", [
    pytest.param(2, False, id="2"), pytest.param(2, True, id="2-every", marks=pytest.mark.slow),
    pytest.param(3, True, id="3", marks=pytest.mark.slow)])
def test_sharded_equals_one_process(world, every):
    _check(spawn(_body, world, 11 + world, every, timeout=240))


@pytest.mark.distributed
@pytest.mark.slow
def test_sharded_equals_one_process_4_ranks():
    _check(spawn(_body, 4, 5, timeout=300))


def test_cuts_cover_the_rows():
    rng = random.Random(0)
    for world in (2, 3, 4):
        for scenario in SCENARIOS:
            for _ in range(20):
                cuts = _cuts(50, world, scenario, rng)
                assert len(cuts) == world + 1 and cuts[0] == 0 and cuts[-1] == 50 and cuts == sorted(cuts)
                sizes = [b - a for a, b in zip(cuts, cuts[1:])]
                if scenario != "uneven":
                    assert 0 in sizes
                if scenario == "one_rank":
                    assert 50 in sizes


# ---------------------------------------------------------------- oracle, errors, volume, fallback


def _oracle_body(rank, world):
    g = torch.Generator().manual_seed(3)
    preds, target = torch.randint(0, 9, (900,), generator=g).float() / 8, (torch.rand(900, generator=g) < 0.3).long()
    lo, hi = rank * 900 // world, (rank + 1) * 900 // world
    out = []
    for name in ("binary_auroc", "binary_average_precision"):
        m = getattr(fm, name)()
        out.append(float(distributed.finalize(m, m.update(m.init(), preds[lo:hi], target[lo:hi]))))
    x = torch.round(torch.randn(900, generator=g) * 3)  # heavy ties in both columns
    y = torch.round(x / 2 + torch.randn(900, generator=g))
    for m in (fm.spearman_corrcoef(), fm.kendall_rank_corrcoef(), fm.kendall_rank_corrcoef(variant="c")):
        out.append(float(distributed.finalize(m, m.update(m.init(), x[lo:hi], y[lo:hi]))))
    return out, preds, target, x, y


@pytest.mark.distributed
def test_sharded_values_match_sklearn_and_scipy():
    from scipy.stats import kendalltau, spearmanr
    from sklearn.metrics import average_precision_score, roc_auc_score

    results = spawn(_oracle_body, 3, timeout=120)
    (auroc, ap, rho, tau_b, tau_c), preds, target, x, y = results[0]
    assert math.isclose(rho, spearmanr(x.numpy(), y.numpy()).statistic, rel_tol=1e-12)
    assert math.isclose(tau_b, kendalltau(x.numpy(), y.numpy()).statistic, rel_tol=1e-12)
    assert math.isclose(tau_c, kendalltau(x.numpy(), y.numpy(), variant="c").statistic, rel_tol=1e-12)
    assert math.isclose(auroc, roc_auc_score(target.numpy(), preds.numpy()), rel_tol=1e-12)
    assert math.isclose(ap, average_precision_score(target.numpy(), preds.numpy()), rel_tol=1e-12)


def _error_body(rank, world):
    m = fm.retrieval_map(empty_target_action="error")
    # rank 1's query 5 has no relevant row: every rank must raise (not only rank 1, not hang)
    target = torch.tensor([1, 0, 0]) if rank == 0 else torch.tensor([0, 0, 0])
    s = m.update(m.init(), torch.rand(3), target, torch.tensor([2, 2, 2]) if rank == 0 else torch.tensor([5, 5, 5]))
    try:
        distributed.finalize(m, s)
    except ValueError as err:
        return str(err)
    return None


@pytest.mark.distributed
def test_an_error_on_one_rank_raises_on_every_rank():
    messages = spawn(_error_body, 2, timeout=120)
    assert all(msg is not None and "retrieval_map" in msg and "no relevant" in msg for msg in messages), messages


def _deferred_body(rank, world):
    """Rank 1 records a broken value rule (deferred, as on a GPU); every rank must raise that metric's error."""
    bad = rank == 1
    cases = [
        (fm.retrieval_map(), (torch.tensor([0.2, 0.5]), torch.tensor([1, 0]), torch.tensor([-3 if bad else 1, 2]))),
        (fm.binary_auroc(), (torch.tensor([0.2, 0.5]), torch.tensor([1, 5 if bad else 0]))),
        (fm.kendall_rank_corrcoef(), (torch.tensor([0.2, 0.5, 0.1]), torch.tensor([1.0, math.nan if bad else 2, 0]))),
    ]
    return _deferred_messages(cases)


def _deferred_messages(cases):
    """Per ``(metric, inputs)`` case: the error `finalize` raises after a deferred update (None if none)."""
    out = []
    for m, inputs in cases:
        with fm.validation.mode("deferred"):
            s = m.update(m.init(), *inputs)
        try:
            distributed.finalize(m, s)
            out.append(None)
        except ValueError as err:
            out.append(str(err))
    return out


@pytest.mark.distributed
def test_a_deferred_error_on_one_rank_raises_on_every_rank():
    per_rank = spawn(_deferred_body, 2, timeout=120)
    for i, name in enumerate(("retrieval_map", "binary_auroc", "kendall_rank_corrcoef")):
        messages = [r[i] for r in per_rank]
        assert all(msg is not None and msg.startswith(name) for msg in messages), messages
        assert messages[0] == messages[1]


def _dtypes_body(rank, world):
    """Uncommon dtypes (bool / uint8 / int16 targets, bfloat16 / float16 / float64 scores) and ranks holding
    different dtypes: (sharded, one process) pairs."""
    g = torch.Generator().manual_seed(0)
    n = 200
    p, t, q = torch.rand(n, generator=g), torch.rand(n, generator=g) < 0.3, torch.randint(0, 20, (n,), generator=g)
    lo, hi = rank * n // world, (rank + 1) * n // world
    out = []
    for pd, td in ((torch.bfloat16, torch.bool), (torch.float16, torch.bool), (torch.float64, torch.uint8),
                   (torch.float32, torch.int16)):
        m = fm.retrieval_map()
        s = m.update(m.init(), p[lo:hi].to(pd), t[lo:hi].to(td), q[lo:hi])
        out.append((f"map {pd} {td}", distributed.finalize(m, s), m(p.to(pd), t.to(td), q)))
    for pd in (torch.bfloat16, torch.float16, torch.float64):
        m = fm.binary_auroc()
        out.append((f"auroc {pd}", distributed.finalize(m, m.update(m.init(), p[lo:hi].to(pd), t[lo:hi].long())),
                    m(p.to(pd), t.long())))
        x = (p * 10).round().to(pd)
        for m in (fm.spearman_corrcoef(), fm.kendall_rank_corrcoef()):
            out.append((f"{m.name} {pd}", distributed.finalize(m, m.update(m.init(), x[lo:hi], p[lo:hi].to(pd))),
                        m(x, p.to(pd))))
    mine = torch.float32 if rank == 0 else torch.float64
    halves = [(p[:n // 2], q[:n // 2].double()), (p[n // 2:].double(), q[n // 2:].double())]
    for m in (fm.spearman_corrcoef(), fm.binary_auroc()):
        data = (p[lo:hi].to(mine), (q[lo:hi] % 2).long()) if m.name == "binary_auroc" else (p[lo:hi].to(mine),
                                                                                           q[lo:hi].double())
        parts = [(a, (b % 2).long()) if m.name == "binary_auroc" else (a, b) for a, b in halves]
        one = m.merge(m.update(m.init(), *parts[0]), m.update(m.init(), *parts[1]))
        out.append((f"{m.name} float32 + float64", distributed.finalize(m, m.update(m.init(), *data)), m.finalize(one)))
    return out


@pytest.mark.distributed
def test_uncommon_and_mixed_dtypes():
    for cid, got, one in spawn(_dtypes_body, 2, timeout=120)[0]:
        assert _close(got, one), (cid, got, one)


def _mismatch_body(rank, world):
    m = fm.retrieval_map() if rank == 0 else fm.retrieval_mrr(ignore_index=-1)
    s = m.update(m.init(), torch.rand(4), torch.tensor([1, 0, 1, 0]), torch.tensor([0, 0, 1, 1]))
    try:
        distributed.finalize(m, s)
    except distributed.LayoutMismatchError:
        return True
    return False


@pytest.mark.distributed
def test_different_metrics_raise_layout_mismatch():
    assert spawn(_mismatch_body, 2, timeout=120) == [True, True]


def _volume_body(rank, world):
    g = torch.Generator().manual_seed(rank)
    n = 20000
    preds, target = torch.rand(n, generator=g), (torch.rand(n, generator=g) < 0.2).long()
    indexes = torch.randint(0, 4000, (n,), generator=g)
    out = {}
    for name, m, inputs in (("ndcg", fm.retrieval_normalized_dcg(top_k=10), (preds, target, indexes)),
                            ("auroc", fm.binary_auroc(), (preds, target))):
        s = m.update(m.init(), *inputs)
        with count_collectives() as sharded:
            distributed.finalize(m, s)
        with count_collectives() as gathered:
            m.finalize(distributed.reduce(m, s))
        out[name] = (sharded["bytes"], gathered["bytes"])
    return out


@pytest.mark.distributed
def test_sharded_sends_about_one_share_of_the_rows():
    """Bytes a rank hands to collectives: about its own rows (the gather path hands its rows too, but
    receives world x; the sharded path receives about one share), so compare what is sent: at most ~its state."""
    for per_rank in spawn(_volume_body, 3, timeout=180):
        for name, (sharded, gathered) in per_rank.items():
            assert sharded <= 1.6 * gathered, (name, sharded, gathered)


def test_shardable_names_the_sharded_metrics():
    assert distributed.shardable(fm.retrieval_normalized_dcg(top_k=5))
    assert distributed.shardable(fm.binary_auroc()) and distributed.shardable(fm.binary_average_precision())
    assert distributed.shardable(fm.binary_auroc(max_fpr=0.5))  # adapters/_shard/columns.py
    assert not distributed.shardable(fm.binary_auroc(thresholds=10))
    assert not distributed.shardable(fm.retrieval_precision_recall_curve(max_k=3))
    assert distributed.shardable(fm.spearman_corrcoef(num_outputs=2))
    assert distributed.shardable(fm.kendall_rank_corrcoef(variant="c"))
    assert not distributed.shardable(fm.multiclass_auroc(num_classes=3, thresholds=5))  # binned: summed
    assert not distributed.shardable(fm.mean())


def test_one_process_is_plain_finalize():
    m = fm.binary_auroc()
    s = m.update(m.init(), torch.tensor([0.1, 0.7, 0.4]), torch.tensor([0, 1, 1]))
    assert torch.equal(distributed.finalize(m, s), m.finalize(s))


def _fallback_body(rank, world):
    m = fm.multiclass_calibration_error(num_classes=3)
    g = torch.Generator().manual_seed(4)
    preds, target = torch.rand(60, 3, generator=g).softmax(1), torch.randint(0, 3, (60,), generator=g)
    lo, hi = rank * 60 // world, (rank + 1) * 60 // world
    return float(distributed.finalize(m, m.update(m.init(), preds[lo:hi], target[lo:hi]))), float(m(preds, target))


@pytest.mark.distributed
def test_a_metric_without_a_sharded_path_reduces_then_finalizes():
    for got, one in spawn(_fallback_body, 2, timeout=120):
        assert math.isclose(got, one, rel_tol=1e-12)


def _collection_body(rank, world):
    c = fm.collection({"map": fm.retrieval_map(), "ndcg": fm.retrieval_normalized_dcg(top_k=5),
                       "prec": fm.retrieval_precision(top_k=3, aggregation="none"),
                       "auroc": fm.retrieval_auroc()}, prefix="val/")
    data = _retrieval_data(77, graded=True, ignore=False)
    data = (data[0], data[1].clamp(max=1), data[2])
    rng = random.Random(5)
    cuts = _cuts(data[0].shape[0], world, "uneven", rng)
    states = [_local_state(c, data, cuts[r], (cuts[r] + cuts[r + 1]) // 2, cuts[r + 1]) for r in range(world)]
    one = states[0]
    for other in states[1:]:
        one = c.merge(one, other)
    with count_collectives() as counts:
        got = distributed.finalize(c, states[rank])
    return got, c.finalize(one), counts["ops"].get("all_to_all_single", 0)


@pytest.mark.distributed
def test_a_retrieval_collection_routes_its_rows_once():
    results = spawn(_collection_body, 3, timeout=120)
    for got, one, all_to_all in results:
        assert got.keys() == one.keys() == {"val/map", "val/ndcg", "val/prec", "val/auroc"}
        assert all(_close(got[k], one[k]) for k in got), (got, one)
        assert all_to_all == 4  # every round's counts, then one round (3 payload columns): one routing for the four
    assert distributed.shardable(fm.collection({"map": fm.retrieval_map(), "m": fm.mean()}))


def _torch_metric_body(rank, world):
    from adapters import TorchMetric

    g = torch.Generator().manual_seed(8)
    preds, target = torch.rand(300, generator=g), (torch.rand(300, generator=g) < 0.3).long()
    indexes = torch.randint(0, 40, (300,), generator=g)
    lo, hi = rank * 300 // world, (rank + 1) * 300 // world
    out = []
    for m, data in ((fm.retrieval_normalized_dcg(top_k=5), (preds, target, indexes)),
                    (fm.binary_auroc(), (preds, target))):
        wrapped = {sync: TorchMetric(m, sync=sync) for sync in ("gather", "shard")}
        for w in wrapped.values():
            w.update(*(x[lo:hi] for x in data))
        out.append((float(wrapped["shard"].compute()), float(wrapped["gather"].compute()), float(m(*data))))
    return out


@pytest.mark.distributed
def test_torch_metric_sync_shard():
    for per_metric in spawn(_torch_metric_body, 2, timeout=120):
        for shard_value, gather_value, one in per_metric:
            assert math.isclose(shard_value, one, rel_tol=1e-12) and math.isclose(gather_value, one, rel_tol=1e-12)


def test_torch_metric_sync_is_checked():
    from adapters import TorchMetric

    with pytest.raises(ValueError, match="TorchMetric: argument `sync` expected 'gather' or 'shard', got 'all'"):
        TorchMetric(fm.binary_auroc(), sync="all")


# ---------------------------------------------------------------- Lightning: self.log of a sharded TorchMetric


def lightning_sharded_results() -> dict:
    """Run in a script (Lightning's "ddp" re-launches it for rank 1): logs NDCG@5 and AUROC with sync="shard".

    The script is tests/_lightning_ddp.py, the suite's one Lightning DDP launch (the ``lightning_ddp`` fixture).
    """
    import lightning as L
    from torch.utils.data import DataLoader, TensorDataset

    from adapters import TorchMetric
    from adapters.distributed import EvalSampler

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)
            self.ndcg = TorchMetric(fm.retrieval_normalized_dcg(top_k=5), sync="shard")
            self.auroc = TorchMetric(fm.binary_auroc(), sync="shard")

        def validation_step(self, batch, batch_idx):
            p, t, q = batch
            self.ndcg.update(p, t, q)
            self.auroc.update(p, t)
            self.log("ndcg", self.ndcg, on_step=False, on_epoch=True)
            self.log("auroc", self.auroc, on_step=False, on_epoch=True)

    dataset = TensorDataset(*_lightning_data())
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", use_distributed_sampler=False, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    logged = trainer.validate(Module(), DataLoader(dataset, batch_size=16, sampler=EvalSampler(dataset)),
                              verbose=False)[0]
    return {"world_size": trainer.world_size, **{k: float(v) for k, v in logged.items()}}


def _lightning_data():
    g = torch.Generator().manual_seed(2)
    preds, target = torch.rand(97, generator=g), (torch.rand(97, generator=g) < 0.4).long()
    return preds, target, torch.randint(0, 9, (97,), generator=g)


@pytest.mark.distributed
def test_lightning_logs_a_sharded_metric(lightning_ddp):
    logged = lightning_ddp["sharded"]
    p, t, q = _lightning_data()
    assert logged["world_size"] == 2
    assert math.isclose(logged["ndcg"], float(fm.retrieval_normalized_dcg(top_k=5)(p, t, q)), rel_tol=1e-6)
    assert math.isclose(logged["auroc"], float(fm.binary_auroc()(p, t)), rel_tol=1e-6)
