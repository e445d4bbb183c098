"""The benchmark runner behind ``python -m benchmarks``.

For each selected workload (see `benchmarks.registry`) the harness builds the
data once (seeded), calls every contender once (warm-up; its value is the one
compared), then times them in alternating rounds -- the order rotates every
round so that no contender always runs on a warm or a cold cache -- and
reports the median time and its spread (interquartile range).

``--device cuda`` builds every workload's data on the GPU (peers run on
the same device where they can) and times each call between two
``torch.cuda.synchronize()``: a call's time includes all the device work it
launched. The device is named in the table header and in the JSON report.

Each workload gets a share of a global time budget (under two minutes for
``--quick``, twenty for the full run) and runs rounds until its share is
spent, between a minimum and a maximum number (see `Budget`).
"""
from __future__ import annotations

import argparse
import datetime
import fnmatch
import gc
import importlib
import importlib.metadata
import json
import math
import os
import pkgutil
import platform
import sys
import time
import traceback
from typing import Any, Mapping, Optional

import numpy as np
import torch

from benchmarks import registry
from benchmarks.registry import BASELINE, Measured, Skip, Unsupported, Workload

SCHEMA = "fmetrics-benchmarks/1"
NOISY = 0.5  # a time whose interquartile range exceeds half its median is flagged as noisy
NOT_WORKLOADS = {"__main__", "harness", "registry", "conftest"}
PEER_PACKAGES = ("torchmetrics", "torcheval", "scikit-learn", "scipy", "ranx", "pytrec-eval-terrier",
                 "faster-coco-eval", "pycocotools", "numpy")


class Budget:
    """Wall-time budget of a run, and how many timed rounds a workload gets.

    A workload's share is the time left divided by the workloads left (capped);
    it runs rounds until its share is spent, between ``min_rounds`` and
    ``max_rounds`` (``--repeats`` fixes the count). A workload whose rounds
    are too slow for ``min_rounds`` of them to fit its share gets as many as
    fit, at least one. Within a workload each contender gets its part of the
    share (`plan`: what a fast contender leaves goes to the slower ones): a
    slow peer stops after the calls that fit (its
    warm-up call is its one timing when not even one more fits) while a fast
    fmetrics keeps being timed in the remaining rounds. Once the run is over
    its budget, each remaining workload gets a single round (for the
    contenders whose first call took under ``floor_s / 2``).
    """

    def __init__(self, quick: bool, repeats: Optional[int] = None, slowdown: float = 1.0):
        # under 2 / 20 minutes, imports, builds and warm-ups included; a busy machine (`load_slowdown`) inflates
        # those fixed costs, so the rounds get a smaller budget
        self.total_s = (90.0 if quick else 1100.0) / max(slowdown, 1.0)
        self.cap_s = 5.0 if quick else 60.0
        self.min_rounds, self.max_rounds = (3, 15) if quick else (5, 41)
        # a workload's share, as far as one timed call of each contender is concerned, is at least this: once
        # the run is over its budget (share 0), a contender whose first call took under half of it still gets
        # one warm call, so that its time is not its first call's (lazy imports, first-call set-up)
        self.floor_s = 0.5 if quick else 6.0
        if repeats is not None:
            self.min_rounds = self.max_rounds = repeats
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def share(self, workloads_left: int) -> float:
        return min(max(self.total_s - self.elapsed(), 0.0) / max(workloads_left, 1), self.cap_s)

    def another_round(self, done: int, spent_s: float, last_round_s: float, share_s: float) -> bool:
        fixed = self.min_rounds == self.max_rounds  # --repeats
        over = self.elapsed() > self.total_s and not fixed  # over budget: one round
        slow = not fixed and spent_s + last_round_s * (self.min_rounds - done) > share_s  # min_rounds do not fit
        if done < (1 if over or slow else self.min_rounds):
            return True
        return done < self.max_rounds and spent_s + last_round_s <= share_s

    def rounds_for(self, part_s: float, call_s: float, share_s: float) -> int:
        """Timed calls of a contender whose call takes ``call_s`` in its ``part_s`` of the share: 0 when not
        even one fits (its warm-up call is then its timing), at most ``max_rounds``; ``--repeats`` fixes it.
        ``min_rounds`` calls costing under 10% of the workload's ``share_s`` are always given (a fast
        fmetrics call beside a slow peer)."""
        if self.min_rounds == self.max_rounds:
            return self.max_rounds
        fits = int(part_s / call_s) if call_s > 0 else self.max_rounds
        if self.cheap(call_s, share_s):
            fits = max(fits, self.min_rounds)
        return min(fits, self.max_rounds)

    def plan(self, calls: Mapping[str, float], left_s: float, share_s: float) -> dict[str, int]:
        """Timed calls per contender in the ``left_s`` seconds left of the workload's ``share_s``, given each
        one's call time ``calls``: ``min_rounds`` for every contender when they all fit, then the rest split
        fastest first (`rounds_for`), each in an equal part of what is still left, so that what a fast
        contender does not need (fmetrics at ``max_rounds`` in a fraction of its part) goes to the slower
        ones (water-filling). ``--repeats`` fixes the count."""
        per_round = sum(calls.values())
        floor = self.min_rounds if self.min_rounds * per_round <= left_s else 0
        left_s -= floor * per_round
        caps = {}
        order = sorted(calls, key=calls.get)
        for i, name in enumerate(order):
            more = self.rounds_for(left_s / (len(order) - i), calls[name], share_s)
            caps[name] = min(floor + more, self.max_rounds)
            left_s = max(left_s - (caps[name] - floor) * calls[name], 0.0)
        return caps

    def cheap(self, call_s: float, share_s: float) -> bool:
        """``min_rounds`` calls of ``call_s`` cost under 10% of the workload's share: always given."""
        return call_s * self.min_rounds <= 0.10 * share_s


