"""`adapters.distributed.reduce` in real gloo process groups (DESIGN.md §2 law 4, §6).

Every registered case is reduced across 2 and 3 processes (one spawned group
per world size) with uneven shards, one rank that saw no data and two
updates per rank. On every rank the result must finalize to the fold of the
ranks' states by ``merge`` and to the one-process value (exactly for integer
states; a case that declares its value depends on batching is held to the
fold only), with the same bits on every rank. The registry grows as domains
are added: the loop picks new cases up by itself.
"""
import math
import random
import warnings
from typing import NamedTuple

import pytest
import torch
import torch.distributed as dist

import fmetrics as fm
from adapters import distributed
from adapters.distributed import LayoutMismatchError, reduce
from benchmarks.sync import fmetrics_ten, shard, ten_metrics
from fmetrics.state import merge_fields
from fmetrics.testing import _num_samples as _num
from fmetrics.testing import assert_values_close, concat_inputs, split_inputs
from tests._dist import count_collectives, spawn
from tests.cases import all_cases

# ---------------------------------------------------------------- every registered case


def _shard_cuts(n: int, world: int, empty_rank: int, rng: random.Random) -> list[int]:
    """Cut points giving ``world`` uneven shards, shard ``empty_rank`` empty."""
    edges = [0, *sorted(rng.randint(0, n) for _ in range(world - 2)), n]
    shards = list(zip(edges[:-1], edges[1:]))  # world - 1 shards with data
    at = shards[empty_rank][0] if empty_rank < len(shards) else n
    shards.insert(empty_rank, (at, at))
    return [lo for lo, _ in shards[1:]]


def _run_case(case, rank: int, world: int, seed: int):
    """On this rank: its local state, finalize(reduce(local state)) and the one-process value."""
    rng = random.Random(f"{case.id}/{seed}/{world}")
    full = concat_inputs(case.batches(seed))
    empty_rank = rng.randrange(world)
    shards = split_inputs(full, _shard_cuts(_num(full), world, empty_rank, rng))
    m = case.make()
    s = m.init()
    if rank != empty_rank:
        shard = shards[rank]
        for piece in split_inputs(shard, [rng.randint(0, _num(shard))]):  # two updates: chunk fields get 2
            s = m.update(s, *piece)
    one_process = m.finalize(m.update(m.init(), *full)) if rank == 0 else None
    return s, m.finalize(reduce(m, s)), one_process


def _all_cases_body(rank: int, world: int, seed: int):
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in all_cases():
            try:
                out[case.id] = (None, *_run_case(case, rank, world, seed))
            except Exception as err:  # noqa: BLE001 - reported per case by the parent
                out[case.id] = (f"{type(err).__name__}: {err}", None, None, None)
    return out


@pytest.mark.distributed
@pytest.mark.parametrize("world", [2, pytest.param(3, marks=pytest.mark.slow)])  # 3 ranks: the slow job
def test_every_case_reduces_to_the_one_process_value(world):
    cases = {c.id: c for c in all_cases()}
    results = spawn(_all_cases_body, world, world, timeout=240)
    failures = []
    for cid, case in cases.items():
        per_rank = [r[cid] for r in results]
        errors = {e for e, *_ in per_rank if e}
        if errors:
            failures.append(f"{cid}: {sorted(errors)}")
            continue
        canonical = case.check.get("canonical", lambda v: v)
        exact = case.integer_state
        rtol, atol = (0.0, 0.0) if exact else (case.check.get("rtol", 1e-6), case.check.get("atol", 1e-8))
        splits_ok = "distributed equivalence" in case.check.get("laws", ("distributed equivalence",))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = case.make()
                folded = m.finalize(fm.state.fold(m.merge, [state for _, state, _, _ in per_rank]))
            got0 = canonical(per_rank[0][2])
            assert_values_close(got0, canonical(folded), rtol, atol,
                                f"{cid}: reduced vs the ranks' states folded by merge")
            if splits_ok:  # a case whose value depends on the batching (declared) is held to the fold only
                assert_values_close(got0, canonical(per_rank[0][3]), rtol, atol, f"{cid}: reduced vs one process")
            for r in range(1, world):  # the same bits on every rank
                assert_values_close(canonical(per_rank[r][2]), got0, 0.0, 0.0, f"{cid}: rank {r} vs rank 0")
        except AssertionError as err:
            failures.append(str(err))
    assert not failures, f"{len(failures)} of {len(cases)} cases fail across {world} ranks:\n" + "\n".join(failures)


