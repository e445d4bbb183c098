"""The bad-input sweep (DESIGN §4, docs/bad_input.md): every registered metric on the inputs users get wrong.

Each law-suite case (tests/cases) is fed, after a good batch, a copy of a good batch spoiled one way:

* ``nan`` / ``inf`` -- one entry of its first floating input non-finite;
* ``device`` -- every tensor on the ``meta`` device while the state is on the CPU;
* ``length`` -- the first input one sample shorter than the others;
* ``zero-length`` -- signals with an empty time axis (audio);
* ``list`` -- tensors given as (nested) Python lists;

and the empty stream is finalized. The outcome must be the contract's:

* **clear error, state intact** -- ``update`` raises ``ValueError`` (``TypeError`` for a Python container)
  naming the metric (or the member of a collection / wrapper that rejects it), and the state from before
  the bad batch still updates and finalizes to the value of the good batches alone;
* or the **documented value**: a non-error policy the case was built with (``nan_strategy`` /
  ``on_invalid``), the aggregation metrics' torchmetrics default (``nan_strategy="warn"``), a value defined
  on no data (listed in `DEFINED_EMPTY`, documented in docs/conventions.md and docs/bad_input.md), or NaN
  with a ``UserWarning`` for an undefined value. A NaN without a warning is never an outcome.
"""
from __future__ import annotations

import math
import warnings

import pytest
import torch

from fmetrics.testing import _num_samples, assert_values_close
from tests.cases import all_cases

CASES = all_cases()
IDS = [c.id for c in CASES]

# metrics whose value on no data is defined (docs/conventions.md "Empty input"): returned without a warning
DEFINED_EMPTY = {
    "sum": "the empty sum, 0",
    "min": "+inf, the identity of min (as torchmetrics)",
    "max": "-inf, the identity of max (as torchmetrics)",
    "cat": "an empty tensor",
    "minkowski_distance": "0, an empty sum",
    "critical_success_index": "0: no event (as torchmetrics)",
    "stat_scores": "counts: all zero",
    "confusion_matrix": "counts: all zero",
    "mean-iou-onehot-perclass-nobg": "-1 per class: torchmetrics' mark of a class absent from preds and target",
}
# a value that is one entry per sample (or per query / pair): an empty tensor on no data
PER_SAMPLE_EMPTY = "an empty tensor: one entry per sample, none seen"

# the options that set a metric's non-finite policy ("error" by default; "warn" for the aggregation metrics,
# as torchmetrics); any other value keeps non-finite entries out (or in) by request
_POLICY_ARGS = ("nan_strategy", "on_invalid")


def _batches(case):
    return [b if isinstance(b, tuple) else (b,) for b in case.batches(0)]


def _leaves(tree, path=()):
    if isinstance(tree, torch.Tensor):
        yield path, tree
    elif isinstance(tree, dict):
        for k, v in tree.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(tree, (list, tuple)):
        for i, v in enumerate(tree):
            yield from _leaves(v, path + (i,))


def _replace(tree, path, value):
    if not path:
        return value
    k, rest = path[0], path[1:]
    if isinstance(tree, dict):
        return {**tree, k: _replace(tree[k], rest, value)}
    items = list(tree)
    items[k] = _replace(items[k], rest, value)
    return type(tree)(items)


def _map(tree, fn):
    if isinstance(tree, torch.Tensor):
        return fn(tree)
    if isinstance(tree, dict):
        return {k: _map(v, fn) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_map(v, fn) for v in tree)
    return tree


def _nonempty(batches):
    """Two batches with samples (a good one to start with, one to spoil and to continue with)."""
    full = [b for b in batches if _num_samples(b) and all(x.numel() for _, x in _leaves(b))]
    full = full or [b for b in batches if _num_samples(b)]
    return full[0], full[-1]


def _inner(metric) -> list:
    """``metric`` and the metrics it is made of (a collection's members, a wrapper's wrapped metric)."""
    out = [metric]
    for value in dict(metric.recipe.kwargs if metric.recipe else ()).values():
        for inner in (value.values() if isinstance(value, dict) else [value]):
            if hasattr(inner, "finalize") and hasattr(inner, "name"):
                out += _inner(inner)
    return out


# the registry's test metric `median` (tests/cases/wrappers.py) is fm.cat with another finalize: cat's checks
_ALIASES = {"median": "cat"}


