"""Maximum-weight assignment of a square matrix (the Hungarian method, O(n³), NumPy).

Used in `finalize` only (cluster accuracy). The shortest augmenting path form
of Jonker-Volgenant with potentials, on costs ``max(w) - w``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["max_weight_assignment"]


def max_weight_assignment(weights: np.ndarray) -> np.ndarray:
    """``col[i]``: the column assigned to row ``i`` maximizing ``sum_i weights[i, col[i]]`` (square input)."""
    w = np.asarray(weights, dtype=np.float64)
    n = w.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    cost = w.max() - w
    inf = np.inf
    u = np.zeros(n + 1)
    v = np.zeros(n + 1)
    p = np.zeros(n + 1, dtype=np.int64)  # p[j]: row matched to column j (1-based; 0 = free)
    way = np.zeros(n + 1, dtype=np.int64)
    for i in range(1, n + 1):
        p[0] = i
        j0 = 0
        minv = np.full(n + 1, inf)
        used = np.zeros(n + 1, dtype=bool)
        while True:
            used[j0] = True
            i0 = p[j0]
            cur = cost[i0 - 1] - u[i0] - v[1:]
            free = ~used[1:]
            better = free & (cur < minv[1:])
            minv[1:][better] = cur[better]
            way[1:][better] = j0
            cand = np.where(free, minv[1:], inf)
            j1 = int(np.argmin(cand)) + 1
            delta = cand[j1 - 1]
            u[p[used]] += delta
            v[used] -= delta
            minv[1:][free] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while True:
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
            if j0 == 0:
                break
    col = np.zeros(n, dtype=np.int64)
    col[p[1:] - 1] = np.arange(n)
    return col
