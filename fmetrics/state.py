"""Helpers every state needs: field-wise merges, chunks, devices, stacking.

States are NamedTuples whose leaves are tensors, or tuples of tensor *chunks*
for concatenating fields (a growing tuple costs O(1) per update; the chunks
are joined once, in `finalize`, so a whole run costs O(total)).

Reduction tags mirror a state's structure and name how each field merges:

* ``"sum"``  -- ``a + b``            (counts, sums; identity: zeros)
* ``"min"``  -- ``torch.minimum``    (identity: +inf or the dtype's max)
* ``"max"``  -- ``torch.maximum``    (identity: -inf or the dtype's min)
* ``"cat"``  -- chunk tuples joined  (identity: ``()``)

States load back with `torch.load`'s defaults (``weights_only=True``): every
NamedTuple type of a state made by `fmetrics.Metric.init` is pickled as a call
of `rebuild` (the one safe global this module registers), which re-imports
the type from its ``fmetrics`` module. A state class of your own needs
``torch.serialization.add_safe_globals([YourState])``.
"""
from __future__ import annotations

import copyreg
import functools
import importlib
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch
import torch.utils._pytree as pytree

__all__ = [
    "TAGS",
    "merge_fields",
    "apply_tags",
    "cat_chunks",
    "to_device",
    "device_of",
    "all_strings",
    "stack",
    "unstack",
    "fold",
    "tree_map",
    "leaves",
    "accum_dtype",
    "EmptyChunks",
    "join_chunks",
    "register",
    "rebuild",
]

TAGS = ("sum", "min", "max", "cat")

_MERGE_LEAF: dict[str, Callable[[Any, Any], Any]] = {
    "sum": lambda a, b: a + b,
    "min": torch.minimum,
    "max": torch.maximum,
    "cat": lambda a, b: join_chunks(a, b),
}

tree_map = pytree.tree_map


def leaves(tree) -> list:
    """The tensor leaves of a state, in a fixed order."""
    return pytree.tree_leaves(tree)


def _is_tag(t) -> bool:
    return t is None or isinstance(t, str)


def apply_tags(fn: Callable[[Optional[str], Any, Any], Any], tags, a, b):
    """Walks ``tags`` (a prefix of the states' structure) and calls ``fn(tag, a_field, b_field)``.

    Returns a tree of the same type as ``a`` built from the results.
    """
    if _is_tag(tags):
        return fn(tags, a, b)
    if isinstance(tags, dict):
        return {k: apply_tags(fn, tags[k], a[k], b[k]) for k in tags}
    if not isinstance(tags, tuple) or len(tags) != len(a):
        raise TypeError(f"reduction tags {tags!r} do not mirror the state {type(a).__name__}")
    parts = [apply_tags(fn, t, x, y) for t, x, y in zip(tags, a, b)]
    return type(a)(*parts) if hasattr(a, "_fields") else type(a)(parts)


def merge_fields(tags) -> Callable[[Any, Any], Any]:
    """A merge function derived from per-field reduction tags.

    Example::

        >>> class MeanState(NamedTuple):
        ...     total: torch.Tensor
        ...     weight: torch.Tensor
        >>> merge = merge_fields(MeanState(total="sum", weight="sum"))
        >>> merge(MeanState(torch.tensor(1.), torch.tensor(2.)), MeanState(torch.tensor(3.), torch.tensor(4.)))
        MeanState(total=tensor(4.), weight=tensor(6.))
    """

    def leaf(tag, x, y):
        if tag not in _MERGE_LEAF:
            raise TypeError(f"merge_fields: field tag {tag!r} must be one of {TAGS}")
        return _MERGE_LEAF[tag](x, y)

    def merge(a, b):
        return apply_tags(leaf, tags, a, b)

    return merge


class EmptyChunks(tuple):
    """An empty chunk field that knows its device (a chunk-only state from `fmetrics.Metric.init` holds these).

    Equal to ``()`` and joined like it; its one pytree leaf, ``marker`` (a 0-element tensor), moves with
    `to_device`, so an input on another device than the state is rejected before any chunk exists.

    Example::

        >>> e = EmptyChunks(torch.empty(0))
        >>> e == (), len(e), e.marker.device
        (True, 0, device(type='cpu'))
    """

    marker: torch.Tensor

    def __new__(cls, marker: torch.Tensor):
        self = super().__new__(cls)
        self.marker = marker
        return self

    def __reduce__(self):
        return EmptyChunks, (self.marker,)

    def __repr__(self) -> str:
        return f"EmptyChunks(device={self.marker.device})"


pytree.register_pytree_node(
    EmptyChunks, lambda e: ([e.marker], None), lambda leaves, _: EmptyChunks(leaves[0]),
    serialized_type_name="fmetrics.state.EmptyChunks")


