"""Constants an update needs live on the state's device, built there once: no host-to-device copy per update
(a pageable copy synchronizes a GPU). Checked on the CPU with the meta device standing in for the GPU."""
import math

import pytest
import torch

import fmetrics
from fmetrics.wrappers import _draws
from fmetrics.wrappers._rows import constants_on, init_on


def test_constant_init_leaves_are_built_on_the_device_not_copied(monkeypatch):
    tree = (torch.zeros(3, dtype=torch.int64), torch.full((2,), math.inf), torch.full((2, 2), float("nan")),
            torch.empty(0, 4), ())
    copies = []
    real_to = torch.Tensor.to
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **k: copies.append(a) or real_to(self, *a, **k))
    out = constants_on(tree, torch.device("meta"))
    assert copies == []
    assert [(x.device.type, x.dtype, tuple(x.shape)) for x in out[:4]] == [
        ("meta", torch.int64, (3,)), ("meta", torch.float32, (2,)), ("meta", torch.float32, (2, 2)),
        ("meta", torch.float32, (0, 4))]
    assert out[4] == ()
    varied = constants_on((torch.tensor([1.0, 2.0]),), torch.device("meta"))  # not a constant: copied
    assert varied[0].device.type == "meta" and len(copies) == 1


def test_init_on_is_init_off_cuda():
    m = fmetrics.mean()
    assert all(torch.equal(a, b) for a, b in zip(init_on(m, None), m.init()))
    assert all(torch.equal(a, b) for a, b in zip(init_on(m, torch.device("cpu")), m.init()))


def test_bootstrap_count_table_built_on_a_device_matches_the_host_table():
    assert torch.equal(_draws._counts16_built_on("cpu"), _draws._COUNTS16)
    assert _draws.counts16(torch.device("cpu")) is _draws._COUNTS16
    meta = torch.device("meta")
    try:
        assert _draws.counts16(meta) is _draws.counts16(meta)  # built once per device
    finally:
        _draws._COUNTS16_ON.pop(meta, None)


def test_binned_thresholds_cached_per_device_and_dtype():
    from fmetrics.classification.curves._scores import Scores

    s = Scores("t", "binary", 1, torch.linspace(0, 1, 5), None, True, torch.linspace(0, 1, 5))
    meta = torch.device("meta")
    a = s._thresholds_on(meta, torch.float64)
    assert a.device == meta and a.dtype == torch.float64 and a is s._thresholds_on(meta, torch.float64)
    assert s._thresholds_on(meta, torch.float32) is not a
    host = s._thresholds_on(torch.device("cpu"), torch.float32)
    assert torch.equal(host, s.sorted_thresholds) and not s._on_device.get((torch.device("cpu"), torch.float32))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_wrapped_updates_do_not_sync_on_cuda():
    x = torch.rand(64, device="cuda")
    for m in (fmetrics.wrappers.running(fmetrics.mean(), window=3),
              fmetrics.wrappers.bootstrap(fmetrics.mean(), num_samples=8),
              fmetrics.binary_auroc(thresholds=10)):
        args = (x,) if "auroc" not in m.name else (x, (x > 0.5).long())
        s = m.update(m.init("cuda"), *args)
        torch.cuda.set_sync_debug_mode("error")
        try:
            m.update(s, *args)
        finally:
            torch.cuda.set_sync_debug_mode(0)