def _names(metric) -> set:
    """The names an error of ``metric`` may carry: its own, and those of the metrics it is made of."""
    names = {m.name for m in _inner(metric)} | {m.recipe.qualname for m in _inner(metric) if m.recipe}
    return names | {_ALIASES[n] for n in names if n in _ALIASES}


_COMPOSERS = ("fmetrics.wrappers", "fmetrics.collection", "fmetrics.metric")


def _modules(metric) -> set:
    """The modules of the factories ``metric`` is made of (wrappers and collections left out)."""
    mods = {m.recipe.module for m in _inner(metric) if m.recipe}
    return {m for m in mods if not m.startswith(_COMPOSERS)} or mods


def _in(metric, prefixes) -> bool:
    """Whether every metric ``metric`` is made of comes from one of the modules ``prefixes``."""
    return all(m.startswith(prefixes) for m in _modules(metric))


def _policies(metric) -> set:
    """The non-finite policies of the metrics ``metric`` is made of ("error" where a metric has no option)."""
    out = set()
    for inner in _inner(metric):
        if inner.recipe is None or inner.recipe.module.startswith(_COMPOSERS):
            continue
        kwargs = dict(inner.recipe.kwargs)
        policy = next((kwargs[k] for k in _POLICY_ARGS if k in kwargs), "error")
        out.add(policy if isinstance(policy, str) else "replace")
    if any(dict(inner.recipe.kwargs).get("remove_nans") for inner in _inner(metric) if inner.recipe):
        out.add("ignore")  # multioutput(remove_nans=True): rows with a NaN are left out of that output
    return out


def _good_value(m, first, then):
    return m.finalize(m.update(m.update(m.init(), *first), *then))


def _assert_rejected(case, bad, *, errors=(ValueError,), must_name=()):
    """``update`` on ``bad`` raises a named error; the state from before it goes on to the good value."""
    m = case.make()
    first, then = _nonempty(_batches(case))
    s = m.update(m.init(), *first)
    with pytest.raises(errors) as info:
        m.update(s, *bad)
    text = str(info.value)
    assert any(n in text for n in _names(m)), f"{case.id}: the error does not name the metric: {text}"
    for word in must_name:
        assert word in text, f"{case.id}: the error does not name {word!r}: {text}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_values_close(m.finalize(m.update(s, *then)), _good_value(m, first, then), 1e-9, 1e-12,
                            f"{case.id}: the value after a rejected batch")


def _finite_case(case):
    m = case.make()
    if m.host_input:
        pytest.skip("host-input metric: strings and counts, no floating input to spoil")
    first, then = _nonempty(_batches(case))
    floats = [(p, x) for p, x in _leaves(then) if x.is_floating_point() and x.numel()]
    if not floats:
        pytest.skip("no floating input (labels, ids): non-finite values cannot be given")
    return m, then, floats


# scores whose order is all that counts: +-inf is a defined score (sigmoid / softmax / rank of an infinite
# logit), as in torchmetrics; aggregation: inf is a value (the sum of an inf is inf), as in torchmetrics
INF_IS_A_VALUE = ("fmetrics.classification", "fmetrics.retrieval", "fmetrics.aggregation",
                  "fmetrics.regression.csi")
# a metric the test registry builds over fm.cat(nan_strategy="disable"): NaN is kept by request
NAN_KEPT = ("tests.cases.wrappers",)


# cases whose spoiled entry is one the metric does not read (a documented choice, not an exemption)
NOT_READ = {"multilabel_exact_match-samplewise-ignore": "its first entry has target -1 (ignore_index): an ignored "
            "entry's score is not read, so a NaN there is no error (case multilabel_exact_match checks a read one)"}


