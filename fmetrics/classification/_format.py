"""Input formatting and validation shared by every classification metric.

Users pass labels, probabilities or logits, ``(N,)`` or ``(N, 1)`` targets,
integer, bool or float 0/1 targets, and extra dimensions ``(N, ..., )``. The
``*_inputs`` functions turn that into one canonical layout, checking shapes,
dtypes and configuration eagerly (`ValueError` via `fmetrics.validation.fail`)
and *counting* bad values without a host sync:

``binary_inputs(name, preds, target, ignore_index=None, samplewise=False)``
    preds ``(N, ...)``, target ``(N, ...)`` (a trailing singleton axis on either
    side is squeezed when only it differs) ->
    ``Formatted(preds (N, M), target (N, M), keep (N, M), bad, bad_values)``.
``multiclass_inputs(name, preds, target, num_classes, ignore_index=None, samplewise=False, top_k=0)``
    preds ``(N, C, ...)`` scores or ``(N, ...)`` labels, target ``(N, ...)`` ->
    preds ``(N, C, M)`` scores or ``(N, M)`` int64 labels, target / keep ``(N, M)``;
    ``top_k >= 1`` turns scores into labels (``argmax`` for 1).
    ``preds.shape[1] != num_classes`` raises at once.
``multilabel_inputs(name, preds, target, num_labels, ignore_index=None, samplewise=False)``
    preds and target ``(N, L, ...)`` -> ``(N, L, M)`` each.

``M`` is the product of the extra dimensions (1 when there are none). In the
result, ``preds`` are the user's float scores unchanged (convert with
`sigmoid_if_logits` / `softmax_if_logits`) or int64 labels; ``target`` is
int64 with every ignored or invalid entry replaced by 0; ``keep`` is the bool
mask of entries that count. With ``validate=True`` (the *deferred* path of
`fmetrics.validation`) ``bad`` is the bool mask of entries that broke a value
rule (`rule`) and ``bad_values`` their values as float64 (NaN for a NaN
score): the metric folds them into a `fmetrics.validation.Invalid` state field
with `flag` and reports in ``finalize`` with `report`; such entries do not
count, every valid entry does. With ``validate=False`` (``validate_args=False``,
or the eager check of `checker` has already passed) ``bad`` is ``None`` and
only ``ignore_index`` entries are left out.

Value rules (one rule for every classification metric): target labels in
``[0, num)`` (or ``ignore_index``); integer / bool predictions valid labels;
float scores not NaN. Float scores outside ``[0, 1]`` are not an error: a batch
holding any is read as logits (sigmoid / softmax), as in torchmetrics.

Logits are detected per batch as torchmetrics does: if any float prediction of
the batch lies outside ``[0, 1]`` the whole batch is treated as logits. The
flag is a 0-d tensor fed to ``torch.where``, so there is no host sync.

Example::

    >>> f = binary_inputs("binary_accuracy", torch.tensor([0.2, 3.0]), torch.tensor([[0], [1]]))
    >>> sigmoid_if_logits(f.preds)      # 3.0 is outside [0, 1]: the batch is logits
    tensor([[0.5498], [0.9526]])
    >>> f.target, f.keep.all(), f.bad.any()
    (tensor([[0], [1]]), tensor(True), tensor(False))
"""
from __future__ import annotations

import functools
import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple, Optional

import numpy as np
import torch

from fmetrics import validation
from fmetrics._kernels import native as _native  # the optional C kernels, or None

__all__ = [
    "rule",
    "checker",
    "flag",
    "Formatted",
    "binary_inputs",
    "multiclass_inputs",
    "multilabel_inputs",
    "logits_flag",
    "sigmoid_if_logits",
    "softmax_if_logits",
    "argmax_classes",
    "top1_counts",
    "check_ignore_index",
    "check_multidim_average",
    "check_num",
    "check_threshold",
    "report",
]

def rule(num: int) -> str:
    """The value rule of a classification metric over ``num`` classes (2 for binary / multilabel)."""
    return f"target values and integer preds must be in [0, {num}) (or ignore_index), float preds not NaN"


