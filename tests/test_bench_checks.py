"""Every pytest-benchmark test checks the value its timed call returned (benchmarks/test_*_bench.py, read with ast)."""
import ast
import pathlib

import pytest

SUITES = sorted((pathlib.Path(__file__).resolve().parent.parent / "benchmarks").glob("test_*_bench.py"))


def _is_timed(node) -> bool:
    """``benchmark(...)`` or ``benchmark.pedantic(...)``."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr == "pedantic":
        f = f.value
    return isinstance(f, ast.Name) and f.id == "benchmark"


def _is_check(node) -> bool:
    """An ``assert`` statement, or a call of a function named ``assert...`` (assert_agrees, assert_close, ...)."""
    if isinstance(node, ast.Assert):
        return True
    f = node.func if isinstance(node, ast.Call) else None
    return (getattr(f, "id", None) or getattr(f, "attr", "")).startswith("assert")


def unchecked(source: str) -> list[str]:
    """The test functions of ``source`` with a timed call whose value no check uses.

    A timed call's value is checked when the call sits inside a check, or when it is bound to a name that
    a check after it reads.
    """
    bad = []
    for fn in ast.walk(ast.parse(source)):
        if not (isinstance(fn, ast.FunctionDef) and fn.name.startswith("test")):
            continue
        checks = [n for n in ast.walk(fn) if _is_check(n)]
        inside = {id(n) for c in checks for n in ast.walk(c)}
        reads = [(n.id, c.lineno) for c in checks for n in ast.walk(c) if isinstance(n, ast.Name)]
        bound = {id(a.value): {n.id for t in a.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
                 for a in ast.walk(fn) if isinstance(a, ast.Assign)}
        for call in filter(_is_timed, ast.walk(fn)):
            names = bound.get(id(call), set())
            if id(call) not in inside and not any(n in names and line > call.lineno for n, line in reads):
                bad.append(fn.name)
                break
    return bad


def test_the_suites_are_found():
    assert len(SUITES) >= 10 and all(any(map(_is_timed, ast.walk(ast.parse(p.read_text())))) for p in SUITES)


@pytest.mark.parametrize("path", SUITES, ids=[p.name for p in SUITES])
def test_every_timed_value_is_checked(path):
    assert unchecked(path.read_text()) == [], f"{path.name}: timed results nobody checks"


VACUOUS = '''
def test_discarded(benchmark):
    m = make()
    benchmark(m.update, x)
    expected = make()(x)
    assert_agrees(make()(x), expected)

def test_bound_not_checked(benchmark):
    value = benchmark.pedantic(f, rounds=3, iterations=1)
    assert other == 1

def test_checked_before_timing(benchmark):
    value = f()
    assert value == 1
    value = benchmark(f)
'''

CHECKED = '''
def test_bound(benchmark):
    state = benchmark(m.update, m.init(), x)
    assert_agrees(m.finalize(state), want, 1e-4)

def test_inline(benchmark):
    assert_agrees(benchmark(run), want)

def test_assert(benchmark):
    value = benchmark.pedantic(updated, setup=setup, rounds=5, iterations=1)
    assert float(value.compute()) == 1.0
'''


def test_the_guard_reports_vacuous_benchmarks():
    assert unchecked(VACUOUS) == ["test_discarded", "test_bound_not_checked", "test_checked_before_timing"]
    assert unchecked(CHECKED) == []
