"""Law-suite cases for the wrappers (fmetrics.wrappers); oracles are numpy formulas on explicit resamples.

The bootstrap oracles draw the per-row counts from the documented seed
scheme written again in NumPy (tests/_draws_np.py; the library's
`fmetrics.wrappers._draws` is checked against it in
tests/test_wrappers_draws.py), materialize each resample with ``np.repeat``
and evaluate it with numpy: this checks the draws, the vmapped row weighting,
the stacked state and the summary against an independent computation.
"""
import warnings

import numpy as np
import torch
from scipy import stats
from sklearn import metrics as skm

import fmetrics as fm
from fmetrics import wrappers as W
from fmetrics.state import accum_dtype
from fmetrics.wrappers import _draws
from tests import _draws_np
from tests.cases import Case

SIZES = (9, 1, 14, 0, 6)


@fm.factory
def median():
    """A concatenating-state metric (median of all values), for the wrappers' cat path (a factory: it pickles)."""
    base = fm.cat(nan_strategy="disable")

    def finalize(s):
        x = base.finalize(s).reshape(-1).double()
        if not x.numel():  # the library's empty-input rule (docs/conventions.md)
            warnings.warn("median: no samples were seen (empty input); the value is undefined and set to NaN",
                          UserWarning, stacklevel=2)
            return torch.tensor(float("nan"), dtype=torch.float64)
        return torch.quantile(x, 0.5)

    return base.replace(finalize=finalize, name="median", state_key=("test-median",))


def _gen(seed):
    return torch.Generator().manual_seed(1000 + seed)


def _values(seed, sizes=SIZES, shape=()):
    g = _gen(seed)
    return [(torch.randn((n, *shape), generator=g) * 2 + 1,) for n in sizes]


def _with_ids(seed):
    g = _gen(seed)
    ids = torch.randperm(sum(SIZES), generator=g) + 10**6  # arbitrary distinct ids
    out, lo = [], 0
    for n in SIZES:
        out.append((ids[lo:lo + n], torch.randn(n, generator=g) * 2 + 1))
        lo += n
    return out


def _ids_pairs(seed):
    g = _gen(seed)
    return [(ids, x, torch.randn(x.shape[0], generator=g)) for ids, x in _with_ids(seed)]


def _grouped(seed, groups=3):
    g = _gen(seed)
    return [(torch.randint(0, groups, (n,), generator=g), torch.randn(n, generator=g)) for n in SIZES]


def _np(x):
    return x.double().numpy()


def _summary(reps, quantiles=(0.025, 0.975)):
    reps = np.asarray(reps, dtype=np.float64)
    return {"mean": reps.mean(0), "std": reps.std(0, ddof=1), "quantile": np.quantile(reps, quantiles, axis=0)}


def poisson_counts(keys, num_samples):
    """Per-replicate Poisson(1) counts ``(R, N)`` for the given sample hashes."""
    return _draws.poisson1_counts(keys, num_samples, accum_dtype()).to(torch.int64).numpy()


def _boot_ref(stat, num_samples, seed, ids=True, quantiles=(0.025, 0.975)):
    def ref(*inputs):
        if ids:
            keys = _draws_np.id_keys(seed, inputs[0])
            inputs = inputs[1:]
        else:
            keys = _draws_np.offset_keys(seed, inputs)
        counts = _draws_np.poisson_counts(keys, num_samples)
        return _summary([stat(*(np.repeat(_np(x), c, axis=0) for x in inputs)) for c in counts], quantiles)

    return ref


def _multinomial_ref(stat, num_samples, seed):
    def ref(x):
        picks = _draws_np.multinomial_picks(_draws_np.offset_keys(seed, (x,)), num_samples)
        return _summary([stat(_np(x)[p]) for p in picks])

    return ref


def _grouped_ref(stat, groups, labels=None):
    def ref(group, x):
        g, v = group.numpy(), _np(x)
        vals = [stat(v[g == k]) for k in range(groups)]
        return dict(zip(labels, vals)) if labels else np.array(vals)

    return ref


def _column_nanmean(x):
    return np.nanmean(_np(x), axis=0)


def _nan_columns(seed):
    g = _gen(seed)
    out = []
    for n in SIZES:
        x = torch.randn(n, 3, generator=g)
        x[torch.rand(n, 3, generator=g) < 0.25] = float("nan")
        out.append((x,))
    return out


