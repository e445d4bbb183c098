"""Retrieval input rules: metadata errors, eager value checks (CPU), deferred records, ownership, no graphs."""
from __future__ import annotations

import math

import pytest
import torch

import fmetrics as fm
from fmetrics import validation

T = torch.tensor
BINARY = [fm.retrieval_map, fm.retrieval_mrr, fm.retrieval_precision, fm.retrieval_recall, fm.retrieval_r_precision,
          fm.retrieval_hit_rate, fm.retrieval_fall_out, fm.retrieval_auroc, fm.retrieval_precision_recall_curve,
          fm.retrieval_recall_at_fixed_precision]
ALL = BINARY + [fm.retrieval_normalized_dcg]


# ------------------------------------------------------------------ metadata (always eager)

def test_indexes_missing():
    with pytest.raises(ValueError, match="retrieval_map: argument `indexes`.*None"):
        fm.retrieval_map()(T([.1]), T([1]))
    with pytest.raises(ValueError, match="argument `indexes`"):
        fm.retrieval_map()(T([.1]), T([1]), None)


@pytest.mark.parametrize("idx", [T([0, 1]), T([[0, 0, 1]])])
def test_indexes_length_mismatch(idx):
    with pytest.raises(ValueError, match="same shape"):
        fm.retrieval_mrr()(T([.1, .2, .3]), T([1, 0, 1]), idx)


@pytest.mark.parametrize("idx", [T([0., 1.]), T([True, False])])
def test_indexes_not_integer(idx):
    with pytest.raises(ValueError, match="integer tensor of query ids"):
        fm.retrieval_mrr()(T([.1, .2]), T([1, 0]), idx)


def test_update_without_state_points_to_the_one_shot_call():
    with pytest.raises(TypeError, match=r"first argument of update must be the state.*m\(preds, target\)"):
        fm.retrieval_map().update(T([.1, .2]), T([1, 0]), T([0, 0]))


# ------------------------------------------------------------------ the value rules, eager on CPU

TARGET_RULE = r"`target` \(relevance\) must be finite and >= 0"


@pytest.mark.parametrize("factory", ALL, ids=lambda f: f.__name__)
@pytest.mark.parametrize("preds,target,idx,message", [
    (T([.1, .2, .3]), T([1, 0, 1]), T([-1, 0, -3]), r"`indexes` \(query ids\) must be >= 0; found -3 and -1"),
    (T([.1, float("nan"), .3]), T([1, 0, 1]), T([0, 0, 1]), r"`preds` must not be NaN; found nan"),
    (T([.1, .2, .3]), T([1., -1., 0.]), T([0, 0, 1]), TARGET_RULE + "; found -1.0"),
    (T([.1, .2, .3]), T([1., float("inf"), 0.]), T([0, 0, 1]), TARGET_RULE + "; found inf"),
    (T([.1, .2, .3]), T([1., float("nan"), 0.]), T([0, 0, 1]), TARGET_RULE + "; found nan"),
    (T([.1, .2, .3]), T([-2, -5, -2]), T([0, 0, 1]), TARGET_RULE + r"; found -5 and -2 \(3 entries\)"),
])
def test_value_rules_raise_in_update_on_cpu_quoting_values(factory, preds, target, idx, message):
    m = factory()
    state = m.update(m.init(), T([.5, .4]), T([1, 0]), T([7, 7]))
    with pytest.raises(ValueError, match=f"{m.name}: {message}"):
        m.update(state, preds, target, idx)
    # the state is untouched: a TorchMetric keeps every good batch
    assert len(state.preds) == 1 and int(state.bad_target.count) == 0


@pytest.mark.parametrize("factory", BINARY, ids=lambda f: f.__name__)
def test_binary_metrics_reject_graded_targets_eagerly(factory):
    with pytest.raises(ValueError, match=r"`target` must be binary \(0 or 1\) for this metric; found 2 and 3"):
        factory()(T([.1, .2, .3]), T([2, 0, 3]), T([0, 0, 1]))


