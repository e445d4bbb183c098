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
import concurrent.futures
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
             '"min": torch.minimum,', '"min": torch.maximum,', ("tests/test_laws.py", "-k", "min-nan-ignore")),
    Mutation("state: fold drops the last rank", "fmetrics/state.py",
             "return functools.reduce(merge, states)", "return functools.reduce(merge, states[:-1])",
             ("tests/test_checker.py", "tests/test_core.py")),
    Mutation("metric: chunk append keeps only the new chunks", "fmetrics/metric.py",
             "return state_lib.join_chunks(old, new)", "return tuple(new)", ("tests/test_core_v2.py",)),
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
             ("tests/test_validation_counters.py", "-k", "distributed")),
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
    # ---- core: the law checker's reference law, a collection's shared finalize
    Mutation("testing: reference law never compares", "fmetrics/testing.py",
             "        assert_values_close(c.expected, want, c.ref_rtol, c.ref_atol, \"value vs reference\")",
             "        pass", ("tests/test_checker.py",)),
    # ---- adapter
    Mutation("adapter: forward forgets the accumulated state", "adapters/torch_metric.py",
             "self._set_state(m.merge(acc, state_lib.tree_map(torch.Tensor.detach, batch)))",
             "self._set_state(state_lib.tree_map(torch.Tensor.detach, batch))",
             ("tests/test_adapter.py", "-k", "forward")),
    # ---- aggregation: a lost counter (merge keeps the larger NaN count instead of the sum)
    Mutation("aggregation: mean merge loses NaN counts", "fmetrics/aggregation/mean.py",
             'tags = MeanState(weighted_sum="sum", weight="sum", nan_count="sum")',
             'tags = MeanState(weighted_sum="sum", weight="sum", nan_count="max")',
             ("tests/test_validation_counters.py", "-k", "mean and not distributed")),
    # ---- classification: swapped averages
    Mutation("classification: weighted average by predictions", "fmetrics/classification/_reduce.py",
             "        weights = tp + fn\n", "        weights = tp + fp\n",
             ("tests/test_classification_counts.py", "-k", "multiclass_vs_sklearn and weighted")),
    # ---- regression: accumulator dtype
    Mutation("regression: float32 accumulator", "fmetrics/regression/_elementwise.py",
             "return ElementwiseState(torch.zeros(num_outputs, dtype=accum_dtype()), z, z.clone(), z.clone())",
             "return ElementwiseState(torch.zeros(num_outputs, dtype=torch.float32), z, z.clone(), z.clone())",
             ("tests/test_regression_stability.py", "tests/test_regression_core_v2.py")),
    # ---- retrieval: off-by-one top-k, wrong tie rule
    Mutation("retrieval: top-k cut one too late", "fmetrics/retrieval/_base.py",
             "return True if top_k is None else r.rank < top_k", "return True if top_k is None else r.rank <= top_k",
             ("tests/test_laws.py", "-k", "retrieval-precision-top4")),
    Mutation("retrieval: ties broken optimistically (general sort)", "fmetrics/retrieval/_ranking.py",
             "torch.cat(preds), torch.cat(indexes), last=t > 0)", "torch.cat(preds), torch.cat(indexes), last=t <= 0)",
             ("tests/test_retrieval.py", "-k", "tie or sort")),
    # ---- wrappers: the running window's shift, the bootstrap's draw derivation
    Mutation("wrappers: running window keeps the oldest update", "fmetrics/wrappers/running.py",
             "return RunningState(tuple(state.slots[1:]) + (step,))",
             "return RunningState(tuple(state.slots[:-1]) + (step,))",
             ("tests/test_registry.py", "-k", "running")),
    Mutation("wrappers: bootstrap replicate salt off by one", "fmetrics/wrappers/_draws.py",
             "salt = mix((torch.arange(groups, dtype=torch.int64, device=sample_hash.device) + 1 + first // 4) * _GOLDEN)",
             "salt = mix((torch.arange(groups, dtype=torch.int64, device=sample_hash.device) + first // 4) * _GOLDEN)",
             ("tests/test_wrappers_draws.py",)),
    # ---- text, image, audio, detection, segmentation
    Mutation("text: BLEU brevity penalty inverted", "fmetrics/text/bleu.py",
             "bp = 1.0 if c >= r else (math.exp(1 - r / c) if c > 0 else 0.0)",
             "bp = 1.0 if c >= r else (math.exp(1 - c / r) if c > 0 else 0.0)",
             ("tests/test_text_parity.py", "-k", "bleu")),
    Mutation("image: PSNR-B blocking effect per pixel, not per image", "fmetrics/image/psnr.py",
             "mse_b = state.sse / state.count + state.bef / state.images",
             "mse_b = state.sse / state.count + state.bef / state.count",
             ("tests/test_laws.py", "-k", "psnrb")),
    Mutation("audio: SNR in amplitude dB (20 log10)", "fmetrics/audio/snr.py",
             "return 10 * torch.log10((num.double() + eps) / (den.double() + eps))",
             "return 20 * torch.log10((num.double() + eps) / (den.double() + eps))",
             ("tests/test_audio_parity.py", "-k", "snr_family")),
    Mutation("detection: box area with the +1 pixel convention", "fmetrics/detection/_boxes.py",
             "return (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])",
             "return (b[..., 2] - b[..., 0] + 1) * (b[..., 3] - b[..., 1] + 1)",
             ("tests/test_laws.py", "-k", "iou-default")),
    Mutation("segmentation: dice numerator without the 2", "fmetrics/segmentation/overlap.py",
             "        return 2 * inter, ps + ts, ts\n", "        return inter, ps + ts, ts\n",
             ("tests/test_segmentation_parity.py", "-k", "dice")),
    Mutation("segmentation: generalized dice numerator without the 2", "fmetrics/segmentation/overlap.py",
             "num = 2.0 * inter.to(torch.float64) * w", "num = 1.0 * inter.to(torch.float64) * w",
             ("tests/test_laws.py", "-k", "gdice-index")),
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
        # pytest: 1 = tests failed (caught), 0 = all passed; 5 = no test selected, 2-4 = an error of the run
        result = {0: "survived", 1: "caught", 5: "no tests"}.get(out.returncode, f"error {out.returncode}")
        return result, time.time() - start, tail[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="run the mutations whose name contains this")
    parser.add_argument("--jobs", type=int, default=1, help="mutations run at once (default 1)")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if args.only in m.name]
    bad = 0
    print(f"{'mutation':<52} {'result':<9} {'time':>7}  last line")
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for m, (result, seconds, tail) in zip(chosen, pool.map(run, chosen)):
            bad += result != "caught"
            print(f"{m.name:<52} {result:<9} {seconds:>6.0f}s  {tail[:90]}", flush=True)
    print(f"{len(chosen) - bad} of {len(chosen)} mutations caught")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
