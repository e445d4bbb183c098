"""Retrieval semantics by hand: ties, empty queries, aggregation, bad input, shared grouping."""
from __future__ import annotations

import math

import pytest
import torch

import fmetrics as fm
from fmetrics.retrieval import _ranking

T = torch.tensor


def _log2(x):
    return math.log2(x)


def test_ties_are_broken_pessimistically():
    # one query, scores tie: [.5 rel, .5 non-rel, .5 rel, .2 non-rel]; pessimistic order: non, rel, rel, non
    preds, target, idx = T([.5, .5, .5, .2]), T([1, 0, 1, 0]), T([7, 7, 7, 7])
    assert fm.retrieval_mrr()(preds, target, idx).item() == pytest.approx(1 / 2)
    assert fm.retrieval_map()(preds, target, idx).item() == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert fm.retrieval_precision(top_k=1)(preds, target, idx).item() == 0.0
    assert fm.retrieval_hit_rate(top_k=1)(preds, target, idx).item() == 0.0
    assert fm.retrieval_fall_out(top_k=1)(preds, target, idx).item() == pytest.approx(1 / 2)
    assert fm.retrieval_r_precision()(preds, target, idx).item() == pytest.approx(1 / 2)
    # -0.0 and 0.0 tie, in the packed sort and in the general one (query ids spanning > 2^30)
    for far in (1, 2**40):
        for scores in ([0.0, -0.0, 1.0], [-0.0, 0.0, 1.0]):
            hit = fm.retrieval_hit_rate(top_k=1, aggregation="none")(T(scores), T([1, 0, 1]), T([0, 0, far]))
            assert hit.tolist() == [0.0, 1.0]
    # a constant score earns nothing
    assert fm.retrieval_mrr()(T([.3, .3, .3]), T([0, 0, 1]), T([1, 1, 1])).item() == pytest.approx(1 / 3)


def test_ndcg_averages_gains_over_ties():
    # ranks 0-1 tie with gains 3 and 0 -> each rank gets 1.5; rank 2 gain 1
    got = fm.retrieval_normalized_dcg()(T([.9, .9, .1]), T([3, 0, 1]), T([0, 0, 0])).item()
    dcg = 1.5 + 1.5 / _log2(3) + 1 / _log2(4)
    idcg = 3 + 1 / _log2(3)
    assert got == pytest.approx(dcg / idcg)
    # the tie straddling k=1: only the first rank's discount counts
    got = fm.retrieval_normalized_dcg(top_k=1)(T([.9, .9, .1]), T([3, 0, 1]), T([0, 0, 0])).item()
    assert got == pytest.approx(1.5 / 3)


def test_nonpositive_scores_are_not_retrieved_for_map_mrr_precision_recall():
    preds, target, idx = T([.4, -1.0, 0.0]), T([0, 1, 1]), T([0, 0, 0])
    assert fm.retrieval_map()(preds, target, idx).item() == 0.0
    assert fm.retrieval_mrr()(preds, target, idx).item() == 0.0
    assert fm.retrieval_recall()(preds, target, idx).item() == 0.0
    assert fm.retrieval_hit_rate()(preds, target, idx).item() == 1.0  # no score threshold here
    assert fm.retrieval_r_precision()(preds, target, idx).item() == pytest.approx(1 / 2)


@pytest.mark.parametrize("action,expected", [("neg", 0.5), ("pos", 1.0), ("skip", 1.0)])
def test_empty_target_action(action, expected):
    preds, target, idx = T([.9, .1, .5]), T([1, 0, 0]), T([0, 0, 3])
    assert fm.retrieval_map(empty_target_action=action)(preds, target, idx).item() == expected


def test_error_action_names_the_number_of_queries():
    preds, target, idx = T([.9, .1, .5, .4, .3]), T([1, 0, 0, 0, 0]), T([0, 0, 3, 4, 4])
    with pytest.raises(ValueError, match="2 of 3 queries had no relevant document"):
        fm.retrieval_normalized_dcg(empty_target_action="error")(preds, target, idx)
    with pytest.raises(ValueError, match="1 of 2 queries had no non-relevant document"):
        fm.retrieval_fall_out(empty_target_action="error")(T([.9, .1, .5]), T([1, 0, 1]), T([0, 0, 3]))