def join_chunks(a: Sequence, b: Sequence) -> tuple:
    """The chunks of ``a`` then ``b`` (the ``"cat"`` merge); an empty result keeps an `EmptyChunks` marker.

    Example::

        >>> x = torch.ones(1)
        >>> join_chunks((x,), (x, x)) == (x, x, x), join_chunks((), ()) == ()
        (True, True)
    """
    if not b:
        return a if a or isinstance(a, EmptyChunks) else b
    return b if not a else tuple(a) + tuple(b)


def cat_chunks(chunks: Sequence[torch.Tensor], empty: torch.Tensor) -> torch.Tensor:
    """Joins a field's chunks along dim 0; ``empty`` is returned when there are none."""
    if len(chunks) == 0:
        return empty
    if len(chunks) == 1:
        return chunks[0]
    return torch.cat(tuple(chunks), dim=0)


def accum_dtype(device: Optional[torch.device | str] = None) -> torch.dtype:
    """float64 for accumulators, unless the device has no float64 (MPS)."""
    if device is not None and torch.device(device).type == "mps":
        return torch.float32
    return torch.float64


def host_plus(count, k: int) -> torch.Tensor:
    """``count + k`` as a fresh CPU int64 0-d tensor (``count``: such a tensor, or an int already read), through
    a Python int: ~1 µs, where a torch add costs ~2 µs in dispatch and several after a large batch's passes
    (the eager CPU updates' row and call counts)."""
    return torch.from_numpy(np.array(int(count) + k, dtype=np.int64))


def to_device(state, device):
    """Moves every leaf to ``device`` (float64 leaves become float32 on MPS).

    Args:
      state: a metric state (a NamedTuple, tuple or dict of tensors, nested).
      device: a ``torch.device`` or its name (``"cuda:1"``).

    Returns:
      The same structure with every tensor on ``device``.

    Example::

        >>> fmetrics.to_device(fmetrics.sum().init(), "cpu").total.device
        device(type='cpu')
    """
    device = torch.device(device)
    if device.type == "mps":
        return tree_map(
            lambda x: x.to(device, torch.float32) if x.dtype == torch.float64 else x.to(device), state
        )
    return tree_map(lambda x: x.to(device), state)


def device_of(tree) -> Optional[torch.device]:
    """Device of the first tensor found in ``tree`` (``None`` if it holds none)."""
    for x in pytree.tree_leaves(tree, is_leaf=_strings):
        if isinstance(x, torch.Tensor):
            return x.device
    return None


def all_strings(x) -> bool:
    """Whether every entry of the sequence ``x`` is a string, checked in one C loop (`str.join`: faster than a
    type walk over text inputs)."""
    try:
        "".join(x)
        return True
    except TypeError:
        return False


def _strings(x) -> bool:
    """A non-empty list or tuple of strings only (text inputs): a leaf without tensors."""
    return type(x) in (list, tuple) and bool(x) and type(x[0]) is str and all_strings(x)  # else pytree's walk


def stack(states: Sequence[Any]):
    """Stacks equally shaped states along a new leading axis (for `torch.func.vmap`)."""
    return tree_map(lambda *xs: torch.stack(xs), states[0], *states[1:])


def unstack(stacked) -> list:
    """Inverse of `stack`: the list of states along the leading axis."""
    flat, spec = pytree.tree_flatten(stacked)
    n = flat[0].shape[0]
    return [pytree.tree_unflatten([x[i] for x in flat], spec) for i in range(n)]


def fold(merge: Callable[[Any, Any], Any], states: Sequence[Any]):
    """Merges states left to right (rank order): ``merge(merge(s0, s1), s2) ...``."""
    return functools.reduce(merge, states)


_TYPES: set = set()  # state types pickled by `rebuild`


def rebuild(module: str, qualname: str, fields: tuple):
    """A state NamedTuple from its type's ``fmetrics`` module and its fields (what `torch.load` calls).

    Only a NamedTuple type defined in an ``fmetrics`` module is built, so loading runs no other code.
    """
    if module.split(".")[0] != "fmetrics":
        raise TypeError(f"fmetrics.state.rebuild: {module}.{qualname} is not an fmetrics state type")
    cls = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    if not (isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")):
        raise TypeError(f"fmetrics.state.rebuild: {module}.{qualname} is not a NamedTuple state type")
    register(cls)
    return cls(*fields)


def _reduce_state(s):
    return rebuild, (type(s).__module__, type(s).__qualname__, tuple(s))


def register(tree) -> None:
    """Makes every fmetrics NamedTuple type in ``tree`` (a state, or a type) load with `torch.load`'s defaults."""
    if isinstance(tree, type):
        if tree not in _TYPES and tree.__module__.split(".")[0] == "fmetrics":
            _TYPES.add(tree)
            copyreg.pickle(tree, _reduce_state)
        return
    if isinstance(tree, dict):
        tree = tuple(tree.values())
    if isinstance(tree, (tuple, list)):
        if hasattr(tree, "_fields"):
            register(type(tree))
        for x in tree:
            register(x)


torch.serialization.add_safe_globals([rebuild, EmptyChunks])
