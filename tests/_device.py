"""The law suite on an accelerator (``pytest --device cuda``, see tests/conftest.py).

`on_device` turns a registry `Case` into what `check_metric` gets on the device:

* the metric with its parameters moved (``metric.to(device)``) and ``init``
  placing the empty state on the device, so every law runs there;
* every ``update`` (the metric's own update function, under every law but
  the traced ones) wrapped in ``torch.cuda.set_sync_debug_mode("error")``: a
  host sync inside an update -- ``.item()``, a host-to-device copy of a CPU
  constant, a boolean-mask index -- fails the law with the metric's name;
* the inputs moved to the device (tensors nested in tuples, lists and dicts;
  strings and numbers as they are) and the oracle fed host copies.

On the CPU the case is returned as it is.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from fmetrics import state as state_lib
from fmetrics.metric import Metric

DEVICE_BLIND = ("compile", "compile epoch")  # not rerun on a device: dynamo traces on the host, device-blind
HOST_INPUT_REASON = ("host-input metric (metric.host_input, DESIGN §2.5): its update works on Python data on "
                     "the host, so it has no device law to check")


def move(tree, device):
    """``tree`` with every tensor (in nested tuples / lists / dicts) on ``device``; other leaves kept."""
    if isinstance(tree, torch.Tensor):
        return tree.to(device)
    if isinstance(tree, dict):
        return type(tree)((k, move(v, device)) for k, v in tree.items())
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*(move(v, device) for v in tree))
    if isinstance(tree, (list, tuple)):
        return type(tree)(move(v, device) for v in tree)
    return tree


class HostSync(AssertionError):
    """An update synchronized the device with the host."""


def sync_guarded(metric: Metric, device: torch.device) -> Metric:
    """``metric`` on ``device``, every eager ``update`` run under ``set_sync_debug_mode("error")``.

    Traced calls (``torch.compile``) run unguarded: the mode is a host-side switch dynamo cannot trace,
    and the eager calls of the same update already cover its operations.
    """
    metric = metric.to(device)
    inner_init, inner_update, name = metric._init, metric._update, metric.name

    def init():
        return state_lib.to_device(inner_init(), device)

    def update(state, *inputs, **kwargs):
        if torch.compiler.is_compiling():
            return inner_update(state, *inputs, **kwargs)
        previous = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("error")
        try:
            return inner_update(state, *inputs, **kwargs)
        except RuntimeError as err:
            if "synchroniz" in str(err):
                raise HostSync(f"{name}: update synchronized {device} with the host "
                               f"(torch.cuda.set_sync_debug_mode('error')): {err}") from err
            raise
        finally:
            torch.cuda.set_sync_debug_mode(previous)

    return metric.replace(init=init, update=update)


def on_device(case, seed: int, device: torch.device) -> tuple[Metric, list, Optional[Callable[..., Any]]]:
    """``(metric, batches, reference)`` of ``case`` for `check_metric` on ``device``."""
    metric, batches, reference = case.make(), case.batches(seed), case.reference
    if device.type == "cpu":
        return metric, batches, reference
    if device.type != "cuda":
        raise ValueError(f"--device {device}: the law suite runs on cpu or cuda")
    host_reference = None
    if reference is not None:
        def host_reference(*inputs):
            return reference(*move(inputs, "cpu"))
    return sync_guarded(metric, device), move(batches, device), host_reference
