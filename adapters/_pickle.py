"""Pickling `fmetrics.Metric` records by value.

A metric's four functions are closures over its configuration, which the
standard pickler refuses (it pickles functions by name). `dumps` pickles
every function it cannot import by name as its code object plus its closure
cells, and a `Metric` as its fields, so a wrapped metric can travel to a
spawned process (Lightning's ``ddp_spawn``, DataLoader workers) or be saved
with the module. Code objects are specific to the Python version: use
``state_dict`` for long-lived checkpoints.
"""
from __future__ import annotations

import builtins
import importlib
import io
import marshal
import pickle
import sys
import types

from fmetrics.metric import Metric

__all__ = ["dumps", "loads", "MetricRef"]


class _Empty:
    """Marks a closure cell that has no value yet."""


def _importable(fn: types.FunctionType) -> bool:
    module = sys.modules.get(fn.__module__ or "")
    if module is None or "<locals>" in fn.__qualname__:
        return False
    obj = module
    for part in fn.__qualname__.split("."):
        obj = getattr(obj, part, None)
    return obj is fn


def _make_function(code: bytes, module: str, name: str, ncells: int):
    try:
        globals_ = importlib.import_module(module).__dict__
    except (ImportError, TypeError, ValueError):
        globals_ = {"__builtins__": builtins}
    closure = tuple(types.CellType() for _ in range(ncells)) or None
    return types.FunctionType(marshal.loads(code), globals_, name, None, closure)


def _fill_function(fn, state) -> None:
    defaults, kwdefaults, cells, attrs, qualname = state
    fn.__defaults__, fn.__kwdefaults__, fn.__qualname__ = defaults, kwdefaults, qualname
    for cell, value in zip(fn.__closure__ or (), cells):
        if not isinstance(value, _Empty):
            cell.cell_contents = value
    fn.__dict__.update(attrs)


def _make_metric(fields: dict) -> Metric:
    return Metric(**fields)


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return _Empty()


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, Metric):
            fields = {k: getattr(obj, k) for k in ("update", "merge", "finalize", "name", "state_key", "reductions")}
            fields["init"] = obj._init
            return _make_metric, (fields,)
        if isinstance(obj, types.FunctionType) and not _importable(obj):
            closure = obj.__closure__ or ()
            state = (obj.__defaults__, obj.__kwdefaults__, [_cell_value(c) for c in closure], obj.__dict__,
                     obj.__qualname__)
            # the function is memoized before its state is pickled, so recursive closures work
            return (_make_function, (marshal.dumps(obj.__code__), obj.__module__, obj.__name__, len(closure)),
                    state, None, None, _fill_function)
        return NotImplemented


def dumps(obj) -> bytes:
    """Pickles ``obj``, closures and `Metric` records included."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def loads(data: bytes):
    return pickle.loads(data)


class MetricRef:
    """Holds a `Metric`: shared by `copy.deepcopy` (it is immutable), pickled by value."""

    __slots__ = ("metric",)

    def __init__(self, metric: Metric):
        self.metric = metric

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        return _load_ref, (dumps(self.metric),)


def _load_ref(data: bytes) -> MetricRef:
    return MetricRef(loads(data))
