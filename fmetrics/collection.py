"""`collection`: many metrics over the same inputs as one `Metric`.

Members with equal ``state_key`` share one state and one update -- the static
form of torchmetrics' compute groups. Accuracy, precision, recall and F1 over
one configuration keep one stat-scores state and update it once per batch.
"""
from __future__ import annotations

from typing import Mapping

from fmetrics.metric import Metric

__all__ = ["collection"]


def collection(metrics: Mapping[str, Metric], prefix: str = "", postfix: str = "") -> Metric:
    """A `Metric` whose value is ``{prefix + name + postfix: value}``.

    A member whose value is a dict contributes ``name_key`` entries.
    The state is a tuple with one entry per distinct state key.

    Example::

        >>> c = fmetrics.collection({"mean": fmetrics.mean(), "max": fmetrics.max()}, prefix="val/")
        >>> c(torch.tensor([1., 3.]))
        {'val/mean': tensor(2., dtype=torch.float64), 'val/max': tensor(3.)}
    """
    if not isinstance(metrics, Mapping) or not metrics:
        raise ValueError("collection: argument `metrics` expected a non-empty dict of name -> Metric")
    for key, m in metrics.items():
        if not isinstance(m, Metric):
            raise TypeError(f"collection: member {key!r} expected a fmetrics.Metric, got {type(m).__name__}")
    names = list(metrics)
    groups: list[Metric] = []  # one representative per distinct state
    group_of: dict[str, int] = {}
    index_of_key: dict = {}
    for name in names:
        m = metrics[name]
        key = m.state_key
        if key is not None and key in index_of_key:
            group_of[name] = index_of_key[key]
            continue
        group_of[name] = len(groups)
        if key is not None:
            index_of_key[key] = len(groups)
        groups.append(m)

    def init():
        return tuple(g.init() for g in groups)

    def update(state, *inputs, **kwargs):
        return tuple(g.update(s, *inputs, **kwargs) for g, s in zip(groups, state))

    def merge(a, b):
        return tuple(g.merge(x, y) for g, x, y in zip(groups, a, b))

    def finalize(state):
        out = {}
        for name in names:
            value = metrics[name].finalize(state[group_of[name]])
            if isinstance(value, Mapping):
                for k, v in value.items():
                    out[f"{prefix}{name}_{k}{postfix}"] = v
            else:
                out[f"{prefix}{name}{postfix}"] = value
        return out

    keys = tuple((name, metrics[name].state_key) for name in names)
    return Metric(
        init=init,
        update=update,
        merge=merge,
        finalize=finalize,
        name="collection",
        state_key=None if any(k is None for _, k in keys) else ("collection", keys, prefix, postfix),
        reductions=tuple(g.reductions for g in groups),
    )
