"""Setup for the pytest-benchmark suites: ``pytest benchmarks/ --benchmark-only``.

They stay out of the default test run (``testpaths = ["tests"]``). Set
``FMETRICS_BENCH_THREADS=N`` to pin torch's thread count. Without
pytest-benchmark installed the suites are not collected.
"""
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

if os.environ.get("FMETRICS_BENCH_THREADS"):
    torch.set_num_threads(int(os.environ["FMETRICS_BENCH_THREADS"]))

try:
    import pytest_benchmark  # noqa: F401
except ImportError:
    collect_ignore_glob = ["test_*.py"]
    sys.stderr.write("benchmarks/: pytest-benchmark is not installed; the suites are skipped\n")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