def test_aggregations_and_per_query_values():
    preds, target, idx = T([.9, .1, .5, .6, .4, .2]), T([0, 1, 0, 1, 0, 1]), T([5, 5, 2, 2, 9, 9])
    per_query = fm.retrieval_mrr(aggregation="none")(preds, target, idx)  # ids 2, 5, 9
    torch.testing.assert_close(per_query, T([1.0, 0.5, 0.5], dtype=torch.float64))
    assert fm.retrieval_mrr(aggregation="median")(preds, target, idx).item() == 0.5
    assert fm.retrieval_mrr(aggregation="max")(preds, target, idx).item() == 1.0
    assert fm.retrieval_mrr(aggregation=lambda v, dim: v.sum(dim))(preds, target, idx).item() == 2.0
    skipped = fm.retrieval_mrr(aggregation="none", empty_target_action="skip")(T([.1, .2]), T([0, 1]), T([0, 1]))
    assert math.isnan(skipped[0].item()) and skipped[1].item() == 1.0


def test_recall_at_fixed_precision_per_query():
    # query 0: precision@k = 1, .5, .67 ; recall@k = .5, .5, 1 -> (1, 3) at min_precision .6
    # query 1: one non-relevant row first: precision@k = 0, .5 -> nothing reaches .6 -> (0, K=3)
    preds, target, idx = T([.5, .3, .2, .9, .1]), T([1, 0, 1, 0, 1]), T([0, 0, 0, 1, 1])
    recall, k = fm.retrieval_recall_at_fixed_precision(min_precision=0.6, aggregation="none")(preds, target, idx)
    torch.testing.assert_close(recall, T([1.0, 0.0], dtype=torch.float64))
    assert k.tolist() == [3, 3]


def test_empty_input_is_nan_with_a_warning():
    # docs/conventions.md: no samples -> the value is undefined: NaN, with a UserWarning naming the metric
    for m in (fm.retrieval_map(), fm.retrieval_normalized_dcg(top_k=3), fm.retrieval_auroc(),
              fm.retrieval_map(ignore_index=-1)):
        with pytest.warns(UserWarning, match=f"{m.name}: no samples were seen \(empty input\)"):
            assert math.isnan(m.finalize(m.init()).item())
    with pytest.warns(UserWarning, match="no samples were seen"):  # every row ignored is empty input too
        assert math.isnan(fm.retrieval_mrr(ignore_index=-1)(T([.1, .2]), T([-1, -1]), T([0, 1])).item())
    with pytest.warns(UserWarning, match="no samples were seen"):
        assert fm.retrieval_mrr(aggregation="none")(T([]), T([]), T([], dtype=torch.long)).shape == (0,)
    with pytest.warns(UserWarning, match="no samples were seen"):
        p, r, k = fm.retrieval_precision_recall_curve(max_k=2)(T([]), T([]), T([], dtype=torch.long))
    assert torch.isnan(p).all() and torch.isnan(r).all() and k.tolist() == [1, 2]
    with pytest.warns(UserWarning, match="no samples were seen"):
        r, k = fm.retrieval_recall_at_fixed_precision(max_k=2)(T([]), T([]), T([], dtype=torch.long))
    assert math.isnan(r.item()) and k.item() == 2


def test_every_query_skipped_gives_zero():
    # not empty input: queries were seen, and all were skipped (torchmetrics' value)
    m = fm.retrieval_map(empty_target_action="skip")
    assert m(T([.1, .2]), T([0, 0]), T([0, 1])).item() == 0.0


def test_query_split_across_batches_and_ranks():
    preds, target, idx = T([.9, .1, .5, .6, .4, .2]), T([0, 1, 0, 1, 0, 1]), T([5, 5, 2, 2, 9, 9])
    m = fm.retrieval_map()
    a = m.update(m.init(), preds[::2], target[::2], idx[::2])
    b = m.update(m.init(), preds[1::2], target[1::2], idx[1::2])
    assert m.finalize(m.merge(b, a)).item() == pytest.approx(m(preds, target, idx).item())


