"""Docstrings of the classification factories: one glossary of arguments and inputs.

Every public factory's docstring is its summary, its formula and an
``Example::`` doctest, written by hand; `documented` inserts before the
example the ``Args:`` section (each argument with its accepted values, read
from the signature's ``Literal`` / type annotations, its default and its
meaning from `MEANING`), the ``Inputs:`` section (what ``update(state, ...)``
takes for the task) and ``Returns:``. One glossary keeps sixty factories
consistent; ``help(fmetrics.binary_auroc)`` shows the assembled text.
"""
from __future__ import annotations

import inspect
import typing
from typing import Callable

__all__ = ["documented", "MEANING", "INPUTS"]

MEANING = {
    "task": "which task's factory to build; the other arguments go to it.",
    "threshold": "a probability strictly above it is a positive prediction (logits batches get a sigmoid "
                 "first); integer / bool predictions are used as 0/1 labels as they are.",
    "num_classes": "the number of classes C (required for the multiclass task).",
    "num_labels": "the number of labels L (required for the multilabel task).",
    "average": "how per-class / per-label values are reduced: 'micro' pools the counts of every class, "
               "'macro' is the unweighted mean over classes (multiclass: classes that never occur are left "
               "out), 'weighted' weights each class by its support (tp + fn), 'none' / None returns one value "
               "per class.",
    "top_k": "multiclass scores: a sample counts as predicted right when its target is among the k highest "
             "scores (torchmetrics' rule); 1 is the argmax.",
    "multidim_average": "'global' pools every entry of the extra dimensions (N, ...); 'samplewise' gives one "
                        "value per sample (a leading N axis; needs inputs with extra dimensions).",
    "ignore_index": "a target value whose entries are left out of every count (e.g. -1 or 255 for padding).",
    "validate_args": "check input values (labels in range, NaN scores): eagerly on CPU (raises at once, quoting "
                     "the values) or deferred on accelerators / under compile (raises in finalize). False skips "
                     "the value checks (shapes are always checked).",
    "zero_division": "the value of a 0 / 0 ratio (a class never predicted or never present).",
    "beta": "weight of recall against precision (beta > 1 favours recall).",
    "normalize": "'true' divides each row (target class) by its sum, 'pred' each column, 'all' by the total; "
                 "None / 'none' gives raw int64 counts. 0 / 0 gives 0.",
    "weights": "disagreement weights: None / 'none' (0 on the diagonal, 1 elsewhere), 'linear' |i - j|, "
               "'quadratic' (i - j)^2.",
    "num_groups": "the number of groups G; group ids are integers in [0, G).",
    "thresholds": "None: the exact curve over every distinct score (the scores are kept, O(n) memory, one "
                  "sort in finalize); an int T >= 2: T thresholds linspace(0, 1, T); a list of floats in [0, 1] "
                  "or a 1-D float tensor: those thresholds. Binned states are O(T) int64 histograms.",
    "max_fpr": "None for the full area; a float in (0, 1]: the McClish-standardized partial AUC up to that "
               "false positive rate (scikit-learn's roc_auc_score(max_fpr=...)).",
    "min_precision": "the floor on precision.",
    "min_recall": "the floor on recall.",
    "min_specificity": "the floor on specificity (1 - fpr).",
    "min_sensitivity": "the floor on sensitivity (tpr).",
    "fpr_range": "(low, high) with 0 <= low < high <= 1: the false positive rate interval of the area.",
    "n_bins": "the number of equal-width confidence bins over [0, 1].",
    "norm": "'l1' expected calibration error, 'l2' root mean square, 'max' maximum calibration error.",
    "squared": "square each hinge loss.",
    "curve_average": "None / 'none': one curve per class (lists of 1-D tensors when exact, (C, T) tensors when "
                     "binned); 'micro': one curve over every (class score, is-that-class) pair pooled; 'macro': "
                     "every class's rate interpolated onto the pooled grid and averaged (torchmetrics' definition).",
    "score_average": "'macro' the unweighted mean over columns (a class / label absent from target scores 0 and "
                     "counts, as in torchmetrics); 'weighted' weights each column by its number of positives; "
                     "'micro' (multilabel) pools every label's (score, label) pairs into one curve; 'none' / None "
                     "one value per column.",
    "multiclass_mode": "'crammer-singer': one margin per sample (true class against the best other); "
                       "'one-vs-all': one binary hinge loss per class.",
}

