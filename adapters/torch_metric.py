"""`TorchMetric`: any fmetrics `Metric` as a real `torchmetrics.Metric`.

Each tensor leaf of the fmetrics state is a torchmetrics tensor state and each
chunk field (a ``"cat"`` field, or a field that is an empty tuple in
``init()``) a list state, so ``reset``, ``.to(device)``, ``state_dict``,
``deepcopy``, pickling and `torchmetrics.MetricCollection` (compute groups
included) work unchanged. Cross-rank sync goes through
`adapters.distributed.reduce`; ``forward`` updates once per call and merges
the batch state into the accumulated one.
"""
from __future__ import annotations

import hashlib
import itertools
from typing import Any, Mapping, Optional

import torch
import torch.utils._pytree as pytree
import torchmetrics
from torchmetrics.utilities.exceptions import TorchMetricsUserError

from adapters import distributed
from fmetrics import state as state_lib
from fmetrics.metric import Metric

__all__ = ["TorchMetric"]

_UNSHARED = itertools.count(1)  # state-key tags for metrics that never share a state


def _child_tags(tags, index):
    if tags is None or isinstance(tags, str):
        return tags  # a tag applies to the whole subtree below it
    return tags[index]


def _template(tags, node, path: tuple):
    """The layout of a state: ``("leaf", name, tag)``, ``("chunks", name)``, ``("seq", type, children)``
    or ``("map", keys, children)``."""
    name = "fm_" + ("_".join(path) if path else "state")
    if isinstance(tags, str) and tags == "cat" or (isinstance(node, (tuple, list)) and len(node) == 0):
        if not isinstance(node, (tuple, list)):
            raise TypeError(f"TorchMetric: state field {name[3:]} is tagged 'cat' but is a {type(node).__name__}")
        return ("chunks", name)
    if isinstance(node, torch.Tensor):
        return ("leaf", name, tags if isinstance(tags, str) else None)
    if isinstance(node, (tuple, list)):
        fields = getattr(node, "_fields", None)
        parts = [_template(_child_tags(tags, i), x, path + (fields[i] if fields else f"s{i}",))
                 for i, x in enumerate(node)]
        return ("seq", type(node), parts)
    if isinstance(node, Mapping):
        keys = list(node)
        parts = [_template(_child_tags(tags, k), node[k], path + ("".join(
            c if c.isalnum() else "_" for c in str(k)),)) for k in keys]
        return ("map", keys, parts)
    raise TypeError(f"TorchMetric: state leaf {name[3:]} is a {type(node).__name__}, not a tensor")


def _slots(template):
    kind = template[0]
    if kind in ("leaf", "chunks"):
        yield template
    else:
        for child in template[2]:
            yield from _slots(child)


def _key_value(metric: Metric) -> int:
    """Equal for metrics whose states may be shared (equal ``state_key``), distinct otherwise."""
    if metric.state_key is None:
        return -next(_UNSHARED)
    digest = hashlib.blake2b(repr(metric.state_key).encode(), digest_size=7).digest()
    return int.from_bytes(digest, "little")


