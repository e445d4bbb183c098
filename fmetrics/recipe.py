"""Recipes: the call that made a metric.

A factory decorated with `factory` records, on the `Metric` it returns, its
importable name and the keyword arguments it was called with (a `Recipe`).
The recipe is what a metric *is*:

* ``repr(m)`` prints it: ``multiclass_accuracy(num_classes=10, average='macro')``;
* pickling and ``copy.deepcopy`` rebuild the metric by calling the factory
  again, so a pickled metric loads in a fresh process;
* the default ``state_key`` derives from it (equal recipes share a state);
* the metric's *parameters* are its tensor and ``nn.Module`` arguments:
  ``metric.to(device)`` rebuilds it with them moved (see `Metric.to`).

Example::

    >>> @factory
    ... def shifted_mean(*, shift: float = 0.0) -> Metric:
    ...     return fmetrics.mean().replace(name="shifted_mean")
    >>> shifted_mean(shift=1.5)
    shifted_mean(shift=1.5)
"""
from __future__ import annotations

import functools
import importlib
import inspect
import re
import weakref
from typing import Any, Callable, Mapping, NamedTuple

import torch

__all__ = ["Recipe", "factory", "rebuild", "is_parameter", "map_parameters", "parameters"]


class Recipe(NamedTuple):
    """``module.qualname(**kwargs)``; ``given`` names the arguments the caller passed (shown by ``repr``)."""

    module: str
    qualname: str
    kwargs: tuple  # ((name, value), ...) in signature order, defaults included
    given: frozenset

    @property
    def arguments(self) -> dict:
        return dict(self.kwargs)

    def call(self, **overrides):
        """Calls the factory again (with ``overrides``)."""
        fn = _resolve(self.module, self.qualname)
        return fn(**{**self.arguments, **overrides})

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={_short(v)}" for k, v in self.kwargs if k in self.given)
        return f"{self.qualname.rsplit('.', 1)[-1]}({shown})"

    def key(self) -> tuple:
        """A hashable description of the call (tensors by value, modules by identity)."""
        return (self.module, self.qualname, tuple((k, _hashable(v)) for k, v in self.kwargs))


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _short(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        if v.numel() <= 8:
            return f"tensor({v.tolist()})"
        return f"tensor(shape={tuple(v.shape)}, dtype={v.dtype})"
    if isinstance(v, torch.nn.Module):
        return f"<{type(v).__name__}>"
    return _ADDRESS.sub("", repr(v))  # `<Tokenizer object at 0x7f..>`: no object id, so it prints alike in every process


def _tensor_key(v: torch.Tensor) -> tuple:
    """Small tensors by value; large ones by shape, dtype and two moments (the same in every process)."""
    v = v.detach()
    if v.numel() <= 64:
        return ("tensor", str(v.dtype), tuple(v.shape), tuple(v.reshape(-1).cpu().tolist()))
    x = v.reshape(-1).to(torch.float64) if not v.is_complex() else torch.view_as_real(v).reshape(-1).double()
    return ("tensor", str(v.dtype), tuple(v.shape), float(x.sum()), float((x * x).sum()))


_MODULE_KEYS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _module_key(m: torch.nn.Module) -> tuple:
    """A network by its class and weights (deterministic across processes); cached until a weight changes."""
    tensors = list(m.state_dict(keep_vars=True).items())
    versions = tuple(t._version for _, t in tensors)
    cached = _MODULE_KEYS.get(m)
    if cached is not None and cached[0] == versions:
        return cached[1]
    key = ("module", type(m).__qualname__, tuple((name, _tensor_key(t)) for name, t in tensors))
    _MODULE_KEYS[m] = (versions, key)
    return key


def _hashable(v: Any):
    if isinstance(v, torch.Tensor):
        return _tensor_key(v)
    if isinstance(v, torch.nn.Module):
        return _module_key(v)
    if isinstance(v, Mapping):
        return ("dict", tuple((k, _hashable(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_hashable(x) for x in v))
    if hasattr(v, "recipe") and hasattr(v, "state_key"):  # a Metric argument (wrappers)
        return ("metric", v.state_key if v.state_key is not None else id(v))
    try:
        hash(v)
    except TypeError:
        return ("object", id(v))
    return v


def _resolve(module: str, qualname: str) -> Callable:
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def rebuild(module: str, qualname: str, kwargs: tuple):
    """Unpickling entry point: calls the factory again."""
    return _resolve(module, qualname)(**dict(kwargs))


def factory(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorates a metric factory so the `Metric` it returns carries its `Recipe`.

    The outermost decorated call wins: a task facade that calls
    ``multiclass_accuracy`` records itself. Configuration is keyword-only
    (``*`` in the signature); only a wrapper's metric argument may come first.

    Args:
      fn: the factory, ``fn(**config) -> Metric``, defined at module level so
        the recipe can name it.

    Returns:
      The factory, whose metrics print, pickle and share states by their recipe.

    Example::

        >>> @fmetrics.factory
        ... def scaled_sum(*, scale: float = 1.0):
        ...     return fmetrics.sum().replace(name="scaled_sum")
        >>> scaled_sum(scale=2.0).name
        'scaled_sum'
    """
    sig = inspect.signature(fn)
    positional = [p.name for p in sig.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]

    @functools.wraps(fn)
    def make(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as err:
            if args and not positional:
                raise TypeError(f"{fn.__name__}: configuration is keyword-only; pass every argument by name, "
                                f"e.g. {fn.__name__}({next(iter(sig.parameters), 'name')}=...)") from None
            raise TypeError(f"{fn.__name__}: {err}") from None
        given = frozenset(list(bound.arguments))
        bound.apply_defaults()
        metric = fn(**bound.arguments)
        recipe = Recipe(fn.__module__, fn.__qualname__, tuple(bound.arguments.items()), given)
        return metric._with_recipe(recipe)

    make.__fmetrics_factory__ = True
    return make


def is_parameter(v: Any) -> bool:
    return isinstance(v, (torch.Tensor, torch.nn.Module))


def map_parameters(value: Any, fn: Callable[[Any], Any]):
    """``value`` with every tensor / module (also inside lists, dicts and nested metrics) replaced by ``fn(x)``."""
    if is_parameter(value):
        return fn(value)
    if isinstance(value, Mapping):
        return type(value)((k, map_parameters(v, fn)) for k, v in value.items())
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(map_parameters(v, fn) for v in value)
    if hasattr(value, "recipe") and hasattr(value, "to") and getattr(value, "recipe", None) is not None:
        return value._map_parameters(fn)
    return value


def parameters(kwargs: tuple, prefix: str = "") -> dict:
    """``{dotted name: tensor or module}`` found in a recipe's arguments."""
    out: dict = {}

    def visit(v, name):
        if is_parameter(v):
            out[name] = v
        elif isinstance(v, Mapping):
            for k, x in v.items():
                visit(x, f"{name}.{k}")
        elif isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
            for i, x in enumerate(v):
                visit(x, f"{name}.{i}")
        elif getattr(v, "recipe", None) is not None and hasattr(v, "params"):
            for k, x in v.params.items():
                out[f"{name}.{k}"] = x

    for k, v in kwargs:
        visit(v, prefix + k)
    return out