# ---------------------------------------------------------------- single process: no group, bad states


class _Pair(NamedTuple):
    total: torch.Tensor
    count: object


def test_without_a_process_group_the_state_comes_back_unchanged():
    m = fm.mean()
    s = m.update(m.init(), torch.tensor([1.0, 2.0]))
    assert not dist.is_initialized()
    assert reduce(m, s) is s


def test_a_leaf_that_is_not_a_tensor_raises_type_error_naming_it():
    tags = _Pair(total="sum", count="sum")
    m = fm.Metric(init=lambda: _Pair(torch.zeros(()), 0), update=lambda s, x: s, merge=merge_fields(tags),
                  finalize=lambda s: s.total, name="pair", reductions=tags)
    with pytest.raises(TypeError, match=r"state\.count is a int, not a tensor"):
        reduce(m, m.init())
    untagged = m.replace(reductions=None)
    with pytest.raises(TypeError, match=r"state\.count is a int"):
        reduce(untagged, m.init())


def test_tags_that_do_not_mirror_the_state_raise_type_error():
    m = fm.mean().replace(reductions=("sum", "sum"))
    with pytest.raises(TypeError, match="do not mirror the state"):
        reduce(m, m.init())
    m = fm.mean().replace(reductions=fm.aggregation.MeanState("sum", "avg", "sum"))
    with pytest.raises(TypeError, match="unknown reduction tag 'avg'"):
        reduce(m, m.init())


# ---------------------------------------------------------------- edge layouts, NaN, mismatches, counts


class _Odd(NamedTuple):
    """Fields no backend all-reduces natively (bool, int16) and chunks of mixed dtypes."""

    any_positive: torch.Tensor  # bool, "max"
    count: torch.Tensor  # int16, "sum"
    low: torch.Tensor  # float32, "min"
    chunks: tuple  # float32 and int64 chunks, "cat"


_ODD_TAGS = _Odd(any_positive="max", count="sum", low="min", chunks="cat")


def _odd_metric():
    def init():
        return _Odd(torch.tensor(False), torch.zeros((), dtype=torch.int16), torch.tensor(math.inf), ())

    def update(s, x):
        return _Odd(s.any_positive | (x > 0).any(), s.count + x.numel(), torch.minimum(s.low, x.amin(dim=0) if x.numel() else s.low),
                    s.chunks + (x, x.long()))

    def finalize(s):
        floats = [c for c in s.chunks if c.is_floating_point()]
        ints = [c for c in s.chunks if not c.is_floating_point()]
        return {"any": s.any_positive, "count": s.count, "low": s.low,
                "floats": torch.sort(torch.cat(floats)).values if floats else torch.empty(0),
                "ints": torch.sort(torch.cat(ints).reshape(-1)).values if ints else torch.empty(0)}

    return fm.Metric(init=init, update=update, merge=merge_fields(_ODD_TAGS), finalize=finalize, name="odd",
                     reductions=_ODD_TAGS)


class _Moments(NamedTuple):
    """Untagged (Chan's merge) with a field whose structure varies per rank."""

    n: torch.Tensor
    mean: torch.Tensor
    m2: torch.Tensor
    batches: tuple  # one 0-d tensor per update: a different tree structure on every rank


def _moments_metric():
    def init():
        z = torch.zeros((), dtype=torch.float64)
        return _Moments(torch.zeros((), dtype=torch.int64), z, z.clone(), ())

    def update(s, x):
        x = x.double()
        return merge(s, _Moments(torch.tensor(x.numel()), x.mean(), ((x - x.mean()) ** 2).sum(),
                                 (torch.tensor(x.numel()),)))

    def merge(a, b):
        n = a.n + b.n
        delta = b.mean - a.mean
        safe = torch.clamp(n, min=1)
        return _Moments(n, a.mean + delta * b.n / safe, a.m2 + b.m2 + delta ** 2 * a.n * b.n / safe,
                        a.batches + b.batches)

    def finalize(s):
        return {"n": s.n, "mean": s.mean, "var": s.m2 / s.n, "batches": torch.stack(s.batches).sum()
                if s.batches else torch.tensor(0)}

    return fm.Metric(init=init, update=update, merge=merge, finalize=finalize, name="moments")


