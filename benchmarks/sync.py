"""Sync cost: reducing a 10-metric collection across 2 gloo processes, fmetrics vs torchmetrics.

The ten metrics (binary accuracy / precision / recall / F1, exact AUROC,
calibration error, MSE, MAE, Pearson, weighted mean) see one shard of the
same ``(probs, labels)`` stream on each rank. fmetrics reduces the
`fmetrics.collection` state with `adapters.distributed.reduce`; torchmetrics
syncs a `MetricCollection` in ``compute()``. Both run once in one spawned
group of 2 gloo processes (127.0.0.1) while the workload is built; each
contender then reports the time of one sync measured inside the ranks
(the slower rank, per repetition) and, as extra columns, the collectives
issued and the bytes each rank handed to them.
"""
from __future__ import annotations

import time
import warnings

import torch

import fmetrics as fm
from benchmarks.registry import Measured, Unsupported, register

WORLD = 2


def ten_metrics() -> dict[str, fm.Metric]:
    """The ten fmetrics metrics by name (accuracy..F1 share one state)."""
    return {
        "acc": fm.binary_accuracy(), "prec": fm.binary_precision(), "rec": fm.binary_recall(),
        "f1": fm.binary_f1_score(), "auroc": fm.binary_auroc(), "ece": fm.binary_calibration_error(),
        "mse": fm.mean_squared_error(), "mae": fm.mean_absolute_error(), "pearson": fm.pearson_corrcoef(),
        "mean": fm.mean(),
    }


def fmetrics_ten() -> fm.Metric:
    """The ten metrics as one `fmetrics.collection`."""
    return fm.collection(ten_metrics())


def torchmetrics_ten():
    """The same ten metrics as a torchmetrics `MetricCollection` (compute groups on, the default)."""
    import torchmetrics as tm
    from torchmetrics import classification as tc

    return tm.MetricCollection({
        "acc": tc.BinaryAccuracy(), "prec": tc.BinaryPrecision(), "rec": tc.BinaryRecall(),
        "f1": tc.BinaryF1Score(), "auroc": tc.BinaryAUROC(), "ece": tc.BinaryCalibrationError(),
        "mse": tm.MeanSquaredError(), "mae": tm.MeanAbsoluteError(), "pearson": tm.PearsonCorrCoef(),
        "mean": tm.MeanMetric(),
    })


def shard(rank: int, world: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s contiguous slice of a seeded stream of ``n`` (probability, 0/1 label) pairs."""
    g = torch.Generator().manual_seed(0)
    probs = torch.rand(n, generator=g)
    labels = (torch.rand(n, generator=g) < probs).float()
    lo, hi = rank * n // world, (rank + 1) * n // world
    return probs[lo:hi], labels[lo:hi]


def _worker(rank: int, world: int, n: int, repeats: int) -> dict:
    import torch.distributed as dist

    from adapters.distributed import reduce
    from tests._dist import count_collectives

    probs, labels = shard(rank, world, n)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = fmetrics_ten()
        state = c.update(c.init(), probs, labels)
        with count_collectives() as counts:
            reduced = reduce(c, state)
        times = []
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            reduce(c, state)
            times.append(time.perf_counter() - t0)
        out["fmetrics"] = (c.finalize(reduced), dict(counts), times)

        col = torchmetrics_ten()
        col.update(probs, labels)
        with count_collectives() as counts:
            value = col.compute()
        times = []
        for _ in range(repeats):
            for m in col.values(copy_state=False):
                m._computed = None  # compute() caches its value; time a fresh sync + compute
            dist.barrier()
            t0 = time.perf_counter()
            col.compute()
            times.append(time.perf_counter() - t0)
        out["torchmetrics"] = ({k: v.double() for k, v in value.items()}, dict(counts), times)
    return out


def _rows(quick: bool) -> int:
    return 20_000 if quick else 200_000


def measure(quick: bool) -> dict:
    """Runs both contenders in one spawned group; ``{contender: (value, counts, [seconds per repeat])}``."""
    from tests._dist import spawn

    per_rank = spawn(_worker, WORLD, _rows(quick), 5 if quick else 20, timeout=300)
    out = {}
    for name in per_rank[0]:
        value, counts, _ = per_rank[0][name]
        slowest = [max(r[name][2][i] for r in per_rank) for i in range(len(per_rank[0][name][2]))]
        out[name] = (value, counts, slowest)
    return out


def _replay(value, counts: dict, times: list[float]):
    state = {"i": 0}
    extra = {"collectives": counts["calls"], "bytes_per_rank": counts["bytes"],
             "ops": ", ".join(f"{k}={v}" for k, v in sorted(counts["ops"].items()))}

    def run():
        t = times[state["i"] % len(times)]
        state["i"] += 1
        return Measured(value, extra=extra, seconds=t)

    return run


@register("adapters/sync_collection10", domain="adapters", peers=("torchmetrics",), tolerance=1e-5,
          full_only="it spawns 2 gloo processes (8 s of start-up, 15 s on a busy machine)",
          description=__doc__.splitlines()[0])
def sync_collection10(quick: bool, device="cpu"):
    if torch.device(device).type != "cpu":
        raise Unsupported("the sync workload spawns 2 gloo processes on the CPU")
    import torchmetrics  # noqa: F401 - the peer; ImportError marks it skipped

    return {name: _replay(*result) for name, result in measure(quick).items()}
