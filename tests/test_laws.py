"""The law suite: `check_metric` on every registered metric (DESIGN.md §2).

``pytest --device cuda`` runs it on the GPU, every update under
``torch.cuda.set_sync_debug_mode("error")`` (tests/_device.py, tests/conftest.py).

Dynamo's traces are most of the suite's time, so the compile laws run on the first seed only, and the
compile epoch law (a static trace, then a dynamic one, over >= 10 updates) runs in the default job on
the first case of each metric (by `Metric.name`). The other cases of that metric (its options) still
trace one compiled update there (the compile law: no graph break, eager values), or share an epoch
compiled for their ``state_key``; `test_compile_epoch_of_the_other_options` (slow) runs their epochs.
"""
import pytest
import torch

from fmetrics.testing import LAWS, check_metric
from tests._device import DEVICE_BLIND, HOST_INPUT_REASON, on_device
from tests.cases import all_cases

CASES = all_cases()
COMPILE_LAWS = ("compile", "compile epoch")  # ~97% of a case's time: run on the first seed only
EPOCHS: dict = {}  # compiled epochs shared by the cases of one state key on the same data (in this process)


def _other_options(cases) -> list:
    """The compiling cases of a metric (by `Metric.name`) after its first case."""
    seen, others = set(), []
    for case in cases:
        metric = case.make()
        if metric.name in seen and "compile epoch" in case.check.get("laws", LAWS) and not metric.host_input:
            others.append(case)
        seen.add(metric.name)
    return others


OTHER_OPTIONS = _other_options(CASES)
_OTHER_IDS = {c.id for c in OTHER_OPTIONS}


def _laws(case) -> list:
    options = dict(case.check)
    skipped = set(LAWS) - set(options.get("laws", LAWS))
    assert not skipped or case.why, f"{case.id}: laws {sorted(skipped)} skipped without a reason"
    return list(options.get("laws", LAWS))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_laws(case, law_device):
    options, laws = dict(case.check), _laws(case)
    if law_device.type != "cpu" and case.make().host_input:
        pytest.skip(HOST_INPUT_REASON)
    if law_device.type != "cpu":  # tracing is host-side and device-blind: the CPU run checks it
        laws = [law for law in laws if law not in DEVICE_BLIND]
    elif case.id in _OTHER_IDS:  # its epoch: test_compile_epoch_of_the_other_options
        laws = [law for law in laws if law != "compile epoch"]
    for seed in ((0, 1) if law_device.type == "cpu" else (0,)):  # one seed on a device: its syncs are the point
        metric, batches, reference = on_device(case, seed, law_device)
        seed_laws = laws
        if seed:  # tracing depends on shapes, not values: compiling once (seed 0) keeps CI within its time
            seed_laws = [law for law in laws if law not in COMPILE_LAWS]
        check_metric(metric, batches, reference=reference, seed=seed, epochs=EPOCHS, **{**options, "laws": seed_laws})


@pytest.mark.slow
@pytest.mark.parametrize("case", OTHER_OPTIONS, ids=[c.id for c in OTHER_OPTIONS])
def test_compile_epoch_of_the_other_options(case):
    """The first seed of `test_laws` as it was before the default job left these cases' compile epochs to
    their metric's first case (module docstring): every law, on the same pieces."""
    metric, batches, reference = on_device(case, 0, torch.device("cpu"))
    report = check_metric(metric, batches, reference=reference, seed=0, epochs=EPOCHS,
                          **{**dict(case.check), "laws": _laws(case)})
    assert "compile epoch" in report.passed
