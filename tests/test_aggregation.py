"""Aggregation metrics: NaN policies, bad input, and parity with torchmetrics' aggregators."""
import warnings

import numpy as np
import pytest
import torch
import torchmetrics

import fmetrics as fm

NAN = float("nan")


def _stream(seed=0):
    # 1-D values: torchmetrics' CatMetric cannot join a NaN-filtered (flattened) 2-D batch with an unfiltered one
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(n, generator=g) for n in (5, 1, 8)]
    xs[1][0] = NAN
    xs[2][3] = NAN
    return xs


def _run(metric, xs, *extra):
    s = metric.init()
    for x in xs:
        s = metric.update(s, x, *extra)
    return metric.finalize(s)


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (fm.sum, torchmetrics.SumMetric),
        (fm.mean, torchmetrics.MeanMetric),
        (fm.min, torchmetrics.MinMetric),
        (fm.max, torchmetrics.MaxMetric),
        (fm.cat, torchmetrics.CatMetric),
    ],
)
@pytest.mark.parametrize("strategy", ["ignore", "disable", 0.5])
def test_matches_torchmetrics(ours, theirs, strategy):
    xs = _stream()
    ref = theirs(nan_strategy=strategy)
    for x in xs:
        ref.update(x.clone())
    want = ref.compute()
    got = _run(ours(nan_strategy=strategy), xs)
    torch.testing.assert_close(got.double().reshape(-1), want.double().reshape(-1), equal_nan=True, rtol=1e-6, atol=1e-6)


def test_weighted_mean_matches_numpy_and_drops_nan_pairs():
    x = torch.tensor([1.0, 2.0, NAN, 4.0])
    w = torch.tensor([1.0, NAN, 2.0, 3.0])
    got = fm.mean(nan_strategy="ignore")(x, w)
    keep = np.array([True, False, False, True])
    want = np.average(x.numpy()[keep], weights=w.numpy()[keep])  # (1*1 + 4*3) / (1 + 3)
    assert got.item() == pytest.approx(want) == pytest.approx(13 / 4)


def test_mean_scalar_weight_broadcasts():
    assert fm.mean()(torch.tensor([2.0, 4.0]), 3.0).item() == pytest.approx(3.0)


def test_error_policy_raises_at_finalize_with_count_and_keeps_state():
    m = fm.mean(nan_strategy="error")
    s = m.update(m.init(), torch.tensor([1.0, NAN, NAN, 3.0]))  # no raise in update: no host sync
    with pytest.raises(ValueError, match="mean: 2 input entries broke the rule: values must not be NaN"):
        m.finalize(s)
    assert s.weighted_sum.item() == 4.0 and s.weight.item() == 2.0  # valid entries kept


def test_warn_policy_warns_at_finalize():
    m = fm.sum()  # default "warn", as torchmetrics
    s = m.update(m.init(), torch.tensor([1.0, NAN]))
    with pytest.warns(UserWarning, match="sum: 1 input entry broke the rule"):
        assert m.finalize(s).item() == 1.0


def test_ignore_policy_is_silent():
    m = fm.max(nan_strategy="ignore")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert m(torch.tensor([NAN, -2.0])).item() == -2.0


def test_disable_propagates_nan():
    assert torch.isnan(fm.mean(nan_strategy="disable")(torch.tensor([1.0, NAN])))


def test_empty_results_follow_torchmetrics():
    assert torch.isnan(fm.mean().finalize(fm.mean().init()))
    assert fm.max().finalize(fm.max().init()).item() == -float("inf")
    assert fm.min().finalize(fm.min().init()).item() == float("inf")
    assert fm.sum().finalize(fm.sum().init()).item() == 0.0
    assert fm.cat().finalize(fm.cat().init()).numel() == 0


def test_float64_accumulation_does_not_drift():
    # 2**24 + 1 is not representable in float32; float32 running sums lose the +1s.
    m = fm.sum()
    s = m.init()
    big = torch.tensor([2.0**24], dtype=torch.float32)
    s = m.update(s, big)
    for _ in range(10):
        s = m.update(s, torch.ones(1, dtype=torch.float32))
    assert m.finalize(s).item() == 2.0**24 + 10


@pytest.mark.parametrize("factory", [fm.sum, fm.mean, fm.min, fm.max, fm.cat])
def test_bad_policy_is_a_clear_error(factory):
    with pytest.raises(ValueError, match=f"{factory.__name__}: argument `nan_strategy` expected one of"):
        factory(nan_strategy="drop")


def test_bad_weight_shape_leaves_state_intact():
    m = fm.mean()
    s = m.update(m.init(), torch.tensor([1.0, 3.0]))
    with pytest.raises(ValueError, match=r"mean: argument `weight` expected a shape broadcastable to value's \(2,\)"):
        m.update(s, torch.tensor([1.0, 2.0]), torch.ones(3))
    assert m.finalize(s).item() == 2.0


def test_non_tensor_value_is_a_clear_error():
    with pytest.raises(ValueError, match="sum: argument `value` expected a tensor or a number, got str"):
        fm.sum()("3")


