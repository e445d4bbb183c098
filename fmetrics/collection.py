"""`collection`: many metrics as one `Metric`.

Members with equal ``state_key`` share one state and one update -- the static
form of torchmetrics' compute groups. Accuracy, precision, recall and F1 over
one configuration keep one stat-scores state and update it once per batch;
members of one family over one state also share its finalize step (one sort
for ROC, AUROC and AP; one ranking for MAP, NDCG and MRR).

Members may read **named inputs** (`Metric.from_output`): the collection is
then fed one dict of model outputs per step, ``c.update(s, outputs)``, and
each member takes the entries it names. Members without names get the
positional inputs.
"""
from __future__ import annotations

from typing import Mapping

from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["collection"]


@factory
def collection(metrics: Mapping[str, Metric], *, prefix: str = "", postfix: str = "") -> Metric:
    """A `Metric` whose value is ``{prefix + name + postfix: value}``.

    Args:
      metrics: ``{name: Metric}``; a member whose value is a dict contributes
        ``name_key`` entries.
      prefix: prepended to every key of the value (e.g. ``"val/"``).
      postfix: appended to every key of the value.

    The state is a tuple with one entry per distinct state key. ``update``
    takes the members' inputs: positional inputs, or one dict of named
    outputs when members read named inputs (`Metric.from_output`).

    Example::

        >>> c = fmetrics.collection({"mean": fmetrics.mean(), "max": fmetrics.max()}, prefix="val/")
        >>> c(torch.tensor([1., 3.]))
        {'val/mean': tensor(2., dtype=torch.float64), 'val/max': tensor(3., dtype=torch.float64)}
        >>> routed = fmetrics.collection({
        ...     "loss": fmetrics.mean().from_output("loss"),
        ...     "acc": fmetrics.multiclass_accuracy(num_classes=3).from_output("logits", "labels")})
        >>> # macro accuracy over 3 classes: recall 1 (class 0), 0 (class 1), 0 (class 2, predicted once)
        >>> routed({"loss": torch.tensor([0.5, 1.5]), "logits": torch.eye(3)[[0, 2]], "labels": torch.tensor([0, 1])})
        {'loss': tensor(1., dtype=torch.float64), 'acc': tensor(0.3333, dtype=torch.float64)}
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
    routed = [g.inputs is not None for g in groups]

    def init():
        return tuple(g.init() for g in groups)

    def update(state, *inputs, **kwargs):
        if any(routed):
            outputs = inputs[0] if len(inputs) == 1 and isinstance(inputs[0], Mapping) and not kwargs else None
            return tuple(g.update(s, outputs if outputs is not None else kwargs) if r
                         else g.update(s, *inputs, **kwargs)
                         for g, s, r in zip(groups, state, routed))
        return tuple(g.update(s, *inputs, **kwargs) for g, s in zip(groups, state))

    def merge(a, b):
        return tuple(g.merge(x, y) for g, x, y in zip(groups, a, b))

    def finalize(state):
        prepared: dict[int, object] = {}
        out = {}
        for name in names:
            m, i = metrics[name], group_of[name]
            if m.shared is not None and groups[i].shared is not None:
                if i not in prepared:
                    prepared[i] = groups[i].shared(state[i])  # once per state, for every member
                value = m.finish(prepared[i])
            else:
                value = m.finalize(state[i])
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
        host_input=any(m.host_input for m in metrics.values()),
    )
