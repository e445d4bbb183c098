"""Law-suite cases for the regression metrics; oracles are scikit-learn, SciPy or numpy formulas."""
import numpy as np
import scipy.spatial.distance as ssd
import scipy.stats as ss
import sklearn.metrics as skm
import torch

import fmetrics as fm
from tests.cases import Case

SIZES = (9, 1, 14, 0, 6)


def _np(x):
    return x.double().numpy()


def _pairs(seed, d=None, kind="normal", sizes=SIZES):
    """Batches of (preds, target), shape (n,) or (n, d), float32."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in sizes:
        shape = (n,) if d is None else (n, d)
        t = torch.randn(shape, generator=g) * 2 + 1
        p = t + torch.randn(shape, generator=g)
        if kind == "positive":
            t, p = t.abs() + 0.1, p.abs() + 0.1
        elif kind == "ties":  # small integer grid: many ties in both
            t, p = torch.round(t), torch.round(p / 2)
        out.append((p, t))
    return out


def _dists(seed, log=False):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in SIZES:
        p, q = torch.rand(n, 5, generator=g) + 0.01, torch.rand(n, 5, generator=g) + 0.01
        if log:
            p, q = torch.log_softmax(p * 3, -1), torch.log_softmax(q * 3, -1)
        out.append((p, q))
    return out


def _ensembles(seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(n, 7, generator=g), torch.randn(n, generator=g) * 1.5) for n in SIZES]


def _columns(fn):
    """Applies a 1-d oracle ``fn(p, t)`` per column of (n, d) inputs."""
    def ref(p, t):
        p, t = _np(p), _np(t)
        if p.ndim == 1:
            return fn(p, t)
        return np.array([fn(p[:, j], t[:, j]) for j in range(p.shape[1])])
    return ref


def _sk(fn, **kw):
    def ref(p, t):
        return fn(_np(t), _np(p), **kw)
    return ref


# --------------------------------------------------------------- hand formulas (numpy, float64)

def _smape(p, t):
    p, t = _np(p), _np(t)
    return np.mean(2 * np.abs(p - t) / np.maximum(np.abs(t) + np.abs(p), 1.17e-6), axis=0)


def _wmape(p, t):
    p, t = _np(p), _np(t)
    return np.abs(p - t).sum(0) / np.abs(t).sum(0)


def _nrmse(normalization):
    def ref(p, t):
        p, t = _np(p), _np(t)
        rmse = np.sqrt(np.mean((p - t) ** 2, axis=0))
        denom = {"mean": lambda: t.mean(0), "range": lambda: t.max(0) - t.min(0), "std": lambda: t.std(0),
                 "l2": lambda: np.sqrt((t ** 2).sum(0))}[normalization]()
        return rmse / denom
    return ref


def _adjusted_r2(k):
    def ref(p, t):
        r2 = skm.r2_score(_np(t), _np(p))
        n = len(t)
        return 1 - (1 - r2) * (n - 1) / (n - k - 1)
    return ref


def _ccc(x, y):
    sxy = np.cov(x, y, ddof=1)[0, 1]
    return 2 * sxy / (np.var(x, ddof=1) + np.var(y, ddof=1) + (x.mean() - y.mean()) ** 2)


def _rse(squared):
    def ref(p, t):
        p, t = _np(p), _np(t)
        rse = ((t - p) ** 2).sum(0) / ((t - t.mean(0)) ** 2).sum(0)
        return np.mean(rse if squared else np.sqrt(rse))
    return ref


def _tau_a(x, y):
    """torchmetrics' tau-a: (C - D) / (C + D), by brute force over pairs."""
    sx = np.sign(x[:, None] - x[None, :])
    sy = np.sign(y[:, None] - y[None, :])
    s = np.triu(sx * sy, 1)
    return (s > 0).sum() - (s < 0).sum(), (s > 0).sum() + (s < 0).sum()


def _kendall(variant, alternative=None):
    def one(x, y):
        if variant == "a":
            num, den = _tau_a(x, y)
            return num / den
        return ss.kendalltau(x, y, variant=variant, method="asymptotic").statistic

    def ref(p, t):
        tau = _columns(one)(p, t)
        if alternative is None:
            return tau
        pv = _columns(lambda x, y: ss.kendalltau(x, y, variant=variant, method="asymptotic",
                                                 alternative=alternative).pvalue)(p, t)
        return tau, pv
    return ref


