"""The `Metric` record: four pure functions over an immutable state.

A metric is ``init / update / merge / finalize``::

    s = m.init()                 # state: a NamedTuple of tensors (a pytree)
    s = m.update(s, *inputs)     # new state; never mutates s or the inputs
    s = m.merge(s, other)        # state of the union of both data streams
    v = m.finalize(s)            # the value
    v = m(*inputs)               # one shot: finalize(update(init(), *inputs))

Config lives in the factory's closure (as in optax); the record carries the
functions, the factory's `Recipe` (what ``repr``, pickling, ``deepcopy`` and
``to(device)`` go by) and a little metadata.
"""
from __future__ import annotations

import copy
import importlib.abc
import importlib.util
import pickle
import sys
from typing import Any, Callable, Hashable, Mapping, Optional, Sequence

import torch

from fmetrics import _updates
from fmetrics import state as state_lib
from fmetrics import validation
from fmetrics.recipe import Recipe, factory, map_parameters, parameters, rebuild

__all__ = ["Metric", "from_output"]

_FIELDS = ("init", "update", "merge", "finalize", "name", "state_key", "reductions", "recipe", "check",
           "inputs", "shared", "finish", "higher_is_better", "is_differentiable", "bounds", "host_input", "weigh_rows",
           "host_rows", "finalize_stacked")


