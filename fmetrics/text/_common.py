"""Shared pieces of the text metrics: input checks, optional imports, count states.

Text metrics are host-input metrics (DESIGN §2.5): `update` tokenizes and
aligns Python strings and folds the result into a state of int64 / float64
counts, which merges by addition. Every input check runs before the state is
touched and names the metric and the argument.
"""
from __future__ import annotations

import importlib
from itertools import chain
from typing import Any, Sequence

import torch

from fmetrics import validation
from fmetrics.family import Family
from fmetrics.state import all_strings, cat_chunks

__all__ = ["sentences", "references", "pair_lists", "require", "counts_family", "cat_scores", "empty", "nan"]


def require(metric: str, module: str, package: str | None = None, purpose: str = "", extra: str | None = "text"):
    """Imports an optional module or raises naming the metric and what to install.

    ``package``: the distributions that bring ``module``, space-separated (default: its top-level name);
    ``extra``: the checkout's extra that has them, if one has. The hint names the packages themselves: outside
    the checkout an extra of ``fmetrics`` would come from an unrelated package of that name (README, "Install").
    Example: ``bleu_score needs sacrebleu: pip install sacrebleu (in a checkout of this repository:
    pip install -e '.[text]')``.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        package = package or module.split(".")[0]
        hint = f" (in a checkout of this repository: pip install -e '.[{extra}]')" if extra else ""
        raise ModuleNotFoundError(f"{metric} needs {package}{purpose}: pip install {package}{hint}") from None


def _kind(x: Any) -> str:
    return type(x).__name__


def sentences(metric: str, arg: str, x: Any) -> list:
    """``x`` as a list of strings: one string is one sentence; anything else must be a list/tuple of strings."""
    if isinstance(x, str):
        return [x]
    if not isinstance(x, (list, tuple)):
        raise validation.fail(metric, arg, "a string or a list of strings", _kind(x))
    if all_strings(x):  # the usual input
        return list(x)
    for i, s in enumerate(x):
        if not isinstance(s, str):
            raise validation.fail(metric, arg, "a list of strings", f"a {_kind(s)} at position {i}")
    return list(x)


def references(metric: str, arg: str, x: Any, n: int, allow_single: bool = True) -> list:
    """``x`` as one list of reference strings per prediction (``n`` predictions).

    Each entry is a list/tuple of strings (several references) or, when
    ``allow_single``, one string (one reference). ``x`` itself must be a list
    or tuple.
    """
    if isinstance(x, str) or not isinstance(x, (list, tuple)):
        raise validation.fail(metric, arg, "a list with one list of reference strings per prediction",
                              f"a {_kind(x)}")
    if len(x) != n:
        raise validation.fail(metric, arg, f"one entry per prediction ({n} predictions)", f"{len(x)} entries")
    kinds = set(map(type, x))
    if kinds <= {list, tuple} and all(x) and set(map(type, chain.from_iterable(x))) <= {str}:
        return list(x) if kinds <= {list} else list(map(list, x))  # the usual input, checked by C loops
    if kinds == {str} and allow_single:
        return [[r] for r in x]
    out = []
    for i, refs in enumerate(x):
        if isinstance(refs, str):
            if not allow_single:
                raise validation.fail(metric, arg, "a list of reference strings per prediction",
                                      f"a string at position {i}")
            out.append([refs])
            continue
        if not isinstance(refs, (list, tuple)):
            raise validation.fail(metric, arg, "a list of reference strings per prediction",
                                  f"a {_kind(refs)} at position {i}")
        if not refs:
            raise validation.fail(metric, arg, "at least one reference per prediction",
                                  f"an empty list at position {i}")
        for j, s in enumerate(refs):
            if not isinstance(s, str):
                raise validation.fail(metric, arg, "reference strings", f"a {_kind(s)} at position [{i}][{j}]")
        out.append(list(refs))
    return out


def pair_lists(metric: str, preds: Any, target: Any) -> tuple[list, list]:
    """``(preds, target)`` as two equally long lists of strings (one reference per prediction)."""
    p = sentences(metric, "preds", preds)
    t = sentences(metric, "target", target)
    if len(p) != len(t):
        raise validation.fail(metric, "target", f"as many sentences as `preds` ({len(p)})", len(t))
    return p, t


def counts_family(name: str, key, State, update=None, dtypes: dict | None = None, shapes: dict | None = None,
                  cats: Sequence[str] = (), rows=None) -> Family:
    """A host-input family over ``State`` (a module-level NamedTuple) of sum-merged counts.

    ``update(*inputs)`` returns a dict of this batch's counts (it raises, on bad
    input, before the state is touched). ``dtypes`` maps a field to
    ``torch.float64`` (default int64); ``shapes`` gives non-scalar shapes;
    ``cats`` names concatenating fields (per-sentence scores, tag ``"cat"``).
    ``rows(*inputs)`` (instead of ``update``; sum fields only) returns each
    sentence's counts stacked on a leading axis: the batch's counts are their
    sums, and the family's ``host_rows`` gives wrappers the one-row states in one call.
    """
    dtypes, shapes = dtypes or {}, shapes or {}
    fields = State._fields

    def init():
        return State(*(() if f in cats else
                       torch.zeros(shapes.get(f, ()), dtype=dtypes.get(f, torch.int64)) for f in fields))

    def host_rows(*inputs):
        new = rows(*inputs)
        return State(*(torch.as_tensor(new[f], dtype=dtypes.get(f, torch.int64)) for f in fields))

    if rows is not None:
        update = lambda *inputs: {f: x.sum(0) for f, x in zip(fields, host_rows(*inputs))}  # noqa: E731

    def wrapped(state, *inputs, **kwargs):
        new = update(*inputs, **kwargs)
        out = []
        for f, old in zip(fields, state):
            if f in cats:
                out.append((torch.as_tensor(new[f], dtype=torch.float64).reshape(-1).clone(),))
            else:
                out.append(_add(old, new[f]))
        return State(*out)

    reductions = State(*("cat" if f in cats else "sum" for f in fields))
    return Family(name=name, key=key, init=init, update=wrapped, reductions=reductions, host_input=True,
                  host_rows=None if rows is None else host_rows)


def _add(total: torch.Tensor, x: Any) -> torch.Tensor:
    """``total + x`` in ``total``'s dtype; a Python int (or a float, into a float field) adds as a scalar, without
    a tensor of its own (a few microseconds per field and update on the host-input hot path)."""
    if type(x) is int or (type(x) is float and total.is_floating_point()):
        return total + x
    return total + torch.as_tensor(x, dtype=total.dtype)


def empty(metric: str, n: Any) -> bool:
    """Warns (and returns True) when ``n`` sentences (tokens, questions) were seen and ``n`` is 0.

    The value is then undefined: the metric returns `nan()` (docs/conventions.md, "Empty input").
    """
    if int(n) == 0:
        validation.warn_empty(metric, stacklevel=3)
        return True
    return False


def nan() -> torch.Tensor:
    """A fresh float64 NaN scalar (the value on empty input)."""
    return torch.tensor(float("nan"), dtype=torch.float64)


def cat_scores(chunks) -> torch.Tensor:
    return cat_chunks(chunks, torch.zeros(0, dtype=torch.float64))
