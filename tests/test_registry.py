"""Every public factory the package ships is in the law-suite registry."""
import importlib
import inspect

import pytest

import fmetrics
from fmetrics import wrappers
from tests.cases import all_cases

# every domain the package ships (fmetrics.DOMAINS lists them in lookup order), then the wrappers
DOMAINS = (*(importlib.import_module(f"fmetrics.{d}") for d in fmetrics.DOMAINS), wrappers)
# the core's public factories (collection; from_output, behind Metric.from_output): cases in tests/cases/core.py
CORE = (importlib.import_module("fmetrics.collection"), importlib.import_module("fmetrics.metric"))


def _factories():
    out = {}
    for module in (*DOMAINS, *CORE):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) and getattr(obj, "__fmetrics_factory__", False):  # not helpers (pit_permutate)
                out[f"{obj.__module__}.{obj.__qualname__}"] = name
    return out


def test_every_factory_has_a_case():
    covered = {f"{c.factory.__module__}.{c.factory.__qualname__}" for c in all_cases()}
    missing = sorted(name for path, name in _factories().items() if path not in covered)
    assert not missing, f"factories without a law-suite case: {missing}"


def test_domain_factories_are_exported_at_top_level():
    for module in DOMAINS[:-1]:
        for name in module.__all__:
            assert getattr(fmetrics, name) is getattr(module, name), name


def _reference_value(case, seed):
    from fmetrics.testing import concat_inputs

    batches = case.batches(seed)
    value = case.reference(*concat_inputs([b if isinstance(b, tuple) else (b,) for b in batches]))
    canonical = case.check.get("canonical")
    return canonical(value) if canonical else value


def _flat(value):
    import numpy as np
    import torch

    if isinstance(value, dict):
        return np.concatenate([_flat(value[k]) for k in sorted(value)]) if value else np.zeros(0)
    if isinstance(value, (tuple, list)):
        return np.concatenate([_flat(v) for v in value]) if value else np.zeros(0)
    return np.atleast_1d(torch.as_tensor(value).double().cpu().numpy()).reshape(-1)


def test_every_reference_tells_a_broken_metric_apart():
    """A reference that is the same on both seeds (or all NaN) would pass a constant-output metric."""
    import numpy as np

    weak = []
    for case in all_cases():
        if case.reference is None:
            continue
        a, b = _flat(_reference_value(case, 0)), _flat(_reference_value(case, 1))
        if np.all(np.isnan(a)) or (a.shape == b.shape and np.array_equal(a, b, equal_nan=True)):
            weak.append(case.id)
    assert not weak, f"cases whose reference a constant metric would match: {weak}"


def _stream(case, seed):
    """The case's own batches fed one update at a time (the law suite compares one-shot values)."""
    m = case.make()
    batches = [b if isinstance(b, tuple) else (b,) for b in case.batches(seed)]
    return m, batches


def _tolerance(case):
    rtol = case.check.get("reference_rtol", case.check.get("rtol", 1e-6))
    return rtol, case.check.get("reference_atol", case.check.get("atol", 1e-8))


_RUNNING = [c for c in all_cases() if c.factory is wrappers.running and c.reference is not None]


@pytest.mark.parametrize("case", _RUNNING, ids=[c.id for c in _RUNNING])
def test_running_cases_cover_their_window(case):
    """A one-shot value is one update, where a running window never matters: the window's own value is checked."""
    import numpy as np

    from fmetrics.testing import assert_values_close, concat_inputs

    window = case.kwargs["window"]
    for seed in (0, 1):
        m, batches = _stream(case, seed)
        assert len(batches) > window, f"{case.id}: the window must leave batches out"
        s = m.init()
        for b in batches:
            s = m.update(s, *b)
        want = case.reference(*concat_inputs(batches[-window:]))
        assert_values_close(m.finalize(s), want, *_tolerance(case), f"{case.id} (seed {seed})")
        everything = case.reference(*concat_inputs(batches))
        assert not np.allclose(_flat(want), _flat(everything), equal_nan=True), f"{case.id}: window never matters"


def test_min_max_cases_track_their_rounds():
    """Each batch is a round (closed by `min_max_reset`): min / max over the rounds' references, raw of the last."""
    import numpy as np

    from fmetrics.testing import assert_values_close

    cases = [c for c in all_cases() if c.factory is wrappers.min_max and c.reference is not None]
    assert cases
    for case in cases:
        for seed in (0, 1):
            m, batches = _stream(case, seed)
            rounds = [b for b in batches if b[0].shape[0]]  # an empty round has no value (NaN)
            s = m.init()
            for i, b in enumerate(rounds):
                if i:
                    s = wrappers.min_max_reset(m, s)
                s = m.update(s, *b)
            raws = [float(_flat(case.reference(*b)["raw"])[0]) for b in rounds]
            assert not np.isclose(min(raws), max(raws)), f"{case.id}: every round has the same value"
            want = {"raw": raws[-1], "min": min(raws), "max": max(raws)}
            assert_values_close(m.finalize(s), want, *_tolerance(case), f"{case.id} (seed {seed})")
