"""`clip_score`: CLIPScore (Hessel et al. 2021) with a user-supplied CLIP network, as torchmetrics.

``100 * cos(E_source, E_target)`` per pair of CLIP embeddings (image-text,
image-image or text-text); the state is a float64 sum of the pair scores and
an int64 pair count, so it merges by addition. torchmetrics clamps the mean at
0 (``max(mean, 0)``, the default ``clamp="mean"``); the paper clamps each pair
(``clamp="pair"``: the sum is of ``100 * max(cos, 0)``).
"""
from __future__ import annotations

from typing import Any, Literal, NamedTuple

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.multimodal import _clip
from fmetrics.recipe import factory
from fmetrics.state import accum_dtype, merge_fields

__all__ = ["clip_score"]


class ClipScoreState(NamedTuple):
    score: torch.Tensor  # float64 (): sum of 100 * cos (clamped at 0 per pair with clamp="pair")
    pairs: torch.Tensor  # int64 (): pairs seen


@factory
def clip_score(*, model: Any, processor: Any, clamp: Literal["mean", "pair"] = "mean") -> Metric:
    """CLIP score: ``max(100 * mean cos(E_source, E_target), 0)`` over pairs of CLIP embeddings.

    Each source and target is an image or a caption; both are embedded by the
    network (``get_image_features`` / ``get_text_features``), L2-normalized,
    and the pair scores ``100 * cos`` are averaged.

    Args:
      model: the CLIP network (a parameter of the metric, moved by
        ``metric.to``): ``get_image_features(pixel_values)`` and
        ``get_text_features(input_ids, attention_mask)`` returning ``(n, dim)``
        embeddings (or a Hugging Face output with ``pooler_output``), e.g.
        ``transformers.CLIPModel.from_pretrained(folder)``. Run in eval mode
        under no-grad, on its own device; nothing is downloaded.
      processor: its processor, e.g. ``transformers.CLIPProcessor``:
        ``processor(text=[...], return_tensors="pt", padding=True)`` and
        ``processor(images=[(C, H, W) tensors], return_tensors="pt", padding=True)``.
      clamp: ``"mean"`` (default, torchmetrics): ``max(mean score, 0)``;
        ``"pair"`` (the paper): the mean of ``max(score, 0)``.

    Inputs:
      ``update(state, source, target)``: each either images (a ``(N, C, H, W)``
      tensor, one ``(C, H, W)`` image, or a list of them, as the processor
      expects: a CLIPImageProcessor rescaling by 1/255 (the default) takes
      integer (uint8) pixels in [0, 255], one built with ``do_rescale=False``
      floats in [0, 1]) or texts (a non-empty string or a list of them);
      equal counts.

    Returns:
      float64 scalar in [0, 100]; NaN with a warning when no pair was seen.

    Example::

        >>> class Net:  # any network with the two methods (a transformers.CLIPModel in practice)
        ...     def get_image_features(self, pixel_values):
        ...         return pixel_values.flatten(1)[:, :2]
        ...     def get_text_features(self, input_ids, attention_mask):
        ...         return input_ids.float()
        >>> def processor(text=None, images=None, **kwargs):
        ...     if images is not None:
        ...         return {"pixel_values": torch.stack(images)}
        ...     ids = torch.tensor([[len(t), 1] for t in text])
        ...     return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        >>> m = fmetrics.clip_score(model=Net(), processor=processor)
        >>> round(float(m(torch.tensor([[[[1.0, 0.0]]]]), ["a"])), 4)  # cos((1, 0), (1, 1)) = 0.7071
        70.7107
    """
    name = "clip_score"
    _clip.check_network(name, model, processor)
    validation.check_policy(name, "clamp", clamp, ("mean", "pair"))
    lo, hi, integer, why = _clip.pixel_rule(processor)

    def init() -> ClipScoreState:
        return ClipScoreState(torch.zeros((), dtype=accum_dtype()), torch.zeros((), dtype=torch.int64))

    def embed(arg: str, kind: str, items: list) -> torch.Tensor:
        if kind == "image":
            _clip.check_images(name, arg, items, lo, hi, why, integer)
            return _clip.image_features(name, model, processor, items)
        return _clip.text_features(name, model, processor, items)

    def update(s: ClipScoreState, source, target) -> ClipScoreState:
        (ks, xs), (kt, xt) = _clip.split(name, "source", source), _clip.split(name, "target", target)
        if len(xs) != len(xt):
            raise validation.fail(name, "target", f"as many examples as source ({len(xs)})", len(xt))
        if not len(xs):
            return ClipScoreState(s.score.clone(), s.pairs.clone())
        a, b = embed("source", ks, xs), embed("target", kt, xt)
        score = 100 * (a * b.to(a.device)).sum(-1)
        if clamp == "pair":
            score = score.clamp_min(0)
        return ClipScoreState(s.score + score.sum().to(s.score), s.pairs + len(xs))

    def finalize(s: ClipScoreState) -> torch.Tensor:
        if int(s.pairs) == 0:
            validation.warn_empty(name, stacklevel=3)
        mean = s.score / s.pairs
        return mean.clamp_min(0) if clamp == "mean" else mean

    tags = ClipScoreState("sum", "sum")
    key = ("clip_score", _clip.fingerprint(model, processor), clamp)
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name, state_key=key,
                  reductions=tags, higher_is_better=True, is_differentiable=False, bounds=(0.0, 100.0),
                  host_input=True)
