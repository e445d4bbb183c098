"""`adapters.TorchMetric` and the core v2 contract (issue 11): recipes, parameters, dtypes, graphs.

* a state dict or merged state from a metric with another recipe raises, naming both recipes;
* the metric's parameters (tensors, networks) follow ``.to()`` and Lightning, are never reset;
* dtype casts (``.to(torch.bfloat16)``, ``.half()``, ``.double()``, ``set_dtype``) never touch the
  state: only the returned value follows the requested dtype (every registered metric, in bf16);
* inputs that require grad leave no autograd graph in the state.
"""
import copy
import gc
import pickle
import weakref
from typing import NamedTuple

import pytest
import torch

import fmetrics as fm
from adapters import TorchMetric
from fmetrics.networks import eval_view
from fmetrics.recipe import factory
from fmetrics.state import merge_fields
from fmetrics.testing import assert_values_close


def _multiclass(seed=0, n=(7, 12, 5), num_classes=5):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(k, num_classes, generator=g).softmax(-1), torch.randint(0, num_classes, (k,), generator=g))
            for k in n]


# ---------------------------------------------------------------- 1. states of another recipe


def _persistent(metric, batches=()):
    w = TorchMetric(metric, persistent=True)
    for b in batches:
        w.update(*b)
    return w


def test_load_state_dict_of_another_configuration_raises_naming_both_recipes():
    src = _persistent(fm.multiclass_accuracy(num_classes=5), _multiclass())
    dst = _persistent(fm.multiclass_accuracy(num_classes=5, ignore_index=0))
    with pytest.raises(ValueError, match=r"belongs to multiclass_accuracy\(num_classes=5\), this metric is "
                                         r"multiclass_accuracy\(num_classes=5, ignore_index=0\)"):
        dst.load_state_dict(src.state_dict())
    dst6 = _persistent(fm.multiclass_accuracy(num_classes=6))
    with pytest.raises(ValueError, match=r"num_classes=5\).*num_classes=6\)"):
        dst6.load_state_dict(src.state_dict())


def test_a_state_dict_without_recipe_of_another_shape_raises_a_clear_error():
    sd = _persistent(fm.multiclass_accuracy(num_classes=5), _multiclass()).state_dict()
    del sd["fm_recipe"]  # e.g. written by hand or by an older version
    dst6 = _persistent(fm.multiclass_accuracy(num_classes=6))
    with pytest.raises(ValueError, match=r"field counts of multiclass_accuracy\(num_classes=6\) expects \(\d+,\), "
                                         r"the incoming state has \(\d+,\)"):
        dst6.load_state_dict(sd)


@pytest.mark.filterwarnings("ignore:The ``compute`` method")
def test_load_state_dict_of_the_same_recipe_restores_the_value():
    data = _multiclass()
    src = _persistent(fm.multiclass_accuracy(num_classes=5), data)
    dst = _persistent(fm.multiclass_accuracy(num_classes=5))
    dst.load_state_dict(src.state_dict())
    assert_values_close(dst.compute(), src.compute(), 0, 0, "loaded")


def test_merge_state_of_another_recipe_raises_naming_both_recipes():
    a = TorchMetric(fm.multiclass_accuracy(num_classes=5))
    b = TorchMetric(fm.multiclass_accuracy(num_classes=5, ignore_index=0))
    for batch in _multiclass():
        b.update(*batch)
    for incoming in (b, b.metric_state):
        with pytest.raises(ValueError, match=r"merge_state: the incoming state belongs to "
                                             r"multiclass_accuracy\(num_classes=5, ignore_index=0\)"):
            a.merge_state(incoming)
    c = TorchMetric(fm.multiclass_accuracy(num_classes=6))
    state = dict(c.metric_state)
    del state["fm_recipe"]
    with pytest.raises(ValueError, match=r"expects \(\d+,\), the incoming state has \(\d+,\)"):
        a.merge_state(state)


# ---------------------------------------------------------------- 2. parameters


class _Weighted(NamedTuple):
    correct: torch.Tensor
    total: torch.Tensor


@factory
def class_weighted_accuracy(*, class_weights: torch.Tensor) -> fm.Metric:
    """Weighted correct / weighted total (weights per target class): the README's example as a parameter."""
    w = class_weights

    def init():
        z = torch.zeros((), dtype=torch.float64, device=w.device)
        return _Weighted(z, z.clone())

    def update(s, preds, target):
        wt = w[target].to(torch.float64)
        hit = (preds.argmax(-1) == target).to(torch.float64)
        return _Weighted(s.correct + (wt * hit).sum(), s.total + wt.sum())

    tags = _Weighted(correct="sum", total="sum")
    return fm.Metric(init=init, update=update, merge=merge_fields(tags), finalize=lambda s: s.correct / s.total,
                     name="class_weighted_accuracy", reductions=tags, higher_is_better=True, bounds=(0.0, 1.0))


