"""The registry of law-suite cases: every metric the package ships.

Each domain has one module here (``tests/cases/<domain>.py``) that appends
`Case` records to its module-level ``CASES`` list; `all_cases()` collects them
from every module in this package. The law suite, the multi-process
distributed tests and the coverage test are parametrized over `all_cases()`.
"""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from typing import Any, Callable, Optional

import torch


@dataclasses.dataclass(frozen=True)
class Case:
    """One metric configuration with its data and oracle.

    Attributes:
      id: unique test id, e.g. ``"mean-weighted"``.
      factory: the public factory (coverage is tracked by its ``__name__``).
      kwargs: factory arguments.
      batches: ``seed -> list of input tuples``.
      reference: oracle ``(*all_inputs) -> value`` (scikit-learn, SciPy, numpy
        or a hand formula), or ``None`` where the oracle lives in a parity test.
      check: extra `check_metric` keywords (``laws=`` to drop a law needs a
        ``why`` entry explaining it).
      why: reason for any law not checked.
      integer_state: the state holds only integers (distributed tests then
        compare exactly).
    """

    id: str
    factory: Callable[..., Any]
    kwargs: dict
    batches: Callable[[int], list]
    reference: Optional[Callable[..., Any]] = None
    check: dict = dataclasses.field(default_factory=dict)
    why: str = ""
    integer_state: bool = False

    def make(self):
        return self.factory(**self.kwargs)


def all_cases() -> list[Case]:
    cases: list[Case] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        cases.extend(getattr(module, "CASES", []))
    ids = [c.id for c in cases]
    dup = {i for i in ids if ids.count(i) > 1}
    assert not dup, f"duplicate case ids: {dup}"
    return cases


def random_splits(n: int, pieces: int, gen: torch.Generator) -> list[int]:
    """Sorted cut points splitting ``n`` samples into ``pieces`` uneven batches."""
    return sorted(torch.randint(0, n + 1, (pieces - 1,), generator=gen).tolist())
