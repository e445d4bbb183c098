"""Mutation check: planted defects that the default test suite must catch.

    python -m tests.mutations [--only SUBSTRING] [--jobs N]

Each mutation replaces one exact snippet of a source file (it must occur
exactly once) in a fresh copy of the working tree, then runs the tests that
guard that code (a selection of the default suite, ``-m "not slow"``). A
mutation is *caught* when those tests fail. The command prints a table of
caught / not caught and exits 1 when any mutation survives or no longer
applies (its snippet changed: update the mutation with the code).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class Mutation:
    name: str
    path: str
    old: str
    new: str
    tests: tuple  # pytest arguments (files, -k expressions)


MUTATIONS = [
    # ---- core
    Mutation("state: sum merge drops the second state", "fmetrics/state.py",
             '"sum": lambda a, b: a + b,', '"sum": lambda a, b: a + 0 * b,',
             ("tests/test_core.py", "tests/test_aggregation.py")),
    Mutation("state: min merge takes the max", "fmetrics/state.py",
             '"min": torch.minimum,', '"min": torch.maximum,', ("tests/test_aggregation.py",)),
    Mutation("state: fold drops the last rank", "fmetrics/state.py",
             "return functools.reduce(merge, states)", "return functools.reduce(merge, states[:-1])",
             ("tests/test_checker.py", "tests/test_core.py")),
    Mutation("metric: chunk append keeps only the new chunks", "fmetrics/metric.py",
             'return tuple(old) + tuple(new) if tag == "cat" else new',
             'return tuple(new) if tag == "cat" else new', ("tests/test_core_v2.py",)),
    Mutation("collection: postfix forgotten", "fmetrics/collection.py",
             'out[f"{prefix}{name}{postfix}"] = value', 'out[f"{prefix}{name}"] = value',
             ("tests/test_core.py", "tests/test_doctests.py", "-k", "collection or prefix")),
    Mutation("validation: merged records lose the second count", "fmetrics/validation.py",
             "return Invalid(a.count + b.count,", "return Invalid(a.count,", ("tests/test_core_v2.py",)),
    Mutation("testing: purity law never compares", "fmetrics/testing.py",
             'raise _Broken(f"{what} was modified in place")\n        elif',
             'pass\n        elif', ("tests/test_checker.py",)),
    # ---- adapters
    Mutation("reducer: rank order reversed", "adapters/distributed.py",
             "return state_lib.fold(metric.merge, [build(r) for r in range(world)])",
             "return state_lib.fold(metric.merge, [build(r) for r in reversed(range(world))])",
             ("tests/test_distributed.py", "-k", "cat or retrieval or auroc")),
    # ---- clustering / nominal
    Mutation("clustering: tp off by one", "fmetrics/clustering/rand.py",
             "    tp = sum_sq - n\n", "    tp = sum_sq - n + 1\n", ("tests/test_clustering_parity.py",)),
    Mutation("clustering: E[MI] window too narrow", "fmetrics/clustering/mutual_info.py",
             "reach = 10.0 * var.sqrt() + 34.0", "reach = 3.0 * var.sqrt() + 1.0",
             ("tests/test_clustering_parity.py", "-k", "poisson")),
    Mutation("nominal: Cramér's V over max instead of min", "fmetrics/nominal/_association.py",
             "return min(max(math.sqrt(phi2 / min(r - 1, c - 1)), 0.0), 1.0)",
             "return min(max(math.sqrt(phi2 / max(r - 1, c - 1)), 0.0), 1.0)",
             ("tests/test_clustering_parity.py", "-k", "nominal")),
]


def _copy_tree(dst: Path) -> None:
    def ignore(_dir, names):
        return [n for n in names if n in {".git", ".ci-venv", ".venv", "__pycache__", ".benchmarks"}]

    shutil.copytree(ROOT, dst, ignore=ignore, dirs_exist_ok=True)


def run(mutation: Mutation, timeout: int = 900) -> tuple[str, float, str]:
    source = (ROOT / mutation.path).read_text()
    if source.count(mutation.old) != 1:
        return "stale", 0.0, f"snippet found {source.count(mutation.old)} times in {mutation.path}"
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        _copy_tree(tree)
        (tree / mutation.path).write_text(source.replace(mutation.old, mutation.new))
        env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
        start = time.time()
        try:
            out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-m", "not slow", "-p", "no:randomly",
                                  *mutation.tests], cwd=tree, env=env, capture_output=True, text=True,
                                 timeout=timeout)
        except subprocess.TimeoutExpired:
            return "timeout", time.time() - start, ""
        tail = (out.stdout + out.stderr).strip().splitlines()[-1:] or [""]
        return ("caught" if out.returncode != 0 else "survived"), time.time() - start, tail[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="run the mutations whose name contains this")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if args.only in m.name]
    bad = 0
    print(f"{'mutation':<52} {'result':<9} {'time':>7}  last line")
    for m in chosen:
        result, seconds, tail = run(m)
        bad += result != "caught"
        print(f"{m.name:<52} {result:<9} {seconds:>6.0f}s  {tail[:90]}", flush=True)
    print(f"{len(chosen) - bad} of {len(chosen)} mutations caught")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
