"""Retrieval bad input (issue 28): ignored queries and empty streams beside torchmetrics 1.9, as
docs/retrieval.md ("Bad input") states them."""
import math

import pytest
import torch
import torchmetrics.retrieval as tmr

import fmetrics as fm

EMPTY = r"no samples were seen \(empty input\); the value is undefined and set to NaN"
PAIRS = [(fm.retrieval_map, tmr.RetrievalMAP), (fm.retrieval_normalized_dcg, tmr.RetrievalNormalizedDCG),
         (fm.retrieval_mrr, tmr.RetrievalMRR), (fm.retrieval_precision, tmr.RetrievalPrecision),
         (fm.retrieval_recall, tmr.RetrievalRecall), (fm.retrieval_fall_out, tmr.RetrievalFallOut),
         (fm.retrieval_hit_rate, tmr.RetrievalHitRate), (fm.retrieval_r_precision, tmr.RetrievalRPrecision),
         (fm.retrieval_auroc, tmr.RetrievalAUROC)]


@pytest.mark.parametrize("ours,theirs", PAIRS, ids=[p[0].__name__ for p in PAIRS])
@pytest.mark.parametrize("action", ["neg", "pos", "skip"])
def test_a_query_whose_every_row_is_ignored_does_not_exist(ours, theirs, action):
    """Query 1's rows are all ``ignore_index``: both libraries leave it out (torchmetrics filters the rows in
    ``update``), so the mean is over queries 0 and 2."""
    preds = torch.tensor([0.9, 0.2, 0.8, 0.3, 0.6, 0.5, 0.4])
    target = torch.tensor([1, 0, -1, -1, 1, 0, 0])
    indexes = torch.tensor([0, 0, 1, 1, 2, 2, 2])
    tm = theirs(ignore_index=-1, empty_target_action=action)
    tm.update(preds, target, indexes)
    got = ours(ignore_index=-1, empty_target_action=action)(preds, target, indexes)
    assert abs(float(got) - float(tm.compute())) < 1e-6
    per_query = ours(ignore_index=-1, empty_target_action=action, aggregation="none")(preds, target, indexes)
    assert per_query.shape == (2,)


@pytest.mark.parametrize("ours,theirs", PAIRS[:3], ids=[p[0].__name__ for p in PAIRS[:3]])
def test_every_row_ignored_is_nan_where_torchmetrics_raises(ours, theirs):
    preds, target, indexes = torch.tensor([0.8, 0.3]), torch.tensor([-1, -1]), torch.tensor([1, 1])
    with pytest.raises(ValueError, match="non-empty"):
        theirs(ignore_index=-1).update(preds, target, indexes)
    m = ours(ignore_index=-1)
    with pytest.warns(UserWarning, match=f"^{m.name}: {EMPTY}$"):
        assert math.isnan(float(m(preds, target, indexes)))


def test_every_query_skipped_is_zero_as_torchmetrics():
    preds, target, indexes = torch.tensor([0.8, 0.3, 0.5]), torch.tensor([0, 0, 0]), torch.tensor([0, 0, 1])
    tm = tmr.RetrievalMAP(empty_target_action="skip")
    tm.update(preds, target, indexes)
    assert float(tm.compute()) == float(fm.retrieval_map(empty_target_action="skip")(preds, target, indexes)) == 0.0