class Metric:
    """A metric as a frozen record of four pure functions.

    Args:
      init: ``() -> state``.
      update: ``(state, *inputs) -> state``; pure and traceable (no host syncs).
      merge: ``(state, state) -> state``; associative, ``init()`` is its identity.
      finalize: ``state -> value`` (a tensor, or a dict/tuple of tensors).
      name: shown in errors and used by collections.
      state_key: hashable description of the state definition and config;
        metrics with equal keys share one state in a `fmetrics.collection`.
        Default: derived from the recipe (``None`` without one: never shared).
      reductions: optional tags mirroring the state (``"sum"``, ``"min"``,
        ``"max"``, ``"cat"`` or ``None``) that let the distributed reducer
        all-reduce instead of gathering, see `fmetrics.state.merge_fields`.
        ``"cat"`` fields are chunk tuples: `update` sees them empty and its
        returned chunks are appended outside any trace (so a compiled update
        does not recompile as the tuple grows).
      recipe: the `Recipe` of the factory call (set by `fmetrics.factory`).
      check: optional ``check(*inputs)`` that raises ``ValueError`` quoting
        offending values; run before `update` where checking is free (CPU
        tensors, eager mode; see `fmetrics.validation.mode`).
      inputs: named-input routing (see `from_output`).
      shared, finish: an optional shared finalize step (``shared(state)``,
        e.g. one sort) and the value from its result; a collection computes
        ``shared`` once for all members over one state.
      higher_is_better, is_differentiable, bounds: metadata (``bounds`` is
        ``(lower, upper)`` of the value, ``None`` where unbounded).
      host_input: ``True`` for metrics over host data (strings): DESIGN §2.5.
      weigh_rows: optional closed-form row weighting for the wrappers
        (bootstrap, grouped, multioutput): ``weigh_rows(rows, weights)`` gets
        ``B`` one-row states stacked on a leading axis and integer weights
        ``(R, B)`` and returns ``R`` stacked states, state ``r`` holding row
        ``i`` ``weights[r, i]`` times. Only needed for a state with fields that
        only ``merge`` knows (tag ``None``); without it such rows are weighted
        by repeated merges (exact, slower).
      host_rows: optional ``host_rows(*inputs)`` for a host-input metric of sum
        fields: the batch's one-row states ``update(init(), row_i)`` stacked on a
        leading axis, in one call (wrappers that weigh rows otherwise update one
        row at a time). `replace` drops it when ``update`` or ``inputs`` change.
      finalize_stacked: optional ``finalize_stacked(states) -> (R,)``: the
        values of ``R`` states stacked on a leading axis, in one call, equal to
        `finalize` on each (the paired tests' replicates). `replace` drops it
        when ``finalize``, ``shared`` or ``finish`` change; without it each
        replicate is finalized on its own.

    Example::

        >>> class S(NamedTuple):
        ...     total: torch.Tensor
        >>> m = Metric(init=lambda: S(torch.zeros((), dtype=torch.float64)),
        ...            update=lambda s, x: S(s.total + x.sum()),
        ...            merge=merge_fields(S(total="sum")),
        ...            finalize=lambda s: s.total, name="total")
        >>> m(torch.tensor([1., 2.]))
        tensor(3., dtype=torch.float64)
    """

    __slots__ = tuple("_" + f for f in _FIELDS) + ("_cats",)

    def __init__(
        self,
        *,
        init: Callable[[], Any],
        update: Callable[..., Any],
        merge: Callable[[Any, Any], Any],
        finalize: Optional[Callable[[Any], Any]] = None,
        name: str = "metric",
        state_key: Optional[Hashable] = None,
        reductions: Any = None,
        recipe: Optional[Recipe] = None,
        check: Optional[Callable[..., None]] = None,
        inputs: Optional[tuple] = None,
        shared: Optional[Callable[[Any], Any]] = None,
        finish: Optional[Callable[[Any], Any]] = None,
        higher_is_better: Optional[bool] = None,
        is_differentiable: bool = False,
        bounds: tuple = (None, None),
        host_input: bool = False,
        weigh_rows: Optional[Callable[[Any, torch.Tensor], Any]] = None,
        host_rows: Optional[Callable[..., Any]] = None,
        finalize_stacked: Optional[Callable[[Any], torch.Tensor]] = None,
    ):
        if finalize is None:
            if finish is None:
                raise TypeError(f"Metric {name!r}: give `finalize`, or `shared` and `finish`")
            finalize = _compose(shared, finish)
        for arg, fn in (("init", init), ("update", update), ("merge", merge), ("finalize", finalize)):
            if not callable(fn):
                raise TypeError(f"Metric {name!r}: argument `{arg}` must be callable, got {type(fn).__name__}")
        if state_key is not None:
            hash(state_key)  # fail early on unhashable keys
        values = dict(init=init, update=update, merge=merge, finalize=finalize, name=name, state_key=state_key,
                      reductions=reductions, recipe=recipe, check=check, inputs=inputs, shared=shared,
                      finish=finish, higher_is_better=higher_is_better, is_differentiable=is_differentiable,
                      bounds=tuple(bounds), host_input=host_input,
                      weigh_rows=weigh_rows, host_rows=host_rows, finalize_stacked=finalize_stacked)
        for k, v in values.items():
            object.__setattr__(self, "_" + k, v)
        object.__setattr__(self, "_cats", _has_cat(reductions))

    # ------------------------------------------------------------ fields

    name = property(lambda self: self._name)
    reductions = property(lambda self: self._reductions)
    recipe = property(lambda self: self._recipe)
    check = property(lambda self: self._check)
    inputs = property(lambda self: self._inputs)
    shared = property(lambda self: self._shared)
    finish = property(lambda self: self._finish)
    higher_is_better = property(lambda self: self._higher_is_better)
    is_differentiable = property(lambda self: self._is_differentiable)
    bounds = property(lambda self: self._bounds)
    host_input = property(lambda self: self._host_input)
    weigh_rows = property(lambda self: self._weigh_rows)
    host_rows = property(lambda self: self._host_rows)
    finalize_stacked = property(lambda self: self._finalize_stacked)

    @property
    def state_key(self) -> Optional[Hashable]:
        """Metrics with equal keys share one state (default: from the recipe)."""
        if self._state_key is None and self._recipe is not None:
            return ("recipe", self._recipe.key(), self._inputs)
        return self._state_key

    @property
    def params(self) -> dict:
        """The metric's parameters: tensors and networks it reads but never accumulates (by name)."""
        return {} if self._recipe is None else parameters(self._recipe.kwargs)

    # ------------------------------------------------------------ the four functions

    def init(self, device: Optional[torch.device | str] = None):
        """The empty state, optionally placed on ``device``."""
        s = self._init()
        state_lib.register(s)
        if self._cats and _first_device(s) is None:  # chunks only: mark the empty chunk tuples with the device
            marker = torch.empty(0, device=device)
            return state_lib.apply_tags(lambda tag, a, _: state_lib.EmptyChunks(marker) if tag == "cat" and a == ()
                                        else a, self._reductions, s, s)
        return s if device is None else state_lib.to_device(s, device)

    def update(self, state, *inputs, **kwargs):
        """``(state, *inputs) -> state``: the state of the data seen so far plus this batch.

        The first argument is the state from `init` (or a previous update).
        """
        if not isinstance(state, (tuple, dict)):
            raise TypeError(
                f"{self._name}: the first argument of update must be the state from {self._name}.init() "
                f"(got a {type(state).__name__}): s = m.update(m.init(), preds, target). For one shot use "
                f"m(preds, target); for a stateful object use adapters.TorchMetric(m)")
        if self._inputs is not None:
            inputs, kwargs = _route(self._name, self._inputs, inputs, kwargs)
        first = state[0] if isinstance(state, tuple) and state else None
        device = first.device if isinstance(first, torch.Tensor) else _first_device(state)
        plain = not kwargs  # the usual update: plain tensors on the state's device, no autograd; inline: each
        for x in inputs:  # call costs ~1 µs after a large batch's passes
            if type(x) is not torch.Tensor or x.requires_grad or x.device != device:
                plain = False
                break
        if device is not None and not plain:
            validation.check_device(self._name, device, inputs, kwargs)
        if self._check is not None and validation.eager_check_applies(inputs, kwargs):
            _run_check(self._check, inputs, kwargs)
        if not (plain or _ONE_SHOT[0]):  # a state never holds an autograd graph (DESIGN §3); one-shot calls keep it
            inputs = _detached(inputs)
            if kwargs:
                kwargs = dict(zip(kwargs, _detached(tuple(kwargs.values()))))
        try:
            if not self._cats:
                return self._update(state, *inputs, **kwargs)
            # chunk fields: update sees them empty; the new chunks are appended here, outside any trace
            new = self._update(_empty_cats(self._reductions, state), *inputs, **kwargs)
        except (AttributeError, TypeError, IndexError, KeyError) as err:
            _check_foreign(self, "update", state, err)
            raise
        try:
            return state_lib.apply_tags(_append, self._reductions, state, new)
        except _ChunkShape as err:
            raise ValueError(f"{self._name}: {err}; the state is unchanged") from None

    def merge(self, a, b):
        """``(state, state) -> state``: the state of both data streams (associative, `init` its identity)."""
        try:
            return self._merge(a, b)
        except (AttributeError, TypeError, IndexError, KeyError, RuntimeError) as err:
            for s in (a, b):
                _check_foreign(self, "merge", s, err)
            raise

    def finalize(self, *state):
        """``state -> value``: the metric's value over the data of ``state``."""
        if len(state) != 1:
            raise TypeError(f"{self._name}: finalize takes one argument, the state from {self._name}.init() and "
                            f"update (got {len(state)}): v = m.finalize(m.update(m.init(), preds, target))")
        try:
            with _updates.checked(self._name, state[0], self._init):  # warns for a state no update was counted in
                return self._finalize(state[0])
        except (AttributeError, TypeError, IndexError, KeyError) as err:
            _check_foreign(self, "finalize", state[0], err)
            raise

    def __call__(self, *inputs, **kwargs):
        """One shot: ``finalize(update(init(), *inputs))`` on the inputs' device."""
        s = self.init(state_lib.device_of((inputs, kwargs)))
        _ONE_SHOT[0] += 1  # gradients flow through the one-shot value (differentiable metrics)
        try:
            return self.finalize(self.update(s, *inputs, **kwargs))
        finally:
            _ONE_SHOT[0] -= 1

    # ------------------------------------------------------------ derived metrics

    def replace(self, **changes) -> "Metric":
        """A copy with some fields replaced (``name=...``, ``finalize=...``, ...).

        The copy is no longer what the factory call makes, so it drops the
        recipe (unless ``recipe=`` is given): it prints as a plain `Metric`
        and pickles by its functions.
        """
        unknown = set(changes) - set(_FIELDS)
        if unknown:
            raise TypeError(f"Metric.replace: unknown fields {sorted(unknown)}; fields are {_FIELDS}")
        fields = {k: getattr(self, "_" + k) for k in _FIELDS}
        if "recipe" not in changes:
            fields["recipe"] = None
            if self._state_key is None and self._recipe is not None:
                fields["state_key"] = self.state_key  # keep sharing what the recipe shared
        if "finalize" not in changes and ("shared" in changes or "finish" in changes):
            fields["finalize"] = None
        if "host_rows" not in changes and ("update" in changes or "inputs" in changes):
            fields["host_rows"] = None  # the rows of the old update
        if "finalize_stacked" not in changes and {"finalize", "shared", "finish"} & set(changes):
            fields["finalize_stacked"] = None  # the values of the old finalize
        fields.update(changes)
        return Metric(**fields)

    def _with_recipe(self, recipe: Recipe) -> "Metric":
        return self.replace(recipe=recipe)

    def from_output(self, *names: str, **named: str) -> "Metric":
        """This metric reading named inputs: ``update(state, outputs)`` with ``outputs`` a dict.

        ``names`` feed ``update``'s positional inputs, ``named`` its keyword
        inputs (``argument="output name"``). Members of a `fmetrics.collection`
        fed one dict of model outputs each take what they need.

        Example::

            >>> loss = fmetrics.mean().from_output("loss")
            >>> loss({"loss": torch.tensor([1., 3.]), "logits": torch.zeros(2, 3)})
            tensor(2., dtype=torch.float64)
        """
        return from_output(metric=self, names=tuple(names), named=tuple(sorted(named.items())))

    def to(self, device) -> "Metric":
        """The same metric with its parameters (tensors, networks) on ``device``; states are moved by the caller."""
        if self._recipe is None or not self.params:
            return self
        return self._map_parameters(lambda x: _moved(x, torch.device(device)))

    def _map_parameters(self, fn) -> "Metric":
        kwargs = {k: map_parameters(v, fn) for k, v in self._recipe.kwargs}
        out = self._recipe.call(**kwargs)
        return out.replace(recipe=self._recipe._replace(kwargs=tuple(kwargs.items())))

    # ------------------------------------------------------------ copying, printing

    def __setattr__(self, key, value):
        raise AttributeError(f"Metric {self._name!r} is immutable; use .replace({key}=...)")

    def __reduce__(self):
        if self._recipe is not None:
            r = self._recipe
            return _from_recipe, (r.module, r.qualname, r.kwargs, r.given)
        fields = {k: getattr(self, "_" + k) for k in _FIELDS}
        try:
            pickle.dumps(fields)
        except (pickle.PicklingError, AttributeError, TypeError) as err:
            raise pickle.PicklingError(
                f"Metric {self._name!r} has no recipe and its functions cannot be pickled by name ({err}); "
                "build it in a factory decorated with @fmetrics.factory so it pickles by its recipe") from None
        return _from_fields, (fields,)

    def __deepcopy__(self, memo):
        if self._recipe is None:
            return self  # immutable: sharing is a copy
        r = self._recipe
        return _from_recipe(r.module, r.qualname, copy.deepcopy(r.kwargs, memo), r.given)

    def __copy__(self):
        return self

    def __repr__(self) -> str:
        if self._recipe is not None:
            return repr(self._recipe)
        return f"Metric(name={self._name!r})"