class Formatted(NamedTuple):
    preds: torch.Tensor  # float scores as given, or int64 labels
    target: torch.Tensor  # int64; ignored / invalid entries hold 0
    keep: torch.Tensor  # bool: the entry counts
    bad: Optional[torch.Tensor] = None  # bool: entries that broke the value rule (validate=True only)
    bad_values: Optional[torch.Tensor] = None  # float64: their values (NaN for a NaN score)
    complete: bool = False  # known without a look at the data: every entry is kept (keep is all True)


def flag(inv: validation.Invalid, f: Optional["Formatted"]) -> validation.Invalid:
    """``inv`` with this update's offending entries folded in (only the call counter when not counting,
    or for ``f=None``: inputs the eager check has passed)."""
    if f is None or f.bad is None:
        return inv._replace(calls=inv.calls + 1)
    return validation.invalid_flag(inv, f.bad, f.bad_values)


def _quote_labels(name: str, arg: str, x: torch.Tensor, num: int, ignore_index) -> None:
    """Raises when ``x`` holds values that are not labels in ``[0, num)`` (nor ``ignore_index``)."""
    if x.numel() == 0 or x.dtype == torch.bool:
        return
    if x.is_floating_point():
        bad = ~((x >= 0) & (x < num) & (x == x.floor()))
    else:
        a = x.numpy()  # eager CPU: numpy's reductions cost less than torch's aminmax and two host reads
        if a.min() >= 0 and a.max() < num:
            return
        bad = (x < 0) | (x >= num)
    if ignore_index is not None:
        bad &= x != ignore_index
    if bool(bad.any()):
        raise ValueError(f"{name}: {arg} values must be in [0, {num}){' or ignore_index' if ignore_index is not None else ''}; "
                         f"found {validation.quote(x[bad])}")


def _quote_nan(name: str, preds: torch.Tensor, target, ignore_index) -> None:
    if preds.numel() == 0 or math.isfinite(preds.sum().item()):  # one reduction settles the common case
        return
    nan = torch.isnan(preds)
    if ignore_index is not None and isinstance(target, torch.Tensor) and target.shape == preds.shape:
        nan &= target != ignore_index
    _raise_nan(name, int(nan.sum()), "entr")


def _raise_nan(name: str, n: int, unit: str) -> None:
    if n:
        plural = {"entr": ("y", "ies"), "row": ("", "s")}[unit][n != 1]
        raise ValueError(f"{name}: preds must not be NaN; found nan ({n} {unit}{plural})")


def _multiclass_scores(preds: torch.Tensor, target: torch.Tensor) -> bool:
    """Whether multiclass ``preds`` are scores ``(N, C, ...)`` (else labels of target's shape)."""
    return preds.is_floating_point() and preds.dim() >= 2 and (
        preds.dim() == target.dim() + 1
        or (preds.dim() == target.dim() and target.shape[-1] == 1 and preds.shape[0] == target.shape[0]
            and preds.shape[2:] == target.shape[1:-1] and preds.shape != target.shape))


def _layout_ok(task: str, preds: torch.Tensor, target: torch.Tensor) -> bool:
    """Whether the shapes (and, for multiclass labels, the dtype) are ones `update` accepts."""
    if task == "multiclass" and _multiclass_scores(preds, target):
        return True
    if task == "multilabel":
        return preds.dim() >= 2 and preds.shape == target.shape
    preds, target = _squeeze_pair(preds, target)
    return preds.shape == target.shape and (task != "multiclass" or not preds.is_floating_point())


def checker(name: str, task: str, num: int = 2, ignore_index: Optional[int] = None, nan_in_update: bool = False):
    """The eager value check ``check(preds, target, *rest)`` of a metric (see `fmetrics.validation`).

    Runs only where checking is free (CPU, eager); raises ``ValueError`` quoting
    the offending values, e.g. ``multiclass_accuracy: target values must be in
    [0, 5); found 5 and 7 (3 entries)``. Cheap on valid input: one ``aminmax``
    per label tensor and one sum per float tensor.

    ``nan_in_update``: multiclass scores are not summed here; the update finds NaN
    rows from its top score at ``O(N)`` cost and raises itself (`multiclass_inputs`
    with ``raise_nan``), which saves a pass over the ``N x C`` scores per batch.
    """
    num = 2 if task != "multiclass" else num

    def check(preds, target=None, *rest):
        if not isinstance(preds, torch.Tensor) or not isinstance(target, torch.Tensor):
            return  # update raises the type error
        if preds.is_complex() or target.is_complex():
            return  # update raises the dtype error
        scores = _multiclass_scores(preds, target) if task == "multiclass" else preds.is_floating_point()
        if not (scores and task == "multiclass") and not _layout_ok(task, preds, target):
            return  # update raises the shape / dtype error, which says more than a value would
        _quote_labels(name, "target", target, num, ignore_index)
        if scores:
            if not (nan_in_update and task == "multiclass"):
                _quote_nan(name, preds, target if task != "multiclass" else None, ignore_index)
        else:
            _quote_labels(name, "preds", preds, num, None)

    return check


