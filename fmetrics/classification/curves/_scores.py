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

`family` validates the configuration and returns a `Scores` spec; its
``family`` is the `fmetrics.Family` of that configuration, whose shared step
(`Prepared`) reports invalid input once and sorts each column at most once,
lazily: a `fmetrics.collection` of ROC, AUROC and AP over one configuration
keeps one state, runs one update per batch and sorts once in ``finalize``.
Members are made with ``spec.metric(finish, **metadata)``, ``finish`` taking
the `Prepared` state.
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Callable, List, Literal, NamedTuple, Optional, Union

import torch

from fmetrics import validation
from fmetrics.classification import _empty, _format
from fmetrics.classification.curves import _curve
from fmetrics.classification.curves._curve import Counts, is_hard
from fmetrics.family import Family
from fmetrics.metric import Metric
from fmetrics.state import cat_chunks

TASKS = ("binary", "multiclass", "multilabel")

# the option types of the curve factories' signatures (read by `fmetrics.classification._docs.documented`)
Task = Literal["binary", "multiclass", "multilabel"]
Thresholds = Optional[Union[int, List[float], torch.Tensor]]
CurveAverage = Optional[Literal["micro", "macro", "none"]]
ScoreAverage = Optional[Literal["micro", "macro", "weighted", "none"]]
ClassAverage = Optional[Literal["macro", "weighted", "none"]]


class ExactState(NamedTuple):
    scores: tuple  # chunks of float (n,) binary or (n, K)
    labels: tuple  # chunks: int8 (n,) / (n, L): -1 or label (| 2 in a logits batch, with validate_args);
    #                multiclass int64 (n,) class or -1
    invalid: validation.Invalid  # deferred record of entries that broke the value rule