def test_collection_shares_state_update_and_grouping(monkeypatch):
    metrics = {"ndcg@10": fm.retrieval_normalized_dcg(top_k=10), "map": fm.retrieval_map(),
               "mrr": fm.retrieval_mrr(), "p@5": fm.retrieval_precision(top_k=5), "auroc": fm.retrieval_auroc()}
    c = fm.collection(metrics)
    state = c.init()
    assert len(state) == 1  # one state for all members
    preds, target, idx = torch.rand(300), (torch.rand(300) < .3).long(), torch.randint(0, 30, (300,))
    state = c.update(state, preds, target, idx)
    built = []
    original = _ranking.Ranking.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(_ranking.Ranking, "__init__", counting)
    out = c.finalize(state)
    assert len(built) == 1  # one grouping/sort for the five members
    assert c.finalize(state) == out and len(built) == 2  # a second finalize ranks again: no hidden cache
    for name, m in metrics.items():
        torch.testing.assert_close(out[name], m(preds, target, idx))


def test_separate_finalize_calls_share_no_hidden_state(monkeypatch):
    built = []
    original = _ranking.Ranking.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(_ranking.Ranking, "__init__", counting)
    m, mrr = fm.retrieval_map(), fm.retrieval_mrr()
    a = m.update(m.init(), T([.1, .9]), T([1, 0]), T([0, 0]))
    b = m.update(m.init(), T([.9, .1]), T([1, 0]), T([0, 0]))
    assert m.finalize(a).item() == 0.5 and m.finalize(b).item() == 1.0
    assert mrr.finalize(a).item() == 0.5 and len(built) == 3  # each finalize ranks its own state
    # the module keeps no grouping between calls
    assert not [k for k, v in vars(_ranking).items() if isinstance(v, (list, dict)) and not k.startswith("__")]


# ------------------------------------------------------------------ bad input

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


def test_bad_dtypes_and_config():
    with pytest.raises(ValueError, match="argument `preds` expected a floating point"):
        fm.retrieval_mrr()(T([1, 2]), T([1, 0]), T([0, 0]))
    for bad in ({"top_k": 0}, {"top_k": 2.0}, {"top_k": True}, {"empty_target_action": "drop"},
                {"aggregation": "sum"}, {"ignore_index": 1.5}):
        with pytest.raises(ValueError):
            fm.retrieval_precision(**bad)
    with pytest.raises(ValueError, match="adaptive_k"):
        fm.retrieval_precision(adaptive_k=1)
    with pytest.raises(ValueError, match="max_fpr"):
        fm.retrieval_auroc(max_fpr=0.0)
    with pytest.raises(ValueError, match="min_precision"):
        fm.retrieval_recall_at_fixed_precision(min_precision=1.5)
    with pytest.raises(ValueError, match="max_k"):
        fm.retrieval_precision_recall_curve(max_k=-2)


def test_packed_sort_and_general_sort_agree():
    from tests.cases.retrieval import make_run

    preds, target, idx = make_run(5, n_queries=50)  # float32 scores with ties: one packed sort
    metrics = [fm.retrieval_map(aggregation="none"), fm.retrieval_mrr(top_k=3, aggregation="none"),
               fm.retrieval_precision(top_k=4, aggregation="none"), fm.retrieval_fall_out(aggregation="none"),
               fm.retrieval_hit_rate(top_k=2, aggregation="none"), fm.retrieval_auroc(aggregation="none"),
               fm.retrieval_normalized_dcg(top_k=3, aggregation="none"),
               fm.retrieval_precision_recall_curve(max_k=5, aggregation="none")]
    # float64 scores that float32 cannot hold (same order, same ties), and ids spanning > 2^30: general sorts
    variants = [(preds.double() * (1 + 1e-12), idx), (preds, idx * 2**31)]
    for m in metrics:
        want = m(preds, target, idx)
        for p, i in variants:
            torch.testing.assert_close(m(p, target, i), want, msg=m.name)