# ------------------------------------------------------------------ config checks


def check_num(name: str, arg: str, value) -> int:
    """``num_classes`` / ``num_labels``: an int >= 2."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise validation.fail(name, arg, "an integer >= 2", repr(value))
    return value


def check_threshold(name: str, threshold) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
        raise validation.fail(name, "threshold", "a float in [0, 1]", repr(threshold))
    return float(threshold)


def check_ignore_index(name: str, ignore_index) -> Optional[int]:
    if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, int)):
        raise validation.fail(name, "ignore_index", "None or an integer", repr(ignore_index))
    return ignore_index


def check_multidim_average(name: str, multidim_average) -> str:
    return validation.check_policy(name, "multidim_average", multidim_average, ("global", "samplewise"))


# ------------------------------------------------------------------ logits


def logits_flag(x: torch.Tensor) -> torch.Tensor:
    """0-d bool tensor: some entry of ``x`` lies outside ``[0, 1]`` (NaN does not count).

    Two float passes, no bool temporaries (about 4x faster than ``((x < 0) | (x > 1)).any()`` on
    10^6 CPU scores): NaN becomes 0.5, then ``min < 0 or max > 1`` from one ``aminmax``.
    """
    if x.numel() == 0:
        return torch.zeros((), dtype=torch.bool, device=x.device)
    lo, hi = torch.aminmax(torch.nan_to_num(x, nan=0.5, posinf=math.inf, neginf=-math.inf))
    return (lo < 0) | (hi > 1)


def sigmoid_if_logits(x: torch.Tensor) -> torch.Tensor:
    """``sigmoid(x)`` if any entry of the batch is outside ``[0, 1]``, else ``x`` (no host sync)."""
    return torch.where(logits_flag(x), x.sigmoid(), x)


def softmax_if_logits(x: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """``softmax(x, dim)`` if any entry of the batch is outside ``[0, 1]``, else ``x`` (no host sync)."""
    return torch.where(logits_flag(x), x.softmax(dim), x)


# ------------------------------------------------------------------ multiclass labels


# scores per thread below which one thread reads the batch alone: waking a pool thread costs up to ~70 µs in
# a VM (2 threads, 4096 x 100 float32: 273 µs against 214 on one; 16384 x 100: 675 against 1009, min wall)
_PART = 2**19
_POOLS: dict = {}  # (pid, workers) -> ThreadPoolExecutor; a forked child builds its own


def _pool(workers: int) -> ThreadPoolExecutor:
    """The process's pool of ``workers`` threads (never shut down: an update in another thread may hold it)."""
    key = (os.getpid(), workers)
    pool = _POOLS.get(key)
    if pool is None:  # setdefault: of two racing callers one pool wins (threads start on the first submit)
        pool = _POOLS.setdefault(key, ThreadPoolExecutor(workers, thread_name_prefix="fmetrics-argmax"))
    return pool


