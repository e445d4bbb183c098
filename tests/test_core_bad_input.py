"""Issue 28, core and adapters: bad input gives a clear error with the state intact, or a defined value.

* states load back with `torch.load`'s defaults (``weights_only=True``), one metric of every domain;
* a dtype cast of `adapters.TorchMetric` never turns a value into inf (torchmetrics' value);
* a chunk-only state knows its device before any chunk exists;
* `cat` rejects an update whose trailing shape differs from the earlier ones;
* wrappers run the wrapped metric's eager check on the rows as given, before weighting them;
* clear errors: `finalize()` without a state, a state of another metric, torchmetrics missing.
"""
import importlib
import io
import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
import torch.utils._pytree as pytree

import fmetrics as fm
import fmetrics.wrappers as W
from fmetrics.testing import assert_values_close

DOMAINS = ("aggregation", "classification", "regression", "retrieval", "text", "image", "audio", "detection",
           "segmentation", "clustering", "nominal", "shape")


def _case(domain):
    from tests.cases import all_cases

    for case in all_cases():
        if case.factory.__module__.startswith(f"fmetrics.{domain}.") and len(case.batches(0)) >= 2:
            return case
    pytest.skip(f"no case of {domain}")


def _same(a, b):
    fa, sa = pytree.tree_flatten(a)
    fb, sb = pytree.tree_flatten(b)
    assert sa == sb and type(a) is type(b)
    for x, y in zip(fa, fb):
        assert x.dtype == y.dtype and torch.equal(x, y)


def _load(state):
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf)  # torch's defaults: weights_only=True


def _roundtrip(m, batches):
    s = m.update(m.init(), *batches[0])
    loaded = _load(s)
    _same(loaded, s)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_values_close(m.finalize(m.update(loaded, *batches[1])), m.finalize(m.update(s, *batches[1])),
                            0, 0, "loaded state, updated")


@pytest.mark.parametrize("domain", DOMAINS)
def test_a_state_of_every_domain_loads_with_torch_defaults(domain):
    case = _case(domain)
    _roundtrip(case.make(), case.batches(0))


def test_wrapper_collection_invalid_and_empty_chunk_states_load_with_torch_defaults():
    x = [(torch.tensor([1.0, 2.0, 3.0]),), (torch.tensor([4.0, 5.0]),)]
    _roundtrip(W.bootstrap(fm.mean(), num_samples=5), x)
    _roundtrip(W.grouped(fm.mean(), num_groups=2), [(torch.tensor([0, 1, 1]), *x[0]), (torch.tensor([1, 0]), *x[1])])
    coll = fm.collection({"mean": fm.mean(), "max": fm.max(), "cat": fm.cat()})
    _roundtrip(coll, x)
    acc = fm.multiclass_accuracy(num_classes=3)  # its state nests the deferred `Invalid` record
    with fm.validation.mode("deferred"):
        s = acc.update(acc.init(), torch.tensor([0, 1]), torch.tensor([0, 7]))
    assert any(isinstance(v, fm.validation.Invalid) for v in s)
    _same(_load(s), s)
    sp = fm.spearman_corrcoef()  # chunk fields only: the empty chunks carry the device
    _same(_load(sp.init()), sp.init())


