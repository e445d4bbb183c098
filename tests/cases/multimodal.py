"""Law-suite cases for the multimodal metrics, and a tiny random CLIP network built offline.

`tiny_clip(folder)` writes a randomly initialised ``transformers.CLIPModel``
(2 layers, width 32, 32x32 images in 8x8 patches) with a character-level
``CLIPTokenizer`` (a vocabulary written to ``folder``, no merges) and a
``CLIPImageProcessor`` to ``folder`` (``save_pretrained``), so a peer can load
the same network from disk. Nothing is downloaded.
"""
from __future__ import annotations

import functools
import json
import os
import tempfile

import torch

import fmetrics.multimodal as fmm
from tests.cases import Case

WORDS = "a cat dog on the mat sat photo of red blue house tree car 42 é ! big small".split()


def tiny_clip(folder: str, seed: int = 0, do_rescale: bool = True):
    """``(model, processor)``: a random tiny CLIP network and its processor, also saved to ``folder``."""
    import transformers

    torch.manual_seed(seed)
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for c in map(chr, range(33, 127)):  # byte-level characters, alone and word-final
        vocab.setdefault(c, len(vocab))
        vocab.setdefault(c + "</w>", len(vocab))
    for c in ("Ã", "©", "Ã</w>", "©</w>"):  # "é" in CLIP's byte-to-unicode alphabet
        vocab.setdefault(c, len(vocab))
    with open(os.path.join(folder, "vocab.json"), "w") as f:
        json.dump(vocab, f)
    with open(os.path.join(folder, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n")
    config = transformers.CLIPConfig(
        text_config=dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, max_position_embeddings=64, bos_token_id=0, eos_token_id=1,
                         pad_token_id=1),
        vision_config=dict(image_size=32, patch_size=8, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2),
        projection_dim=16)
    model = transformers.CLIPModel(config).eval()
    tokenizer = transformers.CLIPTokenizer(os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt"))
    images = transformers.CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32},
                                             do_rescale=do_rescale)
    processor = transformers.CLIPProcessor(image_processor=images, tokenizer=tokenizer)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return model, processor


def float_processor(processor):
    """The same processor with ``do_rescale=False``: float images in [0, 1] (CLIP-IQA's images / data_range)."""
    import transformers

    ip = processor.image_processor
    images = transformers.CLIPImageProcessor(size=ip.size, crop_size=ip.crop_size, do_rescale=False)
    return transformers.CLIPProcessor(image_processor=images, tokenizer=processor.tokenizer)


class TensorFeatures(torch.nn.Module):
    """A loaded CLIPModel whose ``get_*_features`` return tensors: what torchmetrics 1.9 reads (``transformers``
    5 returns an output object whose ``pooler_output`` holds them). For the torchmetrics side of a comparison."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config = model, model.config

    def get_image_features(self, pixel_values):
        return self.model.get_image_features(pixel_values).pooler_output

    def get_text_features(self, input_ids, attention_mask):
        return self.model.get_text_features(input_ids, attention_mask).pooler_output


@functools.lru_cache(maxsize=None)
def shared_clip():
    """``(model, processor, float_processor)``: one tiny CLIP network for the law suite (built once per
    process), or ``None`` without transformers."""
    try:
        import transformers  # noqa: F401
    except ModuleNotFoundError:
        return None
    model, processor = tiny_clip(tempfile.mkdtemp(prefix="fmetrics-clip-"))
    return model, processor, float_processor(processor)


def captions(gen: torch.Generator, n: int) -> list:
    out = []
    for _ in range(n):
        k = int(torch.randint(1, 7, (), generator=gen))
        out.append(" ".join(WORDS[int(i)] for i in torch.randint(len(WORDS), (k,), generator=gen)))
    return out


def images(gen: torch.Generator, n: int, h: int = 36, w: int = 40) -> torch.Tensor:
    """uint8 images (what a CLIPImageProcessor rescaling by 1/255 takes)."""
    return torch.randint(0, 256, (n, 3, h, w), generator=gen).to(torch.uint8)


def _score_batches(kind):
    def make(seed):
        g = torch.Generator().manual_seed(seed)
        out = []
        for n in (2, 0, 3, 1):
            src = images(g, n) if kind != "text-text" else captions(g, n)
            tgt = images(g, n) if kind == "image-image" else captions(g, n)
            out.append((src, tgt))
        return out
    return make


def _iqa_batches(seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(n, 3, 36, 40, generator=g),) for n in (2, 0, 3, 1)]


def _lve_batches(seed, frames=(7, 0, 12, 1, 20), vertices=30):
    g = torch.Generator().manual_seed(seed)
    out = []
    for t in frames:
        out.append((torch.randn(t, vertices, 3, generator=g, dtype=torch.float64),
                    torch.randn(t, vertices, 3, generator=g, dtype=torch.float64)))
    return out


def lve_reference(pred, gt, mouth=(0, 3, 4, 17, 29)):
    """The published formula by hand: per frame the largest squared distance over the mouth, then the mean."""
    n = min(pred.shape[0], gt.shape[0])
    worst = [max(float(((pred[t, v] - gt[t, v]) ** 2).sum()) for v in mouth) for t in range(n)]
    return torch.tensor(sum(worst) / len(worst), dtype=torch.float64)


def _sorted(v):
    """Per-image values in a canonical order (re-batching may reorder the images)."""
    if isinstance(v, dict):
        return {k: torch.sort(x.reshape(-1)).values for k, x in v.items()}
    return torch.sort(v.reshape(-1)).values


MOUTH = [0, 3, 4, 17, 29]
CASES = [
    Case("lip_vertex_error", fmm.lip_vertex_error, {"mouth_map": MOUTH}, _lve_batches, reference=lve_reference),
    Case("lip_vertex_error-repeated-index-float32", fmm.lip_vertex_error, {"mouth_map": [5, 5, 1]},
         lambda s: [(p.float(), t.float()) for p, t in _lve_batches(s)],
         reference=lambda p, t: lve_reference(p.double(), t.double(), (5, 5, 1)),
         check={"reference_rtol": 1e-5}),
]

_NET = shared_clip()
if _NET is not None:
    CASES += [
        Case("clip_score-image-text", fmm.clip_score, {"model": _NET[0], "processor": _NET[1]},
             _score_batches("image-text")),
        Case("clip_score-image-image-pair", fmm.clip_score, {"model": _NET[0], "processor": _NET[1], "clamp": "pair"},
             _score_batches("image-image")),
        Case("clip_score-text-text", fmm.clip_score, {"model": _NET[0], "processor": _NET[1]},
             _score_batches("text-text")),
        Case("clip_iqa-quality", fmm.clip_image_quality_assessment, {"model": _NET[0], "processor": _NET[2]},
             _iqa_batches, check={"canonical": _sorted}),
        Case("clip_iqa-prompts-rescaling-processor", fmm.clip_image_quality_assessment,
             {"model": _NET[0], "processor": _NET[1], "data_range": 255.0,
              "prompts": ("quality", ("Sharp red photo.", "Blurry dull photo."), "brightness")},
             lambda s: [(x * 255,) for x, in _iqa_batches(s)], check={"canonical": _sorted}),
    ]
