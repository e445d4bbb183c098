"""Metric -> Metric transformations (bootstrap, grouped, running, classwise, multitask, ...)."""

__all__: list[str] = []
