#!/usr/bin/env bash
# The GPU device check of issue 20, one script, under ~7 minutes:
#   1. environment (torch, CUDA device, peers);
#   2. a pytest smoke of `pytest --device cuda` (if pytest is installed there);
#   3. the CUDA law suite (every registry case, inputs and states on the GPU, every update under
#      torch.cuda.set_sync_debug_mode("error")), deadline-bound, JSON written after every case;
#   4. `python -m benchmarks --device cuda --quick` (SIGINT at its limit: finished rows still reported).
# Nothing is installed: the preinstalled torch stays; the repository is used from PYTHONPATH.
# Results go to $OUT (default /tmp/fmetrics-device-check): env.txt, pytest_smoke.txt, laws.json, laws.txt,
# bench.json, bench.txt, summary.txt.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/fmetrics-device-check}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }

echo "== environment" | tee "$OUT/env.txt"
timeout 60 python - <<'PY' 2>&1 | tee -a "$OUT/env.txt"
import importlib, platform, torch
print("python", platform.python_version(), "| torch", torch.__version__, "| cuda", torch.version.cuda,
      "| available", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(), "| capability", torch.cuda.get_device_capability())
for m in ("numpy", "torchmetrics", "sklearn", "scipy", "pytest", "ranx", "pycocotools", "fmetrics"):
    try:
        mod = importlib.import_module(m)
        print(f"  {m} {getattr(mod, '__version__', '?')}")
    except Exception as e:
        print(f"  {m}: {type(e).__name__}: {e}")
PY

echo "== pytest smoke (--device cuda) at $(elapsed)s" | tee "$OUT/pytest_smoke.txt"
if python -c "import pytest" 2>/dev/null; then
  timeout -s INT -k 10 60 python -m pytest -q -p no:cacheprovider -o addopts="" --device cuda \
      tests/test_laws.py -k "mean-weighted or binary_auroc-binned or bootstrap-mean or running or wrapped_updates" \
      tests/test_device_constants.py -rfEs 2>&1 | tail -40 | tee -a "$OUT/pytest_smoke.txt"
else
  echo "pytest not installed: skipped (the law runner below runs the same cases)" | tee -a "$OUT/pytest_smoke.txt"
fi

echo "== CUDA law suite at $(elapsed)s" | tee "$OUT/laws.txt"
timeout -s INT -k 10 150 python -m benchmarks._device_laws --device cuda --deadline 120 \
    --json "$OUT/laws.json" >> "$OUT/laws.txt" 2>&1
echo "law runner exit $?" >> "$OUT/laws.txt"
sed -n '/^CUDA law suite:/,$p' "$OUT/laws.txt" | head -80

echo "== benchmarks --device cuda --quick at $(elapsed)s" | tee "$OUT/bench.txt"
ONLY="aggregation/,audio/,classification/,finalize/,clustering/,nominal/,regression/,retrieval/,segmentation/,wrappers/,detection/"
timeout -s INT -k 15 170 python -m benchmarks --device cuda --quick --only "$ONLY" \
    --json "$OUT/bench.json" >> "$OUT/bench.txt" 2>&1
echo "benchmarks exit $?" >> "$OUT/bench.txt"

{
  echo "== summary (device check wall $(elapsed) s)"
  head -3 "$OUT/env.txt" | tail -2
  grep -E "passed|failed|skipped|error" "$OUT/pytest_smoke.txt" | tail -1
  grep -E "^CUDA law suite:" "$OUT/laws.txt"
  python - "$OUT/bench.json" <<'PY'
import json, sys
try:
    rep = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"no benchmark JSON: {e}"); raise SystemExit
print(f"benchmarks: device {rep['machine'].get('device')}, {len(rep['rows'])} rows, wall {rep['wall_s']:.0f} s, "
      f"interrupted {rep['interrupted']}")
print(f"| workload | peer | fmetrics | peer time | peer / fmetrics | check |")
print(f"|---|---|---|---|---|---|")
for r in rep["rows"]:
    b, p = r.get("baseline") or {}, r.get("peer_stats") or {}
    ms = lambda s: f"{s['median_s'] * 1e3:.3g} ms" if s and isinstance(s.get("median_s"), (int, float)) else "-"
    ratio = f"{r['ratio']:.2f}x" if isinstance(r.get("ratio"), (int, float)) else "-"
    print(f"| {r['workload']} | {r['peer'] or '-'} | {ms(b)} | {ms(p)} | {ratio} | {r['status']}"
          + (f": {r['reason'][:80]}" if r.get('reason') and r['status'] != 'ok' else "") + " |")
PY
} 2>&1 | tee "$OUT/summary.txt"
