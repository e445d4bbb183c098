"""examples/custom_loop.py: the named-input validation report equals scikit-learn on the same outputs."""
import importlib.util
import pathlib

import numpy as np
import torch
from sklearn.metrics import f1_score, roc_auc_score

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "custom_loop.py"


def test_custom_loop_report_matches_sklearn():
    spec = importlib.util.spec_from_file_location("custom_loop_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    report, model = module.main(epochs=1)
    x_val, y_val = module.make_data(seed=1)
    with torch.no_grad():
        logits = model(x_val)
        loss = torch.nn.functional.cross_entropy(logits, y_val, reduction="none")
    y = y_val.numpy()
    probs = torch.softmax(logits.double(), -1).numpy()
    np.testing.assert_allclose(float(report["val/loss"]), loss.double().mean().item(), rtol=1e-6)
    np.testing.assert_allclose(float(report["val/acc"]), _macro_recall(y, probs.argmax(-1)), rtol=1e-9)
    np.testing.assert_allclose(float(report["val/f1"]), f1_score(y, probs.argmax(-1), average="macro"), rtol=1e-9)
    np.testing.assert_allclose(float(report["val/auroc"]), roc_auc_score(y, probs, multi_class="ovr"), rtol=1e-6)
    assert set(report) == {"train/loss", "val/loss", "val/acc", "val/f1", "val/auroc"}


def _macro_recall(y, pred):
    """multiclass_accuracy's default average is macro: the mean over classes of per-class recall."""
    return float(np.mean([np.mean(pred[y == c] == c) for c in np.unique(y)]))