class BinnedState(NamedTuple):
    hist: torch.Tensor  # int64 (K, T + 1, 2): column x threshold bucket x label
    soft: torch.Tensor  # int64: kept scores that are neither 0 nor 1
    invalid: validation.Invalid


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


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the classes (dim 1) with its limits at infinite logits, where torch's gives NaN: the
    ``+inf`` entries of a row share 1; a row of ``-inf`` only is uniform.

    Example::

        >>> softmax(torch.tensor([[math.inf, 0.0, math.inf], [-math.inf, -math.inf, -math.inf]]))
        tensor([[0.5000, 0.0000, 0.5000],
                [0.3333, 0.3333, 0.3333]])
    """
    top = x.amax(1, keepdim=True)
    at_top = (x == top).to(x.dtype)
    return torch.where(torch.isinf(top), at_top / at_top.sum(1, keepdim=True), x.softmax(1))


def _if_logits(x: torch.Tensor, keep: torch.Tensor, normalize: Callable) -> torch.Tensor:
    """``normalize(x)`` when a kept entry lies outside ``[0, 1]`` (torchmetrics' rule), without a sync."""
    return torch.where(_logits_flag(x, keep), normalize(x), x)


def _as_scores(preds: torch.Tensor) -> torch.Tensor:
    """float32/64 scores; 16-bit floats widen, integer (hard 0/1) predictions become float32."""
    if preds.is_floating_point():
        return preds.float() if preds.dtype in (torch.float16, torch.bfloat16) else preds
    return preds.float()


@dataclasses.dataclass(frozen=True)
class Scores:
    """The state definition of one (task, num, thresholds, ignore_index) configuration.

    ``update`` formats a batch into columns; `family` is its `fmetrics.Family`,
    whose shared step `Prepared` gives the per-column `Counts` (reporting
    invalid input first) and the pooled counts (micro average).
    """

    name: str
    task: str
    num: int
    thresholds: Optional[torch.Tensor]
    ignore_index: Optional[int]
    validate: bool
    sorted_thresholds: Optional[torch.Tensor] = None
    # the thresholds per (device, dtype), copied there once: an update never copies a host constant
    _on_device: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    # ------------------------------------------------------------- update

    def columns(self, preds, target, lazy: bool = False, count: bool = True):
        """One batch as ``(scores (n, K), labels (n, K) int64, keep (n, K) bool, invalid (3,))``.

        ``lazy`` (binary / multilabel, with validation): the scores stay as given and ``labels`` are the
        int8 exact-state codes (``-1`` dropped, ``label | 2`` in a logits batch), made from the raw
        targets without an int64 temporary.
        """
        name, task = self.name, self.task
        if task != "multiclass":
            if task == "binary":
                f = _format.binary_inputs(name, preds, target, self.ignore_index, validate=count,
                                          zero_dropped=not lazy)
            else:
                f = _format.multilabel_inputs(name, preds, target, self.num, self.ignore_index,
                                              validate=count, zero_dropped=not lazy)
            width = 1 if task == "binary" else self.num
            keep, target = (x.movedim(1, -1).reshape(-1, width) for x in (f.keep, f.target))
            scores = _as_scores(f.preds).movedim(1, -1).reshape(-1, width)
            if lazy:
                flag = _logits_flag(scores, keep).to(torch.int8) * 2  # kept targets are 0 / 1
                return scores, target.to(torch.int8).bitwise_or_(flag).masked_fill_(~keep, -1), keep, f
            return _if_logits(scores, keep, torch.sigmoid), target, keep, f
        f = _format.multiclass_inputs(name, preds, target, self.num, self.ignore_index, validate=count)
        if not f.preds.is_floating_point():
            raise validation.fail(name, "preds", "float scores of shape (N, C, ...)",
                                  f"labels of shape {tuple(preds.shape)}")
        scores = f.preds.movedim(1, -1).reshape(-1, self.num)
        keep = f.keep.reshape(-1, 1)
        scores = _if_logits(_as_scores(scores), keep, softmax)
        return scores, f.target.reshape(-1), keep, f

    def init(self):
        if self.thresholds is None:
            return ExactState((), (), validation.invalid_init())
        k = 1 if self.task == "binary" else self.num
        return BinnedState(torch.zeros(k, self.thresholds.shape[0] + 1, 2, dtype=torch.int64),
                           torch.zeros((), dtype=torch.int64), validation.invalid_init())

    def update(self, state, preds, target):
        exact = self.thresholds is None
        lazy = exact and self.task != "multiclass" and self.validate
        count = self.validate and not validation.eager_check_applies((preds, target), {})
        scores, labels, keep, f = self.columns(preds, target, lazy=lazy, count=count)
        invalid = _format.flag(state.invalid, f)
        if exact:
            if self.task == "multiclass":
                code = torch.where(keep[:, 0], labels, -1)
            else:
                code = labels if lazy else torch.where(keep, labels, -1).to(torch.int8)
                scores, code = (scores[:, 0], code[:, 0]) if self.task == "binary" else (scores, code)
            # a copy, detached: a kept chunk must neither alias the caller's buffer nor hold its autograd graph
            return ExactState(state.scores + (_own(scores, preds) if lazy else scores.detach(),), state.labels + (code,), invalid)
        if self.task == "multiclass":
            labels = labels[:, None] == torch.arange(self.num, device=labels.device)
        else:
            labels = labels == 1  # with validate_args=False an invalid label must not index another bucket
        keep = keep.expand(scores.shape)
        thr = self.sorted_thresholds
        dtype = torch.promote_types(scores.dtype, thr.dtype)
        bucket = torch.searchsorted(self._thresholds_on(scores.device, dtype), scores.to(dtype).contiguous(),
                                    right=True)
        width = thr.shape[0] + 1
        col = torch.arange(scores.shape[1], device=scores.device) * width
        index = ((bucket + col) * 2 + labels.long()).reshape(-1)
        hist = torch.zeros(state.hist.numel(), dtype=torch.int64, device=scores.device)
        hist = hist.scatter_add(0, index, keep.reshape(-1).long()).reshape(state.hist.shape)
        soft = validation.count((scores != 0) & (scores != 1) & keep)
        return BinnedState(state.hist + hist, state.soft + soft, invalid)

    def _thresholds_on(self, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """The sorted thresholds as ``dtype`` on ``device``, without a host sync in ``update``.

        On an accelerator they are copied once per (device, dtype), from pinned memory without blocking
        (a plain host-to-device copy synchronizes), and kept; a traced update copies them in its graph.
        """
        thr = self.sorted_thresholds
        if thr.device == device:
            return thr.to(dtype)
        if torch.compiler.is_compiling():
            return thr.to(device, dtype)
        key = (device, dtype)
        if key not in self._on_device:
            host = thr.to(dtype).contiguous()
            if device.type == "cuda":
                host = host.pin_memory()
            self._on_device[key] = host.to(device, non_blocking=device.type == "cuda")
        return self._on_device[key]

    # ------------------------------------------------------------- finalize

    def pairs(self, state) -> list:
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
        if self.task == "binary":
            return [self._binary_kept(scores, code)]
        if self.validate:
            scores, code = self._decode(scores, code)
        out = []
        for k in range(width):
            keep = code[:, k] >= 0
            out.append((scores[keep, k], code[keep, k] == 1))
        return out

    def binary_parts(self, state):
        """Binary exact state on the host path: ``parts()`` yields, chunk by chunk, ``(float32 scores, int8
        labels 0/1)`` of the kept entries (decoded as each is needed: a chunk of logits is not kept
        transformed), for `_curve.sort_column_parts`; ``None`` for other tasks, devices or dtypes."""
        if self.task != "binary" or _curve.on_device_path(torch.device("cpu")) or not all(
                s.dtype == torch.float32 and s.device.type == "cpu" for s in state.scores):
            return None

        def parts():
            for scores, code in zip(state.scores, state.labels):
                scores, labels = self._binary_kept(scores, code)
                yield scores, labels.to(torch.int8)

        return parts

    def _binary_kept(self, scores: torch.Tensor, code: torch.Tensor):
        """Binary ``(scores, labels bool)`` of the kept entries of ``scores`` and their codes (decoded when
        validated: logits batches through the sigmoid)."""
        if self.validate:
            scores, code = self._decode(scores, code)
        keep = code >= 0
        if not bool(keep.all()):
            scores, code = scores[keep], code[keep]
        return scores, code == 1

    @staticmethod
    def _decode(scores: torch.Tensor, code: torch.Tensor):
        """Validated binary / multilabel codes: the sigmoid applied to the entries of logits batches
        (``code >= 2``) and the codes reduced to ``-1 / 0 / 1``. One ``amax`` of the codes read as
        uint8 (``-1`` is 255) settles the common case: probabilities and nothing left out."""
        if code.numel() == 0 or int(code.view(torch.uint8).amax()) < 2:
            return scores, code
        logits = code >= 2
        if bool(logits.any()):
            scores = torch.where(logits, scores.sigmoid(), scores)
        return scores, torch.where(code >= 0, code & 1, -1)

    def binned(self, hist: torch.Tensor) -> list:
        """Binned: per column `Counts` at the thresholds in the order the user gave them."""
        thr = self.thresholds.to(hist.device)
        rank = torch.argsort(torch.argsort(thr, stable=True), stable=True)
        ge = hist.flip(1).cumsum(1).flip(1)  # entries with bucket >= b
        above = ge[:, 1:][:, rank]  # entries with score >= thresholds[i]
        return [Counts(above[k, :, 0], above[k, :, 1], thr, ge[k, 0, 1], ge[k, 0, 0], False)
                for k in range(hist.shape[0])]

    @property
    def absent_recall(self) -> float:
        """Exact recall of a column without positives: NaN for a multiclass class, else 1 (torchmetrics)."""
        return float("nan") if self.task == "multiclass" else 1.0

    # ------------------------------------------------------------- the family

    @property
    def key(self) -> tuple:
        thr = None if self.thresholds is None else (str(self.thresholds.dtype), tuple(self.thresholds.tolist()))
        return (self.task, self.num, thr, self.ignore_index, self.validate)

    @property
    def family(self) -> Family:
        if self.thresholds is None:
            tags = ExactState(scores="cat", labels="cat", invalid=None)
        else:
            tags = BinnedState(hist="sum", soft="sum", invalid=None)
        num = self.num if self.task == "multiclass" else 2
        check = _format.checker(self.name, self.task, num, self.ignore_index) if self.validate else None
        return Family(name="classification_scores", key=self.key, init=self.init, update=self.update,
                      reductions=tags, merge=_merge, shared=lambda state: Prepared(self, state), check=check)

    def metric(self, finish: Callable[["Prepared"], object]) -> Metric:
        """The member of `family` named after this spec whose value is ``finish(Prepared(spec, state))``.

        Metadata (torchmetrics' class attributes): values in [0, 1]; curves (ROC, PR) have no
        direction, the equal error rate is better lower, every other score higher.
        """
        curve = self.name.endswith(("_roc", "_precision_recall_curve"))
        higher = None if curve else not self.name.endswith("_eer")
        # no kept entry: NaN values with a warning (`_empty`); a curve keeps its thresholds (entry 2)
        finish = _empty.guard(self.name, Prepared.empty, finish, keep=lambda i: curve and i == 2)
        return self.family.metric(self.name, finish, is_differentiable=False, higher_is_better=higher,
                                  bounds=(0.0, 1.0))


def _merge(a, b):
    if isinstance(a, ExactState):
        return ExactState(tuple(a.scores) + tuple(b.scores), tuple(a.labels) + tuple(b.labels),
                          validation.invalid_merge(a.invalid, b.invalid))
    return BinnedState(a.hist + b.hist, a.soft + b.soft, validation.invalid_merge(a.invalid, b.invalid))


def _own(scores: torch.Tensor, preds) -> torch.Tensor:
    """Lazy-path ``scores`` (a view of the caller's ``preds``) detached and copied: a refilled input buffer
    must not change the state; a converted chunk (float16 -> float32, integer -> float) is already a copy."""
    scores = scores.detach()
    if isinstance(preds, torch.Tensor) and scores.dtype == preds.dtype:
        return scores.clone()
    return scores


class Prepared:
    """The shared finalize step of a curve family: invalid input reported, then per-column pairs,
    sorts and counts computed at most once each, on demand (a collection of ROC, AUROC and AP over one
    state sorts each column once)."""

    def __init__(self, spec: Scores, state):
        if spec.validate:
            _format.report(spec.name, state.invalid, spec.num if spec.task == "multiclass" else 2)
        self.spec, self.state = spec, state
        self.name, self.task, self.thresholds = spec.name, spec.task, spec.thresholds
        self.absent_recall = spec.absent_recall
        self._pairs = None
        self._sorted: dict = {}
        self._counts: dict = {}

    def empty(self) -> bool:
        """No entry was kept: no samples, or every one ``ignore_index``."""
        if self.thresholds is not None:
            return not bool(self.state.hist.any())
        return not any(bool((code >= 0).any()) for code in self.state.labels)

    @property
    def num_columns(self) -> int:
        """Columns of the exact state: 1 for binary, else the classes / labels."""
        return 1 if self.task == "binary" else self.spec.num

    def exact_pairs(self) -> list:
        """Exact state: per column ``(scores, labels bool)`` of the kept entries."""
        if self._pairs is None:
            self._pairs = self.spec.pairs(self.state)
        return self._pairs

    def _pooled_pairs(self):
        pairs = self.exact_pairs()
        if len(pairs) == 1:
            return pairs[0]
        return torch.cat([s for s, _ in pairs]), torch.cat([y for _, y in pairs])

    def sorted(self, column) -> "_curve.Sorted":
        """Column ``column`` (an index, or ``"pooled"``) sorted once (`_curve.sort_column`)."""
        if self.num_columns == 1:
            column = 0
        if column not in self._sorted:
            parts = self.spec.binary_parts(self.state) if self.num_columns == 1 and self._pairs is None else None
            found = None if parts is None else _curve.sort_column_parts(parts, torch.device("cpu"))
            if found is None:
                s, y = self._pooled_pairs() if column == "pooled" else self.exact_pairs()[column]
                found = _curve.sort_column(s, y)
            self._sorted[column] = found
        return self._sorted[column]

    def _column_counts(self, column) -> Counts:
        if column not in self._counts:
            self._counts[column] = _curve.exact_counts(self.sorted(column))
        return self._counts[column]

    def counts(self) -> list:
        """Per-column `Counts` (one for binary)."""
        if self.thresholds is not None:
            return self.spec.binned(self.state.hist)
        return [self._column_counts(k) for k in range(self.num_columns)]

    def pooled(self) -> Counts:
        """The counts of every column pooled (the micro average)."""
        if self.thresholds is not None:
            return self.spec.binned(self.state.hist.sum(0, keepdim=True))[0]
        return self._column_counts("pooled")

    def warn_if_hard(self, counts: list = (), hard: bool = False) -> None:
        """Warns when every kept score is exactly 0 or 1: a ranking metric then measures the labels.

        Binned: from the state's count of soft scores; exact: from the columns'
        distinct thresholds (``counts``), or ``hard`` as found by the caller.
        """
        if self.thresholds is not None:
            hard = int(self.state.soft) == 0 and int(self.state.hist.sum()) > 0
        elif counts:
            hard = any(c.thr.numel() for c in counts) and all(is_hard(c.thr) for c in counts)
        if hard:
            warnings.warn(f"{self.name}: every prediction is exactly 0 or 1 (hard labels, not scores); the "
                          "result measures the labels, not a ranking. Pass probabilities or logits.",
                          UserWarning, stacklevel=3)


def family(name: str, task: str, num: int = 1, thresholds=None, ignore_index=None, validate_args=True) -> Scores:
    """Validates a curve metric's configuration; ``num`` is ``num_classes`` / ``num_labels`` (1 for binary)."""
    if task != "binary":
        _format.check_num(name, "num_classes" if task == "multiclass" else "num_labels", num)
    _format.check_ignore_index(name, ignore_index)
    if not isinstance(validate_args, bool):
        raise validation.fail(name, "validate_args", "a bool", repr(validate_args))
    thresholds = check_thresholds(name, thresholds)
    ordered = None if thresholds is None else torch.sort(thresholds).values
    return Scores(name, task, num, thresholds, ignore_index, validate_args, ordered)