def _from_recipe(module: str, qualname: str, kwargs: tuple, given: frozenset) -> Metric:
    m = rebuild(module, qualname, kwargs)
    return m.replace(recipe=Recipe(module, qualname, tuple(kwargs), given))


def _from_fields(fields: dict) -> Metric:
    return Metric(**fields)


_ONE_SHOT = [0]  # depth of one-shot calls (`Metric.__call__`) in progress


def _detached(inputs: tuple) -> tuple:
    """``inputs`` with every tensor that requires grad detached (others as they are)."""
    if not any(getattr(x, "requires_grad", False) for x in inputs):  # the usual case: nothing to copy
        return inputs
    return tuple(x.detach() if isinstance(x, torch.Tensor) and x.requires_grad else x for x in inputs)


def _compose(shared, finish):
    if shared is None:
        return finish
    return lambda state: finish(shared(state))


def _run_check(check, inputs, kwargs) -> None:
    check(*inputs, **kwargs)


def _has_cat(tags) -> bool:
    if tags is None:
        return False
    if isinstance(tags, str):
        return tags == "cat"
    if isinstance(tags, dict):
        return any(_has_cat(t) for t in tags.values())
    return any(_has_cat(t) for t in tags)


def _empty_cats(tags, state):
    return state_lib.apply_tags(lambda tag, a, _: () if tag == "cat" else a, tags, state, state)


