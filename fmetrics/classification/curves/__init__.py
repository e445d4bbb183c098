"""Score and curve metrics: ROC / PR curves, AUROC, AP, operating points, EER, log-AUC, calibration, hinge, ranking."""
from fmetrics.classification.curves.roc import (
    binary_roc,
    multiclass_roc,
    multilabel_roc,
    roc,
)
from fmetrics.classification.curves.precision_recall_curve import (
    binary_precision_recall_curve,
    multiclass_precision_recall_curve,
    multilabel_precision_recall_curve,
    precision_recall_curve,
)
from fmetrics.classification.curves.auroc import (
    binary_auroc,
    multiclass_auroc,
    multilabel_auroc,
    auroc,
)
from fmetrics.classification.curves.average_precision import (
    binary_average_precision,
    multiclass_average_precision,
    multilabel_average_precision,
    average_precision,
)
from fmetrics.classification.curves.fixed_point import (
    binary_recall_at_fixed_precision,
    multiclass_recall_at_fixed_precision,
    multilabel_recall_at_fixed_precision,
    recall_at_fixed_precision,
    binary_precision_at_fixed_recall,
    multiclass_precision_at_fixed_recall,
    multilabel_precision_at_fixed_recall,
    precision_at_fixed_recall,
    binary_sensitivity_at_specificity,
    multiclass_sensitivity_at_specificity,
    multilabel_sensitivity_at_specificity,
    sensitivity_at_specificity,
    binary_specificity_at_sensitivity,
    multiclass_specificity_at_sensitivity,
    multilabel_specificity_at_sensitivity,
    specificity_at_sensitivity,
)
from fmetrics.classification.curves.eer import (
    binary_eer,
    multiclass_eer,
    multilabel_eer,
    eer,
)
from fmetrics.classification.curves.logauc import (
    binary_logauc,
    multiclass_logauc,
    multilabel_logauc,
    logauc,
)
from fmetrics.classification.curves.calibration_error import (
    binary_calibration_error,
    multiclass_calibration_error,
    calibration_error,
)
from fmetrics.classification.curves.hinge_loss import (
    binary_hinge_loss,
    multiclass_hinge_loss,
    hinge_loss,
)
from fmetrics.classification.curves.delong import binary_auroc_ci, delong_test
from fmetrics.classification.curves.ranking import (
    multilabel_ranking_average_precision,
    multilabel_ranking_loss,
    multilabel_coverage_error,
)

__all__ = [
    "binary_roc",
    "multiclass_roc",
    "multilabel_roc",
    "roc",
    "binary_precision_recall_curve",
    "multiclass_precision_recall_curve",
    "multilabel_precision_recall_curve",
    "precision_recall_curve",
    "binary_auroc",
    "multiclass_auroc",
    "multilabel_auroc",
    "auroc",
    "binary_average_precision",
    "multiclass_average_precision",
    "multilabel_average_precision",
    "average_precision",
    "binary_recall_at_fixed_precision",
    "multiclass_recall_at_fixed_precision",
    "multilabel_recall_at_fixed_precision",
    "recall_at_fixed_precision",
    "binary_precision_at_fixed_recall",
    "multiclass_precision_at_fixed_recall",
    "multilabel_precision_at_fixed_recall",
    "precision_at_fixed_recall",
    "binary_sensitivity_at_specificity",
    "multiclass_sensitivity_at_specificity",
    "multilabel_sensitivity_at_specificity",
    "sensitivity_at_specificity",
    "binary_specificity_at_sensitivity",
    "multiclass_specificity_at_sensitivity",
    "multilabel_specificity_at_sensitivity",
    "specificity_at_sensitivity",
    "binary_eer",
    "multiclass_eer",
    "multilabel_eer",
    "eer",
    "binary_logauc",
    "multiclass_logauc",
    "multilabel_logauc",
    "logauc",
    "binary_calibration_error",
    "multiclass_calibration_error",
    "calibration_error",
    "binary_hinge_loss",
    "multiclass_hinge_loss",
    "hinge_loss",
    "multilabel_ranking_average_precision",
    "multilabel_ranking_loss",
    "multilabel_coverage_error",
    "delong_test",
    "binary_auroc_ci",
]
