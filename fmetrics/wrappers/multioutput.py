"""`multioutput`: one metric per output column, updated together under `torch.func.vmap`."""
from __future__ import annotations

from typing import Any, NamedTuple

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.state import device_of, stack, tree_map
from fmetrics.wrappers import _rows
from fmetrics.recipe import factory


class MultioutputState(NamedTuple):
    outputs: Any  # the wrapped state stacked per output (num_outputs, ...); cat chunks (num_outputs, B, ...)
    keep: tuple  # int64 chunks (num_outputs, B): 1 where a stored row had no NaN (remove_nans, cat metrics)


@factory
def multioutput(
    metric: Metric,
    *,
    num_outputs: int,
    output_dim: int = -1,
    remove_nans: bool = True,
    squeeze_outputs: bool = True,
) -> Metric:
    """``metric`` applied to each of ``num_outputs`` slices along ``output_dim``; values stacked on dim 0.

    As torchmetrics' ``MultioutputWrapper``: output ``i`` sees every tensor
    input indexed at ``i`` along ``output_dim`` (the dim squeezed away if
    ``squeeze_outputs``). With ``remove_nans``, a row (index on dim 0) in which
    any input has a NaN for output ``i`` is left out of output ``i`` -- with a
    0/1 row weight instead of a data-dependent selection (see
    `fmetrics.wrappers._rows`), so the metric must be row-decomposable; with
    ``remove_nans=False`` any metric works.

    Args:
      metric: the `fmetrics.Metric` applied per output (positional).
      num_outputs: number of outputs, an int ``>= 1`` (required).
      output_dim: the dim holding the outputs (default ``-1``).
      remove_nans: ``True`` (default) leaves rows with a NaN out of that
        output; ``False`` passes them on.
      squeeze_outputs: ``True`` (default) drops ``output_dim`` from each slice.

    Inputs:
      ``update(state, *inputs)``: the wrapped metric's inputs, each tensor with
      ``num_outputs`` entries along ``output_dim`` and one row count on dim 0
      (a mismatch raises naming the input).

    Returns:
      the per-output values stacked on dim 0, ``(num_outputs, ...)``; metadata
      is the wrapped metric's.

    Example::

        >>> m = multioutput(fmetrics.mean(), num_outputs=2)
        >>> m(torch.tensor([[1., 10.], [3., float("nan")]]))
        tensor([ 2., 10.], dtype=torch.float64)
    """
    name = "multioutput"
    if not isinstance(metric, Metric):
        raise validation.fail(name, "metric", "a fmetrics.Metric", type(metric).__name__)
    if isinstance(num_outputs, bool) or not isinstance(num_outputs, int) or num_outputs < 1:
        raise validation.fail(name, "num_outputs", "an integer >= 1", repr(num_outputs))
    if isinstance(output_dim, bool) or not isinstance(output_dim, int):
        raise validation.fail(name, "output_dim", "an integer", repr(output_dim))
    tags = _rows.decomposable_tags(name, metric) if remove_nans else None
    keeps_rows = remove_nans and _rows.has_cat(tags, metric.init())

    who = f"{name}({metric.name})"  # input errors name the wrapped metric too
    def init():
        return MultioutputState(stack([metric.init()] * num_outputs), ())

    def split(x, i):
        if not isinstance(x, torch.Tensor) or x.dim() == 0:
            return x, None
        d = output_dim % x.dim() if -x.dim() <= output_dim < x.dim() else None
        if d is None or x.shape[d] != num_outputs:
            raise validation.fail(who, f"inputs[{i}]", f"{num_outputs} outputs along dim {output_dim}",
                                  f"shape {tuple(x.shape)}")
        x = x.movedim(d, 0)
        return (x if squeeze_outputs else x.unsqueeze(d + 1)), 0

    def update(state, *inputs, **kwargs):
        split_inputs, dims = zip(*(split(x, i) for i, x in enumerate(inputs))) if inputs else ((), ())
        if not remove_nans:
            outputs = torch.func.vmap(lambda s, *x: metric.update(s, *x, **kwargs), in_dims=(0, *dims))(
                state.outputs, *split_inputs)
            return MultioutputState(outputs, state.keep)
        _rows.num_rows(who, inputs, kwargs)  # raises naming an input whose rows differ
        n = _rows.num_rows(who, tuple(x[0] for x, d in zip(split_inputs, dims) if d is not None))
        if n == 0:  # static shape: nothing to add (vmap cannot run the metric on zero rows)
            return state
        nan = torch.zeros((num_outputs, n), dtype=torch.bool, device=device_of(inputs))
        for x, d in zip(split_inputs, dims):
            if d is not None and (x.is_floating_point() or x.is_complex()):
                nan = nan | torch.isnan(x).reshape(num_outputs, n, -1).any(-1)
        keep = (~nan).to(torch.int64)
        # rows left out still go through update (with weight 0): zero their entries so NaN * 0 stays out
        split_inputs = tuple(
            torch.where(nan.reshape(num_outputs, n, *([1] * (x.dim() - 2))), torch.zeros_like(x), x)
            if d is not None and (x.is_floating_point() or x.is_complex()) else x
            for x, d in zip(split_inputs, dims))
        def one_output(s, w, *x):
            if tags is None:  # one replicate: a stacked state of one
                one = _rows.merge_weighted(metric, tree_map(lambda v: v.unsqueeze(0), s),
                                       _rows.row_states(metric, x, kwargs), w.unsqueeze(0), 1)
                return tree_map(lambda v: v[0], one)
            return _rows.add_rows(tags, s, _rows.per_row(metric, tags, x, kwargs), w)

        outputs = torch.func.vmap(one_output, in_dims=(0, 0, *dims))(state.outputs, keep, *split_inputs)
        return MultioutputState(outputs, state.keep + (keep,) if keeps_rows else state.keep)

    inner_check = _rows.eager_check(metric)

    def check(*inputs, **kwargs):  # eager (CPU): the wrapped metric's check on each output's rows
        _rows.num_rows(who, inputs, kwargs)
        split_inputs, dims = zip(*(split(x, i) for i, x in enumerate(inputs))) if inputs else ((), ())
        for i in range(num_outputs):
            xs = [x[i] if d is not None else x for x, d in zip(split_inputs, dims)]
            if remove_nans:  # the rows this output leaves out
                nan = [torch.isnan(x).flatten(1).any(-1) if x.dim() > 1 else torch.isnan(x)
                       for x, d in zip(xs, dims) if d is not None and x.dim() and (x.is_floating_point() or x.is_complex())]
                if nan:
                    keep = ~torch.stack(nan).any(0)
                    xs = [x[keep] if d is not None and x.dim() else x for x, d in zip(xs, dims)]
            inner_check(*xs, **kwargs)

    def merge(a, b):
        return MultioutputState(torch.func.vmap(metric.merge)(a.outputs, b.outputs), tuple(a.keep) + tuple(b.keep))

    def output_state(state, i):
        if not remove_nans:
            return tree_map(lambda x: x[i], state.outputs)
        keep = _rows.cat_rows(state.keep, dim=1)
        return _rows.select(tags, state.outputs, i, None if keep is None else keep[i], rows_stacked=True)

    def finalize(state):
        return _rows.stack_values(name, [metric.finalize(output_state(state, i)) for i in range(num_outputs)])

    reductions = MultioutputState(outputs=metric.reductions, keep="cat")
    key = None if metric.state_key is None else (
        name, metric.state_key, num_outputs, output_dim, bool(remove_nans), bool(squeeze_outputs))
    return Metric(init=init, update=update, merge=merge, finalize=finalize, name=f"{name}({metric.name})",
                  state_key=key, reductions=reductions, check=check,
                  higher_is_better=metric.higher_is_better,
                  is_differentiable=metric.is_differentiable, bounds=metric.bounds)
