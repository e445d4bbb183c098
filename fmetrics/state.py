"""Helpers every state needs: field-wise merges, chunks, devices, stacking.

States are NamedTuples whose leaves are tensors, or tuples of tensor *chunks*
for concatenating fields (a growing tuple costs O(1) per update; the chunks
are joined once, in `finalize`, so a whole run costs O(total)).

Reduction tags mirror a state's structure and name how each field merges:

* ``"sum"``  -- ``a + b``            (counts, sums; identity: zeros)
* ``"min"``  -- ``torch.minimum``    (identity: +inf or the dtype's max)
* ``"max"``  -- ``torch.maximum``    (identity: -inf or the dtype's min)
* ``"cat"``  -- chunk tuples joined  (identity: ``()``)
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence

import torch
import torch.utils._pytree as pytree

__all__ = [
    "TAGS",
    "merge_fields",
    "apply_tags",
    "cat_chunks",
    "to_device",
    "device_of",
    "stack",
    "unstack",
    "fold",
    "tree_map",
    "leaves",
    "accum_dtype",
]

TAGS = ("sum", "min", "max", "cat")

_MERGE_LEAF: dict[str, Callable[[Any, Any], Any]] = {
    "sum": lambda a, b: a + b,
    "min": torch.minimum,
    "max": torch.maximum,
    "cat": lambda a, b: tuple(a) + tuple(b),
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
    for x in pytree.tree_leaves(tree):
        if isinstance(x, torch.Tensor):
            return x.device
    return None


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
