"""Core v2: recipes, misuse help, named inputs, families with a shared step, chunk appends outside the trace,
parameters, device errors, deferred validation records, lazy domains."""
import copy
import pickle
import subprocess
import sys
import textwrap
from typing import NamedTuple

import pytest
import torch

import fmetrics as fm
from fmetrics import validation
from fmetrics.testing import TRACE_LAWS, check_metric


# ---------------------------------------------------------------- recipes


def test_repr_prints_the_call_that_made_the_metric():
    assert repr(fm.multiclass_accuracy(num_classes=10, average="macro")) == \
        "multiclass_accuracy(num_classes=10, average='macro')"
    assert repr(fm.binary_auroc()) == "binary_auroc()"
    # the facade records itself, not the factory it delegates to
    assert repr(fm.accuracy(task="multiclass", num_classes=3)) == "accuracy(task='multiclass', num_classes=3)"


def test_configuration_is_keyword_only_with_a_clear_error():
    with pytest.raises(TypeError, match="keyword-only.*multiclass_accuracy\\(num_classes=") as err:
        fm.multiclass_accuracy(10)
    assert "<locals>" not in str(err.value)


def test_pickle_loads_in_a_fresh_process():
    m = fm.multiclass_f1_score(num_classes=4, average="weighted", ignore_index=0)
    blob = pickle.dumps(m)
    code = textwrap.dedent("""
        import pickle, sys, torch
        m = pickle.loads(sys.stdin.buffer.read())
        p = torch.tensor([0, 1, 2, 3, 1, 2]); t = torch.tensor([0, 1, 2, 2, 1, 3])
        print(repr(m)); print(float(m(p, t)))
    """)
    out = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True, check=True, timeout=120)
    lines = out.stdout.decode().split("\n")
    p = torch.tensor([0, 1, 2, 3, 1, 2])
    t = torch.tensor([0, 1, 2, 2, 1, 3])
    assert lines[0] == repr(m)
    assert float(lines[1]) == float(m(p, t))


def test_deepcopy_goes_by_recipe_and_keeps_the_value():
    m = fm.mean(nan_strategy="ignore")
    d = copy.deepcopy(m)
    assert d is not m and repr(d) == repr(m) and d.state_key == m.state_key
    x = torch.tensor([1.0, float("nan"), 3.0])
    assert float(d(x)) == float(m(x)) == 2.0


def test_hand_built_metric_pickles_when_importable_and_says_how_otherwise():
    importable = fm.Metric(init=_zero, update=_add, merge=_add_states, finalize=_value, name="total")
    back = pickle.loads(pickle.dumps(importable))
    assert float(back(torch.tensor([1.0, 2.0]))) == 3.0
    closure = fm.Metric(init=_zero, update=lambda s, x: _add(s, x), merge=_add_states, finalize=_value, name="lam")
    with pytest.raises(pickle.PicklingError, match="lam.*@fmetrics.factory"):
        pickle.dumps(closure)


class _Total(NamedTuple):
    total: torch.Tensor


def _zero():
    return _Total(torch.zeros((), dtype=torch.float64))


def _add(s, x):
    return _Total(s.total + x.sum())


def _add_states(a, b):
    return _Total(a.total + b.total)


def _value(s):
    return s.total


def test_state_key_derives_from_the_recipe():
    a, b = fm.mean(), fm.mean()
    assert a.state_key == b.state_key
    assert fm.mean(nan_strategy="ignore").state_key != a.state_key
    # one family, many factories: accuracy and F1 over one configuration share a state
    acc = fm.multiclass_accuracy(num_classes=5)
    f1 = fm.multiclass_f1_score(num_classes=5)
    assert acc.state_key == f1.state_key
    assert fm.multiclass_accuracy(num_classes=6).state_key != acc.state_key


# ---------------------------------------------------------------- misuse


def test_update_without_the_state_explains_the_first_argument():
    m = fm.multiclass_accuracy(num_classes=3)
    with pytest.raises(TypeError) as err:
        m.update(torch.tensor([0, 1]), torch.tensor([0, 1]))
    msg = str(err.value)
    assert "m.init()" in msg or "multiclass_accuracy.init()" in msg
    assert "m(preds, target)" in msg and "adapters.TorchMetric" in msg
    assert "<locals>" not in msg and "counts_metric" not in msg


def test_an_input_on_another_device_raises_naming_both():
    m = fm.mean()
    s = m.init(device="meta")
    with pytest.raises(ValueError, match="mean: an input is on cpu but the state is on meta"):
        m.update(s, torch.ones(3))


