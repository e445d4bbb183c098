"""Comparing two systems (issue 32): paired bootstrap with 1000 replicates, DeLong's test.

* NDCG@10 over 1e6 rows in queries of 20 (1e4 with --quick): `paired_bootstrap(retrieval_normalized_dcg)`
  (whole queries resampled; per-query values weighted per replicate) against NumPy (per-query NDCG by two
  lexsorts, Poisson weights per query);

* corpus BLEU over 10k sentences (500 with --quick): `paired_bootstrap(sacre_bleu_score())` against
  sacrebleu's ``PairedTest(test_type="bs")`` on the same corpus; both give the same delta (the p-values
  differ only by Monte-Carlo error, not compared). Both timed calls start from the raw strings: each builds
  its metric, tokenizes (13a) and extracts both systems' sentence statistics, then resamples; neither reuses a
  tokenization of an earlier call (sacrebleu's tokenizer cache is per tokenizer object, and fmetrics' batch
  13a keeps none);
* multiclass accuracy over 1e6 rows (1e4 with --quick), 10 classes, sample ids: against NumPy paired
  bootstraps of per-row hits -- ``bincount`` counts of ``rng.integers`` draws (the fastest plain-NumPy
  form; other draws, so only a, b, delta compare) and (``..._same_draws``) fmetrics' hashed Poisson
  weights computed again in NumPy (64 replicates per block), whose interval and p-value must equal ours;
* DeLong's test over 1e6 scores (1e4 with --quick): `delong_test` (one-shot: check, update, finalize)
  against the NumPy fast DeLong of Sun & Xu (2014) (midranks by ``scipy.stats.rankdata``); the
  ``sort_s`` column is one ``torch.sort`` of one system's scores (``np_sort_s`` numpy's sort), the floor
  the fast form is measured against (``per_sort``: our time over ``sort_s``), timed apart from ours.
"""
from __future__ import annotations

import math
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

    def ours():
        m = fmetrics.wrappers.paired_bootstrap(fmetrics.sacre_bleu_score(), num_samples=REPLICATES)
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


_G = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on uint64 (wrapping), as `fmetrics.wrappers._draws.mix`."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _poisson_table() -> np.ndarray:
    """Poisson(1) count of each 16-bit draw ``u``: ``#{k : u >= ceil(2^16 P(X <= k))}`` (at most 7)."""
    cdf = np.cumsum([math.exp(-1.0) / math.factorial(k) for k in range(20)]) * 2**16
    return np.searchsorted(np.ceil(cdf[cdf < 2**16 - 1]), np.arange(2**16), side="right").astype(np.uint8)


_POISSON_TABLE = _poisson_table()


