"""Multilabel ranking metrics (scikit-learn's definitions), from one shared per-sample state.

For a sample with scores ``s``, relevant labels ``R`` and kept labels ``V``
(``ignore_index`` entries are left out of that sample's ranking):

* ranking average precision -- mean over ``i in R`` of
  ``|{j in R: s_j >= s_i}| / |{j in V: s_j >= s_i}|`` (1 when ``R`` is empty or all of ``V``);
* ranking loss -- the share of (relevant, irrelevant) pairs ordered wrongly,
  ``s_irrelevant >= s_relevant`` (0 when either set is empty);
* coverage error -- ``|{j in V: s_j >= min_{i in R} s_i}|`` (0 when ``R`` is empty).

Each is averaged over samples with at least one kept label. Only the order of
the scores matters, so logits and probabilities give the same values. The
three share one state key: a collection of them runs one update.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.classification import _empty, _format
from fmetrics.classification._docs import documented
from fmetrics.classification.stat_scores import counting
from fmetrics.metric import Metric
from fmetrics.family import Family
from fmetrics.recipe import factory

__all__ = ["multilabel_ranking_average_precision", "multilabel_ranking_loss", "multilabel_coverage_error"]


class RankingState(NamedTuple):
    precision: torch.Tensor  # float64: sum of per-sample ranking average precision
    loss: torch.Tensor  # float64: sum of per-sample ranking loss
    coverage: torch.Tensor  # float64: sum of per-sample coverage
    count: torch.Tensor  # int64: samples with at least one kept label
    invalid: validation.Invalid  # deferred record of entries that broke the value rule


_META = {
    "precision": dict(higher_is_better=True, bounds=(0.0, 1.0)),
    "loss": dict(higher_is_better=False, bounds=(0.0, 1.0)),
    "coverage": dict(higher_is_better=False, bounds=(0.0, None)),
}


def _make(name: str, field: str, num_labels, ignore_index, validate_args) -> Metric:
    _format.check_num(name, "num_labels", num_labels)
    task, num_ = "multilabel", 2
    _format.check_ignore_index(name, ignore_index)

    def init():
        zero = torch.zeros((), dtype=torch.float64)
        return RankingState(zero, zero.clone(), zero.clone(), torch.zeros((), dtype=torch.int64),
                            validation.invalid_init())

    def update(state, preds, target):
        count = counting(validate_args, (preds, target))
        f = _format.multilabel_inputs(name, preds, target, num_labels, ignore_index, validate=count)
        s = f.preds.movedim(1, -1).reshape(-1, num_labels)
        s = s if s.is_floating_point() else s.double()
        keep = f.keep.movedim(1, -1).reshape(-1, num_labels)
        rel = keep & (f.target.movedim(1, -1).reshape(-1, num_labels) == 1)
        irr = keep & ~rel
        ge = s[:, None, :] >= s[:, :, None]  # ge[n, i, j]: s_j >= s_i
        n_rel, n_keep = rel.sum(1), keep.sum(1)
        above_rel = (ge & rel[:, None, :]).sum(2).double()
        above_all = (ge & keep[:, None, :]).sum(2).double()
        ratio = torch.where(rel, above_rel / above_all.clamp(min=1), 0.0).sum(1) / n_rel.clamp(min=1)
        mixed = (n_rel > 0) & (n_rel < n_keep)
        precision = torch.where(mixed, ratio, 1.0)
        wrong = torch.where(rel, (ge & irr[:, None, :]).sum(2), 0).sum(1).double()
        loss = torch.where(mixed, wrong / (n_rel * (n_keep - n_rel)).clamp(min=1), 0.0)
        lowest = torch.where(rel, s, torch.inf).amin(1, keepdim=True)
        coverage = torch.where(n_rel > 0, ((s >= lowest) & keep).sum(1), 0).double()
        counted = n_keep > 0
        zero = torch.zeros((), dtype=torch.float64, device=s.device)
        return RankingState(
            state.precision + torch.where(counted, precision, zero).sum(),
            state.loss + torch.where(counted, loss, zero).sum(),
            state.coverage + torch.where(counted, coverage, zero).sum(),
            state.count + validation.count(counted),
            _format.flag(state.invalid, f),
        )

    def finalize(state):
        if validate_args:
            _format.report(name, state.invalid, num_)
        return getattr(state, field) / state.count

    def merge(a, b):
        return RankingState(a.precision + b.precision, a.loss + b.loss, a.coverage + b.coverage, a.count + b.count, validation.invalid_merge(a.invalid, b.invalid))

    tags = RankingState(precision="sum", loss="sum", coverage="sum", count="sum", invalid=None)
    check = _format.checker(name, task, num_, ignore_index) if validate_args else None
    fam = Family(name="multilabel_ranking", key=(num_labels, ignore_index, validate_args), init=init, update=update, reductions=tags,
                 merge=merge, check=check)
    return fam.metric(name, _empty.guard(name, lambda state: not bool(state.count.any()), finalize), is_differentiable=False, **_META[field])


@factory
@documented(returns="float64 0-d tensor in [0, 1] (NaN when no sample has a kept label).", inputs="ranking")
def multilabel_ranking_average_precision(*, num_labels: int, ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Label ranking average precision (scikit-learn's ``label_ranking_average_precision_score``).

    Example::

        >>> # scikit-learn's label_ranking_average_precision_score
        >>> fmetrics.multilabel_ranking_average_precision(num_labels=3)(torch.tensor([[0.75, 0.5, 1.0], [1.0, 0.2, 0.1]]),
        ...                                                  torch.tensor([[1, 0, 0], [0, 0, 1]]))
        tensor(0.4167, dtype=torch.float64)
    """
    return _make("multilabel_ranking_average_precision", "precision", num_labels, ignore_index, validate_args)


@factory
@documented(returns="float64 0-d tensor in [0, 1] (NaN when no sample has a kept label).", inputs="ranking")
def multilabel_ranking_loss(*, num_labels: int, ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Label ranking loss (scikit-learn's ``label_ranking_loss``): wrongly ordered pairs, ties count as wrong.

    Example::

        >>> preds = torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]])
        >>> target = torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]])
        >>> fmetrics.multilabel_ranking_loss(num_labels=3)(preds, target)  # scikit-learn's label_ranking_loss
        tensor(0.1250, dtype=torch.float64)
    """
    return _make("multilabel_ranking_loss", "loss", num_labels, ignore_index, validate_args)


@factory
@documented(returns="float64 0-d tensor in [1, L] (NaN when no sample has a kept label).", inputs="ranking")
def multilabel_coverage_error(*, num_labels: int, ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Coverage error (scikit-learn's ``coverage_error``): how deep the ranking goes to cover every relevant label.

    Example::

        >>> preds = torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]])
        >>> target = torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]])
        >>> fmetrics.multilabel_coverage_error(num_labels=3)(preds, target)  # scikit-learn's coverage_error
        tensor(1.7500, dtype=torch.float64)
    """
    return _make("multilabel_coverage_error", "coverage", num_labels, ignore_index, validate_args)
