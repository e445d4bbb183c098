"""The device path of the exact curves (torch on the state's device) against the host path (NumPy) and scikit-learn.

On an accelerator the exact curve metrics sort, count and integrate with torch where the state lives
(`fmetrics.classification.curves._curve.on_device_path`); here that path runs on CPU tensors through
``_curve.TORCH_ON_CPU`` (the meta device cannot compute values). Counts must be equal, values within
1e-12 of the host path and of scikit-learn.
"""
import itertools
import warnings

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

import fmetrics as fm
from fmetrics import validation
from fmetrics.classification.curves import _curve

TOL = 1e-12
N, C, L = 400, 4, 3


def on_both_paths(fn):
    """``[fn() on the host path, fn() on the device path]``, warnings silenced."""
    out = []
    for device_path in (False, True):
        with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
            mp.setattr(_curve, "TORCH_ON_CPU", device_path)
            warnings.simplefilter("ignore")
            out.append(fn())
    return out


def same(a, b, tol=0.0):
    """Equal shapes and dtypes, values within ``tol`` (NaN equal to NaN), over nested tuples / lists."""
    if isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y, tol)
        return
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a, b)
    equal = (a == b) | (torch.isnan(a) & torch.isnan(b)) if a.is_floating_point() else a == b
    assert bool((equal | ((a.double() - b.double()).abs() <= tol)).all()), (a, b)


def near(actual, expected):
    """``actual`` (torch) within `TOL` of ``expected`` (scikit-learn's numpy), as float64."""
    actual = torch.as_tensor(actual).double()
    expected = torch.as_tensor(np.array(expected, dtype=np.float64))  # a copy: no negative strides
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    torch.testing.assert_close(actual, expected, atol=TOL, rtol=0)


# ---------------------------------------------------------------------- one column