class _Sum(NamedTuple):
    total: torch.Tensor
    count: torch.Tensor


@factory
def embedding_mean(*, net: torch.nn.Module) -> fm.Metric:
    """Mean of a network's outputs (a feature-network metric in miniature): run in eval mode, never mutated."""
    view = eval_view(net)

    def init():
        return _Sum(torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.int64))

    def update(s, x):
        with torch.no_grad():
            y = view(x)
        return _Sum(s.total + y.sum().to(torch.float64), s.count + y.numel())

    tags = _Sum(total="sum", count="sum")
    return fm.Metric(init=init, update=update, merge=merge_fields(tags), finalize=lambda s: s.total / s.count,
                     name="embedding_mean", reductions=tags)


def _weights():
    return torch.tensor([1.0, 2.0, 0.5, 1.0, 3.0])


def test_tensor_parameters_are_buffers_that_follow_to_and_survive_reset():
    w = TorchMetric(class_weighted_accuracy(class_weights=_weights()))
    assert "fm_param_class_weights" in dict(w.named_buffers())
    assert "fm_param_class_weights" not in w.metric_state  # a parameter, not state: never reduced
    for batch in _multiclass():
        w.update(*batch)
    p = torch.cat([b[0] for b in _multiclass()])
    t = torch.cat([b[1] for b in _multiclass()])
    wt = _weights()[t].double()
    assert_values_close(w.compute(), (wt * (p.argmax(-1) == t)).sum() / wt.sum(), 1e-12, 0, "weighted accuracy")
    w.persistent(True)
    assert "fm_param_class_weights" not in w.state_dict()  # non-persistent buffer
    moved = w.to("meta")
    assert moved.metric.params["class_weights"].device.type == "meta"
    assert moved.fm_param_class_weights is moved.metric.params["class_weights"]
    assert moved.fm_correct.device.type == "meta"
    moved.reset()
    assert moved.metric.params["class_weights"].device.type == "meta"
    assert moved.fm_param_class_weights.shape == (5,)


def test_a_parent_module_moves_the_parameters_and_casts_leave_them_alone():
    parent = torch.nn.Module()
    parent.metric = TorchMetric(class_weighted_accuracy(class_weights=_weights()))
    parent.to(torch.float64)  # a dtype cast: the weights keep their dtype, only the value follows
    assert parent.metric.metric.params["class_weights"].dtype == torch.float32
    parent.metric.update(*_multiclass()[0])
    assert parent.metric.compute().dtype == torch.float64
    parent.to("meta")
    assert parent.metric.metric.params["class_weights"].device.type == "meta"
    assert parent.metric.fm_param_class_weights.device.type == "meta"


def test_networks_are_submodules_left_in_their_mode_and_move_with_the_wrapper():
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Dropout(0.5))
    net.train()
    w = TorchMetric(embedding_mean(net=net))
    assert dict(w.named_modules())["fm_param_net"] is net
    assert net.training  # the user's module is never switched (DESIGN §4)
    parent = torch.nn.Module()
    parent.metric = w
    parent.eval()
    parent.train()  # Lightning calls this at fit start: the wrapper follows, the network keeps its own mode
    assert net.training and all(m.training for m in net.modules()) and w.training
    parent.eval()
    assert net.training and not w.training
    w.train()
    x = torch.randn(6, 3)
    w.update(x)
    w.update(x)
    net.eval()
    with torch.no_grad():
        assert_values_close(w.compute(), net(x).double().mean(), 1e-6, 1e-7, "dropout off: eval mode")
    net.train()
    parent.to("meta")
    assert next(w.metric.params["net"].parameters()).device.type == "meta"
    assert w.fm_total.device.type == "meta"
    clone = pickle.loads(pickle.dumps(TorchMetric(embedding_mean(net=torch.nn.Linear(3, 1)))))
    assert isinstance(clone.metric.params["net"], torch.nn.Linear)


# ---------------------------------------------------------------- 3. dtypes


def _cast(value, dtype):
    return torch.utils._pytree.tree_map(
        lambda x: x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x, value)