def _pairs_nan(seed):
    g = _gen(seed)
    out = []
    for n in SIZES:
        p, t = torch.randn(n, 2, generator=g), torch.randn(n, 2, generator=g)
        p[torch.rand(n, 2, generator=g) < 0.2] = float("nan")
        t[torch.rand(n, 2, generator=g) < 0.2] = float("nan")
        out.append((p, t))
    return out


def _pair_median_ref(p, t):
    p, t = _np(p), _np(t)
    out = []
    for j in range(p.shape[1]):
        keep = ~(np.isnan(p[:, j]) | np.isnan(t[:, j]))
        out.append(np.median(p[keep, j] - t[keep, j]))
    return np.array(out)


@fm.factory
def diff_median():
    """Median of ``preds - target`` over a cat state: two inputs per row (for multioutput's NaN rows)."""
    base = median()
    return base.replace(update=lambda s, p, t: base.update(s, p - t), state_key=("test-diff-median",))


def _tasks(seed):
    g = _gen(seed)
    return [({"a": torch.randn(n, generator=g), "b": torch.rand(n, generator=g)},) for n in SIZES]


def _classes(seed, classes=4):
    g = _gen(seed)
    ids = torch.randperm(sum(SIZES), generator=g) * 7 + 3
    out, lo = [], 0
    for n in SIZES:
        target = torch.randint(0, classes, (n,), generator=g)
        logits = torch.randn(n, classes, generator=g) + 1.5 * torch.nn.functional.one_hot(target, classes)
        out.append((ids[lo:lo + n], logits.softmax(-1), target))
        lo += n
    return out


def _binary(seed, with_ids=True, groups=0):
    g = _gen(seed)
    ids = torch.randperm(sum(SIZES) * 2, generator=g)
    out, lo = [], 0
    for n in SIZES:
        n = 2 * n  # enough rows that every resample holds both classes
        target = torch.randint(0, 2, (n,), generator=g)
        preds = torch.sigmoid(torch.randn(n, generator=g) + target)
        first = ids[lo:lo + n] if with_ids else torch.randint(0, groups, (n,), generator=g)
        out.append((first, preds, target))
        lo += n
    return out


def _accuracy(p, t):
    return skm.accuracy_score(t, p.argmax(-1))


def _regression_columns(seed):
    g = _gen(seed)
    return [(torch.randn(n, 2, generator=g), torch.randn(n, 2, generator=g)) for n in SIZES]


_BATCHING = "the draws of multinomial resampling are per batch (as torchmetrics'), so the value depends on batching"
_OFFSETS = ("without sample ids a row's draw key is its arrival position in its own stream, so reordered "
            "batches and shards started from init() draw differently from one process (merges stay exact)")

