"""The score state shared by every curve metric (ROC, PR, AUROC, AP, fixed points, EER, log-AUC).

Every task is seen as ``K`` binary *columns* of (score, label) pairs: binary
``K = 1``, multiclass one column per class (label ``target == c``, score the
class probability), multilabel one column per label. Two state layouts:

* exact (``thresholds=None``) -- `ExactState`: the scores and a compact label
  code (``-1`` = dropped: ``ignore_index``, invalid label, NaN score), kept as
  chunks (O(1) per update, joined once in ``finalize``, O(total) per run).
  With ``validate_args`` (labels known to be 0/1), binary / multilabel scores
  are stored as given; bit 1 of the int8 code (``label | 2``) marks an entry
  of a logits batch, and ``finalize`` applies the ``sigmoid`` to those entries
  only (elementwise, so the values equal a per-batch ``sigmoid``; a batch of
  probabilities costs no pass).
* binned (``thresholds`` an int, list or 1-D tensor) -- `BinnedState`: an
  int64 histogram ``(K, T + 1, 2)`` counting entries per column, threshold
  bucket (the number of thresholds ``<= score``) and label. It is sum-mergeable
  and O(T) in memory; ``update`` is one ``searchsorted`` and one ``scatter_add``.

Scores are probabilities; a batch with any kept score outside ``[0, 1]`` is
taken as logits (``sigmoid``; ``softmax`` over classes for multiclass), as in
torchmetrics, without a host sync. Integer predictions are used as hard 0/1
scores (AUROC / AP warn about them).

`family` validates the configuration and returns a `Family` whose
``metric(finalize)`` builds a `Metric`; every metric over one configuration
has the same state key, so a `fmetrics.collection` of them runs one update.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Callable, NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.classification import _format
from fmetrics.classification.curves._curve import Counts, exact_counts, is_hard
from fmetrics.metric import Metric
from fmetrics.state import cat_chunks, merge_fields

TASKS = ("binary", "multiclass", "multilabel")


class ExactState(NamedTuple):
    scores: tuple  # chunks of float (n,) binary or (n, K)
    labels: tuple  # chunks: int8 (n,) / (n, L): -1 or label (| 2 in a logits batch, with validate_args);
    #                multiclass int64 (n,) class or -1
    invalid: torch.Tensor  # int64 (3,): dropped entries per rule of _format.RULES


class BinnedState(NamedTuple):
    hist: torch.Tensor  # int64 (K, T + 1, 2): column x threshold bucket x label
    soft: torch.Tensor  # int64: kept scores that are neither 0 nor 1
    invalid: torch.Tensor  # int64 (3,)


def check_thresholds(name: str, thresholds) -> Optional[torch.Tensor]:
    """``None`` (exact), an int ``>= 2`` (``linspace(0, 1, n)``), a list of floats in [0, 1] or a 1-D tensor."""
    if thresholds is None:
        return None
    if isinstance(thresholds, bool):
        pass
    elif isinstance(thresholds, int):
        if thresholds >= 2:
            return torch.linspace(0, 1, thresholds)
    elif isinstance(thresholds, (list, tuple)):
        if thresholds and all(isinstance(t, (int, float)) and not isinstance(t, bool) and 0 <= t <= 1
                              for t in thresholds):
            return torch.tensor([float(t) for t in thresholds])
    elif isinstance(thresholds, torch.Tensor):
        if thresholds.dim() == 1 and thresholds.numel() and thresholds.is_floating_point():
            return thresholds.detach().cpu().clone()
    raise validation.fail(name, "thresholds", "None, an int >= 2, a non-empty list of floats in [0, 1] "
                          "or a 1-D float tensor", repr(thresholds))


def check_fraction(name: str, arg: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise validation.fail(name, arg, "a float in [0, 1]", repr(value))
    return float(value)


def check_average(name: str, average, allowed) -> Optional[str]:
    """``None`` and ``"none"`` are the same (per-column results)."""
    average = "none" if average is None else average
    validation.check_policy(name, "average", average, allowed)
    return average


def _logits_flag(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """0-d bool: a kept entry of ``x`` lies outside ``[0, 1]`` (torchmetrics' rule; NaN does not count).

    Two passes and no host sync: dropped entries become 0.5, then one ``aminmax``
    (``min < 0 or max > 1``) instead of five elementwise passes.
    """
    if x.numel() == 0:
        return torch.zeros((), dtype=torch.bool, device=x.device)
    lo, hi = torch.aminmax(torch.where(keep, x, 0.5))
    return (lo < 0) | (hi > 1)


def _if_logits(x: torch.Tensor, keep: torch.Tensor, normalize: Callable) -> torch.Tensor:
    """``normalize(x)`` when a kept entry lies outside ``[0, 1]`` (torchmetrics' rule), without a sync."""
    return torch.where(_logits_flag(x, keep), normalize(x), x)


def _as_scores(preds: torch.Tensor) -> torch.Tensor:
    """float32/64 scores; 16-bit floats widen, integer (hard 0/1) predictions become float32."""
    if preds.is_floating_point():
        return preds.float() if preds.dtype in (torch.float16, torch.bfloat16) else preds
    return preds.float()


@dataclasses.dataclass(frozen=True)
class Family:
    """The state of one (task, num, thresholds, ignore_index) configuration.

    ``update`` formats a batch into columns; ``counts(state)`` gives the
    per-column `Counts` (reporting invalid input first), ``pooled(state)`` the
    counts of all columns pooled (micro average).
    """

    name: str
    task: str
    num: int
    thresholds: Optional[torch.Tensor]
    ignore_index: Optional[int]
    validate: bool
    sorted_thresholds: Optional[torch.Tensor] = None

    # ------------------------------------------------------------- update

    def columns(self, preds, target, lazy: bool = False):
        """One batch as ``(scores (n, K), labels (n, K) int64, keep (n, K) bool, invalid (3,))``.

        ``lazy`` (binary / multilabel, with validation): the scores stay as given and ``labels`` are the
        int8 exact-state codes (``-1`` dropped, ``label | 2`` in a logits batch), made from the raw
        targets without an int64 temporary.
        """
        name, task = self.name, self.task
        if task != "multiclass":
            if task == "binary":
                f = _format.binary_inputs(name, preds, target, self.ignore_index, validate=self.validate,
                                          zero_dropped=not lazy)
            else:
                f = _format.multilabel_inputs(name, preds, target, self.num, self.ignore_index,
                                              validate=self.validate, zero_dropped=not lazy)
            width = 1 if task == "binary" else self.num
            keep, target = (x.movedim(1, -1).reshape(-1, width) for x in (f.keep, f.target))
            scores = _as_scores(f.preds).movedim(1, -1).reshape(-1, width)
            if lazy:
                flag = _logits_flag(scores, keep).to(torch.int8) * 2  # kept targets are 0 / 1
                return scores, target.to(torch.int8).bitwise_or_(flag).masked_fill_(~keep, -1), keep, f.invalid
            return _if_logits(scores, keep, torch.sigmoid), target, keep, f.invalid
        f = _format.multiclass_inputs(name, preds, target, self.num, self.ignore_index, validate=self.validate)
        if not f.preds.is_floating_point():
            raise validation.fail(name, "preds", "float scores of shape (N, C, ...)",
                                  f"labels of shape {tuple(preds.shape)}")
        scores = f.preds.movedim(1, -1).reshape(-1, self.num)
        keep = f.keep.reshape(-1, 1)
        scores = _if_logits(_as_scores(scores), keep, lambda x: x.softmax(1))
        return scores, f.target.reshape(-1), keep, f.invalid

    def init(self):
        zero3 = torch.zeros(3, dtype=torch.int64)
        if self.thresholds is None:
            return ExactState((), (), zero3)
        k = 1 if self.task == "binary" else self.num
        return BinnedState(torch.zeros(k, self.thresholds.shape[0] + 1, 2, dtype=torch.int64),
                           torch.zeros((), dtype=torch.int64), zero3)

    def update(self, state, preds, target):
        exact = self.thresholds is None
        lazy = exact and self.task != "multiclass" and self.validate
        scores, labels, keep, invalid = self.columns(preds, target, lazy=lazy)
        if exact:
            if self.task == "multiclass":
                code = torch.where(keep[:, 0], labels, -1)
            else:
                code = labels if lazy else torch.where(keep, labels, -1).to(torch.int8)
                scores, code = (scores[:, 0], code[:, 0]) if self.task == "binary" else (scores, code)
            # detached: a kept chunk must not hold the caller's autograd graph alive
            return ExactState(state.scores + (scores.detach(),), state.labels + (code,), state.invalid + invalid)
        if self.task == "multiclass":
            labels = labels[:, None] == torch.arange(self.num, device=labels.device)
        else:
            labels = labels == 1  # with validate_args=False an invalid label must not index another bucket
        keep = keep.expand(scores.shape)
        thr = self.sorted_thresholds
        dtype = torch.promote_types(scores.dtype, thr.dtype)
        bucket = torch.searchsorted(thr.to(scores.device, dtype), scores.to(dtype).contiguous(), right=True)
        width = thr.shape[0] + 1
        col = torch.arange(scores.shape[1], device=scores.device) * width
        index = ((bucket + col) * 2 + labels.long()).reshape(-1)
        hist = torch.zeros(state.hist.numel(), dtype=torch.int64, device=scores.device)
        hist = hist.scatter_add(0, index, keep.reshape(-1).long()).reshape(state.hist.shape)
        soft = validation.count((scores != 0) & (scores != 1) & keep)
        return BinnedState(state.hist + hist, state.soft + soft, state.invalid + invalid)

    # ------------------------------------------------------------- finalize

    def report(self, state) -> None:
        if self.validate:
            _format.report(self.name, state.invalid)

    def _pairs(self, state):
        """Exact state: per column ``(scores, labels bool)`` of the kept entries."""
        width = 1 if self.task == "binary" else self.num
        scores = cat_chunks(state.scores, torch.empty((0,) if self.task == "binary" else (0, width)))
        code = cat_chunks(state.labels, torch.empty((0, width) if self.task == "multilabel" else (0,),
                                                    dtype=torch.int8))
        if self.task == "multiclass":
            keep = code >= 0
            if not bool(keep.all()):
                scores, code = scores[keep], code[keep]
            return [(scores[:, k], code == k) for k in range(width)]
        if self.validate:
            scores, code = self._decode(scores, code)
        if self.task == "binary":
            keep = code >= 0
            if not bool(keep.all()):
                scores, code = scores[keep], code[keep]
            return [(scores, code == 1)]
        out = []
        for k in range(width):
            keep = code[:, k] >= 0
            out.append((scores[keep, k], code[keep, k] == 1))
        return out

    @staticmethod
    def _decode(scores: torch.Tensor, code: torch.Tensor):
        """Validated binary / multilabel codes: the sigmoid applied to the entries of logits batches
        (``code >= 2``) and the codes reduced to ``-1 / 0 / 1``. One ``amax`` of the codes read as
        uint8 (``-1`` is 255) settles the common case: probabilities and nothing dropped."""
        if code.numel() == 0 or int(code.view(torch.uint8).amax()) < 2:
            return scores, code
        logits = code >= 2
        if bool(logits.any()):
            scores = torch.where(logits, scores.sigmoid(), scores)
        return scores, torch.where(code >= 0, code & 1, -1)

    def _binned(self, hist: torch.Tensor) -> list:
        """Binned: per column `Counts` at the thresholds in the order the user gave them."""
        thr = self.thresholds.to(hist.device)
        rank = torch.argsort(torch.argsort(thr, stable=True), stable=True)
        ge = hist.flip(1).cumsum(1).flip(1)  # entries with bucket >= b
        above = ge[:, 1:][:, rank]  # entries with score >= thresholds[i]
        return [Counts(above[k, :, 0], above[k, :, 1], thr, ge[k, 0, 1], ge[k, 0, 0], False)
                for k in range(hist.shape[0])]

    def exact_pairs(self, state) -> list:
        """Exact state: per column ``(scores, labels bool)`` of the kept entries (reports invalid input)."""
        self.report(state)
        return self._pairs(state)

    def counts(self, state) -> list:
        """Per-column `Counts` (one for binary)."""
        self.report(state)
        if self.thresholds is not None:
            return self._binned(state.hist)
        return [exact_counts(s, y) for s, y in self._pairs(state)]

    def pooled(self, state) -> Counts:
        """The counts of every column pooled (the micro average)."""
        self.report(state)
        if self.thresholds is not None:
            return self._binned(state.hist.sum(0, keepdim=True))[0]
        pairs = self._pairs(state)
        return exact_counts(torch.cat([s for s, _ in pairs]), torch.cat([y for _, y in pairs]))

    @property
    def absent_recall(self) -> float:
        """Exact recall of a column without positives: NaN for a multiclass class, else 1 (torchmetrics)."""
        return float("nan") if self.task == "multiclass" else 1.0

    def warn_if_hard(self, state, counts: list = (), hard: bool = False) -> None:
        """Warns when every kept score is exactly 0 or 1: a ranking metric then measures the labels.

        Binned: from the state's count of soft scores; exact: from the columns'
        distinct thresholds (``counts``), or ``hard`` as found by the caller.
        """
        if self.thresholds is not None:
            hard = int(state.soft) == 0 and int(state.hist.sum()) > 0
        elif counts:
            hard = any(c.thr.numel() for c in counts) and all(is_hard(c.thr) for c in counts)
        if hard:
            warnings.warn(f"{self.name}: every prediction is exactly 0 or 1 (hard labels, not scores); the "
                          "result measures the labels, not a ranking. Pass probabilities or logits.",
                          UserWarning, stacklevel=3)

    # ------------------------------------------------------------- metric

    @property
    def key(self) -> tuple:
        thr = None if self.thresholds is None else (str(self.thresholds.dtype), tuple(self.thresholds.tolist()))
        return ("classification_scores", self.task, self.num, thr, self.ignore_index, self.validate)

    def metric(self, finalize: Callable) -> Metric:
        if self.thresholds is None:
            tags = ExactState(scores="cat", labels="cat", invalid="sum")
        else:
            tags = BinnedState(hist="sum", soft="sum", invalid="sum")
        return Metric(init=self.init, update=self.update, merge=merge_fields(tags), finalize=finalize,
                      name=self.name, state_key=self.key, reductions=tags)


def family(name: str, task: str, num: int = 1, thresholds=None, ignore_index=None, validate_args=True) -> Family:
    """Validates a curve metric's configuration; ``num`` is ``num_classes`` / ``num_labels`` (1 for binary)."""
    if task != "binary":
        _format.check_num(name, "num_classes" if task == "multiclass" else "num_labels", num)
    _format.check_ignore_index(name, ignore_index)
    if not isinstance(validate_args, bool):
        raise validation.fail(name, "validate_args", "a bool", repr(validate_args))
    thresholds = check_thresholds(name, thresholds)
    ordered = None if thresholds is None else torch.sort(thresholds).values
    return Family(name, task, num, thresholds, ignore_index, validate_args, ordered)