@pytest.mark.slow
def test_a_state_loads_in_a_fresh_process_before_its_domain_is_imported(tmp_path):
    m = fm.multiclass_accuracy(num_classes=3, average="micro")
    torch.save(m.update(m.init(), torch.tensor([0, 2, 1]), torch.tensor([0, 1, 1])), tmp_path / "s.pt")
    code = ("import sys, torch, fmetrics; assert 'fmetrics.classification' not in sys.modules; "
            f"s = torch.load({str(tmp_path / 's.pt')!r}); "
            "print(fmetrics.multiclass_accuracy(num_classes=3, average='micro').finalize(s).item())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    from sklearn.metrics import accuracy_score

    assert math.isclose(float(out.stdout), accuracy_score([0, 1, 1], [0, 2, 1]))


def test_loading_builds_only_fmetrics_state_types():
    with pytest.raises(TypeError, match="not an fmetrics state type"):
        fm.state.rebuild("os", "system", ("true",))
    with pytest.raises(TypeError, match="not a NamedTuple state type"):
        fm.state.rebuild("fmetrics.state", "to_device", ())


# ---------------------------------------------------------------- dtype casts of the adapter


@pytest.mark.parametrize("cast", ["half", "to_float16", "set_dtype"])
def test_a_cast_adapter_never_turns_a_value_into_inf(cast):
    torchmetrics = pytest.importorskip("torchmetrics")
    from adapters import TorchMetric

    ref = torchmetrics.SumMetric().half()  # torchmetrics' value: 100000
    ref.update(torch.ones(100_000))
    m = TorchMetric(fm.sum())
    m = m.half() if cast == "half" else m.to(torch.float16) if cast == "to_float16" else m.set_dtype(torch.float16)
    m.update(torch.ones(100_000))
    with pytest.warns(UserWarning, match="does not fit torch.float16"):
        got = m.compute()
    assert got.item() == ref.compute().item() == 100_000 and got.dtype == torch.float64
    small = TorchMetric(fm.mean()).half()  # a value that fits still follows the requested dtype
    small.update(torch.tensor([1.0, 2.0]))
    assert small.compute().dtype == torch.float16 and small.compute().item() == 1.5


# ---------------------------------------------------------------- chunk-only states and devices


@pytest.mark.parametrize("make", [fm.spearman_corrcoef, fm.kendall_rank_corrcoef, fm.binary_auroc,
                                  fm.binary_average_precision, fm.cat])
def test_a_fresh_chunk_state_rejects_an_input_on_another_device(make):
    m = make()
    x, y = torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1])
    args = (x,) if make is fm.cat else (x, y if "auroc" in m.name or "precision" in m.name else y.float())
    s = m.init()
    with pytest.raises(ValueError, match=f"{m.name}: an input is on meta but the state is on cpu"):
        m.update(s, *(a.to("meta") for a in args))
    assert_values_close(m.finalize(m.update(s, *args)), m(*args), 0, 0, "the state after the rejected update")
    on_meta = m.update(m.init("meta"), *(a.to("meta") for a in args))  # a state placed on meta accepts it
    assert on_meta[0][0].device.type == "meta"
    assert m.merge(m.init(), m.init()) == m.init() and len(pytree.tree_leaves(m.init())) >= 1


def test_chunk_device_marker_moves_stacks_and_merges():
    m = fm.spearman_corrcoef()
    s = fm.to_device(m.init(), "meta")
    assert fm.state.device_of(s).type == "meta"
    stacked = fm.state.stack([m.init(), m.init()])
    assert len(fm.state.unstack(stacked)) == 2
    x, y = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 3.0, 2.0])
    merged = m.merge(m.init(), m.update(m.init(), x, y))
    assert_values_close(m.finalize(merged), torch.tensor(0.5, dtype=torch.float64), 0, 1e-12, "spearman")


# ---------------------------------------------------------------- cat: one trailing shape


def test_cat_rejects_an_update_of_another_trailing_shape_with_the_state_intact():
    m = fm.cat()
    s = m.update(m.init(), torch.arange(4.0))
    with pytest.raises(ValueError, match=r"cat: an update gave a chunk of shape \(4, 2\) where the earlier updates "
                                         r"gave \(4,\)"):
        m.update(s, torch.ones(4, 2))
    got = m.finalize(m.update(s, torch.tensor([9.0])))
    assert torch.equal(got, torch.tensor([0.0, 1.0, 2.0, 3.0, 9.0]))  # torch.cat of the accepted batches


# ---------------------------------------------------------------- wrappers check the rows as given


def test_bootstrap_raises_at_once_quoting_the_one_nan_and_keeps_its_state():
    m = W.bootstrap(fm.mean_squared_error(), num_samples=8, seed=3)
    p, t = torch.tensor([1.0, 2.0, 4.0]), torch.tensor([1.0, 3.0, 2.0])
    s = m.update(m.init(), p, t)
    with pytest.raises(ValueError, match="mean_squared_error: preds must be finite .*found nan"):
        m.update(s, torch.tensor([float("nan"), 1.0]), torch.tensor([0.0, 1.0]))
    good = (torch.tensor([0.5, 1.0]), torch.tensor([0.0, 1.0]))
    assert_values_close(m.finalize(m.update(s, *good)), m.finalize(m.update(m.update(m.init(), p, t), *good)),
                        0, 0, "state after the rejected batch")


def test_grouped_raises_at_once_and_keeps_its_state():
    m = W.grouped(fm.mean_squared_error(), num_groups=2)
    g, p, t = torch.tensor([0, 1, 1, 0]), torch.tensor([1.0, 2.0, 4.0, 0.0]), torch.tensor([1.0, 3.0, 2.0, 2.0])
    s = m.update(m.init(), g, p, t)
    with pytest.raises(ValueError, match="mean_squared_error: preds must be finite .*found nan"):
        m.update(s, torch.tensor([1]), torch.tensor([float("nan")]), torch.tensor([0.0]))
    want = [np.mean((p[g == k] - t[g == k]).numpy() ** 2) for k in (0, 1)]  # per group, by hand: 2.0 and 2.5
    assert want == [2.0, 2.5]
    assert torch.equal(m.finalize(s), torch.tensor(want, dtype=torch.float64))


