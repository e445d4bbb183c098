"""Regression and correlation metrics (torchmetrics' functional names and options).

Every metric is a member of a `fmetrics.Family` (one state definition, named
finalizers): MSE/RMSE, R²/explained variance/RSE, Pearson/concordance,
Spearman/Kendall and the four NRMSE normalizations over one configuration
share one state in a collection. Means, variances and covariances are
Chan-merged float64 moments (`fmetrics.regression._moments`), never raw sums
of squares; Spearman and Kendall keep a concatenating state and rank once in
`finalize`. NaN/inf follow one rule, ``nan_strategy`` (docs/regression.md).
"""
from fmetrics.regression.concordance import concordance_corrcoef
from fmetrics.regression.cosine_similarity import cosine_similarity
from fmetrics.regression.crps import continuous_ranked_probability_score
from fmetrics.regression.csi import critical_success_index
from fmetrics.regression.explained_variance import explained_variance
from fmetrics.regression.js_divergence import jensen_shannon_divergence
from fmetrics.regression.kendall import kendall_rank_corrcoef
from fmetrics.regression.kl_divergence import kl_divergence
from fmetrics.regression.log_cosh import log_cosh_error
from fmetrics.regression.log_mse import mean_squared_log_error
from fmetrics.regression.mae import mean_absolute_error
from fmetrics.regression.mape import mean_absolute_percentage_error
from fmetrics.regression.minkowski import minkowski_distance
from fmetrics.regression.mse import mean_squared_error
from fmetrics.regression.nrmse import normalized_root_mean_squared_error
from fmetrics.regression.pearson import pearson_corrcoef
from fmetrics.regression.r2 import r2_score
from fmetrics.regression.rse import relative_squared_error
from fmetrics.regression.spearman import spearman_corrcoef
from fmetrics.regression.symmetric_mape import symmetric_mean_absolute_percentage_error
from fmetrics.regression.tweedie_deviance import tweedie_deviance_score
from fmetrics.regression.wmape import weighted_mean_absolute_percentage_error

__all__ = [
    "concordance_corrcoef",
    "continuous_ranked_probability_score",
    "cosine_similarity",
    "critical_success_index",
    "explained_variance",
    "jensen_shannon_divergence",
    "kendall_rank_corrcoef",
    "kl_divergence",
    "log_cosh_error",
    "mean_absolute_error",
    "mean_absolute_percentage_error",
    "mean_squared_error",
    "mean_squared_log_error",
    "minkowski_distance",
    "normalized_root_mean_squared_error",
    "pearson_corrcoef",
    "r2_score",
    "relative_squared_error",
    "spearman_corrcoef",
    "symmetric_mean_absolute_percentage_error",
    "tweedie_deviance_score",
    "weighted_mean_absolute_percentage_error",
]
