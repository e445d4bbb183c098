"""`multitask`: a dict of metrics, one per task, over dict inputs."""
from __future__ import annotations

from typing import Mapping

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory


@factory
def multitask(metrics: Mapping[str, Metric], *, prefix: str = "", postfix: str = "") -> Metric:
    """``{prefix + task + postfix: value}`` with ``update(state, *inputs)`` where every input is a dict by task.

    As torchmetrics' ``MultitaskWrapper``: task ``t`` is updated with
    ``metrics[t].update(s_t, inputs[0][t], inputs[1][t], ...)``; a member may
    be a `fmetrics.collection`. Every input must have exactly the task keys.

    Args:
      metrics: ``{task: Metric}``, a non-empty dict with str keys (positional).
      prefix: prepended to every task key of the value (default ``""``).
      postfix: appended to every task key of the value (default ``""``).

    Inputs:
      ``update(state, *inputs)``: every input a dict ``{task: tensor}`` with
      exactly the task keys.

    Returns:
      ``{prefix + task + postfix: value}``.

    Example::

        >>> m = multitask({"cls": fmetrics.mean(), "reg": fmetrics.sum()})
        >>> m({"cls": torch.tensor([1., 0.]), "reg": torch.tensor([2., 3.])})
        {'cls': tensor(0.5000, dtype=torch.float64), 'reg': tensor(5., dtype=torch.float64)}
    """
    name = "multitask"
    check_metrics(name, metrics, "task")
    for arg, value in (("prefix", prefix), ("postfix", postfix)):
        if not isinstance(value, str):
            raise validation.fail(name, arg, "a string", repr(value))
    tasks = list(metrics)
    members = [metrics[t] for t in tasks]

    def init():
        return tuple(m.init() for m in members)

    def update(state, *inputs):
        for i, x in enumerate(inputs):
            if not isinstance(x, Mapping):
                raise validation.fail(name, f"inputs[{i}]", f"a dict with keys {tasks}", type(x).__name__)
            missing = [t for t in tasks if t not in x]
            extra = [k for k in x if k not in metrics]
            if missing or extra:
                raise validation.fail(name, f"inputs[{i}]", f"exactly the task keys {tasks}",
                                      f"missing {missing}, unexpected {extra}")
        return tuple(m.update(s, *(x[t] for x in inputs)) for t, m, s in zip(tasks, members, state))

    def merge(a, b):
        return tuple(m.merge(x, y) for m, x, y in zip(members, a, b))

    def finalize(state):
        return {f"{prefix}{t}{postfix}": m.finalize(s) for t, m, s in zip(tasks, members, state)}

    keys = tuple((t, m.state_key) for t, m in zip(tasks, members))
    return Metric(init=init, update=update, merge=merge, finalize=finalize, name=name,
                  state_key=None if any(k is None for _, k in keys) else (name, keys),
                  reductions=tuple(m.reductions for m in members))


def check_metrics(name: str, metrics, key: str) -> None:
    """Raises unless ``metrics`` is a non-empty dict of str ``key`` -> `fmetrics.Metric` (a wrapper's argument)."""
    if not isinstance(metrics, Mapping) or not metrics:
        raise validation.fail(name, "metrics", f"a non-empty dict of {key} -> fmetrics.Metric", repr(metrics))
    for k, m in metrics.items():
        if not isinstance(k, str) or not isinstance(m, Metric):
            raise validation.fail(name, "metrics", f"a dict of str {key} -> fmetrics.Metric",
                                  f"{k!r}: {type(m).__name__}")