def test_python_numbers_are_accepted():
    m = fm.mean()
    s = m.update(m.update(m.init(), 1.0), 2)
    assert m.finalize(s).item() == 1.5


def test_nan_count_is_exact_with_infinities():
    x = torch.tensor([float("inf"), NAN, -float("inf"), 1.0, NAN])
    m = fm.max(nan_strategy="error")
    s = m.update(m.init(), x)
    assert s.nan_count.item() == 2  # hand count: two NaNs; the infinities are numbers
    assert s.value.item() == float("inf")
    with pytest.raises(ValueError, match="max: 2 input entries broke the rule"):
        m.finalize(s)
    assert fm.min(nan_strategy="ignore")(x).item() == -float("inf")


def test_nan_count_of_half_precision_and_integer_inputs():
    h = torch.tensor([1.0, NAN, 2.0], dtype=torch.float16)
    assert fm.sum(nan_strategy="ignore").update(fm.sum().init(), h).nan_count.item() == 1
    assert fm.sum(nan_strategy="error")(torch.arange(4)).item() == 6.0


# ---------------------------------------------------------------------- core v2: docs, ownership, metadata

def test_every_aggregation_example_runs_and_every_factory_documents_itself():
    from fmetrics import aggregation
    from tests import _doctests

    failed, ran, missing = _doctests.run(aggregation)
    assert not missing, f"factories without Args/Returns/Example: {missing}"
    assert ran >= len(aggregation.__all__) and failed == 0, f"{failed} doctest examples failed (see the output)"


def test_cat_state_does_not_alias_the_callers_buffer():
    m = fm.cat()
    buf = torch.arange(4.0)
    s = m.update(m.init(), buf)
    buf.fill_(-1.0)
    assert torch.equal(m.finalize(s), torch.arange(4.0))


def test_aggregation_states_hold_no_autograd_graph():
    w = torch.ones((), requires_grad=True)
    for m in (fm.sum(), fm.mean(), fm.max(), fm.cat()):
        s = m.init()
        for i in range(40):
            s = m.update(s, torch.randn(8) * w)
        leaves = [x for x in torch.utils._pytree.tree_leaves(s) if isinstance(x, torch.Tensor)]
        assert all(x.grad_fn is None for x in leaves), m.name


def test_empty_mean_is_nan_with_a_warning_and_empty_sum_is_zero():
    with pytest.warns(UserWarning, match="no values were seen"):
        assert torch.isnan(fm.mean()(torch.zeros(0)))
    assert fm.sum()(torch.zeros(0)) == 0


@pytest.mark.parametrize("strategy", ["ignore", "disable", 0.5])
@pytest.mark.parametrize("factory", [fm.sum, fm.mean])
def test_large_inputs_sum_in_chunks_to_the_exact_value(monkeypatch, factory, strategy):
    """From `_nan.LARGE` entries a CPU input is summed in `_nan.CHUNK`-entry parts; the value is the exact
    (math.fsum) one up to float64 rounding, NaN policies included. LARGE / CHUNK are lowered so the case is small;
    a spy checks the chunked path ran."""
    from fmetrics.aggregation import _nan
    import math

    monkeypatch.setattr(_nan, "LARGE", 1000)
    monkeypatch.setattr(_nan, "CHUNK", 64)
    calls = []
    split = torch.Tensor.split
    monkeypatch.setattr(torch.Tensor, "split", lambda self, *a, **k: calls.append(a) or split(self, *a, **k))
    g = torch.Generator().manual_seed(3)
    xs = [1e4 + torch.randn(40, 37, generator=g), torch.randn(999, generator=g), torch.randn(3000, generator=g)]
    xs[0][5, 5] = NAN
    got = _run(factory(nan_strategy=strategy), xs)
    # the 1480-entry batch (twice, but once with "disable": its screening sum finds the NaN) and the 3000-entry
    # one are chunked, not the 999-entry one
    assert calls == [(64,)] * (2 if strategy == "disable" else 3)
    values = [float(v) for x in xs for v in x.double().reshape(-1)]
    if strategy == "disable":
        assert math.isnan(got)
        return
    kept = [0.5 if math.isnan(v) else v for v in values] if strategy == 0.5 else [v for v in values if v == v]
    expected = math.fsum(kept) / (len(kept) if factory is fm.mean else 1)
    assert got.dtype == torch.float64
    assert abs(float(got) - expected) <= 1e-12 * abs(expected)


def test_large_input_chunks_keep_the_traced_path_whole():
    """Under torch.compile the chunk loop is not taken (it would unroll): the update traces as one sum."""
    from fmetrics.aggregation import _nan

    x = torch.randn(_nan.LARGE + 5)
    seen = []

    def spy(gm, example_inputs):
        seen.append(sum(1 for n in gm.graph.nodes if n.op == "call_function"))
        return gm

    metric = fm.sum(nan_strategy="disable")
    got = torch.compile(metric.update, backend=spy, fullgraph=True)(metric.init(), x)
    assert seen and seen[0] < 8
    assert abs(float(got.total) - float(x.double().sum())) <= 1e-9 * float(x.double().abs().sum())