class _ChunkShape(ValueError):
    pass


def _append(tag, old, new):
    if tag != "cat":
        return new
    if old and new:  # chunks are joined along one axis: one number of dims, sizes differing in one dim at most
        shapes = [tuple(c.shape) for c in (old[0], *new) if isinstance(c, torch.Tensor)]
        if len({len(x) for x in shapes}) > 1 or \
                any(sum(a != b for a, b in zip(shapes[0], x)) > 1 for x in shapes[1:]):
            raise _ChunkShape(f"an update gave a chunk of shape {shapes[-1]} where the earlier updates gave "
                              f"{shapes[0]}; every update must give values of one trailing shape")
    return state_lib.join_chunks(old, new)


def _first_device(state) -> Optional[torch.device]:
    top = state
    while isinstance(state, (tuple, list, dict)):
        if not state:  # an empty chunk tuple first: any tensor (an `EmptyChunks` marker included) decides
            return state_lib.device_of(top)
        state = next(iter(state.values())) if isinstance(state, dict) else state[0]
    return state.device if isinstance(state, torch.Tensor) else None


def _layout(state) -> tuple:
    """The top level of a state: its type, and its field names or keys."""
    return type(state), getattr(state, "_fields", None) or (tuple(state) if isinstance(state, dict) else len(state))