def _numpy_paired_same_draws(hit_a: np.ndarray, hit_b: np.ndarray, ids: np.ndarray, seed: int, num: int):
    """The paired bootstrap of accuracy in NumPy with fmetrics' replicate weights (sample ids keyed; hash of
    (id, group of 4 replicates) split in four 16-bit Poisson draws), 64 replicates per block; then the same
    percentile interval and crossing p-value."""
    table = _POISSON_TABLE
    with np.errstate(over="ignore"):
        keys = _mix(ids.astype(np.uint64) + _mix(np.uint64(seed)))
    cols = np.stack([hit_b.astype(np.float32) - hit_a, np.ones(len(ids), np.float32)])  # (2, N)
    deltas = []
    for first in range(0, num, 64):
        groups = np.arange(first // 4, -(-min(first + 64, num) // 4), dtype=np.uint64)
        h = _mix(keys[:, None] ^ _mix((groups + np.uint64(1)) * _G))  # (N, groups)
        w = table[h.view(np.uint16)][:, :min(64, num - first)].astype(np.float32)  # replicate 4g + j: half j
        diff, total = np.einsum("sn,nr->sr", cols, w)  # exact: integer sums below 2^24; no BLAS threads
        deltas.append(diff.astype(np.float64) / total)
    d = np.concatenate(deltas)
    tie = 0.5 * np.sum(d == 0)
    p = min(1.0, (2 * min(np.sum(d < 0) + tie, np.sum(d > 0) + tie) + 1) / (num + 1))
    low, high = np.quantile(d, [0.025, 0.975])
    return low, high, p


def _accuracy_workload(quick: bool, device, keys):
    """``(data, ours, hits)``: paired_bootstrap(multiclass_accuracy(10, micro), 1000 replicates, sample ids)."""
    a, b, target = on_device(_classes(quick), device)
    ids = torch.arange(a.shape[0], device=a.device)
    m = fmetrics.wrappers.paired_bootstrap(fmetrics.multiclass_accuracy(num_classes=10, average="micro"),
                                           num_samples=REPLICATES, sample_ids=True)

    def ours():
        s = m.init(None if a.device.type == "cpu" else a.device)
        for lo in range(0, a.shape[0], 65536):
            s = m.update(s, ids[lo:lo + 65536], a[lo:lo + 65536], b[lo:lo + 65536], target[lo:lo + 65536])
        out = m.finalize(s)
        return {k: out[k] for k in keys}

    def hits():
        t = target.cpu().numpy()
        return a.cpu().numpy().argmax(1) == t, b.cpu().numpy().argmax(1) == t, ids.cpu().numpy()

    return ours, hits


@register("comparing/paired_bootstrap_multiclass_accuracy", domain="comparing", samples=_rows, peers=("numpy",),
          tolerance=1e-9)
def paired_bootstrap_multiclass_accuracy(quick: bool, device="cpu"):
    """paired_bootstrap(multiclass_accuracy(10, micro), 1000 replicates) vs a NumPy paired bootstrap of per-row
    hits by bincount resampling (other draws: a, b, delta compared)"""
    ours, hits = _accuracy_workload(quick, device, ("a", "b", "delta"))

    def numpy():
        hit_a, hit_b, _ = hits()
        rng, n = np.random.default_rng(0), hit_a.shape[0]
        deltas = []
        for _ in range(REPLICATES):
            w = np.bincount(rng.integers(0, n, n), minlength=n)
            deltas.append((w @ hit_b - w @ hit_a) / n)
        np.quantile(deltas, [0.025, 0.975])
        va, vb = hit_a.mean(), hit_b.mean()
        return {"a": torch.tensor(va), "b": torch.tensor(vb), "delta": torch.tensor(vb - va)}

    return {"fmetrics": ours, "numpy": numpy}


@register("comparing/paired_bootstrap_multiclass_accuracy_same_draws", domain="comparing", samples=_rows,
          peers=("numpy",), tolerance=1e-9)
def paired_bootstrap_multiclass_accuracy_same_draws(quick: bool, device="cpu"):
    """paired_bootstrap(multiclass_accuracy(10, micro), 1000 replicates) vs NumPy with the same replicate weights:
    a, b, delta, ci_low, ci_high, p_value"""
    keys = ("a", "b", "delta", "ci_low", "ci_high", "p_value")
    ours, hits = _accuracy_workload(quick, device, keys)

    def numpy():
        hit_a, hit_b, ids = hits()
        low, high, p = _numpy_paired_same_draws(hit_a, hit_b, ids, 0, REPLICATES)
        va, vb = hit_a.mean(), hit_b.mean()
        return {k: torch.tensor(v, dtype=torch.float64) for k, v in zip(keys, (va, vb, vb - va, low, high, p))}

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
    numpy sort of one system's scores (the floor: the test sorts each of its 2 systems once); per_sort: a warm
    delong_test over sort_s, each the best of 3 (the harness keeps the extras of the first call, a cold one)"""
    a, b, t = _scores(quick)
    m = fmetrics.delong_test()

    def best(fn):
        times = []
        for _ in range(3):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return min(times)

    def ours():
        start = time.perf_counter()
        out = m(a, b, t)
        seconds = time.perf_counter() - start
        if not ours.extra:  # once, after that cold call
            sort_s, warm_s = best(lambda: torch.sort(a)), best(lambda: m(a, b, t))
            ours.extra = {"sort_s": round(sort_s, 4), "np_sort_s": round(best(lambda: np.sort(a.numpy())), 4),
                          "per_sort": round(warm_s / sort_s, 2)}
        return Measured({k: out[k] for k in ("auroc_a", "auroc_b", "z")}, seconds=seconds, extra=ours.extra)

    ours.extra = {}

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