CASES = [
    Case("bootstrap-median-cat-ids", W.bootstrap,
         {"metric": median(), "num_samples": 8, "sample_ids": True, "seed": 5, "quantiles": (0.1, 0.5, 0.9)},
         _with_ids, reference=_boot_ref(np.median, 8, 5, quantiles=(0.1, 0.5, 0.9))),
    Case("bootstrap-max-offsets", W.bootstrap, {"metric": fm.max(), "num_samples": 8, "seed": 1},
         lambda s: _values(s), reference=_boot_ref(np.max, 8, 1, ids=False),
         check={"laws": [law for law in fm.testing.LAWS if law not in ("split invariance", "merge associativity",
                                                                         "distributed equivalence")]},
         why=_OFFSETS),
    Case("bootstrap-mean-multinomial", W.bootstrap,
         {"metric": fm.mean(), "num_samples": 8, "sampling": "multinomial", "seed": 2},
         lambda s: _values(s), reference=_multinomial_ref(np.mean, 8, 2),
         check={"laws": [law for law in fm.testing.LAWS if law not in ("split invariance", "merge associativity",
                                                                         "distributed equivalence")]},
         why=_BATCHING),
    Case("bootstrap-multiclass_accuracy-ids", W.bootstrap,
         {"metric": fm.multiclass_accuracy(num_classes=4, average="micro"), "num_samples": 12, "sample_ids": True},
         _classes, reference=_boot_ref(_accuracy, 12, 0), integer_state=False,
         check={"laws": [law for law in fm.testing.LAWS if law != "compile epoch"]},
         why="the wrapped accuracy's one-row update (vmapped over rows) specializes on the batch size in "
             "fmetrics/classification/_format.py argmax_classes (a gather under vmap: Eq(batch, 7) guards), so "
             "every new size recompiles; bootstrap itself passes the law (mean_squared_error case, "
             "tests/test_wrappers.py)"),
    Case("bootstrap-mean_squared_error-ids", W.bootstrap,
         {"metric": fm.mean_squared_error(), "num_samples": 12, "sample_ids": True, "seed": 8},
         _ids_pairs, reference=_boot_ref(lambda p, t: np.mean((p - t) ** 2), 12, 8)),
    Case("bootstrap-binary_auroc-ids", W.bootstrap,
         {"metric": fm.binary_auroc(), "num_samples": 10, "sample_ids": True, "seed": 6}, _binary,
         reference=_boot_ref(lambda p, t: skm.roc_auc_score(t, p), 10, 6)),
    Case("grouped-binary_auroc", W.grouped, {"metric": fm.binary_auroc(), "num_groups": 2},
         lambda s: _binary(s, with_ids=False, groups=2),
         reference=lambda g, p, t: np.array([skm.roc_auc_score(_np(t)[g.numpy() == k], _np(p)[g.numpy() == k])
                                             for k in range(2)])),
    Case("classwise-multiclass_accuracy", W.classwise,
         {"metric": fm.multiclass_accuracy(num_classes=4, average=None), "labels": ["a", "b", "c", "d"],
          "prefix": "acc_"},
         lambda s: [b[1:] for b in _classes(s)],
         reference=lambda p, t: dict(zip(["acc_a", "acc_b", "acc_c", "acc_d"],
                                         skm.recall_score(t, p.argmax(-1), average=None, labels=range(4))))),
    Case("multioutput-mean_squared_error", W.multioutput, {"metric": fm.mean_squared_error(), "num_outputs": 2},
         _regression_columns, reference=lambda p, t: np.mean((_np(p) - _np(t)) ** 2, axis=0)),
    Case("bootstrap-pearson_corrcoef-merges", W.bootstrap,
         {"metric": fm.pearson_corrcoef(), "num_samples": 6, "sample_ids": True, "seed": 2}, _ids_pairs,
         reference=_boot_ref(lambda p, t: stats.pearsonr(p, t)[0], 6, 2), check={"rtol": 1e-5}),
    Case("grouped-r2_score-merges", W.grouped, {"metric": fm.r2_score(), "num_groups": 2},
         lambda s: [(g % 2, x, x + torch.randn(x.shape[0], generator=_gen(s))) for g, x in _grouped(s, 2)],
         reference=lambda g, p, t: np.array([skm.r2_score(_np(t)[g.numpy() == k], _np(p)[g.numpy() == k])
                                             for k in range(2)]), check={"rtol": 1e-5}),
    Case("grouped-mean", W.grouped, {"metric": fm.mean(), "num_groups": 3}, _grouped,
         reference=_grouped_ref(np.mean, 3)),
    Case("grouped-median-cat-labels", W.grouped, {"metric": median(), "num_groups": 2, "labels": ["x", "y"]},
         lambda s: _grouped(s, 2), reference=_grouped_ref(np.median, 2, ["x", "y"])),
    Case("running-mean", W.running, {"metric": fm.mean(), "window": 3}, lambda s: _values(s),
         reference=lambda x: np.mean(_np(x)),
         check={"laws": [law for law in fm.testing.LAWS if law != "split invariance"]},
         why="a running window covers the last updates, so its value depends on the batch boundaries"),
    Case("running-median-cat", W.running, {"metric": median(), "window": 2}, lambda s: _values(s),
         reference=lambda x: np.median(_np(x)),
         check={"laws": [law for law in fm.testing.LAWS if law not in ("split invariance",
                                                                         "distributed equivalence")]},
         why="a running window covers the last updates, so its value depends on the batch boundaries "
             "(window 2 < the 2 updates per shard + merges of the distributed law)"),
    Case("min_max-mean", W.min_max, {"metric": fm.mean()}, lambda s: _values(s),
         reference=lambda x: {"raw": np.mean(_np(x)), "min": np.mean(_np(x)), "max": np.mean(_np(x))}),
    Case("classwise-multioutput-mean", W.classwise,
         {"metric": W.multioutput(fm.mean(), num_outputs=3), "labels": ["u", "v", "w"]}, _nan_columns,
         reference=lambda x: {f"multioutput(mean)_{k}": v for k, v in zip("uvw", _column_nanmean(x))}),
    Case("multitask-mean-sum", W.multitask, {"metrics": {"a": fm.mean(), "b": fm.sum()}, "prefix": "t/"}, _tasks,
         reference=lambda d: {"t/a": np.mean(_np(d["a"])), "t/b": np.sum(_np(d["b"]))}),
    Case("multioutput-median-cat-nan", W.multioutput, {"metric": diff_median(), "num_outputs": 2}, _pairs_nan,
         reference=_pair_median_ref),
    Case("multioutput-max-keep-nans", W.multioutput,
         {"metric": fm.max(nan_strategy="disable"), "num_outputs": 3, "remove_nans": False},
         lambda s: _values(s, shape=(3,)), reference=lambda x: np.max(_np(x), axis=0)),
]