def test_ndcg_negative_and_infinite_gains_raise_instead_of_a_silent_or_crashing_value():
    # before: a negative gain gave -1.0 silently, +inf crashed with OverflowError
    ndcg = fm.retrieval_normalized_dcg()
    with pytest.raises(ValueError, match=r"found -1"):
        ndcg(T([.9, .1]), T([-1, 0]), T([0, 0]))
    with pytest.raises(ValueError, match=r"found inf"):
        ndcg(T([.9, .1]), T([float("inf"), 1.]), T([0, 0]))
    assert ndcg(T([.1, .2, .3]), T([2, 0, 3]), T([0, 0, 1])).item() > 0  # graded targets are fine


def test_ignored_rows_are_exempt_from_the_rules():
    assert fm.retrieval_map(ignore_index=-1)(T([.1, .2]), T([-1, 1]), T([0, 0])).item() == 1.0
    assert fm.retrieval_map(ignore_index=5)(T([.1, .2]), T([5, 1]), T([0, 0])).item() == 1.0
    with pytest.raises(ValueError, match=r"found -2 \(rows with target -1 are ignored\)"):
        fm.retrieval_map(ignore_index=-1)(T([.1, .2, .3]), T([-1, 1, -2]), T([0, 0, 0]))


def test_infinite_scores_are_valid():
    assert fm.retrieval_mrr()(T([float("inf"), 1., -float("inf")]), T([0, 1, 0]), T([0, 0, 0])).item() == 0.5


# ------------------------------------------------------------------ deferred (accelerators, compile, vmap)

@pytest.mark.parametrize("factory,target,rule,first", [
    (fm.retrieval_normalized_dcg, T([1., -1., -3.]), TARGET_RULE, "-1"),
    (fm.retrieval_normalized_dcg, T([1., float("inf"), 0.]), TARGET_RULE, "inf"),
    (fm.retrieval_map, T([2, 0, 3]), r"`target` must be binary \(0 or 1\) for this metric", "2"),
])
def test_deferred_record_names_first_value_and_update_call(factory, target, rule, first):
    m = factory()
    with validation.mode("deferred"):
        s = m.update(m.init(), T([.5, .4]), T([1, 0]), T([7, 7]))
        s = m.update(s, T([.1, .2, .3]), target, T([0, 0, 1]))  # no error in update
        s = m.update(s, T([.1, .2]), T([1, 0]), T([9, 9]))
    n = 1 + int((target.float() == -3).any()) if factory is fm.retrieval_normalized_dcg else 2
    with pytest.raises(ValueError, match=f"{m.name}: {n} input entr.*broke the rule: {rule}; "
                                         f"the first was {first} in update call 2"):
        m.finalize(s)


def test_deferred_records_survive_merge_and_name_the_first_batch():
    m = fm.retrieval_mrr()
    with validation.mode("deferred"):
        a = m.update(m.init(), T([.5, .4]), T([1, 0]), T([-4, 7]))
        b = m.update(m.update(m.init(), T([.5]), T([1]), T([1])), T([.5]), T([1]), T([-9]))
    with pytest.raises(ValueError, match=r"2 input entries broke the rule: `indexes`.*first was -4 in update call 1"):
        m.finalize(m.merge(a, b))
    with pytest.raises(ValueError, match=r"1 input entry.*first was -9 in update call 3"):
        m.finalize(m.merge(m.update(m.init(), T([.5]), T([1]), T([2])), b))


