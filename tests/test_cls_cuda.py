"""Classification on an accelerator: deferred value checks, no host sync in update, parity with CPU.

Skipped without CUDA. On CPU the eager checks raise at once (tests/test_cls_guards.py); on a GPU the
update must not sync, so bad values are counted into the state and reported by ``finalize``.
"""
from __future__ import annotations

import pytest
import torch

import fmetrics as fm

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

G = torch.Generator().manual_seed(0)
N, C = 300, 5
SCORES = torch.rand(N, C, generator=G).softmax(1)
LABELS = torch.randint(0, C, (N,), generator=G)
BIN = torch.rand(N, generator=G)
BIN_T = torch.randint(0, 2, (N,), generator=G)
ML = torch.rand(N, C, generator=G)
ML_T = torch.randint(0, 2, (N, C), generator=G)

CASES = [
    (fm.multiclass_accuracy(num_classes=C), SCORES, LABELS),
    (fm.multiclass_f1_score(num_classes=C, average="weighted", top_k=2), SCORES, LABELS),
    (fm.multiclass_confusion_matrix(num_classes=C), SCORES, LABELS),
    (fm.multiclass_exact_match(num_classes=C), LABELS[:, None].expand(N, 2), LABELS[:, None].expand(N, 2)),
    (fm.binary_accuracy(), BIN, BIN_T),
    (fm.binary_auroc(), BIN, BIN_T),
    (fm.binary_auroc(thresholds=50), BIN, BIN_T),
    (fm.multiclass_auroc(num_classes=C), SCORES, LABELS),
    (fm.multilabel_average_precision(num_labels=C), ML, ML_T),
    (fm.binary_calibration_error(), BIN, BIN_T),
    (fm.multiclass_hinge_loss(num_classes=C), SCORES, LABELS),
    (fm.multilabel_ranking_loss(num_labels=C), ML, ML_T),
]


@pytest.mark.parametrize("m,preds,target", CASES, ids=[repr(c[0]) for c in CASES])
def test_cuda_matches_cpu_without_a_host_sync_in_update(m, preds, target):
    want = m.finalize(m.update(m.update(m.init(), preds[:100], target[:100]), preds[100:], target[100:]))
    dev = torch.device("cuda")
    s = m.init(dev)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # any host sync in update raises
    try:
        s = m.update(s, preds[:100].to(dev), target[:100].to(dev))
        s = m.update(s, preds[100:].to(dev), target[100:].to(dev))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    got = m.finalize(s)
    for a, b in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
        assert a.device.type == "cuda"
        torch.testing.assert_close(a.cpu().double(), b.double(), rtol=1e-5, atol=1e-6)


def test_nan_rows_and_bad_labels_are_counted_on_cuda_and_reported_by_finalize():
    dev = torch.device("cuda")
    m = fm.multiclass_accuracy(num_classes=3, average="micro")
    preds = torch.tensor([[0.1, float("nan"), 0.2], [0.1, 0.2, 0.7], [0.5, 0.2, 0.3]], device=dev)
    s = m.update(m.init(dev), preds, torch.tensor([0, 2, 0], device=dev))  # no raise: deferred on a GPU
    s = m.update(s, torch.tensor([[0.1, 0.2, 0.7]], device=dev), torch.tensor([5], device=dev))
    with pytest.raises(ValueError, match="multiclass_accuracy: 2 input entries broke the rule"):
        m.finalize(s)
