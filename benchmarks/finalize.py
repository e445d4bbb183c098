"""Finalize of concatenating states against the sort floor: 2e7 rows in 200 chunks (5e5 in 5 with --quick).

Each workload builds one state once (``init`` and 200 ``update`` calls of 10^5
rows, not timed) and times only ``finalize``: exact binary AUROC, Spearman's
rho, NDCG@10 over 20 rows per query. The reference row, ``torch.sort``, is one
``torch.sort`` of as many int64 keys as the state holds values (one per row;
two, preds and target, for Spearman), measured in the same run on a copy of
random keys; on CPU a second one, ``numpy.sort``, sorts such a copy in place
(no index array: the sort fmetrics' AUROC and Spearman finalizers use, for
memory). The target: finalize <= 2x the ``torch.sort`` row.

Both contenders return the number of rows as their value (the sort has no
metric value); the metric's value is in the extra column, beside
``peak MB``: the growth of peak resident memory during the call (Linux:
``/proc/self/clear_refs`` resets the peak; the state's own bytes are in
``state MB``). On the CPU that peak is measured in a spawned process
(`_child_peaks`, one process for the run) whose glibc returns every large block on free
(`_exact_rss`), so resident memory tracks use; the timed calls run in the
harness's process with glibc's defaults, as a user's finalize does (the
fixed threshold makes every temporary of 128 KiB or more a fresh mmap that
page-faults on first touch: NDCG's finalize took 1.85 s that way against
1.1 s). On a device the peak is ``torch.cuda.max_memory_allocated``.
"""
from __future__ import annotations

import functools
import os
import time

import torch

import fmetrics
from benchmarks.registry import Measured, Unsupported, on_device, register

CHUNK = 100_000
FULL_2RANKS = os.environ.get("FMETRICS_BENCH_FULL_2RANKS") == "1"  # the 2e7 rows per rank


def _rows(quick: bool) -> int:
    return 500_000 if quick else 20_000_000


def _rss_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _exact_rss() -> None:
    """Large blocks (>= 128 KiB) mmapped and returned on free (glibc's dynamic threshold off), so RSS tracks use.

    Otherwise glibc keeps freed blocks of up to 32 MiB in its heap and a later
    allocation reuses them without growing the resident set.
    """
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD
        libc.malloc_trim(0)  # free heap pages left by the build go back to the system
    except (OSError, AttributeError):
        pass


def _peak_growth(fn, device):
    """``(fn(), growth of peak memory in MB during the call)``; None where it cannot be measured."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        out = fn()
        torch.cuda.synchronize(device)
        return out, (torch.cuda.max_memory_allocated(device) - before) / 2**20
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak RSS (VmHWM) to the current RSS
    except OSError:
        return fn(), None
    before = _rss_kb("VmRSS")
    out = fn()
    peak = _rss_kb("VmHWM")
    return out, None if before is None or peak is None else max(peak - before, 0) / 1024


def _state_mb(state) -> float:
    leaves = torch.utils._pytree.tree_leaves(state)
    return sum(t.numel() * t.element_size() for t in leaves if isinstance(t, torch.Tensor)) / 2**20


def _built(build, n: int, device):
    """``(metric, state)`` after the ``n`` rows of ``build(n)`` on ``device``."""
    metric, batches = build(n)
    metric = metric.to(device)
    state = metric.init(device)
    for batch in on_device(batches, device):
        state = metric.update(state, *batch)
    return metric, state


def _keys(n: int, device) -> torch.Tensor:
    return torch.randint(-(2**62), 2**62, (n,), generator=torch.Generator().manual_seed(1)).to(device)


def _sorts(device) -> dict:
    """The reference contenders: ``torch.sort``, and on the CPU numpy's in-place sort (no index array: the
    sort fmetrics' AUROC and Spearman use), each of a copy of the keys."""
    sorts = {"torch.sort": lambda k: torch.sort(k).values}
    if device.type == "cpu":
        sorts["numpy.sort"] = lambda k: k.numpy().sort()
    return sorts


