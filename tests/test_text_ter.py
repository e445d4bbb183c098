"""TER's faster beam edit distance (`fmetrics.text._ter_search`) against sacrebleu's ``lib_ter`` itself."""
from __future__ import annotations

import random

import pytest

lib_ter = pytest.importorskip("sacrebleu.metrics.lib_ter", reason="sacrebleu is the TER oracle")


def _pairs(seed: int, n: int):
    """Edited word sequences: substitutions, drops, insertions, moved blocks, very unequal lengths, empties."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(rng.choice([3, 12, 200]))]
    out = [([], []), (["a"], []), ([], ["a"]), (["a", "b"] * 40, ["b"]), (["x"], ["y"] * 90)]
    while len(out) < n:
        ref = [rng.choice(vocab) for _ in range(rng.randint(1, rng.choice([8, 30])))]
        hyp = [rng.choice(vocab) if rng.random() < 0.2 else w for w in ref if rng.random() > 0.1]
        if len(hyp) > 4 and rng.random() < 0.5:  # move a block: the shift search's case
            i, k = rng.randrange(len(hyp)), rng.randint(1, 6)
            block, rest = hyp[i:i + k], hyp[:i] + hyp[i + k:]
            j = rng.randrange(len(rest) + 1)
            hyp = rest[:j] + block + rest[j:]
        if rng.random() < 0.1:
            hyp = hyp * 3  # far longer than the reference: a wider beam
        out.append((hyp, ref))
    return out


@pytest.mark.parametrize("seed", range(3))
def test_edits_equal_sacrebleus_lib_ter(seed):
    from fmetrics.text._ter_search import translation_edit_rate

    pairs = _pairs(seed, 40)
    got = [translation_edit_rate(h, r) for h, r in pairs]
    want = [lib_ter.translation_edit_rate(h, r) for h, r in pairs]
    assert got == want
    assert sum(e for e, _ in want) > 0


def test_rows_and_traces_equal_sacrebleus():
    """Every call's distance, trace and newly computed rows (as (cost, op) cells) are sacrebleu's."""
    from fmetrics.text._ter_search import BeamEditDistance

    for hyp, ref in _pairs(9, 25):
        if not ref:
            continue
        ours, theirs = BeamEditDistance(ref), lib_ter.BeamEditDistance(ref)
        for words in (hyp, hyp[::-1], hyp[1:] + hyp[:1], hyp):  # the last call starts from cached rows
            start, dist = theirs._find_cache(words)
            d, rows, trace = theirs._edit_distance(words, start, dist)
            start2, dist2 = ours._find_cache(words)
            d2, rows2, trace2 = ours._edit_distance(words, start2, dist2)
            assert (d2, trace2, start2) == (d, trace, start)
            assert [list(zip(*r)) for r in rows2] == [list(r) for r in rows]
            theirs._add_cache(words, rows)
            ours._add_cache(words, rows2)