# ---------------------------------------------------------------- discovery


def discover(package: str = "benchmarks") -> list[tuple[str, str]]:
    """Imports every workload module of ``package``; returns ``[(module, error)]`` for those that failed."""
    pkg = importlib.import_module(package)
    errors = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        name = info.name
        if name in NOT_WORKLOADS or name.startswith(("_", "test_")):
            continue
        try:
            importlib.import_module(f"{package}.{name}")
        except Exception as e:  # noqa: BLE001 - a broken module is reported, not fatal
            errors.append((f"{package}.{name}", f"{type(e).__name__}: {e}"))
    return errors


def preload(selected: list[Workload]) -> None:
    """Imports torchmetrics (seconds, the most common peer) before the first workload when a selected one
    names it: its import then costs the run's budget as a whole, not the rounds of whichever workload
    happens to call it first (that one used to get only the minimum of rounds, with a noisy median)."""
    if any("torchmetrics" in w.peers for w in selected):
        try:
            importlib.import_module("torchmetrics")
        except ImportError:
            pass


def _matches(name: str, pattern: str) -> bool:
    return pattern in name or fnmatch.fnmatchcase(name, pattern)


def select(workloads: Mapping[str, Workload], only: Optional[str]) -> tuple[list[Workload], list[str]]:
    """``(workloads matching any comma-separated pattern, patterns matching none)``; substring or glob."""
    if not only:
        return [workloads[k] for k in sorted(workloads)], []
    patterns = [p.strip() for p in only.split(",") if p.strip()]
    chosen = [workloads[k] for k in sorted(workloads) if any(_matches(k, p) for p in patterns)]
    return chosen, [p for p in patterns if not any(_matches(k, p) for k in workloads)]


# ---------------------------------------------------------------- machine


def measure_bandwidth(quick: bool, device=None) -> dict:
    """Memory bandwidth in GB/s of ``device`` (default: the CPU's): best of a few large ``sum`` (read) and
    ``copy_`` (read + write) passes, synchronized on an accelerator."""
    device = torch.device(device or "cpu")
    n = 256 * 2**20 // 4  # 256 MiB: well beyond the last-level cache
    x = torch.ones(n, dtype=torch.float32, device=device)
    y = torch.zeros_like(x)
    read = copy = math.inf
    for _ in range(5 if quick else 10):
        _sync(device)
        t0 = time.perf_counter()
        x.sum()
        _sync(device)
        t1 = time.perf_counter()
        y.copy_(x)
        _sync(device)
        t2 = time.perf_counter()
        read, copy = min(read, t1 - t0), min(copy, t2 - t1)
    nbytes = x.numel() * x.element_size()
    read_gbps, copy_gbps = nbytes / read / 1e9, 2 * nbytes / copy / 1e9
    return {"read_gbps": read_gbps, "copy_gbps": copy_gbps, "gbps": max(read_gbps, copy_gbps),
            "buffer_bytes": nbytes}


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name(device) -> str:
    """``"cpu"``, or the device and its model, e.g. ``"cuda:0 (NVIDIA H200)"``."""
    device = torch.device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return str(device)