def _peaks(metric, state, keys, device) -> dict:
    """Growth of peak memory (MB) during ``finalize`` and during each reference sort."""
    peaks = {"fmetrics": _peak_growth(lambda: metric.finalize(state), device)[1]}
    for name, sort in _sorts(device).items():
        peaks[name] = _peak_growth(lambda: sort(keys.clone()), device)[1]
    return peaks


def _child_peaks(name: str, n: int) -> dict:
    """`_peaks` of workload ``name`` at ``n`` rows, run in `_peak_process`."""
    metric, state = _built(BUILDS[name], n, torch.device("cpu"))
    keys = _keys(n * KEYS_PER_ROW[name], "cpu")
    _exact_rss()
    return _peaks(metric, state, keys, torch.device("cpu"))


def _peak_setup() -> None:
    torch.set_num_threads(1)
    _exact_rss()


@functools.lru_cache(maxsize=None)
def _peak_process():
    """One spawned process for every peak measurement of the run (its start-up costs ~2 s), whose glibc
    returns large blocks at once (`_exact_rss`); shut down with the interpreter."""
    import multiprocessing

    return multiprocessing.get_context("spawn").Pool(1, initializer=_peak_setup)


def _contenders(name: str, n: int, device):
    metric, state = _built(BUILDS[name], n, device)
    keys = _keys(n * KEYS_PER_ROW[name], device)
    if device.type == "cpu":
        peaks = _peak_process().apply(_child_peaks, (name, n))
    else:
        peaks = _peaks(metric, state, keys, device)
    state_mb = _state_mb(state)

    def finalize():
        value = metric.finalize(state)
        value = float(value) if isinstance(value, torch.Tensor) and value.numel() == 1 else value
        return Measured(n, extra={"value": value, "peak MB": peaks["fmetrics"], "state MB": state_mb})

    def reference(who, sort):
        def run():
            sort(keys.clone())
            return Measured(n, extra={"peak MB": peaks[who], "state MB": keys.numel() * 8 / 2**20})
        return run

    return {"fmetrics": finalize, **{who: reference(who, sort) for who, sort in _sorts(device).items()}}


BUILDS = {}  # workload name -> build(n) -> (metric, batches)
KEYS_PER_ROW = {}  # workload name -> sort keys per row of its state (the reference sorts' size)


def _register(name: str, doc: str, keys_per_row: int = 1):
    def deco(build):
        BUILDS[name], KEYS_PER_ROW[name] = build, keys_per_row

        @register(f"finalize/{name}", domain="finalize", samples=_rows, peers=("torch.sort", "numpy.sort"),
                  description=doc)
        def workload(quick: bool, device="cpu"):
            return _contenders(name, _rows(quick), torch.device(device))
        return build
    return deco


@_register("binary_auroc", "exact binary AUROC finalize over a 2e7-row state (200 chunks) vs one sort of 2e7 keys")
def _auroc(n: int):
    g = torch.Generator().manual_seed(0)
    target = (torch.rand(n, generator=g) < 0.3).long()
    preds = torch.rand(n, generator=g) + 0.5 * target
    return fmetrics.binary_auroc(), list(zip(preds.split(CHUNK), target.split(CHUNK)))


@_register("spearman_corrcoef", "Spearman rho finalize over 2e7 float32 pairs (200 chunks) vs one sort of 4e7 keys",
           keys_per_row=2)
def _spearman(n: int):
    g = torch.Generator().manual_seed(0)
    target = torch.randn(n, generator=g)
    preds = 0.8 * target + 0.6 * torch.randn(n, generator=g)
    return fmetrics.spearman_corrcoef(), list(zip(preds.split(CHUNK), target.split(CHUNK)))