def _by_rows(fn, n: int, size: int) -> list:
    """``[fn(rows) ...]`` over row slices covering ``range(n)``: one slice, or with ``torch.get_num_threads()
    > 1`` and at least 2 x `_PART` scores (``size``) one per thread, the first run here, the rest on `_pool`
    (the kernels release the GIL)."""
    parts = min(torch.get_num_threads(), size // _PART)
    if parts < 2:
        return [fn(slice(0, n))]
    cut = [n * i // parts for i in range(parts + 1)]
    rows = [slice(a, b) for a, b in zip(cut, cut[1:])]
    done = [_pool(parts - 1).submit(fn, r) for r in rows[1:]]
    return [fn(rows[0])] + [f.result() for f in done]


@functools.lru_cache(maxsize=8)
def _row_starts(rows: int, width: int) -> np.ndarray:
    """``0, width, 2 width, ...``: the flat index of each row's first entry (read-only, cached per shape)."""
    starts = np.arange(0, rows * width, width)
    starts.flags.writeable = False
    return starts


def _argmax_rows(x: np.ndarray, labels: np.ndarray, top: np.ndarray) -> None:
    """Row ``argmax`` of C-contiguous ``x`` into ``labels``; each row's winning score into ``top``."""
    if _native is not None:
        _native.argmax_rows(x, labels, top)
        return
    x.argmax(1, out=labels)  # the indices below are valid: mode="clip" skips the bounds check that buffers ``out``
    np.take(x.reshape(-1), labels + _row_starts(*x.shape), out=top, mode="clip")


def _host_scores(scores: torch.Tensor, *others: torch.Tensor) -> Optional[np.ndarray]:
    """C-contiguous numpy scores ``(N, C)`` where the host row kernels apply, else ``None``: on the CPU in
    eager mode (where `fmetrics.validation` allows host reads, for ``scores`` and ``others``), float32 /
    float64 scores of at least 2^15 entries (below, the fixed cost per op dominates)."""
    if (scores.dtype not in (torch.float32, torch.float64) or scores.numel() < 2**15
            or not validation.eager_check_applies_to(scores, *others)):
        return None
    return np.ascontiguousarray((scores.detach() if scores.requires_grad else scores).numpy())


def _host_argmax(scores: torch.Tensor, *others: torch.Tensor):
    """numpy ``(labels, top)`` of scores ``(N, C)`` where the host row kernels apply (`_host_scores`), else
    ``None``.

    ``labels`` is the first maximum of each row and ``top`` its score; a NaN ranks first, as in torch, so
    ``top`` is NaN exactly where the row holds one. The row kernel is `fmetrics._native`'s where it was
    built (each row read once while in L1, the next rows prefetched), else numpy's row ``argmax`` (its
    kernel vectorizes where torch's CPU ``max`` / ``argmax`` over the inner axis does not: 4096 x 100
    float32 ~0.2 ms against ~0.9 ms) and a gather of the winners.
    """
    x = _host_scores(scores, *others)
    return None if x is None else _argmax_all(x)


def _argmax_all(x: np.ndarray):
    """``(labels, top)`` of C-contiguous numpy scores ``(N, C)`` by `_argmax_rows`, split by `_by_rows`."""
    labels, top = np.empty(x.shape[0], np.intp), np.empty(x.shape[0], x.dtype)
    _by_rows(lambda r: _argmax_rows(x[r], labels[r], top[r]), x.shape[0], x.size)
    return labels, top


def argmax_classes(scores: torch.Tensor):
    """``(labels, nan)`` for scores ``(N, C, M)``: ``argmax`` over ``C`` (first maximum on ties) and
    whether the row holds a NaN, both ``(N, M)``.

    One ``torch.max`` over ``C`` gives both (a NaN ranks first); without extra dimensions the host row
    kernel where it applies (`_host_argmax`).
    """
    host = _host_argmax(scores[:, :, 0]) if scores.shape[2] == 1 else None
    if host is None:
        top, labels = scores.max(1)
        return labels, torch.isnan(top)
    labels, top = host
    return torch.from_numpy(labels).view(-1, 1), torch.from_numpy(np.isnan(top)).view(-1, 1)


def _bincounts(labels: np.ndarray, target: np.ndarray, num_classes: int) -> np.ndarray:
    """The targets', the labels' and the hits' (targets where the label is right) ``bincount``s, concatenated:
    numpy's ``bincount`` costs less than torch's fixed cost per op on a few thousand labels (4096 labels:
    30 µs, against 38 for one count of targets moved up by ``C`` on a hit and 42 for one of ``C^2`` pairs)."""
    hits = target[labels == target]
    return np.concatenate([np.bincount(x, minlength=num_classes) for x in (target, labels, hits)])


def top1_counts(name: str, preds: torch.Tensor, target: torch.Tensor, num_classes: int) -> Optional[np.ndarray]:
    """int64 counts ``(3 C,)`` of the targets, the ``argmax`` labels and the hits of scores ``(N, C)``
    against int64 labels ``(N,)``, or ``None`` where the host row kernels do not apply (`_host_scores`) or
    the layout differs.

    For an update whose eager check has passed on these inputs (every target a label; NaN rows left to
    the update): a row holding a NaN raises ``ValueError`` here. The scores are read once. With
    `fmetrics._native` one fused pass per row: its maximum and NaN test, its first maximum, the three
    counts. Without it numpy's row ``argmax``, the winners' scores (summed: one reduction settles the
    common case of no NaN) and `_bincounts`.

    Example::

        >>> top1_counts("m", torch.eye(2**15, 3), torch.zeros(2**15, dtype=torch.long), 3).reshape(3, 3)
        array([[32768,     0,     0],
               [32766,     1,     1],
               [32766,     0,     0]])
    """
    if not (isinstance(preds, torch.Tensor) and isinstance(target, torch.Tensor)) or \
            preds.dim() != 2 or target.dim() != 1 or preds.shape != (target.shape[0], num_classes) or \
            target.dtype != torch.int64:
        return None
    x = _host_scores(preds, target)
    if x is None:
        return None
    t = np.ascontiguousarray(target.numpy())
    if _native is None:
        labels, top = _argmax_all(x)
        with np.errstate(invalid="ignore"):  # +inf and -inf winners sum to NaN
            finite = math.isfinite(top.sum())
        if not finite:
            _raise_nan(name, int(np.count_nonzero(np.isnan(top))), "row")
        return _bincounts(labels, t, num_classes)

    def part(rows):
        counts = np.zeros(3 * num_classes, np.int64)
        return _native.top1_counts(x[rows], t[rows], counts), counts

    parts = _by_rows(part, x.shape[0], x.size)
    _raise_nan(name, sum(nan for nan, _ in parts), "row")
    return parts[0][1] if len(parts) == 1 else np.sum([c for _, c in parts], axis=0)


# ------------------------------------------------------------------ helpers


def _as_tensor(name: str, arg: str, x) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise validation.fail(name, arg, "a torch.Tensor", type(x).__name__)
    if x.is_complex():
        raise validation.fail(name, arg, "a real (float, integer or bool) tensor", f"dtype {x.dtype}")
    if x.dim() == 0:
        raise validation.fail(name, arg, "a tensor with a sample axis (N, ...)", "a 0-d tensor")
    return x


def _squeeze_pair(preds: torch.Tensor, target: torch.Tensor):
    """Drops a trailing singleton axis of one side when only it makes the shapes differ."""
    if preds.shape != target.shape:
        if target.dim() == preds.dim() + 1 and target.shape[-1] == 1 and target.shape[:-1] == preds.shape:
            target = target.squeeze(-1)
        elif preds.dim() == target.dim() + 1 and preds.shape[-1] == 1 and preds.shape[:-1] == target.shape:
            preds = preds.squeeze(-1)
    return preds, target


def _label_values(x: torch.Tensor, num: int):
    """``(labels int64, ok bool)``: ``x`` holds an integer in ``[0, num)``."""
    if x.dtype == torch.bool:
        return x.long(), torch.ones_like(x, dtype=torch.bool)
    if x.is_floating_point():
        ok = (x >= 0) & (x < num) & (x == x.floor())
        labels = torch.where(ok, x, 0).long()
    else:
        ok = (x >= 0) & (x < num)
        labels = x if x.dtype == torch.int64 else x.long()
    return labels, ok


def _target(target: torch.Tensor, num: int, ignore_index, validate: bool):
    """``(target int64, keep, bad)`` for labels in ``[0, num)``; ``bad`` (validate only, else ``None``) marks
    entries that are neither a label nor ``ignore_index``.

    Left-out entries of the int64 target still hold their raw value: the caller zeroes them once, with
    every other rule, in its final ``torch.where(keep, target, 0)``.
    """
    if ignore_index is None and not validate and not (target.is_floating_point() or target.dtype == torch.bool):
        return target.long(), torch.ones_like(target, dtype=torch.bool), None  # checked eagerly, or not at all
    labels, ok = _label_values(target, num)
    if ignore_index is None:
        if not validate:
            return labels, torch.ones_like(ok), None
        return labels, ok, ~ok
    ignored = target == ignore_index
    if validate:
        return labels, ok & ~ignored, ~(ok | ignored)
    return labels, ~ignored, None


def _preds_labels(preds: torch.Tensor, num: int, validate: bool):
    labels, ok = _label_values(preds, num)
    if not validate:
        return labels, torch.ones_like(ok)
    return torch.where(ok, labels, 0), ok


def _values(bad_t: torch.Tensor, target: torch.Tensor, other: Optional[torch.Tensor]) -> torch.Tensor:
    """float64 offending values: the target where it broke the rule, else ``other`` (NaN: a NaN score)."""
    t = target.to(torch.float64)
    return torch.where(bad_t, t, float("nan") if other is None else other.to(torch.float64))


def _flat(x: torch.Tensor, lead: int) -> torch.Tensor:
    """Keeps the first ``lead`` axes and flattens the rest into one (``M``)."""
    return x.reshape(*x.shape[:lead], math.prod(x.shape[lead:]))  # explicit: N may be 0


def _samplewise_ndim(name: str, x: torch.Tensor, at_least: int, layout: str):
    if x.dim() < at_least:
        raise validation.fail(name, "preds", f"extra dimensions {layout} when multidim_average='samplewise'",
                              f"shape {tuple(x.shape)}")


# ------------------------------------------------------------------ tasks


def _binary_like(preds, target, ignore_index, validate, zero_dropped=True):
    """Shared by binary and multilabel once shapes agree; ``zero_dropped=False`` skips the int64
    ``torch.where`` that zeroes the left-out targets (they then hold their raw value)."""
    tgt, keep, bad_t = _target(target, 2, ignore_index, validate)
    bad = values = None
    if preds.is_floating_point():
        if validate:
            nan = torch.isnan(preds) & keep
            keep = keep & ~nan
            bad, values = bad_t | nan, _values(bad_t, target, None)
        out = preds
    else:
        out, ok = _preds_labels(preds, 2, validate)
        if validate:
            bad_p = ~ok & keep
            keep = keep & ok
            bad, values = bad_t | bad_p, _values(bad_t, target, preds)
    tgt = torch.where(keep, tgt, 0) if zero_dropped else tgt
    return Formatted(out, tgt, keep, bad, values)


def binary_inputs(name: str, preds, target, ignore_index: Optional[int] = None,
                  samplewise: bool = False, validate: bool = True, zero_dropped: bool = True) -> Formatted:
    """Binary inputs as ``(N, M)``: see the module docstring (``zero_dropped``: see `_binary_like`)."""
    preds, target = _as_tensor(name, "preds", preds), _as_tensor(name, "target", target)
    preds, target = _squeeze_pair(preds, target)
    if preds.shape != target.shape:
        raise validation.fail(name, "target", f"the shape of preds {tuple(preds.shape)}", tuple(target.shape))
    if samplewise:
        _samplewise_ndim(name, preds, 2, "(N, ...)")
    return _binary_like(_flat(preds, 1), _flat(target, 1), ignore_index, validate, zero_dropped)


def multilabel_inputs(name: str, preds, target, num_labels: int, ignore_index: Optional[int] = None,
                      samplewise: bool = False, validate: bool = True, zero_dropped: bool = True) -> Formatted:
    """Multilabel inputs as ``(N, L, M)``: see the module docstring (``zero_dropped``: see `_binary_like`)."""
    preds, target = _as_tensor(name, "preds", preds), _as_tensor(name, "target", target)
    for arg, x in (("preds", preds), ("target", target)):
        if x.dim() < 2 or x.shape[1] != num_labels:
            raise validation.fail(name, arg, f"shape (N, num_labels={num_labels}, ...): one 0/1 column per label",
                                  f"shape {tuple(x.shape)}")
    if preds.shape != target.shape:
        raise validation.fail(name, "target", f"the shape of preds {tuple(preds.shape)}", tuple(target.shape))
    if samplewise:
        _samplewise_ndim(name, preds, 3, "(N, L, ...)")
    return _binary_like(_flat(preds, 2), _flat(target, 2), ignore_index, validate, zero_dropped)


def multiclass_inputs(name: str, preds, target, num_classes: int, ignore_index: Optional[int] = None,
                      samplewise: bool = False, validate: bool = True, top_k: int = 0,
                      raise_nan: bool = False) -> Formatted:
    """Multiclass inputs: scores ``(N, C, M)`` or labels ``(N, M)``; see the module docstring.

    ``top_k >= 1`` turns scores into int64 labels ``(N, M)``: ``argmax`` for 1; for ``k > 1`` the
    target when it is among the top ``k`` scores, else the top score (torchmetrics' rule). A row
    holding a NaN then has a NaN top score (``argmax`` / ``topk`` rank NaN first), so NaN rows are
    found at ``O(N)`` cost from the top score instead of a pass over all scores.

    ``raise_nan`` (eager CPU only, where the metric's `checker` ran with ``nan_in_update``): a kept
    row of scores holding a NaN raises ``ValueError`` here, before any state is built.
    """
    preds, target = _as_tensor(name, "preds", preds), _as_tensor(name, "target", target)
    scores = preds.is_floating_point() and preds.dim() >= 2 and (
        preds.dim() == target.dim() + 1
        or (preds.dim() == target.dim() and target.shape[-1] == 1 and preds.shape[0] == target.shape[0]
            and preds.shape[2:] == target.shape[1:-1] and preds.shape != target.shape)
    )
    if scores:
        if preds.dim() == target.dim():
            target = target.squeeze(-1)
        if preds.shape[1] != num_classes:
            raise validation.fail(name, "num_classes", f"the width of preds' class axis {preds.shape[1]}",
                                  f"{num_classes} (preds shape {tuple(preds.shape)})")
        if preds.shape[2:] != target.shape[1:] or preds.shape[0] != target.shape[0]:
            raise validation.fail(name, "target", f"shape (N, ...) for preds of shape (N, C, ...) "
                                  f"{tuple(preds.shape)}", tuple(target.shape))
    else:
        if top_k > 1:
            raise validation.fail(name, "preds", "float scores (N, C, ...) when top_k > 1",
                                  f"shape {tuple(preds.shape)} {preds.dtype}")
        preds, target = _squeeze_pair(preds, target)
        if preds.shape != target.shape:
            raise validation.fail(name, "preds", f"labels of target's shape {tuple(target.shape)} "
                                  "or float scores (N, C, ...)", f"{tuple(preds.shape)} {preds.dtype}")
        if preds.is_floating_point():  # probabilities of one class are not labels: truncating them is wrong
            raise validation.fail(name, "preds", f"float scores (N, C={num_classes}, ...) or integer labels of "
                                  f"target's shape {tuple(target.shape)}",
                                  f"{preds.dtype} of shape {tuple(preds.shape)} (float values are not labels)")
    if samplewise:
        _samplewise_ndim(name, target, 2, "(N, ...) in target")
    target = _flat(target, 1)
    tgt, keep, bad_t = _target(target, num_classes, ignore_index, validate)
    bad = values = None
    if not scores:
        flat = _flat(preds, 1)
        preds, ok = _preds_labels(flat, num_classes, validate)
        if validate:
            bad_p = ~ok & keep
            keep = keep & ok
            bad, values = bad_t | bad_p, _values(bad_t, target, flat)
    elif top_k == 0:
        preds = _flat(preds, 2)
        if validate:
            nan = torch.isnan(preds).any(1) & keep
            keep = keep & ~nan
            bad, values = bad_t | nan, _values(bad_t, target, None)
    else:
        scores_ = _flat(preds, 2)
        if top_k == 1:
            preds, nan = argmax_classes(scores_)
        else:
            idx = scores_.topk(top_k, dim=1).indices  # (N, k, M)
            top = idx[:, 0]
            preds = torch.where((idx == tgt.unsqueeze(1)).any(1), tgt, top)
            nan = torch.isnan(scores_.gather(1, top.unsqueeze(1))[:, 0])
        if raise_nan and bool(nan.any()):
            _raise_nan(name, int((nan & keep).sum()), "row")
        if validate:
            nan = nan & keep
            keep = keep & ~nan
            bad, values = bad_t | nan, _values(bad_t, target, None)
        elif ignore_index is None:  # `_target` keeps every entry: nothing to zero
            return Formatted(preds, tgt, keep, complete=True)
    return Formatted(preds, torch.where(keep, tgt, 0), keep, bad, values)


def report(name: str, inv: validation.Invalid, num: int = 2, policy: str = "error") -> None:
    """Raises (``policy="error"``) or warns in ``finalize`` when deferred validation counted offending entries."""
    validation.invalid_report(name, rule(num), inv, policy)