def machine_info(device=None) -> dict:
    versions = {}
    for pkg in PEER_PACKAGES:
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            pass
    return {
        "platform": platform.platform(),
        "cpu": _cpu_name(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "device": device_name(device or "cpu"),
        "packages": versions,
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


# ---------------------------------------------------------------- correctness


def _leaves(x, path: str, out: dict) -> dict:
    """Flattens a result into ``{path: leaf}``; leaves are float64 arrays, or other plain values."""
    if isinstance(x, Measured):
        x = x.value
    if isinstance(x, torch.Tensor):
        out[path] = x.detach().to("cpu", torch.float64).numpy()
    elif isinstance(x, np.ndarray) and x.dtype.kind in "biuf":
        out[path] = x.astype(np.float64)
    elif isinstance(x, (bool, int, float, np.number)):
        out[path] = np.asarray(x, dtype=np.float64)
    elif isinstance(x, Mapping):
        for k in sorted(x, key=str):
            _leaves(x[k], f"{path}.{k}" if path else str(k), out)
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            _leaves(v, f"{path}[{i}]", out)
    else:
        out[path] = x
    return out


def compare(value, reference, tolerance: float) -> tuple[float, bool, Optional[str]]:
    """``(largest |value - reference|, within tolerance, note)`` over matching leaves.

    Element ``a`` agrees with ``b`` when ``|a - b| <= tolerance * max(1, |b|)``;
    NaN agrees with NaN, and an infinity with the same infinity.
    """
    a, b = _leaves(value, "", {}), _leaves(reference, "", {})
    if a.keys() != b.keys():
        return math.inf, False, f"result structure differs: {sorted(a)} vs {sorted(b)}"
    worst, ok, note = 0.0, True, None
    for k in a:
        x, y = a[k], b[k]
        if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)):
            if not (x == y):
                return math.inf, False, f"{k or 'value'}: {x!r} != {y!r}"
            continue
        if x.size != y.size:
            return math.inf, False, f"{k or 'value'}: shape {x.shape} vs {y.shape}"
        x, y = x.reshape(-1), y.reshape(-1)
        same = (x == y) | (np.isnan(x) & np.isnan(y))
        with np.errstate(invalid="ignore"):
            d = np.where(same, 0.0, np.abs(x - y))
        d = np.where(np.isnan(d), np.inf, d)
        if d.size:
            worst = max(worst, float(d.max()))
            bad = d > tolerance * np.maximum(1.0, np.nan_to_num(np.abs(y), nan=1.0, posinf=1.0))
            if bad.any() and ok:
                ok, note = False, f"{k or 'value'}: |diff| {float(d[bad].max()):.3g} > tolerance {tolerance:g}"
    return worst, ok, note


# ---------------------------------------------------------------- timing


def _sync(device=None) -> None:
    """Waits for the device's queued work (CUDA); on the CPU, for CUDA work a CPU workload may have started."""
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    elif torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _timed(fn, device=None) -> tuple[Any, float]:
    """``(fn(), seconds)``; on an accelerator the clock runs between two synchronizations."""
    _sync(device)  # work queued before the call is not charged to it
    t0 = time.perf_counter()
    out = fn()
    _sync(device)
    seconds = time.perf_counter() - t0
    if isinstance(out, Measured) and out.seconds is not None:
        seconds = float(out.seconds)
    return out, seconds


def _stats(times: list[float], samples: Optional[int], nbytes: Optional[int], bandwidth: Optional[float],
           extra: Mapping) -> dict:
    med = float(np.median(times))
    q1, q3 = np.percentile(times, [25, 75])
    return {
        "median_s": med,
        "iqr_s": float(q3 - q1),
        "min_s": float(min(times)),
        "max_s": float(max(times)),
        "times_s": [float(t) for t in times],
        "samples_per_s": samples / med if samples and med > 0 else None,
        "bandwidth_fraction": nbytes / med / (bandwidth * 1e9) if nbytes and bandwidth and med > 0 else None,
        "extra": {k: (v.item() if isinstance(v, (torch.Tensor, np.generic)) else v) for k, v in extra.items()},
    }


def _noisy(st: dict) -> bool:
    return st["iqr_s"] > NOISY * st["median_s"]


