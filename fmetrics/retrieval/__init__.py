"""Retrieval metrics."""

__all__: list[str] = []