def _crps(x, y):
    x, y = _np(x), _np(y)
    m = x.shape[1]
    term1 = np.abs(x - y[:, None]).mean(1)
    term2 = np.abs(x[:, :, None] - x[:, None, :]).sum((1, 2)) / (2 * m * m)
    return np.mean(term1 - term2)


def _csi(threshold, axis=None):
    def ref(p, t):
        p, t = _np(p) >= threshold, _np(t) >= threshold
        axes = None if axis is None else tuple(i for i in range(p.ndim) if i != axis)
        hits, misses, fa = (p & t).sum(axes), (~p & t).sum(axes), (p & ~t).sum(axes)
        den = hits + misses + fa
        return np.where(den > 0, hits / np.maximum(den, 1), 0.0)
    return ref


def _kl(p, q):
    return ss.entropy(_np(p), _np(q), axis=1)


def _js(p, q):
    return ssd.jensenshannon(_np(p), _np(q), axis=1) ** 2


def _exp(f):
    return lambda p, q: f(p.exp(), q.exp())


def _cos(p, t):
    return np.diag(skm.pairwise.cosine_similarity(_np(p), _np(t)))


def _nan_pairs(seed):
    """``_pairs`` with NaN / inf in a few entries of both inputs (for ``nan_strategy="ignore"``)."""
    g = torch.Generator().manual_seed(100 + seed)
    out = []
    for p, t in _pairs(seed):
        p, t = p.clone(), t.clone()
        p[torch.rand(p.shape, generator=g) < 0.15] = float("nan")
        t[torch.rand(t.shape, generator=g) < 0.1] = float("inf")
        out.append((p, t))
    return out


def _finite(fn):
    """Applies a 1-d oracle to the pairs where both values are finite."""
    def ref(p, t):
        p, t = _np(p), _np(t)
        keep = np.isfinite(p) & np.isfinite(t)
        return fn(p[keep], t[keep])
    return ref


FAST = {"rtol": 1e-5, "atol": 1e-6, "reference_rtol": 1e-5, "reference_atol": 1e-6}
SORTED = {"canonical": lambda v: torch.sort(torch.as_tensor(v).reshape(-1)).values}  # per-row values: order-free