@pytest.mark.parametrize("convert", ["to_bf16", "half", "double", "set_dtype_bf16", "module_to_bf16"])
def test_casts_keep_accumulators_and_cast_only_the_value(convert):
    dtype = {"half": torch.float16, "double": torch.float64}.get(convert, torch.bfloat16)
    metrics = {"mean": fm.mean(), "mse": fm.mean_squared_error(), "pearson": fm.pearson_corrcoef(),
               "r2": fm.r2_score(), "ece": fm.binary_calibration_error(n_bins=10), "acc": fm.binary_accuracy()}
    g = torch.Generator().manual_seed(0)
    batches = []
    for k in (50, 31, 77):
        p = torch.rand(k, generator=g)
        batches.append((p, (torch.rand(k, generator=g) < p).long()))
    for name, m in metrics.items():
        ref, w = TorchMetric(m), TorchMetric(copy.deepcopy(m))
        if convert == "to_bf16":
            w = w.to(torch.bfloat16)
        elif convert == "half":
            w = w.half()
        elif convert == "double":
            w = w.double()
        elif convert == "set_dtype_bf16":
            w = w.set_dtype(torch.bfloat16)
        else:
            parent = torch.nn.Module()
            parent.m = w
            parent.to(torch.bfloat16)
        dtypes = {k: getattr(ref, k).dtype for k in ref._defaults if not isinstance(getattr(ref, k), list)}
        for p, t in batches:
            args = (p,) if name == "mean" else (p, t) if name in ("ece", "acc") else (p, t.float())
            ref.update(*args)
            w.update(*args)
        assert {k: getattr(w, k).dtype for k in dtypes} == dtypes, name  # int64 counts, float64 sums untouched
        got, want = w.compute(), ref.compute()
        assert got.dtype == dtype, (name, got.dtype)
        assert_values_close(got, want.to(dtype), 0, 0, f"{convert} {name}")
    m = TorchMetric(fm.mean()).to(torch.bfloat16)
    m.update(torch.full((1000,), 5.0))
    assert m.compute().item() == 5.0  # issue 11: 12.207 when the accumulator was bf16


@pytest.mark.filterwarnings("ignore")
def test_every_registered_metric_in_bf16_equals_the_float32_wrapper_cast():
    from tests.cases import all_cases
    from tests.test_adapter import _nonempty

    failures = []
    for case in all_cases():
        try:
            batches = _nonempty(case.batches(0))[:2]
            ref, low = TorchMetric(case.make()), TorchMetric(case.make()).to(torch.bfloat16)
            for b in batches:
                ref.update(*b)
                low.update(*b)
            want, got = _cast(ref.compute(), torch.bfloat16), low.compute()
            canonical = case.check.get("canonical", lambda v: v)
            assert_values_close(canonical(got), canonical(want), 0, 0, "bf16 wrapper vs float32 wrapper, cast")
            for leaf_ref, leaf in zip(torch.utils._pytree.tree_leaves(ref._get_state()),
                                      torch.utils._pytree.tree_leaves(low._get_state())):
                assert leaf.dtype == leaf_ref.dtype, f"state dtype {leaf.dtype} != {leaf_ref.dtype}"
        except Exception as err:  # noqa: BLE001 - collected, reported together
            failures.append(f"{case.id}: {type(err).__name__}: {str(err)[:200]}")
    assert not failures, f"{len(failures)} cases differ in bf16:\n" + "\n".join(failures)


# ---------------------------------------------------------------- 4. graphs


def test_inputs_that_require_grad_leave_no_graph_in_the_state():
    lin = torch.nn.Linear(8, 1)
    metrics = {"mean": TorchMetric(fm.mean()), "mse": TorchMetric(fm.mean_squared_error()),
               "auroc": TorchMetric(fm.binary_auroc()), "cat": TorchMetric(fm.cat())}
    g = torch.Generator().manual_seed(0)
    inputs = []  # weak references: a graph kept by a state would keep each step's input alive
    for step in range(40):
        x = torch.randn(64, 8, generator=g)
        inputs.append(weakref.ref(x))
        out = lin(x).squeeze(-1)  # the Linear saves x for its backward
        loss = (out ** 2).mean()
        assert loss.grad_fn is not None
        metrics["mean"].update(loss)
        metrics["cat"](out)
        value = metrics["mse"](out, torch.zeros(64))  # differentiable: forward gets the undetached inputs
        metrics["auroc"].update(out.sigmoid(), (torch.rand(64, generator=g) < 0.5).long())
    for name, w in metrics.items():
        for leaf in torch.utils._pytree.tree_leaves(w._get_state()):
            assert leaf.grad_fn is None and not leaf.requires_grad, name
    del x, out, loss, value
    gc.collect()
    alive = sum(r() is not None for r in inputs)
    assert alive == 0, f"{alive} of 40 inputs are still referenced through autograd graphs"
