"""Clustering: extrinsic scores over a contingency table of predicted clusters and classes, intrinsic scores
over points and their labels. See docs/clustering.md."""
from fmetrics.clustering.cluster_accuracy import cluster_accuracy
from fmetrics.clustering.homogeneity import completeness_score, homogeneity_score, v_measure_score
from fmetrics.clustering.intrinsic import calinski_harabasz_score, davies_bouldin_score, dunn_index
from fmetrics.clustering.mutual_info import (
    adjusted_mutual_info_score,
    mutual_info_score,
    normalized_mutual_info_score,
)
from fmetrics.clustering.rand import adjusted_rand_score, fowlkes_mallows_index, rand_score

__all__ = [
    "rand_score",
    "adjusted_rand_score",
    "mutual_info_score",
    "normalized_mutual_info_score",
    "adjusted_mutual_info_score",
    "fowlkes_mallows_index",
    "homogeneity_score",
    "completeness_score",
    "v_measure_score",
    "cluster_accuracy",
    "calinski_harabasz_score",
    "davies_bouldin_score",
    "dunn_index",
]
