"""`clip_image_quality_assessment`: CLIP-IQA (Wang et al. 2023) with a user-supplied CLIP network, as torchmetrics.

Each prompt pair (positive, negative) is embedded once (again when the
network's weights change in place or move); an image's
score for the pair is ``softmax(100 * [cos(img, pos), cos(img, neg)])[0]``,
the probability that the image matches the positive prompt. The state keeps
the per-image probabilities (float64 chunks, one column per pair).
"""
from __future__ import annotations

from typing import Any, NamedTuple, Union

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.multimodal import _clip
from fmetrics.recipe import factory
from fmetrics.state import cat_chunks, merge_fields

__all__ = ["clip_image_quality_assessment", "PROMPTS"]

#: the built-in prompt pairs (torchmetrics' names, including its spelling "colorfullness")
PROMPTS: dict = {
    "quality": ("Good photo.", "Bad photo."),
    "brightness": ("Bright photo.", "Dark photo."),
    "noisiness": ("Clean photo.", "Noisy photo."),
    "colorfullness": ("Colorful photo.", "Dull photo."),
    "sharpness": ("Sharp photo.", "Blurry photo."),
    "contrast": ("High contrast photo.", "Low contrast photo."),
    "complexity": ("Complex photo.", "Simple photo."),
    "natural": ("Natural photo.", "Synthetic photo."),
    "happy": ("Happy photo.", "Sad photo."),
    "scary": ("Scary photo.", "Peaceful photo."),
    "new": ("New photo.", "Old photo."),
    "warm": ("Warm photo.", "Cold photo."),
    "real": ("Real photo.", "Abstract photo."),
    "beautiful": ("Beautiful photo.", "Ugly photo."),
    "lonely": ("Lonely photo.", "Sociable photo."),
    "relaxing": ("Relaxing photo.", "Stressful photo."),
}


class ClipIqaState(NamedTuple):
    probs: Any  # float64 chunks (images, pairs): P(positive prompt) per image and prompt pair


def _prompts(name: str, prompts) -> tuple:
    """``(texts, names)``: the 2k prompt texts (positive, negative per pair) and the k output names."""
    expected = "a tuple of built-in prompt names and (positive, negative) string pairs"
    if not isinstance(prompts, tuple) or not prompts:
        raise validation.fail(name, "prompts", expected, repr(prompts))
    texts, names = [], []
    for p in prompts:
        if isinstance(p, str):
            if p not in PROMPTS:
                raise validation.fail(name, "prompts", f"built-in names among {sorted(PROMPTS)} or string pairs",
                                      repr(p))
            names.append(p)
            texts.extend(PROMPTS[p])
        elif isinstance(p, tuple) and len(p) == 2 and all(isinstance(t, str) and t.strip() for t in p):
            names.append(f"user_defined_{sum(n.startswith('user_defined_') for n in names)}")
            texts.extend(p)
        else:
            raise validation.fail(name, "prompts", expected + " (each pair two non-empty strings)", repr(p))
    return tuple(texts), tuple(names)