def _short_error(e: BaseException) -> str:
    frame = traceback.extract_tb(e.__traceback__)[-1:] if e.__traceback__ else []
    where = f" ({os.path.basename(frame[0].filename)}:{frame[0].lineno})" if frame else ""
    return f"{type(e).__name__}: {e}{where}".replace("\n", " ")[:300]


def run_workload(w: Workload, quick: bool, budget: Budget, workloads_left: int, bandwidth: Optional[float],
                 progress=None, device="cpu") -> list[dict]:
    """Runs one workload on ``device``; returns one row per peer (or one baseline-only row)."""
    progress = progress or (lambda msg: None)
    device = torch.device(device)
    share = budget.share(workloads_left)
    t_start, c_start = time.perf_counter(), time.process_time()
    base_row = {"workload": w.name, "domain": w.domain, "description": w.description, "tolerance": w.tolerance,
                "device": str(device)}

    def row(peer, status, reason=None, **kw):
        return {**base_row, "peer": peer, "status": status, "reason": reason, "baseline": None,
                "peer_stats": None, "ratio": None, "max_abs_diff": None, "agree": None, "noisy": False, **kw}

    if quick and w.full_only:
        return [row(None, "skipped", f"full run only: {w.full_only}")]
    # what is alive between workloads (modules, caches) lives on: frozen, later collections skip it (a full
    # collection of it takes 0.17 CPU-s once torchmetrics, SciPy... are imported), so the collection before
    # each timed call scans this workload's objects only; `main` unfreezes them at the end of the run
    gc.collect()
    gc.freeze()
    progress("building data")
    torch.manual_seed(0)
    np.random.seed(0)
    try:
        runs = dict(w.make(quick, device))
    except ImportError as e:
        return [row(None, "skipped", f"missing package: {e}")]
    except Unsupported as e:
        return [row(None, "skipped", f"not on {device.type}: {e}")]
    except Exception as e:  # noqa: BLE001
        return [row(None, "error", f"build failed: {_short_error(e)}")]
    if BASELINE not in runs or runs[BASELINE] is None:
        return [row(None, "error", f"workload has no {BASELINE!r} contender")]
    # the share pays for warm-ups and rounds; the build (data, a peer's JIT compile, a helper process) is
    # charged to the run's budget: later workloads' shares shrink instead
    match_pools(torch.get_num_threads())  # the pools the build loaded
    t_timing = time.perf_counter()
    build_s, build_cpu_s = t_timing - t_start, time.process_time() - c_start
    peers = [p for p in runs if p != BASELINE]
    skipped = {p: "not installed" for p in w.peers if p not in runs}
    skipped.update({p: "not installed" for p in peers if runs[p] is None})
    skipped.update({p: runs[p].reason for p in peers if isinstance(runs[p], Skip)})

    values, times, extras, warmup, errors = {}, {}, {}, {}, {}
    for name in [BASELINE] + peers:  # warm-up: first call, the value we compare
        if name in skipped:
            continue
        progress(f"warm-up {name}")
        try:
            out, t = _timed(runs[name], device)
        except ImportError as e:
            skipped[name] = f"missing package: {e}"
            continue
        except Exception as e:  # noqa: BLE001
            errors[name] = _short_error(e)
            continue
        values[name], times[name], warmup[name] = out, [], t
        extras[name] = dict(out.extra) if isinstance(out, Measured) else {}
    if BASELINE not in values:
        why = errors.get(BASELINE) or skipped.get(BASELINE)
        return [row(None, "error", f"{BASELINE}: {why}", wall_s=time.perf_counter() - t_start)]

    match_pools(torch.get_num_threads())  # the pools the warm-ups loaded
    live = [n for n in [BASELINE] + peers if n in values]
    caps = budget.plan({n: warmup[n] for n in live}, max(share - (time.perf_counter() - t_timing), 0.0), share)
    for name in live:  # a first call (lazy set-up, cold caches, new kernel shapes included) is a contender's
        if caps[name] == 0 and warmup[name] <= max(share, budget.floor_s) / 2:  # timing only when not even one
            caps[name] = 1  # more call fits in half the workload's share (later workloads' shares shrink to pay)
    for name in live:  # timed once while the workload was built: that one timing, not copies of it
        if isinstance(values[name], Measured) and values[name].once:
            caps[name] = 0
    first_calls = [n for n in live if caps[n] == 0]
    for name in first_calls:  # too slow for another call: the warm-up is its one timing
        times[name].append(warmup[name])
    rounds = 0
    while True:
        active = [n for n in live if len(times[n]) < caps[n]]
        cheap = all(budget.cheap(warmup[n], share) for n in active)
        # the next round's cost: the contenders still active, each at its latest call (a slow peer given
        # its one warm call no longer counts once it has had it)
        next_round = sum(times[n][-1] if times[n] else warmup[n] for n in active)
        if not active or not ((cheap and rounds < budget.min_rounds)
                              or budget.another_round(rounds, time.perf_counter() - t_timing, next_round, share)):
            break
        order = active[rounds % len(active):] + active[:rounds % len(active)]
        for name in order:
            progress(f"round {rounds + 1}: {name}")
            gc.collect()
            try:
                _, t = _timed(runs[name], device)
            except Exception as e:  # noqa: BLE001 - a contender failing late is an error row
                errors[name] = _short_error(e)
                live.remove(name)
                continue
            times[name].append(t)
        rounds += 1
    wall, cpu = time.perf_counter() - t_start, time.process_time() - c_start

    samples, nbytes = w.size("samples", quick), w.size("bytes", quick)

    def stats(name):
        if name not in values or name in errors or not times[name]:
            return None
        return {**_stats(times[name], samples, nbytes, bandwidth, extras[name]), "first_call_s": warmup[name]}

    base = stats(BASELINE)
    meta = {"rounds": max((len(t) for t in times.values()), default=0), "first_calls": sorted(first_calls),
            "wall_s": wall, "build_s": build_s, "cpu_s": cpu, "build_cpu_s": build_cpu_s, "samples": samples,
            "bytes": nbytes}
    if base is None:
        return [row(None, "error", f"{BASELINE}: {errors.get(BASELINE, 'no value')}", **meta)]
    rows = []
    if not peers and not skipped:
        rows.append(row(None, "ok", baseline=base, noisy=_noisy(base), **meta))
    for name in peers + [p for p in skipped if p not in peers]:
        if name in skipped:
            rows.append(row(name, "skipped", skipped[name], baseline=base, **meta))
            continue
        st = stats(name)
        if st is None:
            rows.append(row(name, "error", errors.get(name, "no value"), baseline=base, **meta))
            continue
        diff, agree, note = compare(values[name], values[BASELINE], w.tolerance)
        rows.append(row(name, "ok" if agree else "mismatch", note, baseline=base, peer_stats=st,
                        ratio=st["median_s"] / base["median_s"] if base["median_s"] > 0 else None,
                        max_abs_diff=diff, agree=agree, noisy=_noisy(base) or _noisy(st), **meta))
    return rows


