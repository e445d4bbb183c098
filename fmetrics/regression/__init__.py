"""Regression metrics."""

__all__: list[str] = []
