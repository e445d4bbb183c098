"""Test helper: count how often each member of a collection runs its update."""


def counting(metrics: dict):
    """Wraps each member's update to record its name per call; the state keys stay as they are.

    Returns ``(wrapped_metrics, calls)``: ``calls`` lists member names in call order.
    """
    calls = []

    def wrap(name, m):
        def update(state, *inputs):
            calls.append(name)
            return m.update(state, *inputs)

        return m.replace(update=update)

    return {k: wrap(k, m) for k, m in metrics.items()}, calls