# ---------------------------------------------------------------- output


def _fmt_time(s: Optional[float]) -> str:
    if s is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def _fmt_stats(st: Optional[dict]) -> str:
    """``median ±spread%``; a single timing says so (``1 round``): it has no spread to show."""
    if st is None:
        return "-"
    if len(st.get("times_s", ())) == 1:
        return f"{_fmt_time(st['median_s'])} 1 round"
    spread = st["iqr_s"] / 2 / st["median_s"] * 100 if st["median_s"] > 0 else 0.0
    return f"{_fmt_time(st['median_s'])} ±{spread:.0f}%"


def _fmt_rate(r: Optional[float]) -> str:
    if r is None:
        return "-"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if r >= scale:
            return f"{r / scale:.3g}{unit}/s"
    return f"{r:.3g}/s"


def _fmt_value(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int) and abs(v) >= 10_000:
        return f"{v:.3g}"
    return str(v)


def _fmt_extra(r: dict) -> str:
    a = (r["baseline"] or {}).get("extra") or {}
    b = (r["peer_stats"] or {}).get("extra") or {}
    parts = []
    for k in list(a) + [k for k in b if k not in a]:
        if k in a and k in b:
            parts.append(f"{k} {_fmt_value(a[k])} vs {_fmt_value(b[k])}")
        else:
            parts.append(f"{k} {_fmt_value(a.get(k, b.get(k)))}" + ("" if k in a else f" ({r['peer']})"))
    return "; ".join(parts)


def failures(rows: list[dict]) -> list[dict]:
    """The rows that fail a run (exit status 1): errors, and disagreements that no peer of the workload contradicts.

    A peer that disagrees with fmetrics while another peer of the same workload (a reference implementation:
    scikit-learn, sacrebleu, jiwer) agrees with it is that peer's deviation: reported, not a failure. E.g.
    torchmetrics' ``text/bleu_score`` differs on closest-reference ties where sacrebleu agrees with fmetrics.
    """
    vouched = {r["workload"] for r in rows if r["status"] == "ok" and r["peer"]}
    return [r for r in rows if r["status"] == "error" or r["status"] == "mismatch" and r["workload"] not in vouched]