# ---------------------------------------------------------------- named inputs


def test_collection_routes_named_outputs_and_shares_states():
    from tests._counting import counting

    counted, calls = counting({"acc": fm.multiclass_accuracy(num_classes=3),
                               "f1": fm.multiclass_f1_score(num_classes=3)})
    c = fm.collection({
        "loss": fm.mean().from_output("loss"),
        "acc": counted["acc"].from_output("logits", "labels"),
        "f1": counted["f1"].from_output("logits", "labels"),
        "auroc": fm.multiclass_auroc(num_classes=3).from_output("logits", "labels"),
    })
    g = torch.Generator().manual_seed(0)
    steps = [{"loss": torch.rand(n, generator=g), "logits": torch.randn(n, 3, generator=g),
              "labels": torch.randint(0, 3, (n,), generator=g), "unused": torch.zeros(1)} for n in (5, 9)]
    s = c.init()
    assert len(s) == 3  # acc and f1 share one stat-scores state
    for out in steps:
        s = c.update(s, out)
    v = c.finalize(s)
    loss = torch.cat([o["loss"] for o in steps])
    logits = torch.cat([o["logits"] for o in steps])
    labels = torch.cat([o["labels"] for o in steps])
    torch.testing.assert_close(v["loss"], loss.double().mean())
    torch.testing.assert_close(v["acc"], fm.multiclass_accuracy(num_classes=3)(logits, labels))
    torch.testing.assert_close(v["auroc"], fm.multiclass_auroc(num_classes=3)(logits, labels))
    # kwargs form too
    s2 = c.update(c.init(), **steps[0])
    torch.testing.assert_close(c.finalize(s2)["loss"], steps[0]["loss"].double().mean())
    assert calls == ["acc"] * 3  # one stat-scores update per step for accuracy and F1


def test_named_inputs_name_the_missing_output():
    m = fm.mean().from_output("loss")
    with pytest.raises(ValueError, match="mean: argument `outputs` expected entries named \\['loss'\\]"):
        m({"logits": torch.zeros(2)})
    assert repr(m).startswith("from_output(")
    assert pickle.loads(pickle.dumps(m))({"loss": torch.tensor([2.0, 4.0])}) == 3.0


# ---------------------------------------------------------------- families


class _Hits(NamedTuple):
    scores: tuple
    total: torch.Tensor


def _hits_family(calls):
    def shared(state):
        calls.append(1)
        return torch.sort(fm.state.cat_chunks(state.scores, torch.zeros(0))).values

    return fm.Family(
        name="sorted_scores", key=(),
        init=lambda: _Hits((), torch.zeros((), dtype=torch.int64)),
        update=lambda s, x: _Hits((x.detach().clone(),), s.total + x.numel()),
        reductions=_Hits(scores="cat", total="sum"), shared=shared)


