"""Stat-score metrics over one configuration share one state: a collection runs one update per batch."""
import torch

import fmetrics as fm
from tests._counting import counting


def batches(seed=0, n=4):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(17, 5, generator=g), torch.randint(0, 5, (17,), generator=g)) for _ in range(n)]


def run(metric, data):
    s = metric.init()
    for b in data:
        s = metric.update(s, *b)
    return metric.finalize(s)


def test_collection_of_five_runs_one_update_per_batch():
    members = {
        "acc": fm.multiclass_accuracy(num_classes=5, average="micro"),
        "precision": fm.multiclass_precision(num_classes=5),
        "recall": fm.multiclass_recall(num_classes=5, average="weighted"),
        "f1": fm.multiclass_f1_score(num_classes=5, average=None),
        "specificity": fm.multiclass_specificity(num_classes=5),
    }
    assert len({m.state_key for m in members.values()}) == 1
    wrapped, calls = counting(members)
    col = fm.collection(wrapped)
    data = batches()
    values = run(col, data)
    assert len(calls) == len(data), calls
    assert len(col.init()) == 1  # one state in the collection
    for name, m in members.items():
        torch.testing.assert_close(values[name], run(m, data))


def test_binary_family_and_confusion_matrix_share_the_stat_scores_state():
    members = {
        "acc": fm.binary_accuracy(threshold=0.3),
        "f1": fm.binary_f1_score(threshold=0.3),
        "jaccard": fm.binary_jaccard_index(threshold=0.3),
        "mcc": fm.binary_matthews_corrcoef(threshold=0.3),
        "kappa": fm.binary_cohen_kappa(threshold=0.3, weights="linear"),
        "confmat": fm.binary_confusion_matrix(threshold=0.3, normalize="true"),
        "npv": fm.binary_negative_predictive_value(threshold=0.3),
        "hamming": fm.binary_hamming_distance(threshold=0.3),
    }
    wrapped, calls = counting(members)
    g = torch.Generator().manual_seed(1)
    data = [(torch.rand(11, generator=g), torch.randint(0, 2, (11,), generator=g)) for _ in range(3)]
    values = run(fm.collection(wrapped), data)
    assert len(calls) == 3
    for name, m in members.items():
        torch.testing.assert_close(values[name], run(m, data))


def test_multiclass_confusion_matrix_family_shares_one_state():
    members = {
        "confmat": fm.multiclass_confusion_matrix(num_classes=5),
        "mcc": fm.multiclass_matthews_corrcoef(num_classes=5),
        "kappa": fm.multiclass_cohen_kappa(num_classes=5, weights="quadratic"),
    }
    wrapped, calls = counting(members)
    data = batches(2, n=3)
    values = run(fm.collection(wrapped), data)
    assert len(calls) == 3
    for name, m in members.items():
        torch.testing.assert_close(values[name], run(m, data))


def test_configurations_that_change_the_state_do_not_share():
    keys = {
        fm.binary_accuracy().state_key,
        fm.binary_accuracy(threshold=0.3).state_key,
        fm.binary_accuracy(ignore_index=-1).state_key,
        fm.binary_accuracy(multidim_average="samplewise").state_key,
        fm.multiclass_accuracy(num_classes=5).state_key,
        fm.multiclass_accuracy(num_classes=5, top_k=2).state_key,
        fm.multiclass_accuracy(num_classes=6).state_key,
        fm.multilabel_accuracy(num_labels=5).state_key,
        fm.multiclass_confusion_matrix(num_classes=5).state_key,
        fm.multiclass_exact_match(num_classes=5).state_key,
    }
    assert len(keys) == 10
    # average, zero_division and beta only change finalize
    assert fm.multiclass_precision(num_classes=5, average="micro", zero_division=1).state_key == \
        fm.multiclass_fbeta_score(beta=0.5, num_classes=5, average="none").state_key


def test_mixed_collection_groups_by_state():
    members = {
        "acc": fm.multiclass_accuracy(num_classes=5),
        "f1": fm.multiclass_f1_score(num_classes=5),
        "top2": fm.multiclass_accuracy(num_classes=5, top_k=2),
        "mcc": fm.multiclass_matthews_corrcoef(num_classes=5),
    }
    wrapped, calls = counting(members)
    run(fm.collection(wrapped), batches(3, n=2))
    assert sorted(calls) == sorted(["acc", "top2", "mcc"] * 2)