@_register("retrieval_ndcg", "NDCG@10 finalize over 2e7 rows, 20 per query, shuffled (200 chunks) vs one sort")
def _ndcg(n: int):
    g = torch.Generator().manual_seed(0)
    indexes = torch.randperm(n, generator=g) // 20
    preds = torch.rand(n, generator=g)
    target = torch.randint(0, 4, (n,), generator=g) * (torch.rand(n, generator=g) < 0.3)
    return (fmetrics.retrieval_normalized_dcg(top_k=10),
            list(zip(preds.split(CHUNK), target.split(CHUNK), indexes.split(CHUNK))))



# ---------------------------------------------------------------- 2 ranks: reduce + finalize

WORLD = 2


def _ranks_rows() -> int:
    """Rows per rank: 2e6, or the issue's 2e7 with ``FMETRICS_BENCH_FULL_2RANKS=1``."""
    return _rows(False) if FULL_2RANKS else _rows(False) // 10


def _ndcg_shard(rank: int, world: int, n: int):
    """Rank ``rank``'s contiguous slice of a shuffled stream of ``world * n`` rows, 20 per query (a query's rows
    fall on both ranks), as ``CHUNK``-row batches."""
    _, batches = _ndcg(world * n)
    rows_per_rank = n // CHUNK
    return batches[rank * rows_per_rank:(rank + 1) * rows_per_rank]


def _ndcg_worker(rank: int, world: int, n: int) -> dict:
    import torch.distributed as dist

    from adapters.distributed import reduce

    metric = fmetrics.retrieval_normalized_dcg(top_k=10)
    state = metric.init()
    for batch in _ndcg_shard(rank, world, n):
        state = metric.update(state, *batch)
    state_mb = _state_mb(state)
    dist.barrier()
    t0 = time.perf_counter()  # timed with glibc's defaults, as a user's run
    reduced = reduce(metric, state)
    t1 = time.perf_counter()
    value = float(metric.finalize(reduced))
    t2 = time.perf_counter()
    del reduced
    _exact_rss()  # then once more for the peak, with large blocks returned at once (see the module docstring)
    dist.barrier()
    _, peak = _peak_growth(lambda: metric.finalize(reduce(metric, state)), torch.device("cpu"))
    return {"value": value, "reduce_s": t1 - t0, "finalize_s": t2 - t1, "peak MB": peak, "state MB": state_mb}


@register("finalize/retrieval_ndcg_2ranks", domain="finalize",
          samples=lambda quick: WORLD * _ranks_rows(),
          peers=("torch.sort",), full_only="it spawns 2 gloo processes (seconds of start-up)",
          description="NDCG@10 over 2 gloo ranks of 2e6 rows each (2e7, the issue's size, with "
          "FMETRICS_BENCH_FULL_2RANKS=1), queries split across ranks: "
          "reduce + finalize on the slower rank vs one sort of all the rows' keys")
def ndcg_two_ranks(quick: bool, device="cpu"):
    """Reduce (all-gather of the chunk state, `adapters.distributed.reduce`) plus finalize, timed inside each
    of 2 spawned gloo ranks (the slower rank counts; one run, while the workload is built); extra columns:
    the two phases, and per rank the growth of peak RSS over its state's bytes."""
    if torch.device(device).type != "cpu":
        raise Unsupported("the 2-rank workload spawns gloo processes on the CPU")
    from tests._dist import spawn

    n = _ranks_rows()
    ranks = spawn(_ndcg_worker, WORLD, n, timeout=900)
    slow = max(ranks, key=lambda r: r["reduce_s"] + r["finalize_s"])
    extra = {"value": ranks[0]["value"], "reduce s": round(slow["reduce_s"], 3),
             "finalize s": round(slow["finalize_s"], 3), "peak MB": max(r["peak MB"] or 0 for r in ranks),
             "state MB": ranks[0]["state MB"]}

    def fmetrics_call():
        return Measured(WORLD * n, extra=extra, seconds=slow["reduce_s"] + slow["finalize_s"], once=True)

    keys = torch.randint(-(2**62), 2**62, (WORLD * n,), generator=torch.Generator().manual_seed(1))

    def sort():
        torch.sort(keys)
        return Measured(WORLD * n)

    return {"fmetrics": fmetrics_call, "torch.sort": sort}