_BINARY = ("preds: float (N, ...) probabilities, or logits (a batch with any value outside [0, 1] is read as "
           "logits and gets a sigmoid), or int / bool 0/1 labels; NaN scores are invalid. "
           "target: int, bool or float (N, ...) with values 0 / 1 (or ignore_index).")
_MULTICLASS = ("preds: float (N, C, ...) scores (probabilities, or logits: only their order matters for the "
               "argmax) or int (N, ...) labels in [0, C). target: int (N, ...) labels in [0, C) "
               "(or ignore_index).")
_MULTILABEL = ("preds: float (N, L, ...) probabilities or logits (sigmoid, as for binary) or int 0/1. "
               "target: (N, L, ...) with values 0 / 1 (or ignore_index).")
_SCORES_MULTICLASS = ("preds: float (N, C, ...) scores: probabilities, or logits (a batch with any value "
                      "outside [0, 1] gets a softmax over C). target: int (N, ...) labels in [0, C) "
                      "(or ignore_index).")
_SCORES_BINARY = ("preds: float (N, ...) scores: probabilities, or logits (a batch with any value outside [0, 1] "
                  "gets a sigmoid); int / bool 0/1 predictions are used as hard scores (AUROC / AP warn). "
                  "target: int, bool or float (N, ...) with values 0 / 1 (or ignore_index).")
_SCORES_MULTILABEL = ("preds: float (N, L, ...) scores: probabilities, or logits (a batch with any value outside "
                      "[0, 1] gets a sigmoid). target: (N, L, ...) with values 0 / 1 (or ignore_index).")
_RANKING = ("preds: float (N, L) scores (only their order within a sample matters, so logits and probabilities "
            "give the same value). target: (N, L) with values 0 / 1 (or ignore_index).")
INPUTS = {
    "binary": _BINARY,
    "scores-binary": _SCORES_BINARY,
    "scores-multilabel": _SCORES_MULTILABEL,
    "ranking": _RANKING,
    "multiclass": _MULTICLASS,
    "multilabel": _MULTILABEL,
    "scores-multiclass": _SCORES_MULTICLASS,
    "facade": "those of the task's factory (binary_*, multiclass_* or multilabel_*).",
}


def _accepted(annotation) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(annotation))
    if origin is typing.Union:
        parts = [a for a in typing.get_args(annotation) if a is not type(None)]
        text = " or ".join(_accepted(a) for a in parts)
        return text + (" or None" if len(parts) < len(typing.get_args(annotation)) else "")
    if origin in (list, tuple):
        args = [_accepted(a) for a in typing.get_args(annotation) if a is not ...]
        return f"a list of {args[0]}" if origin is list else "a tuple (" + ", ".join(args) + ")"
    if annotation is inspect.Parameter.empty:
        return "see below"
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))


def documented(returns: str, inputs: str, call: str = "preds, target", **meaning: str) -> Callable:
    """Adds ``Args:``, ``Inputs:`` and ``Returns:`` to a factory's docstring (before its example).

    ``meaning`` overrides or adds argument meanings (``argument="..."``).
    """

    def wrap(fn):
        hints = typing.get_type_hints(fn, include_extras=False)
        lines = ["Args:"]
        for name, p in inspect.signature(fn).parameters.items():
            text = meaning.get(name) or MEANING.get(name)
            if text is None:
                raise TypeError(f"{fn.__name__}: no meaning documented for argument {name!r}")
            default = "required" if p.default is inspect.Parameter.empty else f"default {p.default!r}"
            lines.append(f"  {name}: {_accepted(hints.get(name, p.annotation))}; {default}. {text}")
        lines += ["", "Inputs:", f"  ``update(state, {call})``: {INPUTS.get(inputs, inputs)}", "",
                  "Returns:", f"  {returns}", ""]
        doc = inspect.cleandoc(fn.__doc__ or "")
        head, sep, example = doc.partition("Example::")
        fn.__doc__ = head.rstrip() + "\n\n" + "\n".join(lines) + ("\n" + sep + example if sep else "")
        return fn

    return wrap
