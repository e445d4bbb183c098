"""Comparing two systems (issue 32): paired bootstrap with 1000 replicates, DeLong's test.

* NDCG@10 over 1e6 rows in queries of 20 (1e4 with --quick): `paired_bootstrap(retrieval_normalized_dcg)`
  (whole queries resampled; per-query values weighted per replicate) against NumPy (per-query NDCG by two
  lexsorts, Poisson weights per query);

* corpus BLEU over 10k sentences (500 with --quick): `paired_bootstrap(sacre_bleu_score())` against
  sacrebleu's ``PairedTest(test_type="bs")`` on the same corpus; both give the same delta (the p-values
  differ only by Monte-Carlo error, not compared);
* multiclass accuracy over 1e6 rows (1e4 with --quick), 10 classes: against a NumPy paired bootstrap
  that resamples per-row hits with ``bincount`` counts (the fastest plain-NumPy form: no gather of rows);
* DeLong's test over 1e6 scores (1e4 with --quick): `delong_test` (one-shot: check, update, finalize)
  against the NumPy fast DeLong of Sun & Xu (2014) (midranks by ``scipy.stats.rankdata``); the
  ``sort_s`` column is one ``torch.sort`` of one system's scores (``np_sort_s`` numpy's sort), the floor
  the fast form is measured against (``per_sort``: our time over ``sort_s``), timed apart from ours.
"""
from __future__ import annotations

import time

import numpy as np
import torch

import fmetrics
from benchmarks.registry import Measured, on_device, register
from benchmarks.text import corpus

REPLICATES = 1000


def _sentences(quick: bool) -> int:
    return 500 if quick else 10_000


def _rows(quick: bool) -> int:
    return 10_000 if quick else 1_000_000


def _bleu_corpus(quick: bool):
    hyps, targets = corpus(_sentences(quick), seed=3, refs=2)  # system B: a second edit of the reference
    return hyps, [t[1] for t in targets], [[t[0]] for t in targets]


@register("comparing/paired_bootstrap_bleu", domain="comparing", samples=_sentences, peers=("sacrebleu",),
          tolerance=1e-9)
def paired_bootstrap_bleu(quick: bool, device="cpu"):
    """paired_bootstrap(sacre_bleu_score(), 1000 replicates) vs sacrebleu paired_bs, same corpus: delta"""
    hyp_a, hyp_b, refs = _bleu_corpus(quick)
    m = fmetrics.wrappers.paired_bootstrap(fmetrics.sacre_bleu_score(), num_samples=REPLICATES)

    def ours():
        s = m.init()
        for lo in range(0, len(refs), 1000):
            s = m.update(s, hyp_a[lo:lo + 1000], hyp_b[lo:lo + 1000], refs[lo:lo + 1000])
        out = m.finalize(s)
        return Measured({"delta": out["delta"]}, extra={"p_value": float(out["p_value"])})

    runs = {"fmetrics": ours}
    try:
        from sacrebleu.metrics import BLEU
        from sacrebleu.significance import PairedTest

        def sacre():
            test = PairedTest([("A", hyp_a), ("B", hyp_b)], {"BLEU": BLEU()}, [[r[0] for r in refs]],
                              test_type="bs", n_samples=REPLICATES)
            a, b = test()[1]["BLEU"]
            return Measured({"delta": torch.tensor((b.score - a.score) / 100, dtype=torch.float64)},
                            extra={"p_value": b.p_value})

        runs["sacrebleu"] = sacre
    except ImportError:
        pass
    return runs


def _classes(quick: bool):
    g = torch.Generator().manual_seed(0)
    n, c = _rows(quick), 10
    target = torch.randint(0, c, (n,), generator=g)
    hot = torch.nn.functional.one_hot(target, c)
    a = (torch.randn(n, c, generator=g) + 1.5 * hot).softmax(-1)
    b = (torch.randn(n, c, generator=g) + 1.6 * hot).softmax(-1)
    return a, b, target


@register("comparing/paired_bootstrap_multiclass_accuracy", domain="comparing", samples=_rows, peers=("numpy",),
          tolerance=1e-9)
def paired_bootstrap_multiclass_accuracy(quick: bool, device="cpu"):
    """paired_bootstrap(multiclass_accuracy(10, micro), 1000 replicates) vs a NumPy paired bootstrap: a, b, delta"""
    a, b, target = on_device(_classes(quick), device)
    m = fmetrics.wrappers.paired_bootstrap(fmetrics.multiclass_accuracy(num_classes=10, average="micro"),
                                           num_samples=REPLICATES)

    def ours():
        s = m.init(None if a.device.type == "cpu" else a.device)
        for lo in range(0, a.shape[0], 65536):
            s = m.update(s, a[lo:lo + 65536], b[lo:lo + 65536], target[lo:lo + 65536])
        out = m.finalize(s)
        return {k: out[k] for k in ("a", "b", "delta")}

    def numpy():
        t = target.cpu().numpy()
        hit_a, hit_b = a.cpu().numpy().argmax(1) == t, b.cpu().numpy().argmax(1) == t
        rng, n = np.random.default_rng(0), t.shape[0]
        deltas = []
        for _ in range(REPLICATES):
            w = np.bincount(rng.integers(0, n, n), minlength=n)
            deltas.append((w @ hit_b - w @ hit_a) / n)
        np.quantile(deltas, [0.025, 0.975])
        va, vb = hit_a.mean(), hit_b.mean()
        return {"a": torch.tensor(va), "b": torch.tensor(vb), "delta": torch.tensor(vb - va)}

    return {"fmetrics": ours, "numpy": numpy}