def test_family_members_share_one_state_and_one_shared_step():
    calls = []
    fam = _hits_family(calls)
    c = fm.collection({"median": fam.metric("median", lambda v: v[(v.numel() - 1) // 2]),
                       "top": fam.metric("top", lambda v: v[-1]),
                       "low": fam.metric("low", lambda v: v[0])})
    s = c.init()
    assert len(s) == 1
    s = c.update(s, torch.tensor([3.0, 1.0]))
    s = c.update(s, torch.tensor([2.0]))
    assert len(s[0].scores) == 2  # chunks appended, not re-concatenated
    v = c.finalize(s)
    assert calls == [1]  # one sort for three finalizers
    assert (float(v["median"]), float(v["top"]), float(v["low"])) == (2.0, 3.0, 1.0)


def test_a_family_needs_a_merge_definition():
    with pytest.raises(TypeError, match="reductions"):
        fm.Family(name="x", key=(), init=_zero, update=_add)


# ---------------------------------------------------------------- compile over an epoch


def test_compiled_chunk_update_does_not_recompile_per_step():
    import torch._dynamo
    from torch._dynamo.testing import CompileCounterWithBackend

    m = fm.binary_auroc()
    counter = CompileCounterWithBackend("eager")
    torch._dynamo.reset()
    try:
        f = torch.compile(m.update, backend=counter, fullgraph=True)
        s = m.init()
        g = torch.Generator().manual_seed(0)
        for n in range(5, 17):
            s = f(s, torch.rand(n, generator=g), torch.randint(0, 2, (n,), generator=g))
    finally:
        torch._dynamo.reset()
    assert counter.frame_count <= 3
    assert len(s.scores if hasattr(s, "scores") else fm.state.leaves(s)) >= 1


# ---------------------------------------------------------------- host-input mode


class _Words(NamedTuple):
    words: torch.Tensor
    sentences: torch.Tensor


def test_host_input_mode_skips_only_the_trace_laws_and_says_so():
    tags = _Words(words="sum", sentences="sum")
    m = fm.Metric(
        init=lambda: _Words(torch.zeros((), dtype=torch.int64), torch.zeros((), dtype=torch.int64)),
        update=lambda s, texts: _Words(s.words + sum(len(t.split()) for t in texts), s.sentences + len(texts)),
        merge=fm.state.merge_fields(tags), reductions=tags,
        finalize=lambda s: s.words / s.sentences, name="words_per_sentence", host_input=True)
    batches = [(["a b", "c"],), (["d e f"],), (["g", "h i", "j k l m"],)]
    report = check_metric(m, batches, reference=lambda texts: sum(len(t.split()) for t in texts) / len(texts))
    assert set(report.skipped) == set(TRACE_LAWS)
    assert "host-input" in repr(report)
    assert "distributed equivalence" in report.passed and "split invariance" in report.passed


# ---------------------------------------------------------------- parameters


@fm.factory
def _weighted_total(*, weights: torch.Tensor) -> fm.Metric:
    def update(s, x):
        return _Total(s.total + (x * weights).sum())

    return fm.Metric(init=_zero, update=update, merge=_add_states, finalize=_value, name="weighted_total")


def test_parameters_are_the_tensor_arguments_and_follow_to():
    m = _weighted_total(weights=torch.tensor([1.0, 2.0]))
    assert list(m.params) == ["weights"]
    moved = m.to("meta")
    assert moved.params["weights"].device.type == "meta"
    assert m.params["weights"].device.type == "cpu"  # the original is untouched
    assert float(m(torch.tensor([[1.0, 1.0]]))) == 3.0
    assert m.to("cpu") is not None


def test_to_leaves_the_original_network_where_it_was():
    """``Module.to`` moves in place: ``metric.to(device)`` copies a network first, so the metric it came from
    (and an oracle holding the same network) keeps it on its device."""
    net = torch.nn.Linear(4, 3)
    m = fm.frechet_inception_distance(feature=net)
    moved = m.to("meta")
    assert next(moved.params["feature"].parameters()).device.type == "meta"
    assert next(net.parameters()).device.type == "cpu" and m.params["feature"] is net
    assert m.to("cpu").params["feature"] is net  # already there: not copied


# ---------------------------------------------------------------- deferred validation records


def test_invalid_records_merge_associatively_and_name_the_first_offence():
    inv = [validation.invalid_init() for _ in range(3)]
    inv[0] = validation.invalid_flag(inv[0], torch.tensor([False, False]), torch.tensor([1, 2]))
    inv[1] = validation.invalid_flag(inv[1], torch.tensor([False, True, True]), torch.tensor([0, 7, 9]))
    inv[2] = validation.invalid_flag(inv[2], torch.tensor([True]), torch.tensor([5]))
    left = validation.invalid_merge(validation.invalid_merge(inv[0], inv[1]), inv[2])
    right = validation.invalid_merge(inv[0], validation.invalid_merge(inv[1], inv[2]))
    for a, b in zip(left, right):
        assert torch.equal(a, b)
    assert (int(left.count), float(left.first), int(left.call), int(left.calls)) == (3, 7.0, 2, 3)
    with pytest.raises(ValueError, match="3 input entries broke the rule: labels; the first was 7 in update call 2"):
        validation.invalid_report("m", "labels", left)


def test_validation_mode_rejects_unknown_values():
    with pytest.raises(ValueError, match="one of"):
        with validation.mode("sometimes"):
            pass


# ---------------------------------------------------------------- lazy domains


def test_import_loads_no_domain_until_used():
    code = ("import sys, fmetrics\n"
            "assert not [m for m in sys.modules if m.startswith(('fmetrics.classification', 'fmetrics.retrieval',"
            " 'fmetrics.regression', 'fmetrics.aggregation'))], sorted(sys.modules)\n"
            "fmetrics.binary_auroc\n"
            "assert 'fmetrics.classification' in sys.modules\n"
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert out.stdout.decode().strip() == "ok", out.stderr.decode()[-2000:]


def test_unknown_top_level_names_raise_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'not_a_metric'"):
        fm.not_a_metric  # noqa: B018