class _Rows(NamedTuple):
    rows: tuple


def _chunked_metric():
    tags = _Rows(rows="cat")
    return fm.Metric(init=lambda: _Rows(()), update=lambda s, x: _Rows((x.clone(),)), merge=merge_fields(tags),
                     finalize=lambda s: torch.cat(s.rows) if s.rows else torch.empty(0), name="rows",
                     reductions=tags)


def test_chunks_of_one_field_with_other_trailing_shapes_raise_naming_the_field():
    m = _chunked_metric()
    with pytest.raises(ValueError, match=r"an update gave a chunk of shape \(1, 4\) where the earlier updates gave"):
        m.update(m.update(m.init(), torch.zeros(2, 3)), torch.zeros(1, 4))  # one process: update rejects it
    s = m.merge(m.update(m.init(), torch.zeros(2, 3)), m.update(m.init(), torch.zeros(1, 4)))  # as from two ranks
    with pytest.raises(LayoutMismatchError, match=r"chunks of state\.rows differ in trailing shape \(rank 0 has a "
                                                  r"chunk of shape \(2, 3\), rank 0 has a chunk of shape \(1, 4\)"):
        reduce(m, s)
    ok = m.update(m.update(m.init(), torch.zeros(2, 3, 5)), torch.zeros(2, 7, 5))  # one varying axis: a stacked state
    assert reduce(m, ok) is ok
    # a chunk field inside a merge unit (a NamedTuple with an untagged field) is checked the same way
    merged = m.replace(init=lambda: _RowsN((), torch.zeros((), dtype=torch.int64)),
                       update=lambda s, x: _RowsN((x.clone(),), s.n + 1),
                       merge=lambda a, b: _RowsN(a.rows + b.rows, a.n + b.n), reductions=_RowsN(rows="cat", n=None))
    s = merged.merge(merged.update(merged.init(), torch.zeros(2, 3)), merged.update(merged.init(), torch.zeros(1, 4)))
    with pytest.raises(LayoutMismatchError, match=r"chunks of state\.rows differ in trailing shape"):
        reduce(merged, s)


class _RowsN(NamedTuple):
    rows: tuple
    n: torch.Tensor


def _vector_sum(n):
    tags = fm.aggregation.SumState(total="sum", nan_count="sum")
    return fm.Metric(init=lambda: fm.aggregation.SumState(torch.zeros(n), torch.zeros((), dtype=torch.int64)),
                     update=lambda s, x: s, merge=merge_fields(tags), finalize=lambda s: s.total,
                     name="vector_sum", reductions=tags)


def _data(rank: int, updates: int):
    g = torch.Generator().manual_seed(100 + rank)
    return [torch.randn(int(torch.randint(0, 6, (), generator=g)), generator=g) for _ in range(updates)]


def _states(m, world: int, updates=lambda r: r + 1):
    out = []
    for r in range(world):
        s = m.init()
        for x in _data(r, updates(r)):
            s = m.update(s, x)
        out.append(s)
    return out


def _twenty() -> fm.Metric:
    """Twenty metrics with twelve distinct states (the ten, and ten more configurations)."""
    more = {"acc": fm.binary_accuracy(threshold=0.3), "prec": fm.binary_precision(threshold=0.3),
            "rec": fm.binary_recall(threshold=0.7), "f1": fm.binary_f1_score(threshold=0.7),
            "auroc": fm.binary_auroc(thresholds=50), "ece": fm.binary_calibration_error(n_bins=7),
            "mse": fm.mean_squared_error(), "mae": fm.mean_absolute_error(),
            "r2": fm.r2_score(), "mean": fm.mean(nan_strategy="ignore")}
    return fm.collection({**{f"{k}_a": m for k, m in ten_metrics().items()}, **{f"{k}_b": m for k, m in more.items()}})