def _check_foreign(metric: Metric, what: str, state, err: Exception) -> None:
    """Raises a clear TypeError when ``state`` (which made ``what`` fail) is not laid out like this metric's."""
    mine = metric._init()
    if not isinstance(state, (tuple, dict)) or (_layout(state) != _layout(mine) and not (
            isinstance(state, tuple) and not hasattr(state, "_fields") and len(state) == len(mine))):
        raise TypeError(f"{metric.name}: the state passed to {what} is a {type(state).__name__}, not this "
                        f"metric's {type(mine).__name__}: it came from another metric (or another configuration or "
                        f"version of this one); use the state from "
                        f"{metric.name}.init() and {metric.name}.update") from err
    sized = [(x.shape, y.shape) for x, y in zip(state_lib.leaves(state), state_lib.leaves(mine))
             if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and y.numel()]
    if any(x != y for x, y in sized):
        raise TypeError(f"{metric.name}: the state passed to {what} has fields of other shapes than this metric's "
                        f"({', '.join(f'{tuple(x)} for {tuple(y)}' for x, y in sized if x != y)}): it came from "
                        f"another configuration of {metric.name} (its options, or an earlier fmetrics version); "
                        f"use the state from {metric.name}.init() and {metric.name}.update") from err


def _route(name: str, spec: tuple, inputs: tuple, kwargs: dict):
    names, named = spec
    if len(inputs) == 1 and isinstance(inputs[0], Mapping) and not kwargs:
        outputs = inputs[0]
    elif not inputs:
        outputs = kwargs
    else:
        raise TypeError(f"{name}: reads named inputs {list(names) + [v for _, v in named]}; call "
                        f"update(state, outputs) with a dict of outputs (or update(state, **outputs))")
    missing = [k for k in (*names, *(v for _, v in named)) if k not in outputs]
    if missing:
        raise validation.fail(name, "outputs", f"entries named {missing}", f"a dict with keys {sorted(outputs)}")
    return tuple(outputs[k] for k in names), {arg: outputs[k] for arg, k in named}


@factory
def from_output(*, metric: Metric, names: Sequence[str] = (), named: Sequence[tuple] = ()) -> Metric:
    """``metric`` reading ``update``'s inputs by name from a dict of outputs (see `Metric.from_output`)."""
    if not isinstance(metric, Metric):
        raise validation.fail("from_output", "metric", "a fmetrics.Metric", type(metric).__name__)
    if metric.inputs is not None:
        raise validation.fail(metric.name, "from_output", "a metric that does not already read named inputs")
    names, named = tuple(names), tuple(tuple(p) for p in named)
    if not names and not named:
        raise validation.fail(metric.name, "from_output", "at least one output name")
    inner = metric.state_key
    return metric.replace(inputs=(names, named),
                          state_key=None if inner is None else ("from_output", inner, names, named))


def _outside_trace():
    """``torch.compile(metric.update)`` skips `Metric.update`'s own frame and traces only the metric's update.

    Chunk tuples grow in that frame, so a compiled update is not re-specialized on their length at every
    step; its helpers (device and value checks, chunk bookkeeping) run as plain Python, callees included.
    Called from a compiled caller, `Metric.update` is inlined as usual.
    """
    from torch._dynamo.eval_frame import set_code_exec_strategy, skip_code
    from torch._dynamo.types import FrameAction, FrameExecStrategy

    skip_code(Metric.update.__code__)
    everything = FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP)
    for fn in (_first_device, _route, _detached, _empty_cats, _append, _run_check, validation.check_device,
               validation.eager_check_applies, state_lib.apply_tags):
        set_code_exec_strategy(fn.__code__, everything)


class _AfterDynamo(importlib.abc.MetaPathFinder):
    """Runs `_outside_trace` as soon as ``torch._dynamo`` is imported (by ``torch.compile``, ...).

    Importing it here would make ``import fmetrics`` take as long again as ``import torch`` (~1.5 s).
    """

    def find_spec(self, name, path, target=None):
        if name != "torch._dynamo":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _outside_trace()

        spec.loader.exec_module = exec_module
        return spec


if "torch._dynamo" in sys.modules:
    _outside_trace()
else:
    sys.meta_path.insert(0, _AfterDynamo())


def _moved(x, device: torch.device):
    """``x`` on ``device``; a network is copied first (``Module.to`` moves in place: the metric it came from,
    and anything else holding it, keep theirs)."""
    if not isinstance(x, torch.nn.Module):
        return x.to(device)
    tensors = [*x.parameters(), *x.buffers()]
    if all(t.device == device or (device.index is None and t.device.type == device.type) for t in tensors):
        return x
    return copy.deepcopy(x).to(device)