def _check(r: dict) -> str:
    if r["status"] == "ok":
        return "ok" if r["peer"] else "-"
    if r["status"] == "mismatch":
        return "MISMATCH"
    return r["status"]


def format_table(rows: list[dict]) -> str:
    """An aligned text table: one line per (workload, peer)."""
    header = ("workload", "peer", "fmetrics", "peer time", "peer/fm", "max|diff|", "check",
              "fm samples/s", "fm %bw", "extra / note")
    lines = []
    for r in rows:
        base = r["baseline"]
        note = "; ".join(x for x in (r["reason"], _fmt_extra(r)) if x)
        lines.append((
            r["workload"],
            r["peer"] or "-",
            _fmt_stats(base),
            _fmt_stats(r["peer_stats"]),
            (f"{r['ratio']:.2f}x" + ("?" if r.get("noisy") else "")) if r["ratio"] is not None else "-",
            f"{r['max_abs_diff']:.2g}" if r["max_abs_diff"] is not None else "-",
            _check(r),
            _fmt_rate(base and base["samples_per_s"]),
            f"{base['bandwidth_fraction'] * 100:.1f}%" if base and base["bandwidth_fraction"] else "-",
            note,
        ))
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(header)]
    right = {2, 3, 4, 5, 7, 8}

    def fmt(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(line) for line in lines])


class Progress:
    """One status line on stderr: rewritten in place on a terminal, one line per workload otherwise."""

    WIDTH = 100

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.prefix = ""

    def start(self, i: int, n: int, name: str):
        self.prefix = f"[{i}/{n}] {name}"
        self.step("")

    def step(self, msg: str):
        if self.tty:
            self.stream.write("\r" + f"{self.prefix}  {msg}"[:self.WIDTH].ljust(self.WIDTH))
            self.stream.flush()

    def done(self, seconds: float, rows: list[dict]):
        flags = sorted({r["status"] for r in rows} - {"ok"})
        line = f"{self.prefix}  {seconds:.1f} s" + (f"  ({', '.join(flags)})" if flags else "")
        self.stream.write(("\r" + line.ljust(self.WIDTH) + "\n") if self.tty else line + "\n")
        self.stream.flush()


# ---------------------------------------------------------------- CLI


def _json_safe(x):
    """Strict JSON: non-finite floats become the strings "inf", "-inf", "nan"; unknown objects their str."""
    if isinstance(x, float):
        return x if math.isfinite(x) else str(x)
    if isinstance(x, dict):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if x is None or isinstance(x, (bool, int, str)):
        return x
    return str(x)


def _threads(n: int) -> str:
    return f"{n} torch thread" + ("s" if n != 1 else "")


def _busy(machine: dict) -> Optional[str]:
    """A warning when other processes already keep the cores busy (torch's thread barriers then stall)."""
    load, cpus, threads = (machine["loadavg"] or [0.0])[0], machine["cpu_count"] or 1, machine["threads"]
    if load > cpus - threads + 0.5:
        fix = "a quiet machine" + (f", or --threads {max(1, min(threads - 1, int(cpus - load)))}" if threads > 1 else "")
        return (f"load average {load:.1f} on {cpus} CPUs at start: other processes compete with the "
                f"{_threads(threads)}, so times are inflated; use {fix}")
    return None


def load_slowdown(load: float, cpus: int) -> float:
    """How much slower a run goes when other processes keep ``load`` cores of ``cpus`` busy: it shares the
    cores with them, ``(load + 1) / cpus`` (1 on a quiet machine). Measured: a quick run that takes 90 s
    on the quiet machine took 124 s under two CPU-bound processes (load average 1.7 at start, on 2 CPUs)."""
    return max(1.0, (load + 1.0) / max(cpus, 1))


def fewer_threads(load: float, cpus: int, threads: int) -> int:
    """The torch threads to use when ``--threads`` is not given: the cores other processes leave free (at
    least 1, at most ``threads``). On a busy machine every multi-threaded operation waits at its barrier
    for a descheduled thread, so fewer threads run faster and steadier."""
    return max(1, min(threads, int(cpus - load + 0.5)))