CASES = [
    Case("mse", fm.mean_squared_error, {}, _pairs, reference=_sk(skm.mean_squared_error)),
    Case("mse-multioutput", fm.mean_squared_error, {"num_outputs": 3}, lambda s: _pairs(s, d=3),
         reference=_sk(skm.mean_squared_error, multioutput="raw_values")),
    Case("rmse-flatten-2d", fm.mean_squared_error, {"squared": False}, lambda s: _pairs(s, d=2),
         reference=lambda p, t: skm.root_mean_squared_error(_np(t).ravel(), _np(p).ravel())),
    Case("mae-multioutput", fm.mean_absolute_error, {"num_outputs": 2}, lambda s: _pairs(s, d=2),
         reference=_sk(skm.mean_absolute_error, multioutput="raw_values")),
    Case("msle", fm.mean_squared_log_error, {}, lambda s: _pairs(s, kind="positive"),
         reference=_sk(skm.mean_squared_log_error)),
    Case("mape", fm.mean_absolute_percentage_error, {}, _pairs, reference=_sk(skm.mean_absolute_percentage_error)),
    Case("smape", fm.symmetric_mean_absolute_percentage_error, {}, _pairs, reference=_smape),
    Case("wmape-multioutput", fm.weighted_mean_absolute_percentage_error, {"num_outputs": 2},
         lambda s: _pairs(s, d=2), reference=_wmape),
    *[Case(f"nrmse-{k}", fm.normalized_root_mean_squared_error, {"normalization": k}, _pairs, reference=_nrmse(k))
      for k in ("mean", "range", "std", "l2")],
    Case("nrmse-std-multioutput", fm.normalized_root_mean_squared_error, {"normalization": "std", "num_outputs": 3},
         lambda s: _pairs(s, d=3), reference=_nrmse("std")),
    Case("r2", fm.r2_score, {}, _pairs, reference=_sk(skm.r2_score)),
    Case("r2-adjusted", fm.r2_score, {"adjusted": 3}, _pairs, reference=_adjusted_r2(3)),
    *[Case(f"r2-{mo}", fm.r2_score, {"multioutput": mo, "num_outputs": 3}, lambda s: _pairs(s, d=3),
           reference=_sk(skm.r2_score, multioutput=mo)) for mo in ("raw_values", "uniform_average",
                                                                  "variance_weighted")],
    Case("explained-variance", fm.explained_variance, {}, _pairs, reference=_sk(skm.explained_variance_score)),
    # exact=False: a batch's arithmetic in float32 (float32 rounding depends on the batching: rtol 1e-5)
    Case("mse-fast-multioutput", fm.mean_squared_error, {"num_outputs": 3, "exact": False}, lambda s: _pairs(s, d=3),
         reference=_sk(skm.mean_squared_error, multioutput="raw_values"), check=FAST),
    Case("mae-fast", fm.mean_absolute_error, {"exact": False}, _pairs, reference=_sk(skm.mean_absolute_error),
         check=FAST),
    Case("r2-fast", fm.r2_score, {"exact": False}, _pairs, reference=_sk(skm.r2_score), check=FAST),
    Case("explained-variance-fast", fm.explained_variance, {"exact": False, "num_outputs": 2},
         lambda s: _pairs(s, d=2), reference=_sk(skm.explained_variance_score), check=FAST),
    # exact=True (issue 33): the opt-in centred float64 layout, beside the fast default above
    Case("r2-exact", fm.r2_score, {"exact": True}, _pairs, reference=_sk(skm.r2_score)),
    Case("mse-exact", fm.mean_squared_error, {"exact": True}, _pairs, reference=_sk(skm.mean_squared_error)),
    Case("pearson-exact-multioutput", fm.pearson_corrcoef, {"exact": True, "num_outputs": 3},
         lambda s: _pairs(s, d=3), reference=_columns(lambda x, y: ss.pearsonr(x, y).statistic)),
    Case("concordance-exact", fm.concordance_corrcoef, {"exact": True}, _pairs, reference=_columns(_ccc)),
    Case("nrmse-std-exact-multioutput", fm.normalized_root_mean_squared_error,
         {"normalization": "std", "num_outputs": 3, "exact": True}, lambda s: _pairs(s, d=3), reference=_nrmse("std")),
    Case("nrmse-l2-exact", fm.normalized_root_mean_squared_error, {"normalization": "l2", "exact": True}, _pairs,
         reference=_nrmse("l2")),
    Case("explained-variance-weighted", fm.explained_variance, {"multioutput": "variance_weighted", "num_outputs": 3},
         lambda s: _pairs(s, d=3), reference=_sk(skm.explained_variance_score, multioutput="variance_weighted")),
    Case("explained-variance-raw", fm.explained_variance, {"multioutput": "raw_values", "num_outputs": 2},
         lambda s: _pairs(s, d=2), reference=_sk(skm.explained_variance_score, multioutput="raw_values")),
    Case("rse", fm.relative_squared_error, {}, _pairs, reference=_rse(True)),
    Case("rse-root-multioutput", fm.relative_squared_error, {"squared": False, "num_outputs": 2},
         lambda s: _pairs(s, d=2), reference=_rse(False)),
    Case("pearson", fm.pearson_corrcoef, {}, _pairs, reference=_columns(lambda x, y: ss.pearsonr(x, y).statistic)),
    Case("pearson-multioutput", fm.pearson_corrcoef, {"num_outputs": 3}, lambda s: _pairs(s, d=3),
         reference=_columns(lambda x, y: ss.pearsonr(x, y).statistic)),
    Case("concordance-multioutput", fm.concordance_corrcoef, {"num_outputs": 2}, lambda s: _pairs(s, d=2),
         reference=_columns(_ccc)),
    Case("spearman-ties", fm.spearman_corrcoef, {}, lambda s: _pairs(s, kind="ties"),
         reference=_columns(lambda x, y: ss.spearmanr(x, y).statistic)),
    Case("spearman-multioutput", fm.spearman_corrcoef, {"num_outputs": 2}, lambda s: _pairs(s, d=2),
         reference=_columns(lambda x, y: ss.spearmanr(x, y).statistic)),
    Case("kendall-b-ties", fm.kendall_rank_corrcoef, {}, lambda s: _pairs(s, kind="ties"), reference=_kendall("b")),
    Case("kendall-a-ties", fm.kendall_rank_corrcoef, {"variant": "a"},  # sizes: seeds 0 and 1 tie at SIZES
         lambda s: _pairs(s, kind="ties", sizes=(12, 1, 20, 0, 9)), reference=_kendall("a")),
    Case("kendall-c-test-greater-multioutput", fm.kendall_rank_corrcoef,
         {"variant": "c", "t_test": True, "alternative": "greater", "num_outputs": 2},
         lambda s: _pairs(s, d=2, kind="ties"), reference=_kendall("c", "greater")),
    Case("kendall-b-test-two-sided", fm.kendall_rank_corrcoef, {"t_test": True}, lambda s: _pairs(s, kind="ties"),
         reference=_kendall("b", "two-sided")),
    Case("cosine-sum", fm.cosine_similarity, {}, lambda s: _pairs(s, d=4), reference=lambda p, t: _cos(p, t).sum()),
    Case("cosine-none", fm.cosine_similarity, {"reduction": "none"}, lambda s: _pairs(s, d=4), reference=_cos,
         check=SORTED),
    Case("kl-mean", fm.kl_divergence, {}, _dists, reference=lambda p, q: _kl(p, q).mean()),
    Case("kl-log-prob-sum", fm.kl_divergence, {"log_prob": True, "reduction": "sum"}, lambda s: _dists(s, log=True),
         reference=lambda p, q: _exp(_kl)(p, q).sum()),
    Case("js-mean", fm.jensen_shannon_divergence, {}, _dists, reference=lambda p, q: _js(p, q).mean()),
    Case("js-log-prob-none", fm.jensen_shannon_divergence, {"log_prob": True, "reduction": "none"},
         lambda s: _dists(s, log=True), reference=_exp(_js), check=SORTED),
    Case("log-cosh-multioutput", fm.log_cosh_error, {"num_outputs": 2}, lambda s: _pairs(s, d=2),
         reference=lambda p, t: np.mean(np.log(np.cosh(_np(p) - _np(t))), axis=0)),
    Case("minkowski-p3", fm.minkowski_distance, {"p": 3}, lambda s: _pairs(s, d=2),
         reference=lambda p, t: ssd.minkowski(_np(p).ravel(), _np(t).ravel(), 3)),
    *[Case(f"tweedie-{k}", fm.tweedie_deviance_score, {"power": k}, lambda s: _pairs(s, kind="positive"),
           reference=_sk(skm.mean_tweedie_deviance, power=k)) for k in (0.0, 1.0, 1.5, 2.0, 3.0, -1.0)],
    Case("crps", fm.continuous_ranked_probability_score, {}, _ensembles, reference=_crps),
    Case("csi", fm.critical_success_index, {"threshold": 0.5}, lambda s: _pairs(s, d=3), reference=_csi(0.5)),
    Case("mse-nan-ignore", fm.mean_squared_error, {"nan_strategy": "ignore"}, _nan_pairs,
         reference=_finite(lambda p, t: skm.mean_squared_error(t, p))),
    Case("pearson-nan-ignore", fm.pearson_corrcoef, {"nan_strategy": "ignore"}, _nan_pairs,
         reference=_finite(lambda p, t: ss.pearsonr(p, t).statistic)),
    Case("r2-nan-ignore", fm.r2_score, {"nan_strategy": "ignore"}, _nan_pairs,
         reference=_finite(lambda p, t: skm.r2_score(t, p))),
    Case("spearman-nan-ignore", fm.spearman_corrcoef, {"nan_strategy": "ignore"}, _nan_pairs,
         reference=_finite(lambda p, t: ss.spearmanr(p, t).statistic)),
    Case("csi-per-sample", fm.critical_success_index, {"threshold": 1.0, "keep_sequence_dim": 0},
         lambda s: _pairs(s, d=3), reference=_csi(1.0, axis=0), check=SORTED),
]
