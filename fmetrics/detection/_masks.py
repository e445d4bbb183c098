"""Mask areas and mask IoU of `mean_average_precision` on masks read eight pixels per int64 word.

A bool mask's bytes are 0 or 1, so eight pixels viewed as one int64 word hold their count as a sum of
bytes, and up to 127 words add as plain integers without a carry between bytes (`pixel_counts`). The
area of a mask is that count over its words; the intersection of a detection with a ground truth is the
count of ``words_d & words_g``, computed only for the (detection, ground truth) pairs the matching asks for.
Masks are rows of ``ceil(max(H * W) / 8)`` words, zero-padded (one view, no copy, when every image has
the same size and ``H * W`` is a multiple of 8). Counts are exact integers.
"""
from __future__ import annotations

import itertools

import torch

#: pairs x words gathered at once by `pair_iou` (bounds its temporary memory to ~ 64 MiB per operand)
_CHUNK = 2 ** 23


def pixel_counts(words: torch.Tensor) -> torch.Tensor:
    """Number of set bytes of each row of int64 ``words`` whose bytes are 0 or 1, as int64 ``[n]``.

    Blocks of 127 words are summed as plain integers (each byte lane then holds at most 127: no carry, no
    overflow), and each block sum's eight lanes are folded into one count (16-, then 32-bit lanes).

    Example::

        >>> pixel_counts(torch.tensor([[0x0101000100000001, 1], [0, 0]]))
        tensor([5, 0])
    """
    n, width = words.shape
    k = width // 127
    blocks = [words[:, : k * 127].reshape(n, k, 127).sum(2)] if k else []
    if width % 127 or not k:
        blocks.append(words[:, k * 127:].sum(1, keepdim=True))
    s = torch.cat(blocks, 1)
    s = (s & 0x00FF00FF00FF00FF) + ((s >> 8) & 0x00FF00FF00FF00FF)
    s = (s & 0x0000FFFF0000FFFF) + ((s >> 16) & 0x0000FFFF0000FFFF)
    return ((s & 0xFFFFFFFF) + (s >> 32)).sum(1)


def mask_words(flat: torch.Tensor, counts: torch.Tensor, hw: torch.Tensor):
    """``(words [n, W] int64, area [n] float64)`` of the ``counts[i]`` masks of ``hw[i]`` pixels per image,
    flattened in ``flat`` (bool)."""
    sizes = (hw[:, 0] * hw[:, 1]).tolist()
    n = int(counts.sum())
    width = -(-max(sizes, default=0) // 8)
    if n == 0:
        return torch.zeros((0, width), dtype=torch.int64, device=flat.device), torch.zeros(
            0, dtype=torch.float64, device=flat.device)
    if len(set(sizes)) == 1 and sizes[0] % 8 == 0 and flat.is_contiguous() and flat.storage_offset() % 8 == 0:
        words = flat.view(torch.uint8).view(torch.int64).view(n, width)
    else:
        rows = torch.zeros((n, width * 8), dtype=torch.bool, device=flat.device)
        row = pos = 0
        for size, run in itertools.groupby(zip(sizes, counts.tolist()), key=lambda sc: sc[0]):
            k = sum(c for _, c in run)
            rows[row: row + k, :size] = flat[pos: pos + k * size].view(k, size)
            row, pos = row + k, pos + k * size
        words = rows.view(torch.uint8).view(torch.int64)
    return words, pixel_counts(words).to(torch.float64)


def pair_iou(det_words, gt_words, det_area, gt_area):
    """pycocotools' mask IoU as a `_coco.Dataset.pair_iou`: ``|d & g| / |d | g|`` (crowd: ``/ |d|``), 0 when
    the masks do not meet."""
    width = max(det_words.shape[1], 1)

    def iou(di, gi, crowd):
        step = max(_CHUNK // width, 1)
        parts = [pixel_counts(det_words.index_select(0, d).bitwise_and_(gt_words.index_select(0, g)))
                 for d, g in zip(di.split(step), gi.split(step))]
        inter = (torch.cat(parts) if parts else di.new_zeros(0)).to(torch.float64)
        da, ga = det_area[di], gt_area[gi]
        union = torch.where(crowd, da, da + ga - inter)
        return torch.where(inter > 0, inter / union, torch.zeros((), dtype=torch.float64, device=di.device))

    return iou
