"""Every docstring example in the package runs and prints what it shows (doctest), module by module."""
import doctest
import importlib
import pkgutil
import warnings
from typing import NamedTuple

import pytest
import torch

import fmetrics


def _modules() -> list[str]:
    names = ["fmetrics"]
    for info in pkgutil.walk_packages(fmetrics.__path__, "fmetrics."):
        names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name):
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as err:  # a domain whose optional extra is not installed
        pytest.skip(f"{name} needs {err.name}")
    globs = {**vars(module), "torch": torch, "fmetrics": fmetrics, "fm": fmetrics, "NamedTuple": NamedTuple,
             "merge_fields": fmetrics.state.merge_fields, "Metric": fmetrics.Metric, "Family": fmetrics.Family}
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(module, name, globs=globs) if t.examples]
    if not tests:
        pytest.skip(f"{name} has no examples")
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for test in tests:
            runner.run(test, out=lambda s: None, clear_globs=False)
    summary = runner.summarize(verbose=False)
    if summary.failed:
        report = []
        for test in tests:
            r = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
            out = []
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r.run(test, out=out.append, clear_globs=False)
            if r.failures:
                report.append("".join(out)[:1500])
        pytest.fail(f"{summary.failed} of {summary.attempted} examples failed in {name}:\n" + "\n".join(report))
