"""Hot paths of the counting classification metrics: one update, fmetrics vs torchmetrics.

``pytest benchmarks/test_classification_counts_bench.py --benchmark-only``
"""
import pytest
import torch

import fmetrics
from benchmarks._checks import DEFAULT, ROUNDS, assert_agrees, fresh, updated, workload_tolerance

tmc = pytest.importorskip("torchmetrics.classification")

C, N = 100, 4096

CASES = [
    # id, fmetrics metric, torchmetrics metric, inputs
    ("multiclass-accuracy-logits", lambda: fmetrics.multiclass_accuracy(num_classes=C),
     lambda: tmc.MulticlassAccuracy(num_classes=C), lambda g: (torch.randn(N, C, generator=g),
                                                               torch.randint(0, C, (N,), generator=g))),
    ("multiclass-f1-top5", lambda: fmetrics.multiclass_f1_score(num_classes=C, top_k=5),
     lambda: tmc.MulticlassF1Score(num_classes=C, top_k=5), lambda g: (torch.randn(N, C, generator=g),
                                                                       torch.randint(0, C, (N,), generator=g))),
    ("multiclass-confmat-labels", lambda: fmetrics.multiclass_confusion_matrix(num_classes=C),
     lambda: tmc.MulticlassConfusionMatrix(num_classes=C),
     lambda g: (torch.randint(0, C, (10**6,), generator=g), torch.randint(0, C, (10**6,), generator=g))),
    ("binary-f1-logits", lambda: fmetrics.binary_f1_score(), lambda: tmc.BinaryF1Score(),
     lambda g: (torch.randn(10**6, generator=g), torch.randint(0, 2, (10**6,), generator=g))),
    ("multilabel-f1-probs", lambda: fmetrics.multilabel_f1_score(num_labels=20), lambda: tmc.MultilabelF1Score(num_labels=20),
     lambda g: (torch.rand(N, 20, generator=g), torch.randint(0, 2, (N, 20), generator=g))),
]
params = pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
WORKLOADS = {"multiclass-accuracy-logits": "classification/multiclass_accuracy",
             "multiclass-confmat-labels": "classification/multiclass_confusion_matrix"}  # the cases the harness runs


@params
@pytest.mark.parametrize("library", ["fmetrics", "torchmetrics"])
def test_update(benchmark, case, library):
    name, make_fm, make_tm, data = case
    benchmark.group = f"classification-{name}-update"
    inputs = data(torch.Generator().manual_seed(0))
    tolerance = workload_tolerance(WORKLOADS[name]) if name in WORKLOADS else DEFAULT
    if library == "fmetrics":
        m = make_fm()
        state = benchmark(m.update, m.init(), *inputs)
        assert_agrees(m.finalize(state), make_tm()(*inputs), tolerance)
    else:
        metric = benchmark.pedantic(updated, setup=fresh(make_tm, *inputs), rounds=ROUNDS, iterations=1)
        assert_agrees(metric.compute(), make_fm()(*inputs), tolerance)
