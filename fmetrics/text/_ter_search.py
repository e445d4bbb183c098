"""TER's edit counts with sacrebleu's shift search and a faster beam edit distance.

sacrebleu's ``lib_ter`` (a port of TERCOM) spends most of its time in
``BeamEditDistance._edit_distance``, a Python loop that builds tuples per
cell. `BeamEditDistance` here computes the same rows (same beam, same
tie-breaking: substitution / match first, then deletion, then insertion),
keeping a row as two lists (costs, operations), and sacrebleu's own ``_shift``
drives the search, so the edits are sacrebleu's exactly.
"""
from __future__ import annotations

import math

from sacrebleu.metrics import lib_ter

__all__ = ["translation_edit_rate"]

_INF = lib_ter._INT_INFINITY
_BEAM = lib_ter._BEAM_WIDTH


class BeamEditDistance(lib_ter.BeamEditDistance):
    """sacrebleu's cached beam edit distance; a row is ``(costs, ops)`` (two lists) instead of a list of pairs
    (its cache and lookup are sacrebleu's)."""

    def __init__(self, words_ref: list):
        super().__init__(words_ref)
        m = self._n_words_ref
        self._initial_row = (list(range(m + 1)), ["i"] * (m + 1))

    def _edit_distance(self, words_h: list, start_h: int, cache: list):
        ref, m, n = self._words_ref, self._n_words_ref, len(words_h)
        ratio = m / n if words_h else 1
        beam = math.ceil(ratio / 2 + _BEAM) if _BEAM < ratio / 2 else _BEAM
        rows = list(cache)
        prev_c = rows[-1][0]
        for i in range(start_h + 1, n + 1):
            diag = math.floor(i * ratio)
            lo, hi = max(0, diag - beam), min(m + 1, diag + beam)
            if i == n:
                hi = m + 1
            cost, ops = [_INF] * (m + 1), ["x"] * (m + 1)
            word = words_h[i - 1]
            j = lo
            if j == 0:
                cost[0], ops[0] = prev_c[0] + 1, "d"
                j = 1
            left = cost[j - 1]
            for j in range(j, hi):
                if word == ref[j - 1]:
                    best, op = prev_c[j - 1], " "
                else:
                    best, op = prev_c[j - 1] + 1, "s"
                if prev_c[j] + 1 < best:
                    best, op = prev_c[j] + 1, "d"
                if left + 1 < best:
                    best, op = left + 1, "i"
                if best < _INF:  # else the cell stays (infinity, "x"), as sacrebleu's
                    cost[j], ops[j] = best, op
                    left = best
                else:
                    left = _INF
            rows.append((cost, ops))
            prev_c = cost
        trace = []
        i, j = n, m
        while i > 0 or j > 0:
            op = rows[i][1][j]
            trace.append(op)
            if op == " " or op == "s":
                i, j = i - 1, j - 1
            elif op == "i":
                j -= 1
            elif op == "d":
                i -= 1
            else:
                raise RuntimeError(f"TER: unknown edit operation {op!r}")
        return rows[n][0][m], rows[len(cache):], "".join(reversed(trace))


def translation_edit_rate(words_hyp: list, words_ref: list) -> tuple:
    """``(edits, reference length)`` of one hypothesis against one reference (sacrebleu's
    ``lib_ter.translation_edit_rate``, with `BeamEditDistance`)."""
    if not words_ref:
        return len(words_hyp), 0
    ed = BeamEditDistance(words_ref)
    shifts, words, checked = 0, words_hyp, 0
    while True:
        delta, shifted, checked = lib_ter._shift(words, words_ref, ed, checked)
        if checked >= lib_ter._MAX_SHIFT_CANDIDATES or delta <= 0:
            break
        shifts += 1
        words = shifted
    return shifts + ed(words)[0], len(words_ref)
