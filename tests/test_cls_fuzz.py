"""Randomized configurations of the counting metrics against torchmetrics (seeded, 480 draws).

Each draw picks a metric, a task and its options (average, multidim_average, top_k, ignore_index,
threshold, zero_division, input form, extra dimensions), feeds the data in two batches and compares
with torchmetrics' functional metric on the whole data. Known, documented deviations are not drawn:
multilabel ``weighted`` + ``samplewise`` (a torchmetrics bug) and multilabel Jaccard with an
``ignore_index`` inside ``[0, num_labels)``.
"""
import random

import pytest
import torch
import torchmetrics.functional.classification as tmf

import fmetrics as fm

AVERAGED = ["accuracy", "precision", "recall", "f1_score", "fbeta_score", "specificity",
            "negative_predictive_value", "hamming_distance", "stat_scores"]
WITH_ZERO_DIVISION = {"precision", "recall", "f1_score", "fbeta_score", "negative_predictive_value"}
OTHER = ["jaccard_index", "exact_match", "confusion_matrix", "matthews_corrcoef", "cohen_kappa"]


def draw(rng: random.Random, g: torch.Generator):
    metric = rng.choice(AVERAGED + OTHER)
    tasks = {"exact_match": ["multiclass", "multilabel"], "cohen_kappa": ["binary", "multiclass"]}
    task = rng.choice(tasks.get(metric, ["binary", "multiclass", "multilabel"]))
    samplewise_ok = metric in AVERAGED + ["exact_match"]
    extra = rng.choice([(), (3,), (2, 2)])
    md = rng.choice(["global", "samplewise"]) if samplewise_ok and extra else "global"
    n, c = rng.randint(1, 40), rng.randint(2, 6)
    ignore = rng.choice([None, -1, 0, 255])
    kw = {}
    if metric in AVERAGED or metric == "exact_match":
        kw["multidim_average"] = md
    if metric in AVERAGED + ["jaccard_index"] and task != "binary":
        kw["average"] = rng.choice(["micro", "macro", "weighted", "none"])
        if task == "multilabel" and md == "samplewise" and kw["average"] == "weighted":
            kw["average"] = "macro"
    if metric in WITH_ZERO_DIVISION or metric == "jaccard_index":
        kw["zero_division"] = rng.choice([0, 1])
    if metric == "fbeta_score":
        kw["beta"] = rng.choice([0.5, 2.0])
    if metric == "confusion_matrix":
        kw["normalize"] = rng.choice([None, "true", "pred", "all"])
    if metric == "cohen_kappa":
        kw["weights"] = rng.choice([None, "linear", "quadratic"])
    if metric == "jaccard_index" and task == "multilabel" and ignore == 0:
        ignore = -1
    if task == "binary":
        shape = (n, *extra)
        t = torch.randint(0, 2, shape, generator=g)
        form = rng.choice(["probs", "logits", "labels"])
        p = {"probs": torch.rand(shape, generator=g), "logits": torch.randn(shape, generator=g) * 3,
             "labels": torch.randint(0, 2, shape, generator=g)}[form]
        kw["threshold"] = rng.choice([0.5, 0.3])
    elif task == "multiclass":
        kw["num_classes"] = c
        t = torch.randint(0, c, (n, *extra), generator=g)
        form = rng.choice(["logits", "labels"])
        p = torch.randn((n, c, *extra), generator=g) if form == "logits" else torch.randint(0, c, (n, *extra),
                                                                                             generator=g)
        if metric in AVERAGED and form == "logits" and metric != "stat_scores" or metric == "stat_scores" \
                and form == "logits":
            kw["top_k"] = rng.randint(1, c)
    else:
        kw["num_labels"] = c
        shape = (n, c, *extra)
        t = torch.randint(0, 2, shape, generator=g)
        p = torch.rand(shape, generator=g) if rng.random() < 0.5 else torch.randint(0, 2, shape, generator=g)
        kw["threshold"] = rng.choice([0.5, 0.7])
    if ignore is not None:
        t = torch.where(torch.rand(t.shape, generator=g) < 0.2, torch.full_like(t, ignore), t)
    kw["ignore_index"] = ignore
    return metric, task, kw, p, t


@pytest.mark.parametrize("seed", range(16))
def test_random_configurations_match_torchmetrics(seed):
    rng, g = random.Random(seed), torch.Generator().manual_seed(seed)
    for i in range(30):
        metric, task, kw, p, t = draw(rng, g)
        ours = getattr(fm, metric)(task=task, **kw)
        cut = rng.randint(0, p.shape[0])
        got = ours.finalize(ours.update(ours.update(ours.init(), p[:cut], t[:cut]), p[cut:], t[cut:]))
        want = getattr(tmf, metric)(p, t, task=task, **kw)
        got = torch.as_tensor(got)
        ignore = kw["ignore_index"]
        if ignore is not None and bool((t == ignore).all()) and kw.get("multidim_average", "global") == "global" \
                and not (metric == "exact_match" or metric == "stat_scores" and kw.get("average") != "weighted"
                         or metric == "confusion_matrix" and kw.get("normalize") is None):
            want = torch.full_like(want, float("nan"))  # no entry counted: the empty-input rule (torchmetrics: 0 / 1)
        if got.shape != want.shape and got.numel() == want.numel() == got.shape[0] == 1:
            want = want.reshape(got.shape)  # torchmetrics squeezes a samplewise result of one sample
        torch.testing.assert_close(got.double(), want.double(), rtol=2e-6, atol=2e-6,
                                   equal_nan=True, msg=lambda m: f"draw {i}: {metric} {task} {kw}: {m}")