def _mismatch(rank: int, make) -> str:
    try:
        m = make(rank)
        reduce(m, m.init())
    except LayoutMismatchError as err:
        return str(err)
    return "no error"


def _edge_body(rank: int, world: int):
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # uncommon dtypes (folded locally), mixed-dtype chunks, a rank with no data (rank 0 does 1 update
        # of possibly 0 rows; rank `world - 1` gets none at all)
        odd = _odd_metric()
        states = _states(odd, world, updates=lambda r: 0 if r == world - 1 else r + 1)
        with count_collectives() as counts:
            reduced = reduce(odd, states[rank])
        out["odd"] = (odd.finalize(reduced), odd.finalize(fm.state.fold(odd.merge, states)), dict(counts))
        out["odd_dtypes"] = [x.dtype for x in fm.state.leaves(reduced)[:3]]
        # many mixed chunks: the variable metadata overflows the fixed header (one more all_gather)
        many = _states(odd, world, updates=lambda r: 60)
        with count_collectives() as counts:
            reduced = reduce(odd, many[rank])
        out["overflow"] = (odd.finalize(reduced), odd.finalize(fm.state.fold(odd.merge, many)), dict(counts))
        # a buffer larger than one gather piece goes in pieces (here 64-byte pieces): the same state
        piece = distributed.GATHER_PIECE_BYTES
        distributed.GATHER_PIECE_BYTES = 64
        try:
            with count_collectives() as counts:
                reduced = reduce(odd, many[rank])
        finally:
            distributed.GATHER_PIECE_BYTES = piece
        out["pieces"] = (odd.finalize(reduced), odd.finalize(fm.state.fold(odd.merge, many)), dict(counts))
        # integer chunks travel in the narrowest dtype holding their values, and come back in their own
        rows = _chunked_metric()
        n, big = distributed.NARROW_MIN, 2**40
        chunks = [torch.arange(n) % 200 - 100,  # int64 in int8's range (negatives too) -> int8 on the wire
                  torch.arange(n) * 7 - 5,  # int64 in int16's range -> int16
                  torch.arange(n) * 300_000,  # int64 in int32's range -> int32
                  torch.arange(n) + big,  # int64 beyond int32 -> sent as it is
                  (torch.arange(n) % 100).int(),  # int32 in int8's range -> int8
                  torch.arange(n - 1) % 3]  # too few entries: sent as it is
        for i, c in enumerate(chunks):
            state = rows.update(rows.init(), c + rank)
            with count_collectives() as counts:
                reduced = reduce(rows, state)
            want = torch.cat([c + r for r in range(world)])
            out[f"narrow_{i}"] = (torch.equal(rows.finalize(reduced), want), rows.finalize(reduced).dtype,
                                  c.dtype, counts["bytes"])
        # an untagged state whose tree differs per rank: gathered, then merged in rank order
        mom = _moments_metric()
        states = _states(mom, world)
        with count_collectives() as counts:
            reduced = reduce(mom, states[rank])
        out["moments"] = (mom.finalize(reduced), mom.finalize(fm.state.fold(mom.merge, states)), dict(counts))
        # NaN must win min/max as torch.minimum/maximum do, whatever the backend does
        for name, make in (("max", fm.max), ("min", fm.min)):
            m = make(nan_strategy="disable")
            s = m.update(m.init(), torch.tensor([float("nan")]) if rank == 1 else torch.tensor([1.0, -2.0]))
            out[f"nan_{name}"] = m.finalize(reduce(m, s))
        # disagreements raise on every rank and leave the group usable
        out["mismatch_config"] = _mismatch(rank, lambda r: fm.mean(nan_strategy="warn" if r else "ignore"))
        out["mismatch_metric"] = _mismatch(rank, lambda r: fm.sum() if r == world - 1 else fm.mean())
        out["mismatch_shape"] = _mismatch(rank, lambda r: _vector_sum(3 + (r == 1)))
        out["mismatch_layout"] = _mismatch(rank, lambda r: _odd_metric() if r else _moments_metric())
        # a compute() sync meeting another rank's per-step sync (uneven shards with dist_sync_on_step)
        try:
            m = fm.mean()
            reduce(m, m.init(), purpose="compute" if rank == 1 else "step")
            out["mismatch_purpose"] = "no error"
        except LayoutMismatchError as err:
            out["mismatch_purpose"] = str(err)
        # chunks of one field with another trailing shape on one rank
        try:
            m = _chunked_metric()
            reduce(m, m.update(m.init(), torch.zeros(3, 3) if rank == 1 else torch.zeros(2, 2)))
            out["mismatch_chunks"] = "no error"
        except LayoutMismatchError as err:
            out["mismatch_chunks"] = str(err)
        # a network parameter: its recipe key names the module by a process-local id, which ranks do not share
        from tests.test_adapter_core import embedding_mean

        torch.manual_seed(0)
        m = embedding_mean(net=torch.nn.Linear(2, 1))
        out["network"] = m.finalize(reduce(m, m.update(m.init(), torch.ones(rank + 1, 2))))
        m = fm.sum()
        out["after_mismatch"] = m.finalize(reduce(m, m.update(m.init(), torch.tensor([float(rank)]))))
        # collectives for 10 and 20 metrics: a constant
        probs, labels = shard(rank, world, 300)
        for name, c in (("ten", fmetrics_ten()), ("twenty", _twenty())):
            state = c.update(c.init(), probs, labels)
            with count_collectives() as counts:
                reduced = reduce(c, state)
            out[name] = (c.finalize(reduced), dict(counts))
        # a subgroup: ranks 0 and 2 reduce among themselves
        sub = dist.new_group([0, 2])
        if rank != 1:
            m = fm.mean()
            s = m.update(m.init(), torch.tensor([float(rank)] * (rank + 1)))
            out["subgroup"] = m.finalize(reduce(m, s, group=sub))
        # the sampler resolves the group when iterated
        sampler = distributed.EvalSampler(range(10))
        out["sampler"] = (list(sampler), len(sampler))
    return out


