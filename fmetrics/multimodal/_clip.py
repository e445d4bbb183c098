"""The CLIP network contract shared by `clip_score` and `clip_image_quality_assessment`.

The user passes the network and its processor (nothing is downloaded):

* ``model``: has ``get_image_features(pixel_values)`` and
  ``get_text_features(input_ids, attention_mask)``, each returning ``(n, dim)``
  embeddings, or a Hugging Face output holding them in ``pooler_output``
  (``transformers`` >= 5) / ``image_embeds`` / ``text_embeds``. A
  ``transformers.CLIPModel`` qualifies. It runs in eval mode (its flags are
  restored), under ``torch.no_grad``, on the device of its parameters.
* ``processor``: ``processor(text=[str], return_tensors="pt", padding=True)``
  gives ``input_ids`` / ``attention_mask``; ``processor(images=[(C, H, W)
  tensors], return_tensors="pt", padding=True)`` gives ``pixel_values``. A
  ``transformers.CLIPProcessor`` qualifies.

The processor works on host data (images are handed over on the CPU, as
torchmetrics does), so these are host-input metrics (DESIGN §2.5).
"""
from __future__ import annotations

import contextlib
import math
import warnings
from typing import Any

import torch

from fmetrics import validation
from fmetrics.networks import evaluating

__all__ = ["check_network", "fingerprint", "pixel_rule", "split", "check_images", "weights_version", "image_features",
           "text_features"]


def check_network(name: str, model: Any, processor: Any) -> None:
    for attr in ("get_image_features", "get_text_features"):
        if not callable(getattr(model, attr, None)):
            raise validation.fail(name, "model", f"a CLIP-style network with `{attr}` (e.g. transformers.CLIPModel, "
                                  "built by you: nothing is downloaded)", type(model).__name__)
    if not callable(processor):
        raise validation.fail(name, "processor", "a callable processor(text=..., images=..., return_tensors='pt') "
                              "(e.g. transformers.CLIPProcessor)", type(processor).__name__)


def fingerprint(model: Any, processor: Any) -> tuple:
    """The network named by its class and weights (not its identity), so that every rank agrees on it."""
    params = list(model.parameters()) if isinstance(model, torch.nn.Module) else []
    with torch.no_grad():
        checksum = sum(float(p.detach().double().sum()) for p in params)
    return type(model).__qualname__, sum(p.numel() for p in params), round(checksum, 6), type(processor).__qualname__


def pixel_rule(processor: Any) -> tuple:
    """``(lo, hi, integer, why)``: what the processor expects of the images it is handed. A CLIPImageProcessor
    that rescales by 1/255 (``do_rescale=True``, the default) expects integer pixels in [0, 255] (its resize
    cannot take float images above 1); one built with ``do_rescale=False`` expects floats in [0, 1]; another
    processor gets finite images."""
    ip = getattr(processor, "image_processor", processor)
    flag = getattr(ip, "do_rescale", None)
    if flag is True and abs(float(getattr(ip, "rescale_factor", 0.0)) - 1 / 255) < 1e-9:
        return 0.0, 255.0, True, ("the processor rescales by 1/255: pass uint8 images, or build it with "
                                  "do_rescale=False for float images in [0, 1]")
    if flag is False:
        return 0.0, 1.0, False, "the processor is built with do_rescale=False"
    return -float("inf"), float("inf"), False, ""


def split(name: str, arg: str, x: Any) -> tuple:
    """``(modality, items)``: ``"image"`` and a ``(N, C, H, W)`` tensor or a list of ``(C, H, W)`` tensors, or
    ``"text"`` and a list of non-empty strings; ``(None, [])`` for an empty list."""
    if isinstance(x, str):
        x = [x]
    if isinstance(x, torch.Tensor):
        if x.dim() not in (3, 4):
            raise validation.fail(name, arg, "images (N, C, H, W) or one image (C, H, W)", f"shape {tuple(x.shape)}")
        return "image", x[None] if x.dim() == 3 else x  # a batch tensor: checked and divided at once
    if not isinstance(x, (list, tuple)):
        raise validation.fail(name, arg, "images (a tensor or a list of (C, H, W) tensors) or texts (a string or a "
                              "list of strings)", type(x).__name__)
    if len(x) == 0:
        return None, []
    if all(isinstance(i, str) for i in x):
        for k, s in enumerate(x):
            if not s.strip():
                raise validation.fail(name, arg, "non-empty texts", f"an empty text at position {k}")
        return "text", list(x)
    if all(isinstance(i, torch.Tensor) for i in x):
        for k, i in enumerate(x):
            if i.dim() != 3:
                raise validation.fail(name, arg, "images of shape (C, H, W)", f"shape {tuple(i.shape)} at position {k}")
        return "image", list(x)
    raise validation.fail(name, arg, "a list of strings or a list of (C, H, W) tensors, not a mix",
                          ", ".join(sorted({type(i).__name__ for i in x})))