CASES = ["continuous", "heavy ties", "all equal", "hard 0/1", "no positives", "no negatives", "signed",
         "NaN", "wide float64", "single", "empty"]
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def column(case: str, dtype: torch.dtype, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    n = {"single": 1, "empty": 0}.get(case, N)
    x = torch.rand(n, generator=g, dtype=torch.float64)
    y = torch.rand(n, generator=g) < 0.35
    if case == "heavy ties":
        x = torch.randint(0, 4, (n,), generator=g) / 3.0
    elif case == "all equal":
        x = torch.full((n,), 0.25)
    elif case == "hard 0/1":
        x = torch.randint(0, 2, (n,), generator=g).double()
    elif case == "no positives":
        y = torch.zeros(n, dtype=torch.bool)
    elif case == "no negatives":
        y = torch.ones(n, dtype=torch.bool)
    elif case == "signed":
        x = torch.cat([torch.randn(n - 4, generator=g) * 3, torch.tensor([-0.0, 0.0, -0.0, 0.0])])
    elif case == "NaN":
        x = torch.where(torch.rand(n, generator=g) < 0.1, float("nan"), x)
    elif case == "wide float64":  # keys too wide to carry the label bit: the lexicographic fallback
        x = torch.randn(n, generator=g, dtype=torch.float64) * 1e300
    return x.to(dtype), y


@pytest.mark.parametrize("case,dtype", itertools.product(CASES, DTYPES))
def test_column_counts_and_auroc_equal_on_both_paths(case, dtype):
    x, y = column(case, dtype)
    host, dev = on_both_paths(lambda: _curve.sort_column(x, y))
    assert isinstance(host.keys, np.ndarray) and isinstance(dev.keys, torch.Tensor)
    same(torch.as_tensor(host.keys).long() + host.offset, dev.keys.long() + dev.offset)
    same(torch.as_tensor(host.labels).long(), dev.labels.long())
    counts = [_curve.exact_counts(c) for c in (host, dev)]
    same(tuple(counts[0][:5]), tuple(counts[1][:5]))  # fps, tps, thr, pos, neg: exactly
    assert counts[1].fps.dtype == counts[1].tps.dtype == torch.int64 and counts[1].thr.dtype == dtype
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no positives / negatives
        (auc_host, hard_host), (auc_dev, hard_dev) = _curve.exact_auroc(host, "a"), _curve.exact_auroc(dev, "a")
    same(auc_host, auc_dev, TOL)
    assert hard_host == hard_dev == (case == "hard 0/1")
    if case in ("no positives", "no negatives", "NaN", "empty", "single") or not bool(torch.isfinite(x).all()):
        return  # scikit-learn needs both classes and finite scores
    # scikit-learn on the float64 images of the scores (exact for every dtype)
    yn, xn = y.numpy().astype(int), x.double().numpy()
    near(auc_dev, skm.roc_auc_score(yn, xn))
    for c in counts:
        fpr, tpr, thr = _curve.roc(c)
        sfpr, stpr, sthr = skm.roc_curve(yn, xn, drop_intermediate=False)
        near(fpr, sfpr), near(tpr, stpr), near(thr[1:], sthr[1:])
        precision, recall, thr = _curve.pr(c)
        sp, sr, st = skm.precision_recall_curve(yn, xn, drop_intermediate=False)
        near(precision, sp), near(recall, sr), near(thr, st)
        near(_curve.average_precision(precision, recall, True), skm.average_precision_score(yn, xn))


@pytest.mark.parametrize("seed", range(6))
def test_random_columns_with_ties_agree_with_sklearn(seed):
    """Random sizes, tie levels and class balance, float32 and float64."""
    g = torch.Generator().manual_seed(seed)
    for trial in range(8):
        n = int(torch.randint(2, 3000, (1,), generator=g))
        levels = int(torch.randint(2, 50, (1,), generator=g))
        dtype = (torch.float32, torch.float64)[trial % 2]
        x = (torch.randint(0, levels, (n,), generator=g) / (levels - 1)).to(dtype)
        y = torch.rand(n, generator=g) < float(torch.rand((), generator=g))
        y[0], y[1] = True, False  # both classes
        host, dev = on_both_paths(lambda: _curve.sort_column(x, y))
        same(tuple(_curve.exact_counts(host)[:5]), tuple(_curve.exact_counts(dev)[:5]))
        want = skm.roc_auc_score(y.numpy(), x.double().numpy())
        for col in (host, dev):
            near(_curve.exact_auroc(col, "a")[0], want)


def test_sorted_holds_torch_tensors_on_the_device_path_and_numpy_on_the_host():
    x, y = column("heavy ties", torch.float32)
    host, dev = on_both_paths(lambda: _curve.sort_column(x, y))
    assert isinstance(host.keys, np.ndarray) and isinstance(host.labels, np.ndarray)
    assert isinstance(dev.keys, torch.Tensor) and isinstance(dev.labels, torch.Tensor)
    assert dev.keys.dtype == torch.int32  # scores in [0, 1]: the 32-bit sort
    assert not _curve.on_device_path(torch.device("cpu"))
    assert _curve.on_device_path(torch.device("meta")) and _curve.on_device_path(torch.device("cuda"))


# ---------------------------------------------------------------------- whole metrics


def binary(seed, nan=False):
    g = torch.Generator().manual_seed(seed)
    p = (torch.rand(N, generator=g) * 10).round() / 10
    if nan:
        p = torch.where(torch.rand(N, generator=g) < 0.1, float("nan"), p)
    return p, torch.randint(0, 2, (N,), generator=g)


def multiclass(seed, absent=False):
    g = torch.Generator().manual_seed(seed)
    p = (torch.randn(N, C, generator=g).softmax(1) * 8).round() / 8
    y = torch.randint(0, C, (N,), generator=g)
    return p, torch.where(y == 2, 0, y) if absent else y


def multilabel(seed, absent=False):
    g = torch.Generator().manual_seed(seed)
    p = (torch.rand(N, L, generator=g) * 6).round() / 6
    y = torch.randint(0, 2, (N, L), generator=g)
    if absent:
        y[:, 1] = 0
    return p, y


FIXED = {"recall_at_fixed_precision": "min_precision", "precision_at_fixed_recall": "min_recall",
         "sensitivity_at_specificity": "min_specificity", "specificity_at_sensitivity": "min_sensitivity"}


def run(metric, p, y, pieces=3):
    """The metric over ``pieces`` batches (exact states hold chunks)."""
    cuts = torch.linspace(0, p.shape[0], pieces + 1).long().tolist()
    s = metric.init()
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        s = metric.update(s, p[lo:hi], y[lo:hi])
    return metric.finalize(s)


def metrics_of(task: str, validate: bool = True):
    kw = {"validate_args": validate}
    if task == "binary":
        out = [fm.binary_auroc(**kw), fm.binary_auroc(max_fpr=0.3, **kw), fm.binary_average_precision(**kw),
               fm.binary_roc(**kw), fm.binary_precision_recall_curve(**kw), fm.binary_eer(**kw),
               fm.binary_logauc(**kw)]
        return out + [getattr(fm, f"binary_{k}")(**{a: 0.5}, **kw) for k, a in FIXED.items()]
    if task == "multiclass":
        kw["num_classes"] = C
        out = [fm.multiclass_auroc(average=a, **kw) for a in ("macro", "weighted", None)]
        out += [fm.multiclass_average_precision(average=a, **kw) for a in ("macro", "weighted", None)]
        out += [fm.multiclass_roc(average=a, **kw) for a in (None, "micro", "macro")]
        out += [fm.multiclass_precision_recall_curve(average=a, **kw) for a in (None, "micro", "macro")]
        out += [fm.multiclass_eer(average=a, **kw) for a in (None, "micro", "macro")]
        out += [fm.multiclass_logauc(**kw)]
        return out + [getattr(fm, f"multiclass_{k}")(**{a: 0.5}, **kw) for k, a in FIXED.items()]
    kw["num_labels"] = L
    out = [fm.multilabel_auroc(average=a, **kw) for a in ("micro", "macro", "weighted", None)]
    out += [fm.multilabel_average_precision(average=a, **kw) for a in ("micro", "macro", "weighted", None)]
    out += [fm.multilabel_roc(**kw), fm.multilabel_precision_recall_curve(**kw), fm.multilabel_eer(**kw),
            fm.multilabel_logauc(**kw)]
    return out + [getattr(fm, f"multilabel_{k}")(**{a: 0.5}, **kw) for k, a in FIXED.items()]


DATA = {"binary": binary, "multiclass": multiclass, "multilabel": multilabel}


@pytest.mark.parametrize("task,variant,seed", [(t, v, s) for t in DATA for v in ("plain", "absent") for s in (0, 1)])
def test_every_exact_curve_metric_is_the_same_on_both_paths(task, variant, seed):
    p, y = DATA[task](seed, variant == "absent") if task != "binary" else binary(seed)
    if task == "binary" and variant == "absent":
        y = torch.zeros_like(y)  # one class absent
    for metric in metrics_of(task):
        host, dev = on_both_paths(lambda: run(metric, p, y))
        same(host, dev, TOL)


def test_nan_scores_without_validation_are_the_same_on_both_paths():
    p, y = binary(3, nan=True)
    for metric in metrics_of("binary", validate=False):
        host, dev = on_both_paths(lambda: run(metric, p, y))
        same(host, dev, TOL)


@pytest.mark.parametrize("seed", [0, 1])
def test_device_path_metrics_match_sklearn(seed, monkeypatch):
    monkeypatch.setattr(_curve, "TORCH_ON_CPU", True)
    p, y = binary(seed)
    yn, pn = y.numpy(), p.double().numpy()
    near(run(fm.binary_auroc(), p, y), skm.roc_auc_score(yn, pn))
    near(run(fm.binary_average_precision(), p, y), skm.average_precision_score(yn, pn))
    fpr, tpr, thr = run(fm.binary_roc(), p, y)
    sfpr, stpr, sthr = skm.roc_curve(yn, pn, drop_intermediate=False)
    near(fpr, sfpr), near(tpr, stpr), near(thr[1:], sthr[1:])
    near(torch.stack(run(fm.binary_precision_recall_curve(), p, y)[:2]).T,
         np.stack(skm.precision_recall_curve(yn, pn, drop_intermediate=False)[:2]).T)
    p, y = multiclass(seed)
    yn, pn = y.numpy(), p.double().numpy()
    onehot = np.eye(C)[yn]
    for average in ("macro", "weighted"):
        near(run(fm.multiclass_auroc(num_classes=C, average=average), p, y),  # one-vs-rest (scores rounded)
             skm.roc_auc_score(onehot, pn, average=average))
        near(run(fm.multiclass_average_precision(num_classes=C, average=average), p, y),
             skm.average_precision_score(onehot, pn, average=average))
    fprs, tprs, _ = run(fm.multiclass_roc(num_classes=C), p, y)
    precisions, recalls, _ = run(fm.multiclass_precision_recall_curve(num_classes=C), p, y)
    for c in range(C):
        sfpr, stpr, _ = skm.roc_curve(onehot[:, c], pn[:, c], drop_intermediate=False)
        near(fprs[c], sfpr), near(tprs[c], stpr)
        sp, sr, _ = skm.precision_recall_curve(onehot[:, c], pn[:, c], drop_intermediate=False)
        near(precisions[c], sp), near(recalls[c], sr)
    p, y = multilabel(seed)
    yn, pn = y.numpy(), p.double().numpy()
    for average in ("micro", "macro", "weighted", None):
        near(run(fm.multilabel_auroc(num_labels=L, average=average), p, y), skm.roc_auc_score(yn, pn, average=average))
        near(run(fm.multilabel_average_precision(num_labels=L, average=average), p, y),
             skm.average_precision_score(yn, pn, average=average))


def test_the_device_path_never_goes_through_numpy(monkeypatch):
    """Stands in for "no device -> host copy of the data": no tensor is turned into a NumPy array."""
    def refuse(self, *args, **kwargs):
        raise AssertionError("the device path converted a tensor to NumPy")

    data = {task: make(0) for task, make in DATA.items()}
    monkeypatch.setattr(_curve, "TORCH_ON_CPU", True)
    monkeypatch.setattr(torch.Tensor, "numpy", refuse)
    for task, (p, y) in data.items():
        for metric in metrics_of(task):
            with warnings.catch_warnings(), validation.mode("deferred"):  # as on a device: no eager input checks
                warnings.simplefilter("ignore")
                run(metric, p, y)
