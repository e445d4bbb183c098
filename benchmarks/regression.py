"""Regression workloads: 200 batches of 4096x16 (preds, target) float32 pairs (25 with --quick),
1000 batches of 16x16 for the per-update overhead of Pearson and R² (100 with --quick),
and the rank correlations on one stream of 10^6 (Spearman) / 5000 (Kendall) pairs.

fmetrics' ``init / update* / finalize`` against torchmetrics' ``update* / compute``,
both with 16 outputs on the 4096x16 data.
"""
from __future__ import annotations

import torch

import fmetrics
from benchmarks.registry import fmetrics_run, on_device, register, torchmetrics_run

ROWS, COLS = 4096, 16
SMALL_ROWS, SMALL_BATCHES = 16, 1000
SPEARMAN_PAIRS, SPEARMAN_CHUNKS = 10**6, 10
KENDALL_PAIRS = 5000


def _batches(quick: bool) -> int:
    return 25 if quick else 200


def _pairs(n_batches: int, rows: int, cols=None, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    shape = (n_batches, rows) if cols is None else (n_batches, rows, cols)
    target = torch.randn(shape, generator=g)
    preds = 0.8 * target + 0.6 * torch.randn(shape, generator=g)
    return list(zip(preds.unbind(0), target.unbind(0)))


def _torchmetrics(cls_name: str, batches, **kwargs):
    import torchmetrics.regression as tm

    cls = getattr(tm, cls_name)
    return torchmetrics_run(lambda: cls(**kwargs), batches)


def _workload(name: str, factory, tm_class: str, doc: str, tm_kwargs=None, small: bool = False, **kwargs):
    def n_batches(quick: bool) -> int:
        return (SMALL_BATCHES // (10 if quick else 1)) if small else _batches(quick)

    rows = SMALL_ROWS if small else ROWS

    @register(f"regression/{name}", domain="regression", samples=lambda quick: n_batches(quick) * rows,
              bytes=lambda quick: 2 * n_batches(quick) * rows * COLS * 4, peers=("torchmetrics",), description=doc)
    def build(quick: bool, device="cpu"):
        batches = on_device(_pairs(n_batches(quick), rows, COLS), device)
        runs = {"fmetrics": fmetrics_run(factory(**kwargs), batches)}
        try:
            runs["torchmetrics"] = _torchmetrics(tm_class, batches, **(tm_kwargs or {}))
        except ImportError:
            pass
        return runs

    return build


_workload("mean_squared_error", fmetrics.mean_squared_error, "MeanSquaredError",
          "MSE per output of 4096x16 batches vs MeanSquaredError(num_outputs=16)",
          tm_kwargs={"num_outputs": COLS}, num_outputs=COLS)
_workload("mean_absolute_error", fmetrics.mean_absolute_error, "MeanAbsoluteError",
          "MAE per output of 4096x16 batches vs MeanAbsoluteError(num_outputs=16)",
          tm_kwargs={"num_outputs": COLS}, num_outputs=COLS)
_workload("pearson_corrcoef", fmetrics.pearson_corrcoef, "PearsonCorrCoef",
          "Pearson r of 16 outputs, 4096x16 batches, vs PearsonCorrCoef(num_outputs=16)",
          tm_kwargs={"num_outputs": COLS}, num_outputs=COLS)
_workload("r2_score", fmetrics.r2_score, "R2Score",
          "R2 (uniform average of 16 outputs), 4096x16 batches, vs R2Score", num_outputs=COLS)
_workload("pearson_corrcoef_16rows", fmetrics.pearson_corrcoef, "PearsonCorrCoef",
          "Pearson r of 16 outputs, 1000 batches of 16x16 (per-update overhead)",
          tm_kwargs={"num_outputs": COLS}, small=True, num_outputs=COLS)
_workload("r2_score_16rows", fmetrics.r2_score, "R2Score",
          "R2 of 16 outputs, 1000 batches of 16x16 (per-update overhead)", small=True, num_outputs=COLS)
_workload("explained_variance", fmetrics.explained_variance, "ExplainedVariance",
          "explained variance (uniform average of 16 outputs), 4096x16 batches, vs ExplainedVariance",
          num_outputs=COLS)
_workload("mean_squared_error_16rows", fmetrics.mean_squared_error, "MeanSquaredError",
          "MSE of 16 outputs, 1000 batches of 16x16 (per-update overhead)", tm_kwargs={"num_outputs": COLS},
          small=True, num_outputs=COLS)
_workload("mean_absolute_error_16rows", fmetrics.mean_absolute_error, "MeanAbsoluteError",
          "MAE of 16 outputs, 1000 batches of 16x16 (per-update overhead)", tm_kwargs={"num_outputs": COLS},
          small=True, num_outputs=COLS)
_workload("explained_variance_16rows", fmetrics.explained_variance, "ExplainedVariance",
          "explained variance of 16 outputs, 1000 batches of 16x16 (per-update overhead)", small=True,
          num_outputs=COLS)

# exact=True beside the default: float64 arithmetic per element (docs/regression.md, "Precision")
for _name, _factory, _tm, _tm_kwargs in (
        ("mean_squared_error", fmetrics.mean_squared_error, "MeanSquaredError", {"num_outputs": COLS}),
        ("mean_absolute_error", fmetrics.mean_absolute_error, "MeanAbsoluteError", {"num_outputs": COLS}),
        ("pearson_corrcoef", fmetrics.pearson_corrcoef, "PearsonCorrCoef", {"num_outputs": COLS}),
        ("r2_score", fmetrics.r2_score, "R2Score", {}),
        ("explained_variance", fmetrics.explained_variance, "ExplainedVariance", {})):
    _workload(f"{_name}_exact", _factory, _tm, f"{_name} with exact=True, 4096x16 batches", tm_kwargs=_tm_kwargs,
              num_outputs=COLS, exact=True)
    _workload(f"{_name}_16rows_exact", _factory, _tm, f"{_name} with exact=True, 1000 batches of 16x16",
              tm_kwargs=_tm_kwargs, small=True, num_outputs=COLS, exact=True)

# NRMSE (std: every normalization keeps the same state; torchmetrics updates all of them every batch)
_NRMSE = {"normalization": "std", "num_outputs": COLS}
_workload("normalized_root_mean_squared_error", fmetrics.normalized_root_mean_squared_error,
          "NormalizedRootMeanSquaredError", "NRMSE (std) of 16 outputs, 4096x16 batches, vs "
          "NormalizedRootMeanSquaredError", tm_kwargs=_NRMSE, **_NRMSE)
_workload("normalized_root_mean_squared_error_16rows", fmetrics.normalized_root_mean_squared_error,
          "NormalizedRootMeanSquaredError", "NRMSE (std) of 16 outputs, 1000 batches of 16x16 (per-update overhead)",
          tm_kwargs=_NRMSE, small=True, **_NRMSE)
_workload("normalized_root_mean_squared_error_exact", fmetrics.normalized_root_mean_squared_error,
          "NormalizedRootMeanSquaredError", "NRMSE (std) with exact=True, 4096x16 batches", tm_kwargs=_NRMSE,
          exact=True, **_NRMSE)
_workload("normalized_root_mean_squared_error_16rows_exact", fmetrics.normalized_root_mean_squared_error,
          "NormalizedRootMeanSquaredError", "NRMSE (std) with exact=True, 1000 batches of 16x16", tm_kwargs=_NRMSE,
          small=True, exact=True, **_NRMSE)


@register("regression/spearman_corrcoef", domain="regression",
          samples=lambda quick: SPEARMAN_PAIRS // (10 if quick else 1),
          bytes=lambda quick: 2 * 4 * SPEARMAN_PAIRS // (10 if quick else 1), peers=("torchmetrics",))
def spearman(quick: bool, device="cpu"):
    """Spearman rho of 10^6 pairs in 10 chunks (10^5 with --quick) vs SpearmanCorrCoef."""
    n = SPEARMAN_PAIRS // (10 if quick else 1)
    batches = on_device(_pairs(SPEARMAN_CHUNKS, n // SPEARMAN_CHUNKS), device)
    runs = {"fmetrics": fmetrics_run(fmetrics.spearman_corrcoef(), batches)}
    try:
        runs["torchmetrics"] = _torchmetrics("SpearmanCorrCoef", batches)
    except ImportError:
        pass
    return runs


@register("regression/kendall_rank_corrcoef", domain="regression",
          samples=lambda quick: KENDALL_PAIRS // (5 if quick else 1), peers=("torchmetrics",))
def kendall(quick: bool, device="cpu"):
    """Kendall tau-b of 5000 pairs with ties (1000 with --quick) vs KendallRankCorrCoef (O(n^2))."""
    n = KENDALL_PAIRS // (5 if quick else 1)
    batches = on_device([(torch.round(p * 4), torch.round(t * 4)) for p, t in _pairs(5, n // 5)], device)
    runs = {"fmetrics": fmetrics_run(fmetrics.kendall_rank_corrcoef(), batches)}
    try:
        runs["torchmetrics"] = _torchmetrics("KendallRankCorrCoef", batches)
    except ImportError:
        pass
    return runs
