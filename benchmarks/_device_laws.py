"""The CUDA law suite as a plain script, with a deadline and an incremental JSON report.

``python -m benchmarks._device_laws --device cuda --deadline 150 --json laws.json``

It runs what ``pytest --device cuda tests/test_laws.py`` runs (tests/_device.py: inputs and states on
the device, every update under ``torch.cuda.set_sync_debug_mode("error")``, compile laws left to the CPU
run, one seed), without needing pytest, and writes the report after every case, so a run cut short
still says what it found. Failures are classified: ``host sync`` (an update synchronized the device)
or ``other`` (a law broken on the device for another reason, e.g. a tolerance or a device mix-up).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import traceback

import torch


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks._device_laws")
    p.add_argument("--device", default="cuda")
    p.add_argument("--deadline", type=float, default=150.0, help="seconds; cases not started by then are 'not run'")
    p.add_argument("--json", default=None)
    p.add_argument("-k", dest="only", default=None, help="run the cases whose id contains this")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(f"--device {args.device}: no CUDA device", file=sys.stderr)
        return 2

    from fmetrics.testing import LAWS, check_metric
    from tests._device import DEVICE_BLIND, HOST_INPUT_REASON, HostSync, on_device
    from tests.cases import all_cases

    t_start = time.perf_counter()
    cases = [c for c in all_cases() if not args.only or args.only in c.id]
    rows = []

    def write():
        if args.json:
            counts = {}
            for r in rows:
                counts[r["status"]] = counts.get(r["status"], 0) + 1
            with open(args.json, "w") as f:
                json.dump({"device": str(device), "torch": torch.__version__,
                           "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None,
                           "cases": len(cases), "counts": counts, "wall_s": time.perf_counter() - t_start,
                           "rows": rows}, f, indent=1)

    for case in cases:
        if time.perf_counter() - t_start > args.deadline:
            rows.append({"id": case.id, "status": "not run", "reason": "deadline"})
            continue
        t0 = time.perf_counter()
        row = {"id": case.id}
        try:
            if case.make().host_input:
                row.update(status="skipped", reason=HOST_INPUT_REASON)
            else:
                options = dict(case.check)
                options["laws"] = [law for law in options.get("laws", LAWS) if law not in DEVICE_BLIND]
                metric, batches, reference = on_device(case, 0, device)
                check_metric(metric, batches, reference=reference, seed=0, **options)
                row.update(status="passed")
        except Exception as err:  # noqa: BLE001 - every failure is a row
            chain, e = [], err
            while e is not None and len(chain) < 4:
                chain.append(e)
                e = e.__cause__ or e.__context__
            sync = any(isinstance(x, HostSync) or "synchroniz" in str(x) for x in chain)
            where = traceback.extract_tb(chain[-1].__traceback__)[-3:] if chain[-1].__traceback__ else []
            row.update(status="host sync" if sync else "other", reason=f"{type(err).__name__}: {err}"[:1500],
                       where=[f"{f.filename.split('/fmetrics/')[-1]}:{f.lineno} {f.name}" for f in where])
        finally:
            if device.type == "cuda":
                torch.cuda.set_sync_debug_mode(0)
        row["seconds"] = round(time.perf_counter() - t0, 3)
        rows.append(row)
        print(f"{row['status']:10s} {row['seconds']:7.2f}s  {case.id}", flush=True)
        write()
    write()
    counts = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"\nCUDA law suite: {len(cases)} cases in {time.perf_counter() - t_start:.0f} s: "
          + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    for status in ("host sync", "other"):
        bad = [r for r in rows if r["status"] == status]
        if bad:
            print(f"\n{status} ({len(bad)}):")
            for r in bad:
                print(f"  {r['id']}: {r['reason'][:300]}")
    return 0 if not any(r["status"] in ("host sync", "other") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
