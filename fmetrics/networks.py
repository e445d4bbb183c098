"""Running a user's network in eval mode without changing it (DESIGN §4: a module the user passes is never mutated).

`eval_view(net)` is a module that shares ``net``'s parameters and buffers (the same tensors, the same dicts, so
an in-place ``net.to(...)`` or a training step is seen) but has its own submodule tree with every ``training``
flag off: dropout is off and batch norm reads its running statistics, while ``net.training`` and every
submodule's flag stay what the user set.

Example::

    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5))
    >>> view = eval_view(net)
    >>> net.training, view.training, view[0].weight is net[0].weight
    (True, False, True)
"""
from __future__ import annotations

import contextlib
import copy
from typing import Iterator

import torch

from fmetrics import validation

__all__ = ["eval_view", "evaluating"]


def eval_view(net: torch.nn.Module, metric: str = "network", arg: str = "net") -> torch.nn.Module:
    """An eval-mode view of ``net`` (see the module docstring). A TorchScript module is used as it is, and
    must then be in eval mode already (its flags cannot be set apart from the original): ``metric`` and
    ``arg`` name it in that error."""
    if isinstance(net, torch.jit.ScriptModule):
        if any(m.training for m in net.modules()):
            raise validation.fail(metric, arg, "a TorchScript network in eval mode (call .eval() on it first: "
                                  "its training flags cannot be set apart from yours)", "one in training mode")
        return net
    view = copy.copy(net)  # a new object: own __dict__ (training flag, _modules), shared tensor dicts
    view.__dict__["_modules"] = {k: None if m is None else eval_view(m, metric, arg)
                                 for k, m in net._modules.items()}
    view.__dict__["training"] = False
    return view


@contextlib.contextmanager
def evaluating(net: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Within the block ``net`` runs in eval mode; every submodule's flag is restored after it, even on error.

    For host-side code that is never traced (BERTScore's encoder): a Hugging Face model records its hidden
    states through hooks installed once per model object, so it is run as itself, not through `eval_view`.
    """
    flags = [(m, m.training) for m in net.modules()]
    net.eval()
    try:
        yield net
    finally:
        for m, flag in flags:
            m.training = flag
