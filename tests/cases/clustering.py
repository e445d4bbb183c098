"""Law-suite cases for clustering, nominal association and shape; oracles are scikit-learn and SciPy."""
import numpy as np
import scipy.spatial
import sklearn.metrics as skm
import torch
from scipy.stats.contingency import association

import fmetrics as fm
from tests.cases import Case

SIZES = (17, 1, 30, 0, 12)


def _labels(seed, k=4, offset=0, scale=1):
    """(preds, target) label batches; ids ``offset + scale * j`` (large / non-contiguous when asked)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in SIZES:
        t = torch.randint(0, k, (n,), generator=g)
        p = torch.where(torch.rand(n, generator=g) < 0.6, t, torch.randint(0, k, (n,), generator=g))
        out.append((p * scale + offset, t * scale + offset))
    return out


def _sk(fn, **kw):
    return lambda p, t: fn(t.numpy(), p.numpy(), **kw)  # scikit-learn takes (labels_true, labels_pred)


def _points(seed, k=3):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(k, 2, generator=g, dtype=torch.float64) * 4
    out = []
    for n in SIZES:
        labels = torch.arange(n) % k if n else torch.zeros(0, dtype=torch.int64)
        out.append((centers[labels] + torch.randn(n, 2, generator=g, dtype=torch.float64), labels))
    return out


def _np_points(fn):
    return lambda x, labels: fn(x.numpy(), labels.numpy())


def _dunn(x, labels):
    x, labels = x.numpy(), labels.numpy()
    ks = np.unique(labels)
    cents = np.stack([x[labels == k].mean(0) for k in ks])
    sep = min(np.linalg.norm(cents[i] - cents[j]) for i in range(len(ks)) for j in range(i + 1, len(ks)))
    spread = max(np.linalg.norm(x[labels == k] - cents[i], axis=1).max() for i, k in enumerate(ks))
    return sep / spread


def _hungarian_accuracy(p, t, k):
    from scipy.optimize import linear_sum_assignment

    table = np.zeros((k, k))
    np.add.at(table, (t.numpy(), p.numpy()), 1)
    r, c = linear_sum_assignment(table, maximize=True)
    return table[r, c].sum() / table.sum()


def _table(p, t):
    p, t = np.asarray(p), np.asarray(t)
    _, ti = np.unique(t, return_inverse=True)
    _, pi = np.unique(p, return_inverse=True)
    out = np.zeros((ti.max() + 1, pi.max() + 1), dtype=np.int64)
    np.add.at(out, (ti, pi), 1)
    return out


def _assoc(method):
    return lambda p, t: association(_table(p.numpy(), t.numpy()), method=method)


def _theils_u(p, t):
    """U(preds | target) from the definition: (H(X) - H(X|Y)) / H(X), X = preds, Y = target."""
    tab = _table(p.numpy(), t.numpy()).astype(float)
    n = tab.sum()
    pxy, py, px = tab / n, tab.sum(1) / n, tab.sum(0) / n
    nz = pxy > 0
    h_x_y = -(pxy[nz] * np.log(pxy[nz] / np.broadcast_to(py[:, None], pxy.shape)[nz])).sum()
    h_x = -(px[px > 0] * np.log(px[px > 0])).sum()
    return (h_x - h_x_y) / h_x


def _matrix_batches(seed, v=3, k=3):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in SIZES:
        base = torch.randint(0, k, (n, 1), generator=g)
        noise = torch.randint(0, k, (n, v), generator=g)
        out.append((torch.where(torch.rand(n, v, generator=g) < 0.5, base, noise),))
    return out


def _matrix_ref(pair_fn, symmetric=True):
    def ref(m):
        m = m.numpy()
        v = m.shape[1]
        out = np.eye(v)
        for i in range(v):
            for j in range(i + 1, v):
                out[i, j] = pair_fn(torch.tensor(m[:, i]), torch.tensor(m[:, j]))
                out[j, i] = out[i, j] if symmetric else pair_fn(torch.tensor(m[:, j]), torch.tensor(m[:, i]))
        return out
    return ref


def _fleiss_batches(seed, raters=4, k=3):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in SIZES:
        choice = torch.randint(0, k, (n, raters), generator=g)
        choice = torch.where(torch.rand(n, raters, generator=g) < 0.5, choice[:, :1], choice)
        out.append((torch.nn.functional.one_hot(choice, k).sum(1),))
    return out


def _fleiss(counts):
    """Fleiss (1971) from the definition."""
    c = counts.numpy().astype(float)
    n_sub, n = c.shape[0], c.sum(1)[0]
    p_i = ((c ** 2).sum(1) - n) / (n * (n - 1))
    p_j = c.sum(0) / (n_sub * n)
    pe = (p_j ** 2).sum()
    return (p_i.mean() - pe) / (1 - pe)


def _clouds(seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in (3, 1, 4, 0, 2):
        a = torch.randn(n, 6, 3, generator=g, dtype=torch.float64)
        out.append((a, a + 0.3 * torch.randn(n, 6, 3, generator=g, dtype=torch.float64)))
    return out


def _procrustes(a, b):
    return np.mean([scipy.spatial.procrustes(a[i].numpy(), b[i].numpy())[2] for i in range(a.shape[0])])


CASES = [
    Case("rand_score", fm.rand_score, {}, _labels, _sk(skm.rand_score), integer_state=True),
    Case("rand_score-dense", fm.rand_score, {"num_clusters": 4}, _labels, _sk(skm.rand_score), integer_state=True),
    Case("adjusted_rand_score-sparse-ids", fm.adjusted_rand_score, {}, lambda s: _labels(s, 5, 10**9, 7),
         _sk(skm.adjusted_rand_score), integer_state=True),
    Case("adjusted_rand_score-dense", fm.adjusted_rand_score, {"num_clusters": 4}, _labels,
         _sk(skm.adjusted_rand_score), integer_state=True),
    Case("mutual_info_score", fm.mutual_info_score, {}, _labels, _sk(skm.mutual_info_score), integer_state=True),
    Case("normalized_mutual_info_score-geometric", fm.normalized_mutual_info_score,
         {"average_method": "geometric"}, _labels, _sk(skm.normalized_mutual_info_score, average_method="geometric"),
         integer_state=True),
    Case("adjusted_mutual_info_score", fm.adjusted_mutual_info_score, {}, _labels,
         _sk(skm.adjusted_mutual_info_score), integer_state=True),
    Case("adjusted_mutual_info_score-max-dense", fm.adjusted_mutual_info_score,
         {"average_method": "max", "num_clusters": 4}, _labels,
         _sk(skm.adjusted_mutual_info_score, average_method="max"), integer_state=True),
    Case("fowlkes_mallows_index", fm.fowlkes_mallows_index, {}, _labels, _sk(skm.fowlkes_mallows_score),
         integer_state=True),
    Case("homogeneity_score", fm.homogeneity_score, {}, _labels, _sk(skm.homogeneity_score), integer_state=True),
    Case("completeness_score", fm.completeness_score, {"num_clusters": 4}, _labels, _sk(skm.completeness_score),
         integer_state=True),
    Case("v_measure_score-beta2", fm.v_measure_score, {"beta": 2.0}, _labels,
         _sk(skm.v_measure_score, beta=2.0), integer_state=True),
    Case("cluster_accuracy", fm.cluster_accuracy, {"num_classes": 4}, _labels,
         lambda p, t: _hungarian_accuracy(p, t, 4), integer_state=True),
    Case("calinski_harabasz_score", fm.calinski_harabasz_score, {}, _points,
         _np_points(skm.calinski_harabasz_score)),
    Case("calinski_harabasz_score-moments", fm.calinski_harabasz_score, {"num_clusters": 3}, _points,
         _np_points(skm.calinski_harabasz_score)),
    Case("davies_bouldin_score", fm.davies_bouldin_score, {}, _points, _np_points(skm.davies_bouldin_score)),
    Case("dunn_index", fm.dunn_index, {}, _points, _dunn),
    Case("cramers_v", fm.cramers_v, {"bias_correction": False}, _labels, _assoc("cramer"), integer_state=True),
    Case("cramers_v-dense", fm.cramers_v, {"bias_correction": False, "num_categories": 4}, _labels,
         _assoc("cramer"), integer_state=True),
    Case("tschuprows_t", fm.tschuprows_t, {"bias_correction": False}, _labels, _assoc("tschuprow"),
         integer_state=True),
    Case("pearsons_contingency_coefficient", fm.pearsons_contingency_coefficient, {}, _labels, _assoc("pearson"),
         integer_state=True),
    Case("theils_u", fm.theils_u, {}, _labels, _theils_u, integer_state=True),
    Case("cramers_v_matrix", fm.cramers_v_matrix, {"bias_correction": False}, _matrix_batches,
         _matrix_ref(_assoc("cramer")), integer_state=True),
    Case("tschuprows_t_matrix-dense", fm.tschuprows_t_matrix, {"bias_correction": False, "num_categories": 3},
         _matrix_batches, _matrix_ref(_assoc("tschuprow")), integer_state=True),
    Case("pearsons_contingency_coefficient_matrix", fm.pearsons_contingency_coefficient_matrix, {},
         _matrix_batches, _matrix_ref(_assoc("pearson")), integer_state=True),
    Case("theils_u_matrix", fm.theils_u_matrix, {}, _matrix_batches, _matrix_ref(_theils_u, symmetric=False),
         integer_state=True),
    Case("fleiss_kappa", fm.fleiss_kappa, {}, _fleiss_batches, _fleiss, integer_state=True),
    Case("procrustes_disparity", fm.procrustes_disparity, {}, _clouds, _procrustes),
    Case("procrustes_disparity-none", fm.procrustes_disparity, {"reduction": "none"}, _clouds,
         lambda a, b: np.array([scipy.spatial.procrustes(a[i].numpy(), b[i].numpy())[2] for i in range(a.shape[0])]),
         check={"canonical": lambda v: torch.sort(torch.as_tensor(v)).values}),  # per-pair values in stream order
]
