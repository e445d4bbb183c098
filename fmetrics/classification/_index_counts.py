"""Re-exports of the counting (stat-score family) metrics."""

__all__: list[str] = []
