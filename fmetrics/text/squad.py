"""`squad`: exact match and token F1 of extractive answers (the official SQuAD v1.1 evaluation)."""
from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any, NamedTuple

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.text._common import counts_family, empty, nan

__all__ = ["squad"]

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


class SquadState(NamedTuple):
    f1: torch.Tensor           # float64 sum of best F1 per question
    exact_match: torch.Tensor  # int64 questions answered exactly
    total: torch.Tensor        # int64 questions


def normalize_answer(s: str) -> str:
    """Lowercase, drop ASCII punctuation, drop the articles a/an/the, collapse whitespace (the official rules)."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def _f1(pred: str, truth: str) -> float:
    p = normalize_answer(pred).split() if pred else []
    t = normalize_answer(truth).split() if truth else []
    if not p or not t:
        return float(p == t)
    same = sum((Counter(p) & Counter(t)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(t)
    return 2 * precision * recall / (precision + recall)


def _as_list(name: str, arg: str, x: Any, keys: tuple) -> list:
    items = [x] if isinstance(x, dict) else x
    if not isinstance(items, (list, tuple)):
        raise validation.fail(name, arg, "a dict or a list of dicts", type(x).__name__)
    seen = set()
    for i, d in enumerate(items):
        if not isinstance(d, dict):
            raise validation.fail(name, arg, "a list of dicts", f"a {type(d).__name__} at position {i}")
        missing = [k for k in keys if k not in d]
        if missing:
            raise validation.fail(name, arg, f"dicts with keys {list(keys)}", f"keys {sorted(d)} at position {i}")
        qid = d["id"]
        if isinstance(qid, bool) or not isinstance(qid, (str, int)):
            raise validation.fail(name, arg, "'id' strings (or integers)", f"{qid!r} at position {i}")
        if qid in seen:
            raise validation.fail(name, arg, "one entry per 'id'", f"id {qid!r} again at position {i}")
        seen.add(qid)
    return list(items)


def _unmatched(name: str, arg: str, ids: list, others: set, what: str) -> None:
    """Raises naming the ids of ``arg`` that ``others`` lacks (a question without its prediction, or the converse)."""
    lost = [q for q in ids if q not in others]
    if lost:
        more = f" and {len(lost) - 1} more" if len(lost) > 1 else ""
        raise validation.fail(name, arg, f"{what} in the same update", f"id {lost[0]!r}{more} without one")


def squad_counts(preds: Any, target: Any) -> dict:
    name = "squad"
    preds = _as_list(name, "preds", preds, ("prediction_text", "id"))
    target = _as_list(name, "target", target, ("answers", "id"))
    answers = {}
    for i, p in enumerate(preds):
        if not isinstance(p["prediction_text"], str):
            raise validation.fail(name, "preds", "'prediction_text' strings",
                                  f"a {type(p['prediction_text']).__name__} at position {i}")
        answers[p["id"]] = p["prediction_text"]
    golds = []
    for i, t in enumerate(target):
        a = t["answers"]
        texts = a.get("text") if isinstance(a, dict) else None
        if not isinstance(texts, (list, tuple)) or not texts or not all(isinstance(s, str) for s in texts):
            raise validation.fail(name, "target", "'answers' dicts with a non-empty list of strings under 'text'",
                                  f"{a!r} at position {i}")
        golds.append(texts)
    _unmatched(name, "target", [t["id"] for t in target], set(answers), "a prediction (preds) for every question")
    _unmatched(name, "preds", list(answers), {t["id"] for t in target}, "a question (target) for every prediction")
    f1 = 0.0
    em = 0
    for t, texts in zip(target, golds):
        pred = answers[t["id"]]
        em += max(int(normalize_answer(pred) == normalize_answer(x)) for x in texts)
        f1 += max(_f1(pred, x) for x in texts)
    return {"f1": f1, "exact_match": em, "total": len(target)}


@factory
def squad() -> Metric:
    """SQuAD exact match and F1 in percent: ``100 * mean over questions of max over gold answers``.

    Answers are normalized by the official rules (lowercase, ASCII
    punctuation removed, articles ``a``/``an``/``the`` removed, whitespace
    collapsed); F1 is over normalized tokens (bag of words). Every question
    of an update needs its prediction (same ``id``) in that update and the
    converse; an unanswered question is an error (the official script scores
    it 0: give it ``"prediction_text": ""`` for that).

    Args:
      none: the metric has no options (as torchmetrics' ``SQuAD()``).

    Inputs:
      ``update(state, preds, target)``: ``preds`` a dict or list of dicts
      ``{"prediction_text": str, "id": str}``; ``target`` a dict or list of
      dicts ``{"answers": {"text": [str, ...], ...}, "id": str}``.

    Returns:
      ``{"exact_match": float64, "f1": float64}``, both in [0, 100]; NaN with
      a warning when no question was seen.

    Example::

        >>> preds = [{"prediction_text": "1976", "id": "56e10a3be3433e1400422b22"}]
        >>> target = [{"answers": {"answer_start": [97], "text": ["1976"]}, "id": "56e10a3be3433e1400422b22"}]
        >>> fmetrics.squad()(preds, target)
        {'exact_match': tensor(100., dtype=torch.float64), 'f1': tensor(100., dtype=torch.float64)}
    """
    fam = counts_family("squad", (), SquadState, squad_counts, dtypes={"f1": torch.float64})

    def finish(s: SquadState) -> dict:
        if empty("squad", s.total):
            return {"exact_match": nan(), "f1": nan()}
        n = s.total.double()
        return {"exact_match": 100.0 * s.exact_match.double() / n, "f1": 100.0 * s.f1 / n}

    return fam.metric("squad", finish, higher_is_better=True, is_differentiable=False, bounds=(0.0, 100.0))