def check_images(name: str, arg: str, images: list, lo: float, hi: float, why: str, integer: bool = False) -> None:
    """Images must be finite, within ``[lo, hi]`` and, with ``integer``, of an integer dtype (host-input
    metric: reading them here is allowed). A batch tensor is read once; an image is named only on failure."""
    plain = not (images.is_complex() or images.dtype == torch.bool) if isinstance(images, torch.Tensor) else False
    if plain and images.numel() and not (integer and images.is_floating_point()):
        mn, mx = (float(v) for v in torch.aminmax(images))
        if math.isfinite(mn) and math.isfinite(mx) and lo <= mn and mx <= hi:
            return
    for k, img in enumerate(images):
        if img.is_complex() or img.dtype == torch.bool or (integer and img.is_floating_point()):
            want = "integer (uint8) images" if integer else "real images"
            raise validation.fail(name, arg, f"{want} ({why})" if why else want, f"{img.dtype} in image {k}")
        if not img.numel():
            continue
        mn, mx = (float(v) for v in torch.aminmax(img))  # NaN propagates to both
        if img.is_floating_point() and not (math.isfinite(mn) and math.isfinite(mx)):
            raise validation.fail(name, arg, "finite images", f"{validation.quote(img[~torch.isfinite(img)])} "
                                  f"in image {k}")
        if mn < lo or mx > hi:
            raise validation.fail(name, arg, f"pixel values in [{lo:g}, {hi:g}] ({why})",
                                  f"values in [{mn:g}, {mx:g}] in image {k}")


def weights_version(model: Any) -> tuple:
    """Which tensors the network's weights are, where, and how often they were changed in place (an optimizer
    step bumps every parameter's version): a value computed from them is valid while this stays the same."""
    if not isinstance(model, torch.nn.Module):
        return (id(model),)
    return tuple((id(p), p.device, p._version) for p in model.parameters())


def _device(model: Any) -> torch.device:
    if isinstance(model, torch.nn.Module):
        for p in model.parameters():
            return p.device
    return torch.device("cpu")


def _embeddings(name: str, out: Any, kind: str) -> torch.Tensor:
    if not isinstance(out, torch.Tensor):
        for attr in ("pooler_output", f"{kind}_embeds"):
            if isinstance(getattr(out, attr, None), torch.Tensor):
                out = getattr(out, attr)
                break
    if not isinstance(out, torch.Tensor) or out.dim() != 2:
        got = f"shape {tuple(out.shape)}" if isinstance(out, torch.Tensor) else type(out).__name__
        raise validation.fail(name, "model", f"get_{kind}_features returning (n, dim) embeddings", got)
    out = out.detach().to(torch.float64)
    bad = ~torch.isfinite(out).all(dim=1)
    if bool(bad.any()):
        raise ValueError(f"{name}: the model returned non-finite {kind} features for {int(bad.sum())} of "
                         f"{out.shape[0]} inputs (check the network's weights and dtype); the state is unchanged")
    return out / out.norm(p=2, dim=-1, keepdim=True)


@contextlib.contextmanager
def _running(model: Any):
    training = isinstance(model, torch.nn.Module) and any(m.training for m in model.modules())
    with torch.no_grad(), (evaluating(model) if training else contextlib.nullcontext()):  # flags restored after
        yield


def image_features(name: str, model: Any, processor: Any, images: list) -> torch.Tensor:
    """L2-normalized float64 image embeddings ``(n, dim)``, on the network's device."""
    pixels = processor(images=[i.cpu() for i in images], return_tensors="pt", padding=True)["pixel_values"]
    with _running(model):
        return _embeddings(name, model.get_image_features(pixels.to(_device(model))), "image")


def text_features(name: str, model: Any, processor: Any, texts: list) -> torch.Tensor:
    """L2-normalized float64 text embeddings ``(n, dim)``; captions longer than the network's positions are
    truncated to them with a warning (as torchmetrics)."""
    tok = processor(text=list(texts), return_tensors="pt", padding=True)
    ids, mask = tok["input_ids"], tok["attention_mask"]
    limit = getattr(getattr(getattr(model, "config", None), "text_config", None), "max_position_embeddings", None)
    if isinstance(limit, int) and mask.shape[-1] > limit:
        warnings.warn(f"{name}: a caption is longer than the network's {limit} positions; truncated to {limit} "
                      "tokens", UserWarning, stacklevel=4)
        ids, mask = ids[..., :limit], mask[..., :limit]
    device = _device(model)
    with _running(model):
        return _embeddings(name, model.get_text_features(ids.to(device), mask.to(device)), "text")