def test_deferred_rules_in_a_collection_shared_state():
    # NDCG and MAP share one state: the graded targets break only MAP's rule, raised by MAP's finalizer
    c = fm.collection({"ndcg": fm.retrieval_normalized_dcg(), "map": fm.retrieval_map()})
    with validation.mode("deferred"):
        s = c.update(c.init(), T([.1, .2, .3]), T([2, 0, 3]), T([0, 0, 1]))
    with pytest.raises(ValueError, match="retrieval_map: 2 input entries broke the rule: `target` must be binary"):
        c.finalize(s)
    assert fm.retrieval_normalized_dcg().finalize(s[0]).item() > 0
    # eager (CPU): NDCG's update checks the shared rules only; MAP's finalizer still reports the graded targets
    s = c.update(c.init(), T([.1, .2, .3]), T([2, 0, 3]), T([0, 0, 1]))
    with pytest.raises(ValueError, match="retrieval_map: 2 input entries broke .* binary.* the first was 2"):
        c.finalize(s)
    # MAP first: its eager check raises in update, before the state changes
    c = fm.collection({"map": fm.retrieval_map(), "ndcg": fm.retrieval_normalized_dcg()})
    with pytest.raises(ValueError, match=r"retrieval_map: `target` must be binary"):
        c.update(c.init(), T([.1, .2, .3]), T([2, 0, 3]), T([0, 0, 1]))


@pytest.mark.parametrize("target,ignore_index,count", [
    (T([-1, 0, 1, 2, 3, -2]), None, 4), (T([0, 1, 2, 255, 1, 0], dtype=torch.uint8), None, 2),
    (T([-1, 0, 1, 2, -1, 1]), -1, 1), (T([0., .5, 1., 2., -0., 1.]), None, 2),
    (T([1, 0, 1, 0, 0, 1], dtype=torch.bool), None, 0), (T([-3, 0, 1, 2, 5, 1]), 5, 2),
    (T([0, 512, 1, 0, 0, 0]), None, 1)])
def test_non_binary_target_count_per_dtype(target, ignore_index, count):
    m = fm.retrieval_normalized_dcg(ignore_index=ignore_index)
    with validation.mode("deferred"):
        state = m.update(m.init(), torch.rand(6), target, torch.zeros(6, dtype=torch.long))
    assert state.non_binary.count.item() == count


# ------------------------------------------------------------------ ownership, graphs (DESIGN §3)

@pytest.mark.parametrize("factory", ALL, ids=lambda f: f.__name__)
def test_refilled_input_buffers_do_not_change_the_state(factory):
    from tests.cases.retrieval import make_run

    preds, target, idx = make_run(3, n_queries=12, graded=factory is fm.retrieval_normalized_dcg)
    m = factory()
    want = m(preds, target, idx)
    bp, bt, bi = preds.clone(), target.clone(), idx.clone()
    s = m.update(m.init(), bp, bt, bi)
    bp.copy_(torch.rand_like(bp))  # the loader refills its buffers for the next batch
    bt.zero_()
    bi.fill_(3)
    torch.testing.assert_close(m.finalize(s), want)


def test_states_hold_no_autograd_graph():
    preds = torch.rand(50, requires_grad=True)
    scores = preds * 2  # a graph behind the input
    m = fm.retrieval_normalized_dcg()
    s = m.update(m.init(), scores, torch.randint(0, 3, (50,)), torch.randint(0, 5, (50,)))
    for leaf in fm.state.leaves(s):
        assert not leaf.requires_grad and leaf.grad_fn is None
    assert not fm.retrieval_map().is_differentiable


def test_metadata_for_every_factory():
    for factory in ALL:
        m = factory()
        assert m.higher_is_better is (factory is not fm.retrieval_fall_out), m.name
        assert m.is_differentiable is False and m.bounds == (0.0, 1.0), m.name
    assert fm.retrieval_mrr().state_key == fm.retrieval_normalized_dcg(top_k=3).state_key
    assert fm.retrieval_mrr().state_key != fm.retrieval_mrr(ignore_index=-1).state_key


def test_nan_survives_only_where_documented():
    with pytest.warns(UserWarning, match="empty input"):
        assert math.isnan(fm.retrieval_map().finalize(fm.retrieval_map().init()).item())
