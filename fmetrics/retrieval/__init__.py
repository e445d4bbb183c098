"""Retrieval metrics over query groups: rows grouped by ``indexes`` with sort and segment ops.

Every metric takes ``update(state, preds, target, indexes)`` and shares one
state (the rows, as chunks) per ``ignore_index``; grouping happens once, in
`finalize`. Semantics and differences from trec_eval: docs/retrieval.md.
"""
from fmetrics.retrieval._state import RetrievalState
from fmetrics.retrieval.auroc import retrieval_auroc
from fmetrics.retrieval.average_precision import retrieval_average_precision, retrieval_map
from fmetrics.retrieval.fall_out import retrieval_fall_out
from fmetrics.retrieval.hit_rate import retrieval_hit_rate
from fmetrics.retrieval.ndcg import retrieval_normalized_dcg
from fmetrics.retrieval.precision import retrieval_precision
from fmetrics.retrieval.precision_recall_curve import (
    retrieval_precision_recall_curve,
    retrieval_recall_at_fixed_precision,
)
from fmetrics.retrieval.r_precision import retrieval_r_precision
from fmetrics.retrieval.recall import retrieval_recall
from fmetrics.retrieval.reciprocal_rank import retrieval_mrr, retrieval_reciprocal_rank

__all__ = [
    "retrieval_auroc",
    "retrieval_average_precision",
    "retrieval_fall_out",
    "retrieval_hit_rate",
    "retrieval_map",
    "retrieval_mrr",
    "retrieval_normalized_dcg",
    "retrieval_precision",
    "retrieval_precision_recall_curve",
    "retrieval_r_precision",
    "retrieval_recall",
    "retrieval_recall_at_fixed_precision",
    "retrieval_reciprocal_rank",
]