_pools_set = (0, 0)  # (len(sys.modules), threads) when `match_pools` last set the pools


def match_pools(threads: int) -> None:
    """Gives the BLAS / OpenMP thread pools loaded so far (numpy's and SciPy's OpenBLAS, scikit-learn's OpenMP)
    torch's ``threads``, so that peers run on as many threads as fmetrics; a no-op when neither a module was
    imported nor ``threads`` changed since the last call, or without threadpoolctl. On a busy machine OpenBLAS threads spin-wait for descheduled
    siblings: ``scipy.linalg.sqrtm`` of a 384-d matrix took 3-7 CPU-s (13-27 s) with 2 threads at load 11 on
    2 CPUs, 0.05 CPU-s with 1."""
    global _pools_set
    if (len(sys.modules), threads) == _pools_set:
        return
    _pools_set = (len(sys.modules), threads)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(threads)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="fmetrics side by side with torchmetrics and other peers, on identical data.")
    p.add_argument("--quick", action="store_true", help="small data and few rounds (under 2 minutes)")
    p.add_argument("--only", metavar="PATTERN",
                   help="comma-separated workload name patterns (substring or glob, e.g. 'regression/*')")
    p.add_argument("--device", default="cpu", metavar="DEVICE",
                   help="where the data live and the contenders run: cpu (default), cuda, cuda:1, ...; "
                        "accelerator times are taken between two synchronizations")
    p.add_argument("--threads", type=int, metavar="N",
                   help="torch.set_num_threads(N) (default: torch's, fewer when other processes keep cores busy)")
    p.add_argument("--repeats", type=int, metavar="N", help="timed rounds per workload (default: fit the budget)")
    p.add_argument("--json", metavar="FILE", help="write the machine-readable results to FILE")
    p.add_argument("--plot", metavar="FILE", help="write a PNG bar chart of the ratios (needs matplotlib)")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    return p


def _list(workloads, stream) -> None:
    for name in sorted(workloads):
        desc = workloads[name].description.splitlines()[0] if workloads[name].description else ""
        stream.write(f"  {name}" + (f"  -- {desc}" if desc else "") + "\n")