def test_numpy_and_torch_kernels_and_ideal_dcg_paths_agree(monkeypatch):
    g = torch.Generator().manual_seed(1)
    preds = torch.randint(0, 8, (400,), generator=g) / 4 - 0.5  # ties, zero and negative scores
    target = torch.randint(0, 5, (400,), generator=g)  # graded: the packed keys hold the gains
    idx = torch.randint(0, 30, (400,), generator=g)
    binary = (target > 2).long()
    cases = [(fm.retrieval_normalized_dcg(top_k=k, aggregation="none"), target) for k in (None, 3)] + [
        (m(aggregation="none"), binary) for m in (fm.retrieval_map, fm.retrieval_mrr, fm.retrieval_auroc,
                                                  fm.retrieval_r_precision, fm.retrieval_recall)]

    def values(i=idx):
        return [m(preds, t, i) for m, t in cases]

    want = values()
    # ids spanning > 2^30: the general sort, gains gathered by the row order, the ideal DCG by a second sort
    torch.testing.assert_close(values(idx * 2**31), want)
    # the torch kernels other devices use instead of numpy's (positions, packing, sorting)
    monkeypatch.setattr(_ranking, "_on_host", lambda x: False)
    torch.testing.assert_close(values(), want)


def test_ndcg_binary_targets_match_torchmetrics():
    # binary gains: the ideal DCG is the discount summed over each query's relevant count
    tmr = pytest.importorskip("torchmetrics.retrieval")
    g = torch.Generator().manual_seed(2)
    idx = torch.randint(0, 12, (150,), generator=g)
    preds, target = torch.rand(150, generator=g), (torch.rand(150, generator=g) < 0.3).long()
    for k in (None, 1, 3):
        want = tmr.RetrievalNormalizedDCG(top_k=k)(preds, target, indexes=idx)
        torch.testing.assert_close(fm.retrieval_normalized_dcg(top_k=k)(preds, target, idx), want.double(),
                                   rtol=1e-6, atol=1e-7)


def test_ndcg_float_gains_match_torchmetrics():
    tmr = pytest.importorskip("torchmetrics.retrieval")
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, 12, (150,), generator=g)
    preds = torch.rand(150, generator=g)
    target = torch.rand(150, generator=g) * 3 * (torch.rand(150, generator=g) < 0.5)
    for k in (None, 3):
        want = tmr.RetrievalNormalizedDCG(top_k=k, aggregation=lambda v, dim=None: v)(preds, target, indexes=idx)
        got = fm.retrieval_normalized_dcg(top_k=k, aggregation="none")(preds, target, idx)
        torch.testing.assert_close(got, want.double(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("host", [True, False], ids=["numpy-blocks", "torch"])
@pytest.mark.parametrize("spacing", [1, 7, 200], ids=["dense-ids", "sparse-ids", "wide-ids-sample-sorted"])
def test_ndcg_top_k_redoes_only_tied_queries_against_sklearn(monkeypatch, host, spacing):
    """NDCG@k over many queries, a few with tied scores (inside, across and below the cutoff): the
    untied queries take the top rows' gains, the tied ones their tie groups' means (scikit-learn's rule).
    Query ids spanning 16 bits take the sample sort of large key arrays (`_keys.BUCKET_ROWS`, forced here)."""
    skm = pytest.importorskip("sklearn.metrics")
    from fmetrics import _keys

    monkeypatch.setattr(_ranking, "_BLOCK", 64)  # many blocks of queries
    monkeypatch.setattr(_ranking, "_SAMPLE_BLOCK", 100)
    monkeypatch.setattr(_keys, "BUCKET_ROWS", 1)
    if not host:
        monkeypatch.setattr(_ranking, "_on_host", lambda x: False)
    g = torch.Generator().manual_seed(5)
    queries, per = 400, 9
    preds = torch.rand(queries, per, generator=g)
    tied = torch.randperm(queries, generator=g)[:40]
    preds[tied] = torch.round(preds[tied] * 3) / 3  # 4 score levels in 9 rows: ties at every rank
    target = torch.randint(0, 4, (queries, per), generator=g) * (torch.rand(queries, per, generator=g) < 0.5)
    ids = torch.arange(queries)[:, None].expand(queries, per) * spacing
    order = torch.randperm(queries * per, generator=g)
    flat = [x.reshape(-1)[order] for x in (preds, target, ids)]
    for k in (1, 3, 9, 12):
        got = fm.retrieval_normalized_dcg(top_k=k, aggregation="none")(*flat)
        want = [skm.ndcg_score(target[q:q + 1].numpy(), preds[q:q + 1].numpy(), k=k) if target[q].any() else 0.0
                for q in range(queries)]
        torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), rtol=1e-12, atol=1e-12)