@factory
def clip_image_quality_assessment(*, model: Any, processor: Any, data_range: float = 1.0,
                                  prompts: tuple = ("quality",)) -> Metric:
    """CLIP-IQA: per image, the probability that it matches the positive rather than the negative prompt.

    ``p = exp(100 c+) / (exp(100 c+) + exp(100 c-))`` with ``c+`` / ``c-`` the
    cosine similarities of the image's CLIP embedding to the embeddings of the
    positive / negative prompt.

    Args:
      model: the CLIP network (a parameter of the metric): ``get_image_features``
        and ``get_text_features`` as for `clip_score` (e.g. a
        ``transformers.CLIPModel`` built from a checkpoint on disk; torchmetrics'
        default ``"clip_iqa"`` network of the piq package is not built in).
      processor: its processor (e.g. ``transformers.CLIPProcessor``).
      data_range: the largest pixel value (default 1.0); images are divided by
        it and the result, in [0, 1], goes to the processor, as torchmetrics
        does. A CLIPImageProcessor then rescales by 1/255 again unless it was
        built with ``do_rescale=False`` (docs/multimodal.md).
      prompts: a tuple of built-in names (``"quality"``, ``"brightness"``,
        ``"noisiness"``, ``"colorfullness"``, ``"sharpness"``, ``"contrast"``,
        ``"complexity"``, ``"natural"``, ``"happy"``, ``"scary"``, ``"new"``,
        ``"warm"``, ``"real"``, ``"beautiful"``, ``"lonely"``, ``"relaxing"``)
        and ``(positive, negative)`` string pairs (named ``user_defined_0``,
        ``user_defined_1``, ...). Default ``("quality",)``.

    Inputs:
      ``update(state, images)``: a ``(N, C, H, W)`` tensor (or a list of
      ``(C, H, W)`` tensors) with values in ``[0, data_range]``.

    Returns:
      one prompt: the ``(N,)`` float64 probabilities, squeezed as torchmetrics
      (a 0-d tensor for one image); several: a dict name -> ``(N,)``.

    Example::

        >>> class Net:  # any network with the two methods (a transformers.CLIPModel in practice)
        ...     def get_image_features(self, pixel_values):
        ...         return pixel_values.flatten(1)[:, :2]
        ...     def get_text_features(self, input_ids, attention_mask):
        ...         return input_ids.float()
        >>> def processor(text=None, images=None, **kwargs):
        ...     if images is not None:
        ...         return {"pixel_values": torch.stack(images)}
        ...     return {"input_ids": torch.tensor([[1.0, 0.0] if t.startswith("Good") else [0.0, 1.0] for t in text]),
        ...             "attention_mask": torch.ones(len(text), 2)}
        >>> m = fmetrics.clip_image_quality_assessment(model=Net(), processor=processor)
        >>> m(torch.tensor([[[[1.0, 0.0]]], [[[0.5, 0.5]]]]))  # the first image matches "Good photo." only
        tensor([1.0000, 0.5000], dtype=torch.float64)
    """
    name = "clip_image_quality_assessment"
    _clip.check_network(name, model, processor)
    if isinstance(data_range, bool) or not isinstance(data_range, (int, float)) or not 0 < data_range < float("inf"):
        raise validation.fail(name, "data_range", "a positive finite number", repr(data_range))
    texts, names = _prompts(name, prompts)
    data_range = float(data_range)

    anchors_for: dict = {}  # the prompts' embeddings, kept while the network's weights stay the same

    def anchors() -> torch.Tensor:
        version = _clip.weights_version(model)
        if anchors_for.get("version") != version:
            anchors_for.update(version=version, value=_clip.text_features(name, model, processor, list(texts)))
        return anchors_for["value"]

    def init() -> ClipIqaState:
        return ClipIqaState(())

    def update(s: ClipIqaState, images) -> ClipIqaState:
        kind, items = _clip.split(name, "images", images)
        if kind == "text":
            raise validation.fail(name, "images", "images (a tensor or a list of (C, H, W) tensors)", "texts")
        if not len(items):
            return ClipIqaState(())
        _clip.check_images(name, "images", items, 0.0, data_range, "data_range")
        img = _clip.image_features(name, model, processor, items / data_range if isinstance(items, torch.Tensor)
                                   else [i / data_range for i in items])
        logits = (100 * img @ anchors().to(img.device).T).reshape(len(items), len(names), 2)
        return ClipIqaState((logits.softmax(-1)[..., 0].to(items[0].device),))

    def finalize(s: ClipIqaState) -> Union[torch.Tensor, dict]:
        probs = cat_chunks(s.probs, torch.zeros((0, len(names)), dtype=torch.float64))
        if len(names) == 1:
            return probs.squeeze()
        return {n: probs[:, i] for i, n in enumerate(names)}

    tags = ClipIqaState("cat")
    key = ("clip_image_quality_assessment", _clip.fingerprint(model, processor), data_range, texts)
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name, state_key=key,
                  reductions=tags, higher_is_better=True, is_differentiable=False, bounds=(0.0, 1.0),
                  host_input=True)