def main(argv=None, workloads: Optional[Mapping[str, Workload]] = None, out=None, err=None) -> int:
    """CLI entry point; ``workloads`` replaces discovery (tests pass their own)."""
    out, err = out or sys.stdout, err or sys.stderr
    args = _parser().parse_args(argv)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None  # read once: the 1-minute load at start
    if args.threads is not None:
        if args.threads < 1:
            err.write("--threads must be >= 1\n")
            return 2
        torch.set_num_threads(args.threads)
    elif load is not None:
        threads = fewer_threads(load, os.cpu_count() or 1, torch.get_num_threads())
        if threads < torch.get_num_threads():
            err.write(f"the machine is busy (load average {load:.1f} on {os.cpu_count()} CPUs): "
                      f"using {_threads(threads)} instead of {torch.get_num_threads()} (--threads N to choose)\n")
            torch.set_num_threads(threads)
    if args.repeats is not None and args.repeats < 1:
        err.write("--repeats must be >= 1\n")
        return 2
    if args.plot:
        from benchmarks import _plot

        problem = _plot.unavailable()
        if problem:
            err.write(f"--plot: {problem}\n")
            return 2

    try:
        device = torch.device(args.device)
    except RuntimeError as e:
        err.write(f"--device: {e}\n")
        return 2
    if device.type == "cuda" and not torch.cuda.is_available():
        err.write(f"--device {args.device}: torch.cuda.is_available() is False (no CUDA device, or a CPU build "
                  f"of torch {torch.__version__})\n")
        return 2
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        err.write(f"--device {args.device}: only {torch.cuda.device_count()} CUDA device(s)\n")
        return 2
    if device.type not in ("cpu", "cuda"):
        err.write(f"--device {args.device}: only cpu and cuda are supported\n")
        return 2
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if device.type == "cuda":
        torch.cuda.set_device(device)

    slowdown = load_slowdown(load, os.cpu_count() or 1) if load is not None else 1.0
    budget = Budget(args.quick, args.repeats, slowdown)
    if slowdown > 1.0 and args.repeats is None:
        err.write(f"the machine is busy: the rounds get {budget.total_s:.0f} s instead of "
                  f"{Budget(args.quick).total_s:.0f} s, to finish in time\n")
    import_errors = []
    if workloads is None:
        import_errors = discover()
        workloads = registry.WORKLOADS
    for module, e in import_errors:
        err.write(f"warning: benchmark module {module} failed to import and is skipped: {e}\n")
    if args.list:
        _list(workloads, out)
        return 0
    selected, unknown = select(workloads, args.only)
    preload(selected)
    if unknown or not selected:
        err.write(f"no workload matches --only {', '.join(map(repr, unknown or [args.only]))}. "
                  "Available workloads:\n")
        _list(workloads, err)
        return 2

    machine = machine_info(device)
    bandwidth = measure_bandwidth(args.quick, device)
    where = machine["device"] if device.type != "cpu" else "cpu"
    err.write(f"fmetrics benchmarks: {len(selected)} workloads, {'quick' if args.quick else 'full'} run, "
              f"device {where}, {_threads(machine['threads'])}, memory bandwidth {bandwidth['gbps']:.1f} GB/s\n")
    busy = _busy(machine)
    if busy:
        err.write(f"warning: {busy}\n")
    progress = Progress(err)
    rows, interrupted, walls = [], False, {}
    for i, w in enumerate(selected):
        progress.start(i + 1, len(selected), w.name)
        t0 = time.perf_counter()
        try:
            new = run_workload(w, args.quick, budget, len(selected) - i, bandwidth["gbps"], progress.step, device)
        except KeyboardInterrupt:
            err.write("\ninterrupted: reporting the workloads finished so far\n")
            interrupted = True
            break
        walls[w.name] = time.perf_counter() - t0
        progress.done(walls[w.name], new)
        rows.extend(new)
    gc.unfreeze()  # what `run_workload` froze
    wall, cpu = budget.elapsed(), time.process_time()  # CPU: the whole process so far, imports included

    out.write(f"device: {where}" + (" (CUDA-synchronized times)" if device.type == "cuda" else "") + "\n")
    out.write(format_table(rows) + "\n")
    out.write(f"\n{len(selected)} workloads in {wall:.1f} s, {cpu:.0f} CPU-s ({'quick' if args.quick else 'full'} run, "
              f"device {where}, {_threads(machine['threads'])}, {machine['cpu']}, "
              f"{'device ' if device.type != 'cpu' else ''}memory bandwidth {bandwidth['gbps']:.1f} GB/s). "
              "peer/fm > 1: fmetrics is faster. Times: median ±half the interquartile range.\n")
    if any(r.get("noisy") for r in rows):
        out.write(f"?: noisy (interquartile range over {NOISY:.0%} of the median); the machine is busy: "
                  "rerun on a quiet machine" + (", or with --threads 1" if machine["threads"] > 1 else "") + ".\n")
    if busy:
        out.write(f"warning: {busy}\n")
    limit = 120.0 if args.quick else 1200.0
    if wall > limit and not interrupted:
        share = limit / max(len(selected), 1)
        slow = [f"{n} ({s:.0f} s)" for n, s in sorted(walls.items(), key=lambda kv: -kv[1]) if s > share]
        err.write(f"warning: the run took {wall:.0f} s, over its {limit:.0f} s budget; "
                  f"workloads over their share: {', '.join(slow) or 'none'}\n")
    flagged = failures(rows)
    if flagged:
        err.write(f"{len(flagged)} row(s) flagged: " + ", ".join(
            f"{r['workload']}/{r['peer'] or BASELINE} ({r['status']})" for r in flagged) + "\n")
    peer_off = [r for r in rows if r["status"] == "mismatch" and r not in flagged]
    if peer_off:
        err.write(f"{len(peer_off)} peer row(s) disagree with fmetrics where another peer agrees with it (the "
                  "peer's deviation, not a failure): " + ", ".join(f"{r['workload']}/{r['peer']}" for r in peer_off)
                  + "\n")

    report = {
        "schema": SCHEMA,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "quick": args.quick,
        "argv": list(sys.argv[1:] if argv is None else argv),
        "device": str(device),
        "machine": machine,
        "bandwidth": bandwidth,
        "wall_s": wall,
        "cpu_s": cpu,
        "interrupted": interrupted,
        "import_errors": [{"module": m, "error": e} for m, e in import_errors],
        "rows": rows,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(_json_safe(report), f, indent=1, allow_nan=False)
    if args.plot and rows:
        from benchmarks import _plot

        _plot.plot(report, args.plot)
        err.write(f"wrote {args.plot}\n")
    return 130 if interrupted else (1 if flagged else 0)
