"""A newcomer's first hour (issue 34): import time, install hints, the benchmark's exit code, docs hygiene,
the forgotten reassignment."""
from __future__ import annotations

import subprocess
import sys
import textwrap

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def _fresh(code: str) -> str:
    """Runs ``code`` in a fresh interpreter at the repository root; its stdout."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_import_adds_little_to_torch():
    """``import fmetrics`` adds <= 0.2 s to ``import torch`` (it imported torch._dynamo: +1.6-2.7 s)."""
    out = _fresh("""
        import sys, time
        import torch
        t = time.perf_counter()
        import fmetrics
        print(time.perf_counter() - t, "torch._dynamo" in sys.modules)
    """).split()
    assert out[1] == "False", "import fmetrics imported torch._dynamo"
    assert float(out[0]) <= 0.2, f"import fmetrics took {float(out[0]):.2f} s after import torch"


def test_compiled_update_skips_its_wrapper_when_dynamo_comes_later():
    """torch._dynamo imported after fmetrics still skips `Metric.update`'s frame: growing chunk tuples do not
    recompile a compiled ``cat`` update (without the skip: a recompile per step, then fullgraph's hard failure)."""
    out = _fresh("""
        import torch, fmetrics
        from torch._dynamo.testing import CompileCounter
        m, counter = fmetrics.cat(), CompileCounter()
        update = torch.compile(m.update, backend=counter, fullgraph=True)
        s = m.init()
        for n in range(3, 15):
            s = update(s, torch.rand(n))
        print(counter.frame_count, m.finalize(s).numel())
    """).split()
    assert int(out[0]) <= 4 and out[1] == str(sum(range(3, 15)))
