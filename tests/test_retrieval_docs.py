"""Every public retrieval factory documents itself: Args (every argument), Inputs, Returns, a checked Example."""
from __future__ import annotations

import doctest
import inspect
import typing

import pytest
import torch

import fmetrics
from fmetrics import retrieval

FACTORIES = [getattr(retrieval, n) for n in retrieval.__all__]


def _section(doc: str, title: str) -> str:
    lines = doc.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"{title}:")
    body = []
    for line in lines[start + 1:]:
        if line.strip() and not line.startswith(" " * 6):
            break
        body.append(line)
    return "\n".join(body)


@pytest.mark.parametrize("factory", FACTORIES, ids=lambda f: f.__name__)
def test_docstring_sections(factory):
    doc = factory.__doc__
    for token in ("<INPUTS", "<COMMON", "<RETURNS"):
        assert token not in doc, f"{factory.__name__}: unfilled placeholder {token}"
    for title in ("Args", "Inputs", "Returns"):
        assert f"    {title}:" in doc, f"{factory.__name__}: no {title} section"
    args = _section(doc, "Args")
    for name in inspect.signature(factory).parameters:
        assert f"      {name}: " in args, f"{factory.__name__}: argument {name!r} undocumented"
    inputs = _section(doc, "Inputs")
    for name in ("preds", "target", "indexes"):
        assert f"``{name}``" in inputs
    assert "query id" in inputs
    assert "Example::" in doc and ">>>" in doc


@pytest.mark.parametrize("factory", FACTORIES, ids=lambda f: f.__name__)
def test_configuration_is_keyword_only_with_literal_options(factory):
    params = inspect.signature(factory).parameters
    assert all(p.kind is p.KEYWORD_ONLY for p in params.values())
    hints = typing.get_type_hints(factory)
    assert typing.get_args(hints["empty_target_action"]) == ("neg", "pos", "skip", "error")
    literal = typing.get_args(hints["aggregation"])[0]
    assert typing.get_args(literal) == ("mean", "median", "min", "max", "none")
    with pytest.raises(TypeError, match="keyword-only"):
        factory(3)
    m = factory(aggregation="max")
    assert repr(m) == f"{factory.__name__}(aggregation='max')"


@pytest.mark.parametrize("factory", FACTORIES, ids=lambda f: f.__name__)
def test_examples_run(factory):
    finder, runner = doctest.DocTestFinder(recurse=False), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = finder.find(factory, factory.__name__, globs={"fmetrics": fmetrics, "torch": torch})
    assert tests and tests[0].examples
    for t in tests:
        runner.run(t)
    assert runner.failures == 0, f"{factory.__name__}: a doctest failed (see the output above)"