def _scores(quick: bool):
    g = torch.Generator().manual_seed(1)
    n = _rows(quick)
    t = torch.randint(0, 2, (n,), generator=g)
    a = torch.randn(n, generator=g) + t
    return a, 0.7 * a + torch.randn(n, generator=g) + 0.8 * t, t


def _numpy_fast_delong(a, b, t):
    """Sun & Xu (2014) with midranks from ``scipy.stats.rankdata`` (the common NumPy implementation)."""
    from scipy.stats import rankdata

    pos, neg = t == 1, t == 0
    m, n = int(pos.sum()), int(neg.sum())
    v10, v01, aucs = [], [], []
    for s in (a, b):
        tz, tx, ty = rankdata(s), rankdata(s[pos]), rankdata(s[neg])
        aucs.append(tz[pos].sum() / m / n - (m + 1.0) / 2.0 / n)
        v10.append((tz[pos] - tx) / n)
        v01.append(1.0 - (tz[neg] - ty) / m)
    cov = np.cov(np.array(v10)) / m + np.cov(np.array(v01)) / n
    z = (aucs[1] - aucs[0]) / np.sqrt(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])
    return {"auroc_a": aucs[0], "auroc_b": aucs[1], "z": z}


@register("comparing/delong_test", domain="comparing", samples=_rows, peers=("numpy",), tolerance=1e-9)
def delong_test(quick: bool, device="cpu"):
    """delong_test over 1e6 scores vs NumPy fast DeLong (Sun & Xu); sort_s / np_sort_s: one torch.sort /
    numpy sort of one system's scores (the floor: the test sorts each of its 2 systems once)"""
    a, b, t = _scores(quick)
    m = fmetrics.delong_test()

    def ours():
        start = time.perf_counter()
        torch.sort(a)
        sort_s = time.perf_counter() - start
        host = a.numpy()
        start = time.perf_counter()
        np.sort(host)
        np_sort_s = time.perf_counter() - start
        start = time.perf_counter()
        out = m(a, b, t)
        seconds = time.perf_counter() - start
        return Measured({k: out[k] for k in ("auroc_a", "auroc_b", "z")}, seconds=seconds,
                        extra={"sort_s": round(sort_s, 4), "np_sort_s": round(np_sort_s, 4),
                               "per_sort": round(seconds / sort_s, 2)})

    def numpy():
        out = _numpy_fast_delong(a.double().numpy(), b.double().numpy(), t.numpy())
        return {k: torch.tensor(v, dtype=torch.float64) for k, v in out.items()}

    return {"fmetrics": ours, "numpy": numpy}


def _ranking(quick: bool):
    """1e6 rows (1e4 with --quick) in queries of 20 documents, graded relevance 0-3; B ranks a bit better."""
    g = torch.Generator().manual_seed(2)
    n = _rows(quick)
    idx = torch.arange(n) // 20
    t = torch.randint(0, 4, (n,), generator=g)
    a = torch.rand(n, generator=g) + 0.10 * t
    return a, torch.rand(n, generator=g) + 0.12 * t, t, idx


def _numpy_ndcg_per_query(p, t, idx, k):
    """Per-query NDCG@k (linear gains, as sklearn's ndcg_score) by two lexsorts."""
    order = np.lexsort((-p, idx))
    ideal = np.lexsort((-t, idx))
    starts = np.r_[0, np.flatnonzero(np.diff(idx[order])) + 1]
    rank = np.arange(len(p)) - np.repeat(starts, np.diff(np.r_[starts, len(p)]))
    disc = np.where(rank < k, 1.0 / np.log2(rank + 2.0), 0.0)
    q = idx[order][starts]
    dcg = np.bincount(np.searchsorted(q, idx[order]), weights=t[order] * disc)
    idcg = np.bincount(np.searchsorted(q, idx[ideal]), weights=t[ideal] * disc)
    return np.where(idcg > 0, dcg / np.where(idcg > 0, idcg, 1), 0.0)


@register("comparing/paired_bootstrap_ndcg", domain="comparing", samples=_rows, peers=("numpy",), tolerance=1e-9)
def paired_bootstrap_ndcg(quick: bool, device="cpu"):
    """paired_bootstrap(retrieval_normalized_dcg(top_k=10), 1000 replicates, whole queries) vs NumPy: a, b, delta"""
    a, b, t, idx = on_device(_ranking(quick), device)
    m = fmetrics.wrappers.paired_bootstrap(fmetrics.retrieval_normalized_dcg(top_k=10), num_samples=REPLICATES)

    def ours():
        s = m.init(None if a.device.type == "cpu" else a.device)
        for lo in range(0, a.shape[0], 100_000):
            s = m.update(s, a[lo:lo + 100_000], b[lo:lo + 100_000], t[lo:lo + 100_000], idx[lo:lo + 100_000])
        out = m.finalize(s)
        return {k: out[k] for k in ("a", "b", "delta")}

    def numpy():
        pa, pb, tn, qn = (x.cpu().numpy() for x in (a, b, t, idx))
        va, vb = (_numpy_ndcg_per_query(x.astype(np.float64), tn.astype(np.float64), qn, 10) for x in (pa, pb))
        rng = np.random.default_rng(0)
        w = rng.poisson(1.0, (REPLICATES, va.shape[0])).astype(np.float64)
        deltas = (w @ vb - w @ va) / w.sum(1)
        np.quantile(deltas, [0.025, 0.975])
        a_, b_ = va.mean(), vb.mean()
        return {"a": torch.tensor(a_), "b": torch.tensor(b_), "delta": torch.tensor(b_ - a_)}

    return {"fmetrics": ours, "numpy": numpy}
