"""Sharded finalize (`adapters.distributed.finalize`) against the gather path and one sort of a rank's keys.

Each workload spawns ``world`` gloo ranks (127.0.0.1); every rank builds its own state of ``n`` rows
(`ROWS`, 5e6 by default; ``FMETRICS_BENCH_SHARD_ROWS`` sets it, e.g. 2e7) in 10^5-row updates, not timed,
then, after one untimed call of each contender (gloo sets up its connections on a group's first
collectives), times one call of each after a barrier, on the slower rank:

* ``fmetrics``: ``adapters.distributed.finalize(metric, state)`` (sharded);
* ``gather``: ``metric.finalize(adapters.distributed.reduce(metric, state))`` (every rank holds all rows);
* ``torch.sort``: one ``torch.sort`` of as many int64 keys as the rank holds rows.

Extra ``cpu s per rank``: each rank's ``time.process_time()`` over its timed call (less sensitive than the wall
time to other work on shared cores).

Extra columns: the value (sharded and gather agree, see tests/test_distributed_sharded.py), the rank's state
MB, per rank the growth of peak RSS during each call (``/proc/self/clear_refs``; the largest over the ranks) and
its ratio to the state. Peaks are measured in a second set of ranks whose glibc returns large blocks on free from
the start (as benchmarks/finalize.py does), after one warm call of each contender: in the timing ranks, the
contenders' earlier runs under glibc's defaults leave free heap chunks that later large blocks reuse and keep, so
their RSS peak depends on the call order. One timing per contender (``once``): the ranks run while the workload
is built.
"""
from __future__ import annotations

import os
import time
import warnings

import torch

import fmetrics
from benchmarks.finalize import _exact_rss, _peak_growth, _state_mb
from benchmarks.registry import Measured, Unsupported, register

CHUNK = 100_000
ROWS = int(float(os.environ.get("FMETRICS_BENCH_SHARD_ROWS", "5e6")))


def _data(name: str, rank: int, world: int, n: int):
    """``(metric, batches)`` of rank ``rank``: its own random rows (NDCG: 20 rows per query on average, query
    ids drawn over every rank's range, so queries are split across ranks)."""
    g = torch.Generator().manual_seed(1000 + rank)
    if name == "ndcg10":
        indexes = torch.randint(0, world * n // 20, (n,), generator=g)
        preds, target = torch.rand(n, generator=g), torch.randint(0, 4, (n,), generator=g)
        return fmetrics.retrieval_normalized_dcg(top_k=10), (preds, target, indexes)
    if name == "binary_auroc":
        target = (torch.rand(n, generator=g) < 0.3).long()
        return fmetrics.binary_auroc(), (torch.rand(n, generator=g) + 0.5 * target, target)
    target = torch.randn(n, generator=g)
    return fmetrics.spearman_corrcoef(), (target + torch.randn(n, generator=g), target)


def _timed(fn):
    """``(fn(), wall seconds, CPU seconds of this rank's process)`` after a barrier."""
    import torch.distributed as dist

    dist.barrier()
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def _worker(rank: int, world: int, name: str, n: int, peaks: bool) -> dict:
    """Every contender's value and seconds, or with ``peaks`` (a fresh process, large blocks returned on free from
    the start) its peak growth."""
    from adapters import distributed

    if peaks:
        _exact_rss()
    metric, columns = _data(name, rank, world, n)
    state = metric.init()
    for batch in zip(*(c.split(CHUNK) for c in columns)):
        state = metric.update(state, *batch)
    del columns
    keys = torch.randint(-(2**62), 2**62, (n,), generator=torch.Generator().manual_seed(rank))
    calls = {"fmetrics": lambda: distributed.finalize(metric, state),
             "gather": lambda: metric.finalize(distributed.reduce(metric, state)),
             "torch.sort": lambda: torch.sort(keys).values[:1]}
    out = {"state MB": _state_mb(state)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for who, call in calls.items():  # warm: the first collectives of a group set up its connections
            _timed(call)
        for who, call in calls.items():
            if peaks:
                _exact_rss()
                _timed(lambda: None)
                out[who] = {"peak MB": _peak_growth(call, torch.device("cpu"))[1]}
            else:  # timed with glibc's defaults, as a user's run
                value, seconds, cpu = _timed(call)
                out[who] = {"value": float(value.reshape(-1)[0]), "s": seconds, "cpu s": cpu}
    return out


def _workload(name: str, world: int):
    def build(quick: bool, device="cpu"):
        if torch.device(device).type != "cpu":
            raise Unsupported("the sharded workloads spawn gloo processes on the CPU")
        from tests._dist import spawn

        ranks = spawn(_worker, world, name, ROWS, False, timeout=1800)
        for r, p in zip(ranks, spawn(_worker, world, name, ROWS, True, timeout=1800)):
            for who in ("fmetrics", "gather", "torch.sort"):
                r[who].update(p[who])

        def contender(who):
            slow = max(r[who]["s"] for r in ranks)
            peak, state = max(r[who]["peak MB"] or 0 for r in ranks), max(r["state MB"] for r in ranks)
            cpu = [round(r[who]["cpu s"], 3) for r in ranks]
            extra = {"peak MB": peak, "state MB": round(state, 1), "peak / state": round(peak / state, 2),
                     "cpu s per rank": cpu}
            if who != "torch.sort":
                extra = {"value": ranks[0][who]["value"], **extra}
            return lambda: Measured(world * ROWS, extra=extra, seconds=slow, once=True)

        return {who: contender(who) for who in ("fmetrics", "gather", "torch.sort")}

    register(f"finalize/{name}_sharded_{world}ranks", domain="finalize", samples=lambda quick: world * ROWS,
             peers=("gather", "torch.sort"), full_only=f"it spawns {world} gloo processes",
             description=f"{name} sharded finalize over {world} gloo ranks of {ROWS:.0e} rows each vs the gather "
                         "path and one sort of a rank's keys")(build)


for _name in ("ndcg10", "binary_auroc", "spearman"):
    for _world in (2, 4):
        _workload(_name, _world)
