"""The retrieval examples run as scripts: DDP (Lightning) and a custom loop on 2 gloo processes.

Both print, per dataset and metric, the multi-process value beside the
single-process value on the whole data; the scripts exit non-zero if they
differ. Both train the same ranker the same way, so they print the same numbers.

The custom loop runs as its own subprocess. The Lightning example runs as
``__main__`` inside the suite's one Lightning DDP launch (tests/_lightning_ddp.py,
the ``lightning_ddp`` fixture, shared with tests/test_lightning.py and
tests/test_distributed_sharded.py), which records its stdout and how it exited.
"""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.distributed


@pytest.fixture(scope="module")
def outputs(request):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    name = "retrieval_custom_loop.py"
    proc = subprocess.Popen([sys.executable, str(ROOT / "examples" / name)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        ddp = request.getfixturevalue("lightning_ddp")["retrieval_ddp"]  # while the custom loop runs
        text, _ = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"examples/{name} did not finish in 240 s")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, f"examples/{name} failed:\n{text[-4000:]}"
    assert ddp["exit"] is None, f"examples/retrieval_ddp.py failed: {ddp['exit']}\n{ddp['stdout'][-4000:]}"
    return {name: text, "retrieval_ddp.py": ddp["stdout"]}


def _table(text: str) -> dict:
    rows = [line.split() for line in text.splitlines() if line.startswith("val/")]
    return {row[0]: [float(x) for x in row[1:]] for row in rows}


def test_ddp_example_logs_the_single_process_values(outputs):
    table = _table(outputs["retrieval_ddp.py"])
    assert set(table) == {f"val/{d}/{m}" for d in ("web", "news") for m in ("ndcg@10", "map")}
    for key, (ddp, single, mean_of_ranks, peer) in table.items():
        assert ddp == pytest.approx(single, abs=1e-8), key
        assert peer == pytest.approx(single, abs=1e-5), f"{key}: torchmetrics' independent value differs"
        assert abs(mean_of_ranks - single) > 1e-4, f"{key}: shards too easy to tell the reduction apart"


def test_custom_loop_example_matches_single_process_and_the_ddp_example(outputs):
    table = _table(outputs["retrieval_custom_loop.py"])
    ddp = _table(outputs["retrieval_ddp.py"])
    for key, (rank0, rank1, single) in table.items():
        assert rank0 == rank1 == pytest.approx(single, abs=1e-12), key
        assert single == pytest.approx(ddp[key][1], abs=1e-6), key
