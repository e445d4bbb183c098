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
