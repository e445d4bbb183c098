"""Validation counters survive every path a state takes (issue: counters through merges).

For every registry case whose state holds `fmetrics.validation.Invalid`
records (found by type) or NaN counters (``nan_count`` fields), offending
entries are planted into the states of two shards (2 and 3 entries, as
`validation.mode("deferred")` would record them on an accelerator), and the
report of ``finalize`` must count all 5 after

* ``merge`` (both orders, with ``init()`` in between),
* `adapters.distributed.reduce` across 2 gloo ranks,
* `adapters.TorchMetric.forward` of a valid batch on top of a planted state.

Cases whose counters are stacked per replicate or group (bootstrap, grouped:
their counts are weighted) and cases whose policy never reports (``"ignore"``)
are left out; the control run proves the rest report a planted count at all.
"""
from __future__ import annotations

import re
import warnings

import pytest
import torch

from fmetrics import validation
from fmetrics.testing import _num_samples
from fmetrics.validation import Invalid
from tests._dist import spawn
from tests.cases import all_cases

A, B = 2, 3  # entries planted into the two shards' states


def _walk(tree, invalid, nan):
    """``tree`` with every Invalid record mapped by ``invalid`` and every ``nan_count`` field by ``nan``."""
    if isinstance(tree, Invalid):
        return invalid(tree)
    if hasattr(tree, "_fields"):
        return type(tree)(*(nan(v) if f == "nan_count" and isinstance(v, torch.Tensor) else _walk(v, invalid, nan)
                            for f, v in zip(tree._fields, tree)))
    if isinstance(tree, (tuple, list)):
        return type(tree)(_walk(v, invalid, nan) for v in tree)
    if isinstance(tree, dict):
        return {k: _walk(v, invalid, nan) for k, v in tree.items()}
    return tree


def _counters(state) -> list:
    found = []
    _walk(state, lambda inv: found.append(inv.count) or inv, lambda t: found.append(t) or t)
    return found


def plant(state, k: int, first: float):
    """``state`` as if ``k`` more offending entries (the first ``first``) had been recorded in its first update."""
    def invalid(inv):
        seen = inv.count > 0
        return Invalid(inv.count + k, torch.where(seen, inv.first, torch.full_like(inv.first, first)),
                       torch.where(seen, inv.call, torch.ones_like(inv.call)), inv.calls.clamp_min(1))

    return _walk(state, invalid, lambda t: t + k)


def report(fn) -> int | None:
    """The count in the validation report that ``fn()`` (a finalize) raises or warns; None when it reports nothing."""
    return _parse(fn)[0]


def first(fn) -> str | None:
    """The first offending value the report names (Invalid records), or None."""
    return _parse(fn)[1]


def _parse(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn()
        except ValueError as err:
            text = str(err)
        else:
            text = next((str(w.message) for w in caught if "input entr" in str(w.message)), "")
    match = re.search(r"(\d+) input entr(y|ies) broke the rule", text)
    at = re.search(r"the first was (\S+) in update call", text)
    return (int(match.group(1)) if match else None), (at.group(1) if at else None)


def _shards(case, seed=0):
    batches = [b if isinstance(b, tuple) else (b,) for b in case.batches(seed)]
    full = [b for b in batches if _num_samples(b)]
    return full[0], full[-1] if len(full) > 1 else full[0]


def _candidates():
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in all_cases():
            m = case.make()
            counters = _counters(m.init())
            if counters and all(c.dim() == 0 for c in counters):
                out.append(case)
    return out


CASES = _candidates()


def _states(case):
    m = case.make()
    a, b = _shards(case)
    return m, m.update(m.init(), *a), m.update(m.init(), *b)


@pytest.mark.filterwarnings("ignore")
def test_there_are_counter_cases_of_both_kinds():
    kinds = set()
    for case in CASES:
        _walk(case.make().init(), lambda inv: kinds.add("invalid") or inv, lambda t: kinds.add("nan") or t)
    assert kinds == {"invalid", "nan"} and len(CASES) > 50


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_counters_survive_merges_and_forward(case):
    from adapters import TorchMetric

    m, sa, sb = _states(case)
    base = report(lambda: m.finalize(m.merge(sa, sb)))
    if base is not None:
        pytest.skip("the case's own data already breaks a rule")
    control = report(lambda: m.finalize(plant(sa, A, 7.0)))
    if control is None:
        pytest.skip("this configuration never reports (policy 'ignore' / 'disable' / a replacement value)")
    # one report per planted counter; a running window's slots each hold one (and add up)
    assert control % A == 0, f"{case.id}: planted {A}, reported {control}"
    per = control // A
    pa, pb = plant(sa, A, 7.0), plant(sb, B, 9.0)
    e = m.init()
    for name, merged, head in (("a+b", m.merge(pa, pb), "7"), ("b+a", m.merge(pb, pa), "9"),
                               ("a+init+b", m.merge(m.merge(pa, e), pb), "7"),
                               ("init+(b+a)", m.merge(e, m.merge(pb, pa)), "9")):
        assert report(lambda: m.finalize(merged)) == per * (A + B), f"{case.id}: after merge {name}"
        # the first offending value is the first state's (Invalid records; NaN counts name none)
        assert first(lambda: m.finalize(merged)) in (None, head), f"{case.id}: first value after merge {name}"
    # the adapter: a valid batch through forward on top of the planted accumulated state
    wrapped = TorchMetric(m)
    wrapped._set_state(pa)
    _, b = _shards(case)
    with validation.mode("deferred"):
        wrapped(*b)
    assert report(wrapped.compute) == per * A, f"{case.id}: after TorchMetric.forward"


def _reduce_body(rank: int, world: int, ids: list):
    """Each rank plants its own count (2 on rank 0, 3 on rank 1), reduces, and reports."""
    from adapters.distributed import reduce

    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = {c.id: c for c in all_cases()}
        for cid in ids:
            try:
                m, sa, sb = _states(cases[cid])
                mine = plant(sa, A, 7.0) if rank == 0 else plant(sb, B, 9.0)
                per = report(lambda: m.finalize(plant(sa, 1, 7.0)))
                reduced = reduce(m, mine)
                out[cid] = report(lambda: m.finalize(reduced)) / per, first(lambda: m.finalize(reduced))
            except Exception as err:  # noqa: BLE001 - reported per case by the parent
                out[cid] = f"{type(err).__name__}: {err}"
    return out


@pytest.mark.distributed
@pytest.mark.filterwarnings("ignore")
def test_counters_survive_the_distributed_reduce():
    ids = []
    for case in CASES:
        m, sa, sb = _states(case)
        if report(lambda: m.finalize(m.merge(sa, sb))) is None and report(lambda: m.finalize(plant(sa, A, 7.0))):
            ids.append(case.id)
    assert len(ids) > 50
    results = spawn(_reduce_body, 2, ids, timeout=300)
    # counts add up; the first offending value is rank 0's (7): states fold in rank order
    bad = [f"{cid}: rank {r} reported {res[cid]!r}" for r, res in enumerate(results) for cid in ids
           if isinstance(res[cid], str) or res[cid][0] != A + B or res[cid][1] not in (None, "7")]
    assert not bad, f"{len(bad)} reports lost planted counts across 2 ranks:\n" + "\n".join(bad[:20])
