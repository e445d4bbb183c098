"""Re-exports of the counting (stat-score family) metrics."""
from fmetrics.classification.accuracy import *  # noqa: F401,F403
from fmetrics.classification.accuracy import __all__ as _accuracy
from fmetrics.classification.cohen_kappa import *  # noqa: F401,F403
from fmetrics.classification.cohen_kappa import __all__ as _cohen_kappa
from fmetrics.classification.confusion_matrix import *  # noqa: F401,F403
from fmetrics.classification.confusion_matrix import __all__ as _confusion_matrix
from fmetrics.classification.exact_match import *  # noqa: F401,F403
from fmetrics.classification.exact_match import __all__ as _exact_match
from fmetrics.classification.f_beta import *  # noqa: F401,F403
from fmetrics.classification.f_beta import __all__ as _f_beta
from fmetrics.classification.group_fairness import *  # noqa: F401,F403
from fmetrics.classification.group_fairness import __all__ as _group_fairness
from fmetrics.classification.hamming import *  # noqa: F401,F403
from fmetrics.classification.hamming import __all__ as _hamming
from fmetrics.classification.jaccard import *  # noqa: F401,F403
from fmetrics.classification.jaccard import __all__ as _jaccard
from fmetrics.classification.matthews_corrcoef import *  # noqa: F401,F403
from fmetrics.classification.matthews_corrcoef import __all__ as _matthews_corrcoef
from fmetrics.classification.negative_predictive_value import *  # noqa: F401,F403
from fmetrics.classification.negative_predictive_value import __all__ as _npv
from fmetrics.classification.precision_recall import *  # noqa: F401,F403
from fmetrics.classification.precision_recall import __all__ as _precision_recall
from fmetrics.classification.specificity import *  # noqa: F401,F403
from fmetrics.classification.specificity import __all__ as _specificity
from fmetrics.classification.stat_scores import *  # noqa: F401,F403
from fmetrics.classification.stat_scores import __all__ as _stat_scores

__all__: list[str] = [
    *_stat_scores, *_accuracy, *_precision_recall, *_f_beta, *_specificity, *_npv, *_jaccard, *_hamming,
    *_exact_match, *_confusion_matrix, *_matthews_corrcoef, *_cohen_kappa, *_group_fairness,
]
