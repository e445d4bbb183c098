"""`lip_vertex_error`: the Lip Vertex Error of 3D talking heads (torchmetrics' definition).

``LVE = 1/T sum_t max_{v in mouth} ||x_tv - y_tv||^2``: per frame, the largest
squared L2 error over the mouth vertices, averaged over the frames. The state
is a float64 sum of the per-frame maxima and an int64 frame count, so it merges
by addition (exact across batches and ranks).
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import torch

from fmetrics import validation
from fmetrics.image import _finite
from fmetrics.image._finite import NanStrategy
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.state import accum_dtype, merge_fields

__all__ = ["lip_vertex_error"]


class LveState(NamedTuple):
    total: torch.Tensor      # float64 (): sum over frames of the per-frame maximum squared error
    frames: torch.Tensor     # int64 (): frames seen
    nonfinite: torch.Tensor  # int64 (): non-finite input entries (nan_strategy)


def _mouth_index(name: str, mouth_map) -> tuple:
    if isinstance(mouth_map, torch.Tensor):
        mouth_map = mouth_map.tolist()
    if isinstance(mouth_map, (str, bytes)) or not isinstance(mouth_map, Sequence) or len(mouth_map) == 0:
        raise validation.fail(name, "mouth_map", "a non-empty list of vertex indices", repr(mouth_map))
    for v in mouth_map:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise validation.fail(name, "mouth_map", "non-negative integer vertex indices", repr(v))
    return tuple(mouth_map)


@factory
def lip_vertex_error(*, mouth_map: Sequence[int], validate_args: bool = True,
                     nan_strategy: NanStrategy = "error") -> Metric:
    """Lip Vertex Error: the mean over frames of the largest squared L2 error over the mouth vertices.

    ``LVE = 1/T sum_t max_{v in mouth_map} ||pred_tv - gt_tv||_2^2``. When the
    two sequences of an update differ in length, the first ``min(T, T')``
    frames of each are compared (as torchmetrics).

    Args:
      mouth_map: the vertex indices of the mouth region (a non-empty list of
        non-negative ints, each below the number of vertices).
      validate_args: kept for torchmetrics compatibility; shapes and indices
        are always checked (metadata only, free).
      nan_strategy: NaN / inf in the vertices: ``"error"`` (default) raises (at
        once on CPU, else in ``finalize``); ``"warn"`` / ``"ignore"`` leave such
        frames out; ``"disable"`` lets NaN propagate.

    Inputs:
      ``update(state, vertices_pred, vertices_gt)``: float tensors ``(T, V, 3)``
      and ``(T', V, 3)`` (frames, vertices, xyz).

    Returns:
      float64 scalar; NaN with a warning when no frame was seen.

    Example::

        >>> m = fmetrics.lip_vertex_error(mouth_map=[0, 2])
        >>> pred, gt = torch.zeros(2, 3, 3), torch.zeros(2, 3, 3)
        >>> gt[0, 0] = torch.tensor([1.0, 2.0, 2.0])  # frame 0: error 9 at vertex 0
        >>> gt[1, 1] = 5.0                            # vertex 1 is not in the mouth
        >>> float(m(pred, gt))
        4.5
    """
    name = "lip_vertex_error"
    mouth = _mouth_index(name, mouth_map)
    if not isinstance(validate_args, bool):
        raise validation.fail(name, "validate_args", "a bool", repr(validate_args))
    nan_strategy = _finite.check_strategy(name, nan_strategy)
    index_on: dict = {torch.device("cpu"): torch.tensor(mouth, dtype=torch.int64)}

    def index(device: torch.device) -> torch.Tensor:  # the mouth indices, copied to a device once
        idx = index_on.get(device)
        if idx is None:
            idx = index_on[torch.device("cpu")].to(device)
            if not torch.compiler.is_compiling():
                index_on[device] = idx
        return idx

    def init() -> LveState:
        return LveState(torch.zeros((), dtype=accum_dtype()), torch.zeros((), dtype=torch.int64),
                        torch.zeros((), dtype=torch.int64))

    def update(s: LveState, vertices_pred: torch.Tensor, vertices_gt: torch.Tensor) -> LveState:
        for arg, x in (("vertices_pred", vertices_pred), ("vertices_gt", vertices_gt)):
            if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[2] != 3:
                got = f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
                raise validation.fail(name, arg, "a tensor (frames, vertices, 3)", got)
            if not (x.is_floating_point() or x.dtype in (torch.int32, torch.int64, torch.int16, torch.uint8)):
                raise validation.fail(name, arg, "a real tensor", str(x.dtype))
        if vertices_pred.shape[1] != vertices_gt.shape[1]:
            raise validation.fail(name, "vertices_gt", f"{vertices_pred.shape[1]} vertices as vertices_pred",
                                  vertices_gt.shape[1])
        if max(mouth) >= vertices_pred.shape[1]:
            raise validation.fail(name, "mouth_map", f"vertex indices below {vertices_pred.shape[1]} (the "
                                  "number of vertices)", f"index {max(mouth)}")
        t = min(vertices_pred.shape[0], vertices_gt.shape[0])
        idx = index(vertices_pred.device)
        p = vertices_pred[:t].index_select(1, idx).to(s.total.dtype)
        g = vertices_gt[:t].index_select(1, idx).to(s.total.dtype)
        per_frame = (g - p).square().sum(-1).amax(1)  # (t,)
        screened = _finite.screen(nan_strategy, vertices_pred[:t], vertices_gt[:t])
        ok = None if screened is None else screened[0]
        per_frame, kept = _finite.keep(ok, per_frame), _finite.kept(ok, t)
        return LveState(s.total + per_frame.sum(), s.frames + kept, _finite.counted(s.nonfinite, screened))

    def finalize(s: LveState) -> torch.Tensor:
        _finite.report(name, nan_strategy, s.nonfinite)
        if int(s.frames) == 0:
            validation.warn_empty(name, stacklevel=3)
        return s.total / s.frames

    tags = LveState("sum", "sum", "sum")
    check = _finite.eager_check(name, ("vertices_pred", "vertices_gt"), nan_strategy)
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  state_key=("lip_vertex_error", mouth, nan_strategy == "disable"), reductions=tags, check=check,
                  higher_is_better=False, is_differentiable=False, bounds=(0.0, None))
