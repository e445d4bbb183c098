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
import warnings
from typing import Any, Literal, Mapping, Optional

import torch
import torch.utils._pytree as pytree

try:
    import torchmetrics
except ModuleNotFoundError as _err:
    if _err.name != "torchmetrics":
        raise
    raise ModuleNotFoundError("adapters.TorchMetric needs torchmetrics, which is not installed: "
                              "pip install torchmetrics", name="torchmetrics") from None
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
      persistent: ``True`` puts the state (and the metric's recipe) in
        ``state_dict``, so a checkpoint taken mid-epoch resumes with the data
        seen so far. Default ``False``, as torchmetrics (``.persistent(True)``
        switches it later).
      sync: how ``compute()`` combines the ranks: ``"gather"`` (default) reduces
        the state with `adapters.distributed.reduce` (every rank holds all
        rows), ``"shard"`` computes with `adapters.distributed.finalize`
        (rows routed, never all on one rank; docs/scaling.md). The value is
        the same on every rank, so Lightning's ``self.log`` works alike.
      **kwargs: torchmetrics' options: ``dist_sync_on_step``, ``sync_on_compute``,
        ``compute_on_cpu`` (finalize runs on the CPU; chunk states move there
        after each update), ``process_group``, ``compute_with_cache``.
        ``dist_sync_fn`` is not accepted: sync always uses
        `adapters.distributed.reduce`.

    * Metadata (``higher_is_better``, ``is_differentiable``,
      ``plot_lower_bound`` / ``plot_upper_bound``) comes from the wrapped
      metric; `member_metadata` gives it per output key for a collection.
    * The metric's parameters (`fmetrics.Metric.params`: class weights,
      networks) are non-persistent buffers and submodules, so ``.to(device)``
      and Lightning move them (the metric is rebuilt with the moved ones);
      the metric runs networks in eval mode without changing their mode
      (``.train()`` on the wrapper leaves them alone). They are never reduced and never reset.
    * Dtype casts (``.half()``, ``.double()``, ``.to(torch.bfloat16)``,
      ``set_dtype``, Lightning ``precision="bf16-true"``) never touch the state
      or the parameters: only the returned value follows the requested dtype.
    * Inputs are detached before they reach the state.

    Example::

        >>> acc = TorchMetric(fmetrics.multiclass_accuracy(num_classes=3))
        >>> acc(preds, target)      # the batch value; also accumulated
        >>> acc.compute()           # all batches (all ranks under DDP)
    """

    full_state_update = False

    def __init__(self, metric: Metric, *, persistent: bool = False, sync: Literal["gather", "shard"] = "gather",
                 **kwargs: Any):
        if not isinstance(metric, Metric):
            raise TypeError(f"TorchMetric: argument `metric` expected a fmetrics.Metric, got {type(metric).__name__}")
        if kwargs.get("dist_sync_fn") is not None:
            raise ValueError("TorchMetric: argument `dist_sync_fn` is not supported; states are synced with "
                             "adapters.distributed.reduce")
        if not isinstance(persistent, bool):
            raise ValueError(f"TorchMetric: argument `persistent` expected a bool, got {persistent!r}")
        if sync not in ("gather", "shard"):
            raise ValueError(f"TorchMetric: argument `sync` expected 'gather' or 'shard', got {sync!r}")
        self._fm_sync = sync
        self._fm_shard_group = None
        super().__init__(**kwargs)
        self._fm = metric  # pickled and deep-copied by its recipe
        self._fm_recipe = repr(metric)
        self._out_dtype: Optional[torch.dtype] = None
        for key, value in _metadata(metric).items():
            self.__dict__[key] = value  # torchmetrics guards these names against assignment
        init = metric.init()
        self._template = _template(metric.reductions, init, ())
        names = [slot[1] for slot in _slots(self._template)]
        if len(set(names)) != len(names) or "fm_state_key" in names:
            raise ValueError(f"TorchMetric: state field names collide: {names}")
        values: dict = {}
        self._read(self._template, init, values, "state")
        for slot in _slots(self._template):
            if slot[0] == "chunks":
                self.add_state(slot[1], default=[], dist_reduce_fx="cat", persistent=persistent)
            else:
                self.add_state(slot[1], default=values[slot[1]], dist_reduce_fx=slot[2], persistent=persistent)
        # makes MetricCollection's compute groups follow state keys (see `_key_value`)
        self.add_state("fm_state_key", torch.tensor(_key_value(metric), dtype=torch.int64))
        self._register_parameters()
        members = _collection_members(metric)
        self._fm_member_keys: list = list(_member_metadata(metric)) if members is not None else []
        if self._fm_member_keys:
            # one view per output key, registered as submodules so Lightning finds them (log_dict)
            self.fm_members = torch.nn.ModuleDict(
                {_attr(key): _MemberView(self, key) for key in self._fm_member_keys})

    @property
    def metric(self) -> Metric:
        """The wrapped fmetrics metric."""
        return self._fm

    @property
    def member_metadata(self) -> dict:
        """``{output key: {higher_is_better, is_differentiable, bounds}}`` (one entry, ``""``, for a plain metric)."""
        return _member_metadata(self._fm)

    def items(self):
        """``(output key, Metric)`` per member of a wrapped collection, so ``self.log_dict(wrapper)`` logs every
        member under its prefixed name, on step (the last ``forward``'s value) and on epoch (``compute``).
        A plain metric gives one pair, ``(metric.name, self)``."""
        if not self._fm_member_keys:
            return [(self._fm.name, self)]
        return [(key, self.fm_members[_attr(key)]) for key in self._fm_member_keys]

    def keys(self):
        return [k for k, _ in self.items()]

    # ------------------------------------------------------------ parameters

    def _register_parameters(self) -> None:
        """Tensor parameters as non-persistent buffers, networks as submodules (their modes left as they are)."""
        self._fm_param_names: dict = {}
        for name, value in self._fm.params.items():
            attr = "fm_param_" + "".join(c if c.isalnum() else "_" for c in name)
            self._fm_param_names[name] = attr
            if isinstance(value, torch.nn.Module):
                if attr not in self._modules:
                    self.add_module(attr, value)
                else:
                    self._modules[attr] = value
            elif attr in self._buffers:
                self._buffers[attr] = value
            else:
                self.register_buffer(attr, value, persistent=False)

    def train(self, mode: bool = True):
        """Sets the mode of this module; the metric's networks keep the mode their owner set (the metric
        evaluates them in eval mode without changing them: `fmetrics.networks.eval_view`)."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for name, module in self.named_children():
            if not name.startswith("fm_param_"):
                module.train(mode)
        return self

    def _apply(self, fn, exclude_state=""):
        """Moves states, defaults and parameters; a dtype cast only sets the dtype of the returned value."""
        try:
            probes = [torch.zeros(1, device=self.device, dtype=d) for d in (torch.float32, torch.float64)]
            outs = [fn(p) for p in probes]
        except Exception:  # noqa: BLE001 - an unusual fn: applied as torchmetrics does
            outs = None
        if outs is not None and isinstance(outs[0], torch.Tensor):
            cast = next((o.dtype for p, o in zip(probes, outs) if o.dtype != p.dtype), None)
            if cast is not None:  # .to(dtype), .half(), bf16-true, ...: accumulators and parameters keep theirs
                device = outs[0].device
                self._out_dtype = cast
                this = super()._apply(lambda t: t.to(device), exclude_state)
                this._dtype = cast
                this._rebuild_on(device)
                return this
        this = super()._apply(fn, exclude_state)
        this._rebuild_on(this.device)
        return this

    def _rebuild_on(self, device) -> None:
        """Rebuilds the wrapped metric with its parameters on ``device`` (by its recipe), re-registered."""
        params = self._fm.params
        if not params or all(_on(p, device) for p in params.values()):
            return
        try:
            self._fm = self._fm.to(device)
        except Exception as err:  # noqa: BLE001 - e.g. a factory that cannot read its parameters on `meta`
            warnings.warn(f"TorchMetric({self._fm_recipe}): its parameters could not be moved to {device} "
                          f"({type(err).__name__}: {err}); the metric keeps them where they were", UserWarning)
            return
        self._register_parameters()

    def set_dtype(self, dst_type) -> "TorchMetric":
        """The dtype of the returned value; states keep theirs (int64 counts, float64 sums)."""
        self._out_dtype = _as_dtype(dst_type)
        self._dtype = self._out_dtype
        return self

    def type(self, dst_type) -> "TorchMetric":
        return self.set_dtype(dst_type)

    def half(self) -> "TorchMetric":
        return self.set_dtype(torch.float16)

    def bfloat16(self) -> "TorchMetric":
        return self.set_dtype(torch.bfloat16)

    def float(self) -> "TorchMetric":
        return self.set_dtype(torch.float32)

    def double(self) -> "TorchMetric":
        return self.set_dtype(torch.float64)

    def _cast(self, value):
        """``value``'s floating tensors in the requested dtype where they fit: one with a finite entry beyond
        the dtype's range keeps its own dtype, with a warning (a cast never turns a value into inf)."""
        if self._out_dtype is None:
            return value
        return pytree.tree_map(lambda x: _cast_fitting(self._fm.name, x, self._out_dtype), value)

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

    def _has_data(self) -> bool:
        if self._update_count:
            return True
        for name, default in self._defaults.items():
            value = getattr(self, name)
            if isinstance(value, list):
                if value:
                    return True
            elif name != "fm_state_key" and (value.device.type == "meta"
                                             or not _tensors_equal(value, default.to(value.device))):
                return True
        return False

    # ------------------------------------------------------------ the torchmetrics API

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Folds a batch into the state: ``state = metric.update(state, *args, **kwargs)`` (inputs detached)."""
        args, kwargs = _detached((args, kwargs))
        self._set_state(self.metric.update(self._get_state(), *args, **kwargs))

    def compute(self) -> Any:
        """``metric.finalize`` of the (synced) state, in the requested dtype (see `set_dtype`)."""
        state = self._get_state()
        if self.compute_on_cpu:
            state = state_lib.to_device(state, "cpu")
        if self._fm_sync == "shard" and self._is_synced:  # `_sync_dist` left the local state in place
            return self._cast(distributed.finalize(self.metric, state, group=self._fm_shard_group))
        return self._cast(self.metric.finalize(state))

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The batch value; the batch state is merged into the accumulated state (one update per call).

        The batch value keeps its autograd graph when the metric is differentiable; the state never does.
        """
        if self._is_synced:
            raise TorchMetricsUserError(
                "The Metric shouldn't be synced when performing ``forward``. HINT: Did you forget to call ``unsync`` ?.")
        if not self.metric.is_differentiable:
            args, kwargs = _detached((args, kwargs))
        acc = self._get_state()
        m = self.metric
        batch = m.update(m.init(state_lib.device_of(acc) or self.device), *args, **kwargs)
        shown = batch
        if self.dist_sync_on_step and self.distributed_available_fn():
            shown = distributed.reduce(m, batch, group=self.process_group, purpose="step")
        value = self._cast(_squeeze_if_scalar(m.finalize(shown)))
        with torch.no_grad():
            self._set_state(m.merge(acc, state_lib.tree_map(torch.Tensor.detach, batch)))
        self._update_count += 1
        self._computed = None
        if self.compute_on_cpu:
            self._move_list_states_to_cpu()
        self._forward_cache = _detached(value)  # a cached value never keeps the step's graph alive
        return value

    def _sync_dist(self, dist_sync_fn: Optional[Any] = None, process_group: Optional[Any] = None) -> None:
        if self._fm_sync == "shard":  # compute() finalizes the local states together
            self._fm_shard_group = process_group or self.process_group
            return
        self._set_state(distributed.reduce(self.metric, self._get_state(),
                                           group=process_group or self.process_group, purpose="compute"))

    @property
    def metric_state(self) -> dict:
        """The torchmetrics states by name, plus ``fm_recipe`` (the wrapped metric's recipe, checked by `merge_state`)."""
        return {**{k: getattr(self, k) for k in self._defaults}, "fm_recipe": self._fm_recipe}

    def merge_state(self, incoming_state) -> None:
        """Merges another `TorchMetric` of the same metric (or its ``metric_state`` dict) into this one.

        Raises ``ValueError`` naming both recipes when the other metric has another recipe.
        """
        if isinstance(incoming_state, TorchMetric):
            incoming_state = incoming_state.metric_state
        if not isinstance(incoming_state, Mapping):
            raise ValueError(f"Expected incoming state to be a dict or a TorchMetric, got {type(incoming_state)}")
        incoming_state = dict(incoming_state)
        self._check_recipe(incoming_state.pop("fm_recipe", None), "merge_state")
        self._check_layout(incoming_state, "merge_state")
        other = self._build(self._template, incoming_state)
        self._set_state(self.metric.merge(self._get_state(), other))
        self._computed = None

    # ------------------------------------------------------------ checkpoints

    def persistent(self, mode: bool = False) -> None:
        """Whether ``state_dict`` carries the state (and the recipe); see the ``persistent`` argument."""
        super().persistent(mode)

    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False):
        """torchmetrics' ``state_dict``; with persistent states it also records ``fm_recipe``."""
        out = super().state_dict(destination=destination, prefix=prefix, keep_vars=keep_vars)
        if any(self._persistent.values()):
            out[prefix + "fm_recipe"] = self._fm_recipe
        return out

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        recipe = state_dict.pop(prefix + "fm_recipe", None)
        present = {k: state_dict[prefix + k] for k in self._defaults if prefix + k in state_dict}
        if present:
            self._check_recipe(recipe, "load_state_dict")
            self._check_layout(present, "load_state_dict")
        elif self._has_data():
            warnings.warn(
                f"TorchMetric({self._fm_recipe}): the loaded state_dict carries no state for this metric (it was "
                f"saved with persistent=False), so the data accumulated here ({self._update_count} updates) is "
                "kept, and whatever the checkpoint's metric had seen is lost. Build it with "
                "TorchMetric(..., persistent=True) to checkpoint metric states.", UserWarning, stacklevel=2)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def _check_recipe(self, recipe: Optional[str], what: str) -> None:
        if recipe is not None and recipe != self._fm_recipe:
            raise ValueError(f"TorchMetric.{what}: the incoming state belongs to {recipe}, this metric is "
                             f"{self._fm_recipe}; states of different recipes cannot be combined")

    def _check_layout(self, incoming: Mapping, what: str) -> None:
        for name, default in self._defaults.items():
            if name == "fm_state_key" or name not in incoming:
                continue
            value = incoming[name]
            # a 0-d default may hold any shape: fields sized by the first batch (FID without num_features, maps)
            bad = (isinstance(default, list) != isinstance(value, list)
                   or isinstance(default, torch.Tensor) and (not isinstance(value, torch.Tensor)
                                                             or value.shape != default.shape and default.dim()))
            if bad:
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                want = tuple(default.shape) if isinstance(default, torch.Tensor) else "a list of chunks"
                raise ValueError(f"TorchMetric.{what}: field {name[3:]} of {self._fm_recipe} expects {want}, the "
                                 f"incoming state has {got}: it comes from a metric of another configuration")
        missing = [k for k in self._defaults if k != "fm_state_key" and k not in incoming]
        if missing and what == "merge_state":
            raise ValueError(f"TorchMetric.merge_state: the incoming state lacks {missing} of {self._fm_recipe}")

    # ------------------------------------------------------------ plots

    def plot(self, val: Any = None, ax: Any = None, **kwargs: Any):
        """Plots ``val`` (default: ``compute()``), a list of values (one per step) too; returns ``(fig, ax)``.

        See `fmetrics.plot.plot` for what each kind of value looks like (scalars, per-class vectors,
        values over steps, ROC / PR curves with their AUC, confusion matrices). Needs matplotlib
        (``pip install matplotlib``).
        """
        from fmetrics.plot import plot

        return plot(self.metric, self.compute() if val is None else val, ax=ax, **kwargs)

    def __repr__(self) -> str:
        return f"TorchMetric({self._fm_recipe})"