class TorchMetric(torchmetrics.Metric):
    """Wraps an fmetrics `Metric` as a `torchmetrics.Metric`.

    Args:
      metric: any `fmetrics.Metric` (a `fmetrics.collection` too).
      **kwargs: torchmetrics' options: ``dist_sync_on_step``, ``sync_on_compute``,
        ``compute_on_cpu`` (finalize runs on the CPU; chunk states move there
        after each update), ``process_group``, ``compute_with_cache``.
        ``dist_sync_fn`` is not accepted: sync always uses
        `adapters.distributed.reduce`.

    States are not persistent by default (as in torchmetrics); call
    ``.persistent(True)`` to put them in ``state_dict``.

    Example::

        >>> acc = TorchMetric(fmetrics.multiclass_accuracy(num_classes=3))
        >>> acc(preds, target)      # the batch value; also accumulated
        >>> acc.compute()           # all batches (all ranks under DDP)
    """

    full_state_update = False

    def __init__(self, metric: Metric, **kwargs: Any):
        if not isinstance(metric, Metric):
            raise TypeError(f"TorchMetric: argument `metric` expected a fmetrics.Metric, got {type(metric).__name__}")
        if kwargs.get("dist_sync_fn") is not None:
            raise ValueError("TorchMetric: argument `dist_sync_fn` is not supported; states are synced with "
                             "adapters.distributed.reduce")
        super().__init__(**kwargs)
        self._fm = metric  # pickled and deep-copied by its recipe
        init = metric.init()
        self._template = _template(metric.reductions, init, ())
        names = [slot[1] for slot in _slots(self._template)]
        if len(set(names)) != len(names) or "fm_state_key" in names:
            raise ValueError(f"TorchMetric: state field names collide: {names}")
        values: dict = {}
        self._read(self._template, init, values, "state")
        for slot in _slots(self._template):
            if slot[0] == "chunks":
                self.add_state(slot[1], default=[], dist_reduce_fx="cat")
            else:
                self.add_state(slot[1], default=values[slot[1]], dist_reduce_fx=slot[2])
        # makes MetricCollection's compute groups follow state keys (see `_key_value`)
        self.add_state("fm_state_key", torch.tensor(_key_value(metric), dtype=torch.int64))

    @property
    def metric(self) -> Metric:
        """The wrapped fmetrics metric."""
        return self._fm

    # ------------------------------------------------------------ state <-> torchmetrics states

    def _read(self, template, node, out: dict, path: str) -> None:
        kind = template[0]
        if kind == "chunks":
            if not isinstance(node, (tuple, list)) or not all(isinstance(c, torch.Tensor) for c in node):
                raise TypeError(f"TorchMetric({self.metric.name}): {path} must be a tuple of tensor chunks")
            out[template[1]] = list(node)
        elif kind == "leaf":
            if not isinstance(node, torch.Tensor):
                raise TypeError(f"TorchMetric({self.metric.name}): {path} must be a tensor, "
                                f"got {type(node).__name__}")
            out[template[1]] = node
        elif kind == "seq":
            if type(node) is not template[1] or len(node) != len(template[2]):
                raise TypeError(f"TorchMetric({self.metric.name}): the state layout changed at {path}; "
                                "only chunk fields may change size")
            for i, (child, x) in enumerate(zip(template[2], node)):
                self._read(child, x, out, f"{path}[{i}]")
        else:
            if not isinstance(node, Mapping) or list(node) != template[1]:
                raise TypeError(f"TorchMetric({self.metric.name}): the state layout changed at {path}")
            for child, k in zip(template[2], template[1]):
                self._read(child, node[k], out, f"{path}[{k!r}]")

    def _build(self, template, values: Mapping[str, Any]):
        kind = template[0]
        if kind == "chunks":
            return tuple(values[template[1]])
        if kind == "leaf":
            return values[template[1]]
        parts = [self._build(child, values) for child in template[2]]
        if kind == "map":
            return dict(zip(template[1], parts))
        cls = template[1]
        return cls(*parts) if hasattr(cls, "_fields") else cls(parts)

    def _get_state(self):
        """The fmetrics state held by this module."""
        return self._build(self._template, {slot[1]: getattr(self, slot[1]) for slot in _slots(self._template)})

    def _set_state(self, state) -> None:
        values: dict = {}
        self._read(self._template, state, values, "state")
        for name, value in values.items():
            setattr(self, name, value)

    # ------------------------------------------------------------ the torchmetrics API

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Folds a batch into the state: ``state = metric.update(state, *args, **kwargs)``."""
        self._set_state(self.metric.update(self._get_state(), *args, **kwargs))

    def compute(self) -> Any:
        """``metric.finalize`` of the (synced) state."""
        state = self._get_state()
        if self.compute_on_cpu:
            state = state_lib.to_device(state, "cpu")
        return self.metric.finalize(state)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The batch value; the batch state is merged into the accumulated state (one update per call)."""
        if self._is_synced:
            raise TorchMetricsUserError(
                "The Metric shouldn't be synced when performing ``forward``. HINT: Did you forget to call ``unsync`` ?.")
        acc = self._get_state()
        m = self.metric
        batch = m.update(m.init(state_lib.device_of(acc) or self.device), *args, **kwargs)
        shown = batch
        if self.dist_sync_on_step and self.distributed_available_fn():
            shown = distributed.reduce(m, batch, group=self.process_group)
        value = _squeeze_if_scalar(m.finalize(shown))
        with torch.no_grad():
            self._set_state(m.merge(acc, state_lib.tree_map(torch.Tensor.detach, batch)))
        self._update_count += 1
        self._computed = None
        if self.compute_on_cpu:
            self._move_list_states_to_cpu()
        self._forward_cache = value
        return value

    def _sync_dist(self, dist_sync_fn: Optional[Any] = None, process_group: Optional[Any] = None) -> None:
        self._set_state(distributed.reduce(self.metric, self._get_state(), group=process_group or self.process_group))

    def merge_state(self, incoming_state) -> None:
        """Merges another `TorchMetric` of the same metric (or its ``metric_state`` dict) into this one."""
        if isinstance(incoming_state, TorchMetric):
            incoming_state = incoming_state.metric_state
        if not isinstance(incoming_state, Mapping):
            raise ValueError(f"Expected incoming state to be a dict or a TorchMetric, got {type(incoming_state)}")
        other = self._build(self._template, incoming_state)
        self._set_state(self.metric.merge(self._get_state(), other))
        self._computed = None

    def __repr__(self) -> str:
        return f"TorchMetric({self.metric!r})"


def _squeeze_if_scalar(value):
    """As torchmetrics' compute does: one-element tensors become 0-d."""
    return pytree.tree_map(lambda x: x.squeeze() if isinstance(x, torch.Tensor) and x.numel() == 1 else x, value)
