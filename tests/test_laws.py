"""The law suite: `check_metric` on every registered metric (DESIGN.md §2).

``pytest --device cuda`` runs it on the GPU, every update under
``torch.cuda.set_sync_debug_mode("error")`` (tests/_device.py, tests/conftest.py).
"""
import pytest

from fmetrics.testing import LAWS, check_metric
from tests._device import DEVICE_BLIND, HOST_INPUT_REASON, on_device
from tests.cases import all_cases

CASES = all_cases()
COMPILE_LAWS = ("compile", "compile epoch")  # ~97% of a case's time: run on the first seed only
EPOCHS: dict = {}  # compiled epochs shared by the cases of one state key on the same data (in this process)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_laws(case, law_device):
    options = dict(case.check)
    skipped = set(LAWS) - set(options.get("laws", LAWS))
    assert not skipped or case.why, f"{case.id}: laws {sorted(skipped)} skipped without a reason"
    if law_device.type != "cpu" and case.make().host_input:
        pytest.skip(HOST_INPUT_REASON)
    if law_device.type != "cpu":  # tracing is host-side and device-blind: the CPU run checks it
        options["laws"] = [law for law in options.get("laws", LAWS) if law not in DEVICE_BLIND]
    for seed in ((0, 1) if law_device.type == "cpu" else (0,)):  # one seed on a device: its syncs are the point
        metric, batches, reference = on_device(case, seed, law_device)
        laws = options.get("laws", LAWS)
        if seed:  # tracing depends on shapes, not values: compiling once (seed 0) keeps CI within its time
            laws = [law for law in laws if law not in COMPILE_LAWS]
        check_metric(metric, batches, reference=reference, seed=seed, epochs=EPOCHS, **{**options, "laws": laws})