@pytest.fixture(scope="module")
def edge_results():
    return spawn(_edge_body, 3, timeout=180)


@pytest.mark.distributed
def test_uncommon_dtypes_and_mixed_chunks_reduce_to_the_fold(edge_results):
    for rank, out in enumerate(edge_results):
        got, want, counts = out["odd"]
        assert_values_close(got, want, 0.0, 0.0, f"rank {rank}")
        assert out["odd_dtypes"] == [torch.bool, torch.int16, torch.float32]
        # header + one all_reduce (float32 min) + one all_gather (bool/int16 fields and the chunks)
        assert counts["ops"] == {"all_gather": 2, "all_reduce": 1}, counts


@pytest.mark.distributed
def test_integer_chunks_travel_narrowed_and_come_back_exact(edge_results):
    header = distributed.HEADER_LEN * 8  # one int64 header per rank
    n = distributed.NARROW_MIN
    wire = [1, 2, 4, 8, 1, 8]  # bytes per entry on the wire, per chunk of `_edge_body`
    for rank, out in enumerate(edge_results):
        for i, per_entry in enumerate(wire):
            equal, got, want, sent = out[f"narrow_{i}"]
            assert equal and got == want, (rank, i)
            rows = n - (i == 5)
            assert sent == header + -(-rows * per_entry // 16) * 16, (rank, i, sent)


@pytest.mark.distributed
def test_metadata_longer_than_the_header_costs_one_more_gather(edge_results):
    for rank, out in enumerate(edge_results):
        got, want, counts = out["overflow"]
        assert_values_close(got, want, 0.0, 0.0, f"rank {rank}")
        assert counts["ops"] == {"all_gather": 3, "all_reduce": 1}, counts


@pytest.mark.distributed
def test_a_buffer_larger_than_a_gather_piece_is_gathered_in_pieces(edge_results):
    for rank, out in enumerate(edge_results):
        got, want, counts = out["pieces"]
        assert_values_close(got, want, 0.0, 0.0, f"rank {rank}")
        assert counts["ops"]["all_gather"] > 3, counts  # the data buffer went in more than one all_gather


@pytest.mark.distributed
def test_untagged_state_with_per_rank_structure_is_merged_in_rank_order(edge_results):
    for rank, out in enumerate(edge_results):
        got, want, counts = out["moments"]
        assert_values_close(got, want, 1e-12, 0.0, f"rank {rank}")
        assert got["batches"].item() == sum(x.numel() for r in range(3) for x in _data(r, r + 1))
        # header + gather of the leaves + the tree specs (all_gather_object: 2 all_gathers)
        assert counts["ops"] == {"all_gather": 4}, counts


@pytest.mark.distributed
def test_nan_wins_min_and_max_on_every_rank(edge_results):
    for out in edge_results:
        assert math.isnan(out["nan_max"].item()) and math.isnan(out["nan_min"].item())


@pytest.mark.distributed
@pytest.mark.parametrize("scenario, names", [
    ("mismatch_config", ["('nan_strategy', 'ignore')", "('nan_strategy', 'warn')"]),
    ("mismatch_metric", ["metric: mean", "metric: sum"]),
    ("mismatch_shape", ["state.total: sum leaf 0 torch.float32 (3,)", "(4,)"]),
    ("mismatch_layout", ["metric: moments", "metric: odd"]),
])
def test_disagreeing_ranks_all_raise_naming_the_difference(edge_results, scenario, names):
    for rank, out in enumerate(edge_results):
        msg = out[scenario]
        assert msg.startswith("adapters.distributed.reduce: ranks disagree"), (rank, msg)
        for name in names:
            assert name in msg, (rank, msg)


@pytest.mark.distributed
def test_a_compute_sync_meeting_a_step_sync_raises_on_every_rank(edge_results):
    for rank, out in enumerate(edge_results):
        msg = out["mismatch_purpose"]
        assert msg.startswith("adapters.distributed.reduce: ranks disagree"), (rank, msg)
        assert "(step)" in msg and "(compute)" in msg and "different reduce calls" in msg, (rank, msg)


@pytest.mark.distributed
def test_chunks_with_other_trailing_shapes_across_ranks_raise_on_every_rank(edge_results):
    for rank, out in enumerate(edge_results):
        msg = out["mismatch_chunks"]
        assert "chunks of state.rows differ in trailing shape" in msg, (rank, msg)
        assert "rank 0 has a chunk of shape (2, 2)" in msg and "rank 1 has a chunk of shape (3, 3)" in msg, (rank, msg)


@pytest.mark.distributed
def test_metrics_with_a_network_parameter_reduce_across_processes(edge_results):
    values = [out["network"].item() for out in edge_results]
    torch.manual_seed(0)
    want = torch.nn.Linear(2, 1)(torch.ones(1, 2)).item()
    assert values == pytest.approx([want] * 3, rel=1e-6)


@pytest.mark.distributed
def test_a_subgroup_reduces_among_its_members(edge_results):
    for rank in (0, 2):
        assert edge_results[rank]["subgroup"].item() == pytest.approx((0.0 + 2.0 * 3) / 4)
    assert "subgroup" not in edge_results[1]


@pytest.mark.distributed
def test_the_group_still_works_after_a_mismatch(edge_results):
    assert [out["after_mismatch"].item() for out in edge_results] == [3.0] * 3


@pytest.mark.distributed
def test_eval_sampler_resolves_the_group_when_iterated(edge_results):
    shards = [out["sampler"] for out in edge_results]
    assert shards == [([0, 1, 2], 3), ([3, 4, 5], 3), ([6, 7, 8, 9], 4)]


@pytest.mark.distributed
def test_collectives_do_not_grow_with_the_number_of_metrics(edge_results):
    full = [torch.cat(x) for x in zip(*(shard(r, 3, 300) for r in range(3)))]
    for rank, out in enumerate(edge_results):
        for name, make in (("ten", fmetrics_ten), ("twenty", _twenty)):
            value, counts = out[name]
            # 1e-6: the regression members' fast default sums float32 batches around per-rank shifts
            assert_values_close(value, make()(*full), 1e-6, 1e-9, f"rank {rank}, {name}")
            # header all_gather + all_reduce (int64 sums) + all_reduce (float64 sums) + one all_gather
            # of the variable fields (exact AUROC's chunks, Pearson's and R2's untagged moments)
            assert counts["ops"] == {"all_gather": 2, "all_reduce": 2}, (name, counts)
