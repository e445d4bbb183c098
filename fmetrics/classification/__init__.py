"""Classification metrics."""

__all__: list[str] = []