@pytest.mark.parametrize("value", [math.nan, math.inf], ids=["nan", "inf"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_non_finite_input(case, value):
    m, then, floats = _finite_case(case)
    if case.id in NOT_READ:
        pytest.skip(NOT_READ[case.id])
    bad = then
    for path, x in floats:  # the first entry of every floating input: whichever the metric reads
        y = x.clone()
        y.view(-1)[0] = value
        bad = _replace(bad, path, y)
    first, _ = _nonempty(_batches(case))
    policies = _policies(m)
    if policies - {"error", "warn"} or _in(m, NAN_KEPT) or (math.isinf(value) and _in(m, INF_IS_A_VALUE)):
        # kept or dropped by request, or a defined value: the state stays usable and finalize gives a value;
        # an input that is not a score (labels, relevance, weights) may still be rejected, by a clear error
        try:
            m.update(m.init(), *bad)
        except ValueError:
            _assert_rejected(case, bad)
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m.finalize(m.update(m.update(m.init(), *first), *bad))
        return
    if policies == {"warn"}:  # the aggregation metrics' default (torchmetrics'): left out, finalize warns
        with pytest.warns(UserWarning):
            m.finalize(m.update(m.update(m.init(), *first), *bad))
        return
    _assert_rejected(case, bad)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_empty_stream(case):
    m = case.make()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = m.finalize(m.init())
    tensors = [x for _, x in _leaves(value if not isinstance(value, dict) else list(value.values()))]
    warned = any(issubclass(w.category, UserWarning) for w in caught)
    has_nan = any(x.is_floating_point() and bool(torch.isnan(x).any()) for x in tensors)
    if has_nan:
        assert warned, f"{case.id}: NaN on no data without a warning"
        return
    if all(x.numel() == 0 for x in tensors):
        return  # PER_SAMPLE_EMPTY
    if warned:
        return  # a documented fallback, said in a warning
    if dict(m.recipe.kwargs if m.recipe else ()).get("reduction") == "sum":
        return  # a sum over no samples: 0
    assert (_names(m) | {case.factory.__name__, case.id}) & set(DEFINED_EMPTY), (
        f"{case.id}: {value} on no data without a warning; an undefined value is NaN with a warning, a "
        f"defined one is listed in DEFINED_EMPTY and documented")


def _tensor_case(case):
    """``(metric, first batch, batch to spoil)`` of a case over tensors (host-input metrics skip)."""
    m = case.make()
    if m.host_input:
        pytest.skip("host-input metric: its inputs are Python data")
    return (m, *_nonempty(_batches(case)))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_input_on_another_device(case):
    _, _, then = _tensor_case(case)
    _assert_rejected(case, _map(then, lambda x: x.to("meta")), must_name=("meta", "cpu"))


def _sample_inputs(batch):
    """Positions of the inputs with a sample axis (tensors of rank >= 1, lists)."""
    return [i for i, x in enumerate(batch)
            if (isinstance(x, torch.Tensor) and x.dim() >= 1) or isinstance(x, (list, tuple))]


def _shorter(x):
    return x[:-1]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_inputs_of_different_lengths(case):
    first, then = _nonempty(_batches(case))
    axes = _sample_inputs(then)
    if len(axes) < 2:
        pytest.skip("one input with a sample axis: no lengths to disagree")
    if case.id in LENGTHS_FREE:
        pytest.skip(LENGTHS_FREE[case.id])
    i = axes[0]
    bad = tuple(_shorter(x) if j == i else x for j, x in enumerate(then))
    _assert_rejected(case, bad, errors=(ValueError,))


LVE_FRAMES = ("torchmetrics' definition: sequences of different lengths compare their first min(T, T') "
              "frames (tests/test_multimodal.py checks it)")
LENGTHS_FREE = {
    "lip_vertex_error": LVE_FRAMES,
    "lip_vertex_error-repeated-index-float32": LVE_FRAMES,
}


@pytest.mark.parametrize("case", [c for c in CASES if c.factory.__module__.startswith("fmetrics.audio")],
                         ids=[c.id for c in CASES if c.factory.__module__.startswith("fmetrics.audio")])
def test_zero_length_signals(case):
    first, then = _nonempty(_batches(case))
    bad = _map(then, lambda x: x[..., :0] if x.is_floating_point() else x)
    _assert_rejected(case, bad)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_python_containers(case):
    m, first, then = _tensor_case(case)
    as_lists = _map(then, lambda x: x.tolist() if x.dim() else x)
    s = m.update(m.init(), *first)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s2 = m.update(s, *as_lists)
    except (TypeError, ValueError) as err:
        assert any(n in str(err) for n in _names(m)), f"{case.id}: the error does not name the metric: {err}"
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_values_close(m.finalize(s2), _good_value(m, first, then), 1e-9, 1e-12,
                            f"{case.id}: lists must give the tensors' value")