# ---------------------------------------------------------------- comparing two systems (issue 32)

def swap_bits_np(keys, num):
    """NumPy twin of `fmetrics.wrappers._pairs.swap_bits`: ``(R, N)`` fair bits, 64 per hash of (key, group)."""
    groups = -(-num // 64)
    with np.errstate(over="ignore"):
        salt = _draws_np.mix((np.arange(groups, dtype=np.uint64) + np.uint64(1)) * np.uint64(_draws_np.G)
                             + np.uint64(0x5A5A))
        h = _draws_np.mix(keys[:, None] ^ salt[None, :])
    bits = (h[..., None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
    return bits.reshape(len(keys), -1)[:, :num].T.astype(np.int64)


def _two_systems(seed, regression=False):
    g = _gen(seed)
    ids = torch.randperm(sum(SIZES) * 2, generator=g) * 3 + 11
    out, lo = [], 0
    for n in SIZES:
        n = 2 * n
        t = torch.randint(0, 2, (n,), generator=g)
        a = torch.sigmoid(torch.randn(n, generator=g) + t)
        b = torch.sigmoid(torch.randn(n, generator=g) + 1.5 * t)
        out.append((ids[lo:lo + n], a, b, t.double() if regression else t))
        lo += n
    return out


def crossing_p(d):
    """Two-sided bootstrap p-value by hand: twice the share of replicate deltas beyond 0 (ties half), +1 rule."""
    tie = 0.5 * np.sum(d == 0)
    return min(1.0, (2 * min(np.sum(d < 0) + tie, np.sum(d > 0) + tie) + 1) / (len(d) + 1))


def _paired_ref(stat, num, seed, swap=False, alpha=0.05):
    """Explicit resamples (or swaps) in NumPy, then the paired summary of the issue (sacrebleu's p-values)."""
    def ref(ids, a, b, t):
        a, b, t = _np(a), _np(b), _np(t)
        keys = _draws_np.id_keys(seed, ids)
        va, vb = stat(a, t), stat(b, t)
        if swap:
            s = swap_bits_np(keys, num).astype(bool)
            d = np.array([stat(np.where(w, a, b), t) - stat(np.where(w, b, a), t) for w in s])
            return {"a": va, "b": vb, "delta": vb - va, "p_value": (np.sum(np.abs(d) >= abs(vb - va) - 1e-9 * max(1, abs(vb - va))) + 1) / (num + 1)}
        c = _draws_np.poisson_counts(keys, num)
        d = np.array([stat(np.repeat(b, w), np.repeat(t, w)) - stat(np.repeat(a, w), np.repeat(t, w)) for w in c])
        return {"a": va, "b": vb, "delta": vb - va, "ci_low": np.quantile(d, alpha / 2),
                "ci_high": np.quantile(d, 1 - alpha / 2),
                "p_value": crossing_p(d)}

    return ref


def _bleu_pairs(seed):
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(12)]
    out, start = [], 0
    for n in (5, 0, 7, 3):
        refs = [" ".join(rng.choice(vocab, rng.integers(3, 8))) for _ in range(n)]
        noisy = [[" ".join(w if rng.random() > p else rng.choice(vocab) for w in r.split()) for r in refs]
                 for p in (0.3, 0.2)]
        out.append((torch.arange(start, start + n) * 5 + 1, noisy[0], noisy[1], [[r] for r in refs]))
        start += n
    return out


def _bleu_paired_ref(num, seed):
    from sacrebleu.metrics import BLEU

    def ref(ids, a, b, t):
        refs = [r[0] for r in t]
        bleu = lambda h, w: BLEU().corpus_score(list(np.repeat(h, w)), [list(np.repeat(refs, w))]).score / 100
        c = _draws_np.poisson_counts(_draws_np.id_keys(seed, ids), num)
        d = np.array([bleu(b, w) - bleu(a, w) for w in c])
        ones = np.ones(len(refs), dtype=np.int64)
        va, vb = bleu(a, ones), bleu(b, ones)
        return {"a": va, "b": vb, "delta": vb - va, "ci_low": np.quantile(d, 0.025), "ci_high": np.quantile(d, 0.975),
                "p_value": crossing_p(d)}

    return ref


def _wilson_ref(p, t):
    tp, pos = int(((p == 1) & (t == 1)).sum()), int((t == 1).sum())
    ci = stats.binomtest(tp, pos).proportion_ci(method="wilson")
    return {"value": tp / pos, "ci_low": ci.low, "ci_high": ci.high}


def _auroc(p, t):
    return skm.roc_auc_score(t, p)


CASES += [
    Case("paired_bootstrap-binary_auroc-ids", W.paired_bootstrap,
         {"metric": fm.binary_auroc(), "num_samples": 6, "sample_ids": True, "seed": 3}, _two_systems,
         reference=_paired_ref(_auroc, 6, 3)),
    Case("paired_bootstrap-mean_squared_error-ids", W.paired_bootstrap,
         {"metric": fm.mean_squared_error(), "num_samples": 9, "sample_ids": True, "seed": 1, "alpha": 0.2},
         lambda s: _two_systems(s, regression=True),
         reference=_paired_ref(lambda p, t: np.mean((p - t) ** 2), 9, 1, alpha=0.2)),
    Case("paired_bootstrap-sacre_bleu_score-ids", W.paired_bootstrap,
         {"metric": fm.sacre_bleu_score(), "num_samples": 5, "sample_ids": True, "seed": 2}, _bleu_pairs,
         reference=_bleu_paired_ref(5, 2)),
    Case("permutation_test-binary_auroc-ids", W.permutation_test,
         {"metric": fm.binary_auroc(), "num_permutations": 7, "sample_ids": True, "seed": 4}, _two_systems,
         reference=_paired_ref(_auroc, 7, 4, swap=True)),
    Case("permutation_test-mean_squared_error-ids", W.permutation_test,
         {"metric": fm.mean_squared_error(), "num_permutations": 70, "sample_ids": True},
         lambda s: _two_systems(s, regression=True),
         reference=_paired_ref(lambda p, t: np.mean((p - t) ** 2), 70, 0, swap=True)),
    Case("confidence_interval-binary_recall-wilson", W.confidence_interval,
         {"metric": fm.binary_recall(), "method": "wilson"},
         lambda s: [(a.round().long(), t) for _, a, _, t in _two_systems(s)], reference=_wilson_ref,
         integer_state=True),
    Case("confidence_interval-mean-bca-ids", W.confidence_interval,
         {"metric": fm.mean(), "method": "bootstrap", "interval": "bca", "num_samples": 20, "sample_ids": True},
         _with_ids, reference=None),
]


def _queries(seed):
    g = _gen(seed)
    idx = torch.randint(0, 6, (sum(SIZES) * 2,), generator=g) * 5 + 3
    t = torch.randint(0, 3, idx.shape, generator=g)
    a = torch.rand(idx.shape, generator=g)
    b = a + 0.5 * t * torch.rand(idx.shape, generator=g)
    cuts = np.cumsum([0] + [2 * n for n in SIZES])
    return [(a[lo:hi], b[lo:hi], t[lo:hi], idx[lo:hi]) for lo, hi in zip(cuts[:-1], cuts[1:])]


def _query_boot_ref(num, seed):
    """Whole queries resampled: a replicate is the mean of sklearn's per-query NDCG weighted by the draws."""
    def ref(a, b, t, idx):
        qs = torch.unique(idx)
        per = lambda p: np.array([skm.ndcg_score([_np(t[idx == q])], [_np(p[idx == q])], k=3)
                                  if t[idx == q].sum() > 0 else 0.0 for q in qs])
        qa, qb = per(a), per(b)
        c = _draws_np.poisson_counts(_draws_np.id_keys(seed, qs), num)
        d = np.array([(w @ qb - w @ qa) / w.sum() for w in c])
        delta = qb.mean() - qa.mean()
        return {"a": qa.mean(), "b": qb.mean(), "delta": delta, "ci_low": np.quantile(d, 0.025),
                "ci_high": np.quantile(d, 0.975),
                "p_value": crossing_p(d)}

    return ref


def _paired_detections(seed):
    """Batches of (image ids, A's, B's predictions, targets): per-image dicts (sizes 3, 0, 4, 1)."""
    from tests.test_comparing import _detections

    pa, pb, t = _detections(8, seed)
    out, lo = [], 0
    for n in (3, 0, 4, 1):
        out.append((torch.arange(lo, lo + n) * 5 + 2, pa[lo:lo + n], pb[lo:lo + n], t[lo:lo + n]))
        lo += n
    return out


CASES += [
    # oracle: tests/test_comparing.py::test_detection_map_resampled_per_image (pycocotools over the same draws)
    Case("paired_bootstrap-mean_average_precision-ids", W.paired_bootstrap,
         {"metric": fm.mean_average_precision(), "num_samples": 2, "sample_ids": True, "seed": 1},
         _paired_detections),
    Case("permutation_test-mean_average_precision-ids", W.permutation_test,
         {"metric": fm.mean_average_precision(), "num_permutations": 2, "sample_ids": True, "seed": 2},
         _paired_detections),
]


CASES += [
    Case("paired_bootstrap-retrieval_normalized_dcg-queries", W.paired_bootstrap,
         {"metric": fm.retrieval_normalized_dcg(top_k=3), "num_samples": 8, "seed": 6}, _queries,
         reference=_query_boot_ref(8, 6)),
]


# ------------------------------------------------------------------ input transformers and feature_share

def flip(p):
    """A named transform (importable, so the wrapper pickles by its recipe): ``1 - p``."""
    return 1 - p


def halve(x):
    return x / 2


def _scores(seed, sizes=SIZES):
    g = _gen(seed)
    return [(torch.rand(n, generator=g), torch.rand(n, generator=g) * 3) for n in sizes]


def _mifid_ref(x, flags):
    from tests.cases.image import _split_feats
    fr, ff = _split_feats(x, flags)
    cos = (fr / np.linalg.norm(fr, axis=1, keepdims=True)) @ (ff / np.linalg.norm(ff, axis=1, keepdims=True)).T
    d = (1 - np.abs(cos)).min(1).mean()
    return _fid_ref(x, flags) / ((d if d < 0.1 else 1.0) + 1e-15)


def _fid_ref(x, flags):
    from tests.cases.image import _fid_ref as ref
    return ref(x, flags)


def _shared_members():
    from tests.cases.image import FEATURE_NET
    return {"fid": fm.frechet_inception_distance(feature=FEATURE_NET),
            "mifid": fm.memorization_informed_frechet_inception_distance(feature=FEATURE_NET)}


def _feature_batches(seed):
    from tests.cases.image import _gen_batches
    return _gen_batches(seed)


CASES += [
    Case("lambda_input_transformer-binary_accuracy", W.lambda_input_transformer,
         {"metric": fm.binary_accuracy(), "transform_pred": flip},
         lambda s: [(p, (t > 1.5).long()) for p, t in _scores(s)],
         reference=lambda p, t: skm.accuracy_score(_np(t), _np(1 - p) > 0.5), integer_state=True),
    Case("binary_target_transformer-binary_auroc", W.binary_target_transformer,
         {"metric": fm.binary_auroc(), "threshold": 1.5}, _scores,
         reference=lambda p, t: skm.roc_auc_score(_np(t) > 1.5, _np(p))),
    Case("metric_input_transformer-mean_squared_error", W.metric_input_transformer,
         {"metric": fm.mean_squared_error(), "transform_pred": halve, "transform_target": torch.round},
         _scores, reference=lambda p, t: np.mean((_np(p) / 2 - np.round(_np(t))) ** 2)),
    Case("feature_share-fid-mifid", W.feature_share, {"metrics": _shared_members()}, _feature_batches,
         reference=lambda x, f: {"fid": _fid_ref(x, f), "mifid": _mifid_ref(x, f)},
         check={"reference_rtol": 1e-6, "rtol": 1e-6, "atol": 1e-6}),
]
