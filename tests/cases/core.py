"""Law-suite cases for the core compositions: `fmetrics.collection` and named-input routing (`from_output`).

Oracles are scikit-learn, numpy and torchmetrics (retrieval), computed member
by member on the joined inputs, so a collection that mixes up its shared
states, its routing or its key names differs from them.
"""
import numpy as np
import torch
import torchmetrics.retrieval as tmr
from sklearn import metrics as skm

import fmetrics as fm
from fmetrics.metric import from_output
from tests.cases import Case
from tests.cases.retrieval import make_run, tm_reference

SIZES = (9, 1, 14, 0, 6)
C = 4


def _gen(seed):
    return torch.Generator().manual_seed(3000 + seed)


def _np(x):
    return x.double().numpy()


def _classes(seed):
    """``(probabilities (n, C), labels)``: informative scores, so every class is sometimes right."""
    g, out = _gen(seed), []
    for n in SIZES:
        t = torch.randint(0, C, (n,), generator=g)
        logits = torch.randn(n, C, generator=g) + 1.2 * torch.nn.functional.one_hot(t, C)
        out.append((logits.softmax(-1), t))
    return out


def _values(seed):
    g = _gen(seed)
    return [(torch.randn(n, generator=g) * 2 + 1,) for n in SIZES]


def _binary(seed):
    g, out = _gen(seed), []
    for n in SIZES:
        t = torch.randint(0, 2, (n,), generator=g)
        out.append((torch.sigmoid(torch.randn(n, generator=g) + t), t))
    return out


def _outputs(seed):
    """One dict of model outputs per step: a loss, class scores and labels, retrieval scores/relevance/query."""
    g = _gen(seed)
    scores, rel, query = make_run(seed, n_queries=12, ties=False)
    n, out, lo = scores.shape[0], [], 0
    t = torch.randint(0, C, (n,), generator=g)
    logits = torch.randn(n, C, generator=g) + 1.2 * torch.nn.functional.one_hot(t, C)
    loss = torch.rand(n, generator=g) * 3
    cuts = [0, *sorted(torch.randint(0, n + 1, (3,), generator=g).tolist()), n]
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        out.append(({"loss": loss[lo:hi], "logits": logits[lo:hi], "labels": t[lo:hi],
                     "scores": scores[lo:hi], "rel": rel[lo:hi], "query": query[lo:hi]},))
    return out


def _macro(fn):
    return lambda p, t: fn(t.numpy(), p.argmax(-1).numpy(), average="macro", labels=range(C), zero_division=0)


def _ref_stat_scores(p, t):
    """Four members over one stat-scores state (one shared state in the collection)."""
    return {"acc": _macro(skm.recall_score)(p, t),  # macro accuracy: the mean of the per-class recalls
            "prec": _macro(skm.precision_score)(p, t), "rec": _macro(skm.recall_score)(p, t),
            "f1": _macro(skm.f1_score)(p, t)}


def _ref_mixed(x):
    x = _np(x)
    return {"val/mean_x": x.mean(), "val/max_x": x.max(), "val/min_x": x.min(), "val/sum_x": x.sum()}


def _ref_curves(p, t):
    """AUROC and AP over one sorted state (the shared step runs once) beside a moments state."""
    p, t = _np(p), t.numpy()
    return {"auroc": skm.roc_auc_score(t, p), "ap": skm.average_precision_score(t, p),
            "mse": np.mean((p - t) ** 2)}


_NDCG = tm_reference(tmr.RetrievalNormalizedDCG, perturb=False)


def _ref_routed(out):
    pred = out["logits"].argmax(-1).numpy()
    return {"loss": _np(out["loss"]).mean(),
            "acc": skm.recall_score(out["labels"].numpy(), pred, average="macro", labels=range(C), zero_division=0),
            "ndcg": _NDCG(out["scores"], out["rel"], out["query"])}


def _routed():
    return {"loss": fm.mean().from_output("loss"),
            "acc": fm.multiclass_accuracy(num_classes=C).from_output("logits", "labels"),
            "ndcg": fm.retrieval_normalized_dcg().from_output(preds="scores", target="rel", indexes="query")}


CASES = [
    Case("collection-shared-stat-scores", fm.collection,
         {"metrics": {"acc": fm.multiclass_accuracy(num_classes=C), "prec": fm.multiclass_precision(num_classes=C),
                      "rec": fm.multiclass_recall(num_classes=C), "f1": fm.multiclass_f1_score(num_classes=C)}},
         _classes, reference=_ref_stat_scores, check={"rtol": 1e-6}),
    Case("collection-prefix-postfix", fm.collection,
         {"metrics": {"mean": fm.mean(), "max": fm.max(), "min": fm.min(), "sum": fm.sum()},
          "prefix": "val/", "postfix": "_x"}, _values, reference=_ref_mixed),
    Case("collection-shared-curve", fm.collection,
         {"metrics": {"auroc": fm.binary_auroc(), "ap": fm.binary_average_precision(),
                      "mse": fm.mean_squared_error()}}, _binary, reference=_ref_curves),
    Case("collection-from-output", fm.collection, {"metrics": _routed()}, _outputs, reference=_ref_routed,
         check={"reference_rtol": 1e-5, "reference_atol": 1e-6}),
    Case("from_output-retrieval", from_output,
         {"metric": fm.retrieval_normalized_dcg(), "named": (("preds", "scores"), ("target", "rel"),
                                                             ("indexes", "query"))},
         _outputs, reference=lambda out: _NDCG(out["scores"], out["rel"], out["query"]),
         check={"reference_rtol": 1e-5, "reference_atol": 1e-6}),
]