class _MemberView(torchmetrics.Metric):
    """One output key of a `TorchMetric` over a collection, as a torchmetrics Metric (for ``log_dict``).

    It holds no state: ``compute`` is the key of the parent's (synced, cached) ``compute``, the step value
    the key of the parent's last ``forward``, ``reset`` resets the parent. Update the parent, not the view.
    """

    full_state_update = False

    def __init__(self, parent: "TorchMetric", key: str):
        super().__init__()
        self.__dict__["_fm_parent"] = parent  # not a submodule: the parent owns the view
        self.__dict__["_fm_key"] = key
        meta = parent.member_metadata[key]
        lo, hi = meta["bounds"]
        self.__dict__.update(higher_is_better=meta["higher_is_better"], is_differentiable=meta["is_differentiable"],
                             plot_lower_bound=None if lo is None else float(lo),
                             plot_upper_bound=None if hi is None else float(hi))

    @property
    def _forward_cache(self):
        cache = self._fm_parent._forward_cache
        return cache.get(self._fm_key) if isinstance(cache, Mapping) else None

    @_forward_cache.setter
    def _forward_cache(self, value) -> None:
        pass  # the parent's forward fills it

    @property
    def _update_count(self) -> int:
        return self._fm_parent._update_count

    @_update_count.setter
    def _update_count(self, value) -> None:
        pass

    def update(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(f"the member view {self._fm_key!r} holds no state: update its TorchMetric instead")

    def compute(self) -> Any:
        return self._fm_parent.compute()[self._fm_key]

    def _sync_dist(self, dist_sync_fn: Optional[Any] = None, process_group: Optional[Any] = None) -> None:
        pass  # the parent's compute syncs

    def reset(self) -> None:
        super().reset()
        self._fm_parent.reset()

    def plot(self, val: Any = None, ax: Any = None, **kwargs: Any):
        from fmetrics.plot import plot

        return plot(None, self.compute() if val is None else val, ax=ax, title=self._fm_key, **kwargs)

    def __repr__(self) -> str:
        return f"{self._fm_parent!r}[{self._fm_key!r}]"


def _cast_fitting(name: str, x, dtype: torch.dtype):
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dtype == dtype:
        return x
    y = x.to(dtype)
    if torch.finfo(dtype).max < torch.finfo(x.dtype).max and bool((y.isinf() & x.isfinite()).any()):
        warnings.warn(f"TorchMetric({name}): the value does not fit {dtype} (largest magnitude "
                      f"{x.abs().nan_to_num(posinf=0).max().item():g}); it is returned in {x.dtype}", UserWarning)
        return x
    return y


def _attr(key: str) -> str:
    return "m_" + "".join(c if c.isalnum() else "_" for c in key)


def _detached(tree):
    return pytree.tree_map(lambda x: x.detach() if isinstance(x, torch.Tensor) else x, tree)


def _on(x, device) -> bool:
    device = torch.device(device)
    if isinstance(x, torch.nn.Module):
        return all(_same_device(p.device, device) for p in itertools.chain(x.parameters(), x.buffers()))
    return _same_device(x.device, device)


def _same_device(a: torch.device, b: torch.device) -> bool:
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


def _as_dtype(dst_type) -> torch.dtype:
    if isinstance(dst_type, torch.dtype):
        return dst_type
    if isinstance(dst_type, str):
        name = dst_type.replace("torch.", "")
        dtype = getattr(torch, name, None)
        if isinstance(dtype, torch.dtype):
            return dtype
    raise ValueError(f"TorchMetric.set_dtype: expected a torch.dtype (or its name), got {dst_type!r}")


def _metadata(metric: Metric) -> dict:
    """torchmetrics' class attributes filled from the wrapped metric (agreed by every member of a collection)."""
    members = list(_member_metadata(metric).values())

    def agreed(key):
        values = {m[key] for m in members}
        return values.pop() if len(values) == 1 else None

    bounds = {m["bounds"] for m in members}
    lo, hi = bounds.pop() if len(bounds) == 1 else (None, None)
    return {"higher_is_better": agreed("higher_is_better"), "is_differentiable": bool(agreed("is_differentiable")),
            "plot_lower_bound": None if lo is None else float(lo), "plot_upper_bound": None if hi is None else float(hi),
            "plot_legend_name": None}


def _member_metadata(metric: Metric, prefix: str = "", postfix: str = "") -> dict:
    members = _collection_members(metric)
    if members is None:
        return {f"{prefix}{postfix}" if (prefix or postfix) else "": {
            "higher_is_better": metric.higher_is_better, "is_differentiable": bool(metric.is_differentiable),
            "bounds": tuple(metric.bounds)}}
    metrics, pre, post = members
    out = {}
    for name, m in metrics.items():
        for key, meta in _member_metadata(m).items():
            out[f"{prefix}{pre}{name}{'_' + key if key else ''}{post}{postfix}"] = meta
    return out


def _collection_members(metric: Metric):
    recipe = metric.recipe
    if recipe is None or recipe.qualname != "collection" or not recipe.module.startswith("fmetrics"):
        return None
    args = recipe.arguments
    return args["metrics"], args.get("prefix", ""), args.get("postfix", "")


def _tensors_equal(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Equal shape, dtype and values, NaN equal to NaN."""
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    if x.is_floating_point():
        return torch.equal(x.isnan(), y.isnan()) and torch.equal(torch.nan_to_num(x, nan=0.0),
                                                                  torch.nan_to_num(y, nan=0.0))
    return torch.equal(x, y)


def _equal_states_nan_aware(original):
    """torchmetrics' compute-group test compares states with ``allclose``, where NaN != NaN; fmetrics states
    hold NaN by design (e.g. the "no offending value yet" slot of deferred validation), so two wrappers of one
    state key would never share a group. For a pair of TorchMetrics, equal state keys and NaN-equal states decide."""

    def equal(metric1, metric2) -> bool:
        if not (isinstance(metric1, TorchMetric) and isinstance(metric2, TorchMetric)):
            return original(metric1, metric2)
        if metric1._defaults.keys() != metric2._defaults.keys():
            return False
        for key in metric1._defaults:
            a, b = getattr(metric1, key), getattr(metric2, key)
            if isinstance(a, list) != isinstance(b, list):
                return False
            pairs = zip(a, b) if isinstance(a, list) else [(a, b)]
            if isinstance(a, list) and len(a) != len(b):
                return False
            if not all(_tensors_equal(x, y) for x, y in pairs):
                return False
        return True

    equal.__fmetrics_patch__ = True
    return staticmethod(equal)


if not getattr(torchmetrics.MetricCollection._equal_metric_states, "__fmetrics_patch__", False):
    torchmetrics.MetricCollection._equal_metric_states = _equal_states_nan_aware(
        torchmetrics.MetricCollection._equal_metric_states)


def _squeeze_if_scalar(value):
    """As torchmetrics' compute does: one-element tensors become 0-d."""
    return pytree.tree_map(lambda x: x.squeeze() if isinstance(x, torch.Tensor) and x.numel() == 1 else x, value)
