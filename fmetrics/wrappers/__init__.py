"""Metric -> Metric transformations: bootstrap intervals, groups, running windows, class-wise, multitask.

Each wrapper takes a `fmetrics.Metric` and returns one, so wrappers compose,
pass the law suite, go into collections, and reduce across ranks like any
metric. See docs/wrappers.md.
"""
from fmetrics.wrappers.bootstrap import BootstrapState, bootstrap
from fmetrics.wrappers.classwise import classwise
from fmetrics.wrappers.grouped import GroupedState, grouped
from fmetrics.wrappers.min_max import MinMaxState, min_max, min_max_reset
from fmetrics.wrappers.multioutput import MultioutputState, multioutput
from fmetrics.wrappers.multitask import multitask
from fmetrics.wrappers.running import RunningState, running
from fmetrics.wrappers.paired import PairedState, paired_bootstrap, permutation_test
from fmetrics.wrappers.intervals import IntervalState, confidence_interval
from fmetrics.wrappers.feature_share import feature_share
from fmetrics.wrappers.input_transformers import (binary_target_transformer, lambda_input_transformer,
                                                  metric_input_transformer)

__all__ = ["bootstrap", "grouped", "running", "min_max", "classwise", "multitask", "multioutput",
           "paired_bootstrap", "permutation_test",
           "confidence_interval", "feature_share", "lambda_input_transformer", "binary_target_transformer",
           "metric_input_transformer"]