def test_multioutput_checks_each_output_before_weighting():
    m = W.multioutput(fm.multiclass_accuracy(num_classes=3, average="micro"), num_outputs=2)
    p, t = torch.tensor([[0, 1], [2, 2]]), torch.tensor([[0, 1], [1, 2]])
    s = m.update(m.init(), p, t)
    with pytest.raises(ValueError, match=r"multiclass_accuracy: target values must be in \[0, 3\); found 7"):
        m.update(s, torch.tensor([[0, 1]]), torch.tensor([[0, 7]]))
    from sklearn.metrics import accuracy_score

    want = [accuracy_score(t[:, k], p[:, k]) for k in (0, 1)]  # 0.5 and 1.0
    assert torch.equal(m.finalize(s), torch.tensor(want, dtype=torch.float64))


# ---------------------------------------------------------------- clear errors


def test_finalize_without_a_state_says_what_it_takes():
    m = fm.mean()
    with pytest.raises(TypeError, match=r"mean: finalize takes one argument, the state from mean.init\(\)"):
        m.finalize()


def test_a_state_of_another_metric_is_named_as_such():
    acc, mean = fm.multiclass_accuracy(num_classes=3), fm.mean()
    x = (torch.tensor([0]), torch.tensor([0]))
    for call in (lambda: acc.update(mean.init(), *x), lambda: acc.merge(acc.init(), mean.init()),
                 lambda: acc.finalize(mean.init())):
        with pytest.raises(TypeError, match="multiclass_accuracy: the state passed to .* is a MeanState, .* "
                                            "came from another metric"):
            call()


def test_a_state_of_another_configuration_names_the_shapes():
    """Same state type, other option (num_classes 4 vs 3: a 4x3 vs 3x3 count table): a TypeError, not torch's."""
    three, four = fm.multiclass_accuracy(num_classes=3), fm.multiclass_accuracy(num_classes=4)
    s = three.update(three.init(), torch.tensor([0, 2]), torch.tensor([1, 2]))
    with pytest.raises(TypeError, match=r"multiclass_accuracy: the state passed to merge has fields of other shapes "
                                        r"than this metric's \(\(12,\) for \(9,\)\): it came from another configuration"):
        three.merge(s, four.init())
    assert torch.equal(three.finalize(s), three(torch.tensor([0, 2]), torch.tensor([1, 2])))  # s still usable


def test_a_missing_torchmetrics_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchmetrics", None)
    monkeypatch.delitem(sys.modules, "adapters.torch_metric", raising=False)
    with pytest.raises(ModuleNotFoundError, match="pip install torchmetrics"):
        importlib.import_module("adapters.torch_metric")
    monkeypatch.delitem(sys.modules, "adapters.torch_metric", raising=False)


# ---------------------------------------------------------------- aggregation: what docs/design.md's table says


@pytest.mark.parametrize("name", ["sum", "mean", "min", "max", "cat"])
def test_aggregation_bad_input_behaves_as_documented(name):
    torchmetrics = pytest.importorskip("torchmetrics")
    m = getattr(fm, name)()
    with pytest.raises(ValueError, match=f"{name}: argument `value` expected a tensor or a number, got list"):
        m.update(m.init(), [1.0, 2.0])
    with pytest.raises(ValueError, match=f"{name}: an input is on meta but the state is on cpu"):
        m.update(m.init(), torch.ones(2, device="meta"))
    x = torch.tensor([1.0, float("inf"), 2.0])
    ref = {"sum": torchmetrics.SumMetric, "mean": torchmetrics.MeanMetric, "min": torchmetrics.MinMetric,
           "max": torchmetrics.MaxMetric, "cat": torchmetrics.CatMetric}[name]()
    ref.update(x)
    assert torch.equal(m(x).to(ref.compute().dtype), ref.compute())  # inf is a value, as in torchmetrics
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        empty = m(torch.tensor([]))
    want = {"sum": 0.0, "mean": math.nan, "min": math.inf, "max": -math.inf}
    if name == "cat":
        assert empty.numel() == 0
    else:
        assert torch.equal(empty, torch.tensor(want[name], dtype=torch.float64)) or (name == "mean" and empty.isnan())
    assert bool(caught) == (name == "mean")  # only the undefined mean warns (docs/conventions.md, Empty input)
