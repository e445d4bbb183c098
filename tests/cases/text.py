"""Law-suite cases for the text metrics, and the synthetic corpora (random sentences plus the nasty cases)."""
from __future__ import annotations

import random

WORDS = ("the a cat dog sat on mat is was there house running runs ran quickly , . ! ? ; : ' \" ( ) "
         "1,000 3.14 2024-01-05 $5 50% U.S. don't it's e-mail x86_64 «quoted» — … ¿qué? ¡sí! "
         "数据 中文 测试 。 ， 東京 日本語 한국어 café naïve Straße ÉCOLE").split()
NASTY = [
    ("", "a reference"),
    ("a hypothesis", ""),
    ("", ""),
    ("word", "word"),
    ("word", "other"),
    ("数据测试。中文，东京", "数据 测试 。 中文"),
    ("He paid $1,000.50 (approx.) — «ok»!", "He paid $ 1,000.50 approx. -- ok !"),
    ("  spaced   out  ", "spaced out"),
    ("The THE the", "the"),
]


def sentence(rng: random.Random, lo: int = 1, hi: int = 12, words=WORDS) -> str:
    return " ".join(rng.choice(words) for _ in range(rng.randint(lo, hi)))


def noisy(rng: random.Random, s: str, rate: float = 0.3, words=WORDS) -> str:
    out = []
    for w in s.split():
        u = rng.random()
        if u < rate / 3:
            continue  # deletion
        if u < 2 * rate / 3:
            out.append(rng.choice(words))  # substitution
        else:
            out.append(w)
        if rng.random() < rate / 3:
            out.append(rng.choice(words))  # insertion
    return " ".join(out)


def pairs(seed: int, n: int = 40, nasty: bool = True) -> tuple[list, list]:
    """``n`` (hypothesis, reference) pairs, the nasty cases first."""
    rng = random.Random(seed)
    preds, target = [], []
    if nasty:
        for h, r in NASTY:
            preds.append(h)
            target.append(r)
    while len(preds) < n:
        r = sentence(rng)
        preds.append(noisy(rng, r))
        target.append(r)
    return preds, target


def multi_refs(seed: int, n: int = 40, max_refs: int = 3, nasty: bool = True) -> tuple[list, list]:
    """``n`` hypotheses, each with 1..max_refs references (counts differ per sentence)."""
    rng = random.Random(seed + 1000)
    preds, target = pairs(seed, n, nasty)
    refs = [[t] + [noisy(rng, t) for _ in range(rng.randint(0, max_refs - 1))] for t in target]
    return preds, refs


def batches(preds: list, target: list, sizes=(7, 0, 13, 1)) -> list:
    """Splits a corpus into batches of the given sizes (the rest in the last batch)."""
    out, i = [], 0
    for k in sizes:
        out.append((preds[i:i + k], target[i:i + k]))
        i += k
    out.append((preds[i:], target[i:]))
    return out
