"""Plots of metric values with `fmetrics.plot`, on synthetic scores (the README's picture).

    python examples/plot_curves.py [out.png]

A 3-class classifier's scores: the one-vs-rest ROC curves (AUC in the legend)
and the confusion matrix, side by side, written to docs/images/curves.png.
"""
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

import fmetrics as fm  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "docs" / "images" / "curves.png"


def main(out: Path = OUT) -> Path:
    g = torch.Generator().manual_seed(0)
    target = torch.randint(0, 3, (600,), generator=g)
    logits = torch.randn(600, 3, generator=g) + 1.5 * torch.nn.functional.one_hot(target, 3)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    roc = fm.multiclass_roc(num_classes=3)
    fm.plot(roc, roc(logits, target), ax=left)
    confusion = fm.multiclass_confusion_matrix(num_classes=3)
    fm.plot(confusion, confusion(logits, target), ax=right)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out


if __name__ == "__main__":
    print(main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT))
