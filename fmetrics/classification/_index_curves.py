"""Re-exports of the score-ranking (curve family) metrics."""

__all__: list[str] = []
