import gc
import os

import pytest
import torch

# the cores shared among pytest-xdist workers (``-n 2``: one torch thread each; 2 threads without xdist)
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
torch.set_num_threads(max(1, min(2, (os.cpu_count() or 1) // _WORKERS)))


def pytest_addoption(parser):
    parser.addoption(
        "--device", default="cpu", metavar="DEVICE",
        help="device of the law suite (tests/test_laws.py): cpu (default) or cuda[:N]. On cuda every case runs "
             "with its inputs and states on the GPU and every update under "
             "torch.cuda.set_sync_debug_mode('error'); without a GPU those tests skip, saying why.")


def pytest_collection_finish(session):
    """The collector's time halves: the collected cases (hundreds of thousands of objects) move out of its
    reach (`gc.freeze`), and the young generation is collected every 50,000 allocations instead of 700.
    Dynamo's traces in the compile laws allocate heavily; measured over 78 law cases, 8.4 s -> 4.6 s of
    collections."""
    import torch._dynamo.config
    import torch._dynamo.guards

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 10)
    # two costs dynamo adds to each compile for its own logs, ~10% of the law suite: a collection of the young
    # generations after each compile, and timing the new guards after a flush of the CPU caches (~20 ms)
    torch._dynamo.config.run_gc_after_compile = False
    torch._dynamo.guards.profile_guard_manager = lambda *args: 0.0


@pytest.fixture(scope="session")
def law_device(request) -> torch.device:
    """The device of the law suite (``pytest --device cuda``); skips the test where there is none."""
    spelled = request.config.getoption("--device")
    try:
        device = torch.device(spelled)
    except RuntimeError as err:
        raise pytest.UsageError(f"--device {spelled}: {err}") from None
    if device.type not in ("cpu", "cuda"):
        raise pytest.UsageError(f"--device {spelled}: the law suite runs on cpu or cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        pytest.skip(f"--device {spelled}: no CUDA device here (torch.cuda.is_available() is False, torch "
                    f"{torch.__version__}); the CUDA law suite runs on a GPU machine (benchmarks/device_check.sh)")
    return device


@pytest.fixture(scope="session")
def lightning_ddp(tmp_path_factory) -> dict:
    """What tests/_lightning_ddp.py wrote: one Lightning "ddp" launch (2 CPU processes) serving the retrieval
    example, tests/test_lightning.py and tests/test_distributed_sharded.py (importing Lightning costs each
    process ~8 s of CPU, so the suite launches it once).

    Run once per test session: under pytest-xdist the first worker to ask runs it while holding a lock in the
    workers' shared temporary root, and the others read its JSON (or the same failure) from there.
    """
    import json
    import sys

    from filelock import FileLock

    from tests._dist import REPO, run_script

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by the workers of this session (each one's basetemp is a folder in it)
    out = root / "lightning_ddp.json"
    with FileLock(str(out) + ".lock"):
        if not out.is_file():
            try:
                run_script([sys.executable, os.path.join(REPO, "tests", "_lightning_ddp.py"), str(out)],
                           timeout=420)
                if not out.is_file():
                    raise AssertionError("tests/_lightning_ddp.py exited 0 without writing its results")
            except AssertionError as err:
                out.write_text(json.dumps({"error": str(err)}))
        logged = json.loads(out.read_text())
    if "error" in logged:
        pytest.fail(f"the Lightning DDP launch (tests/_lightning_ddp.py) failed:\n{logged['error']}")
    return logged
