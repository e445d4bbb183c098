"""Runs the ``>>>`` examples of a package's public factories (and module docstrings) as doctests."""
import doctest
import importlib
import pkgutil
import warnings

import torch

import fmetrics


def run(package) -> tuple:
    """``(failed, ran, factories_without_example)`` over every module of ``package``."""
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    modules = [package] + [importlib.import_module(i.name)
                           for i in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    missing, ran = [], 0
    for name in package.__all__:
        doc = getattr(package, name).__doc__ or ""
        if ">>>" not in doc or "Args:" not in doc or "Returns:" not in doc:
            missing.append(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for module in modules:
            docs = [(module.__name__, module.__doc__)]
            docs += [(f"{module.__name__}.{k}", v.__doc__) for k, v in vars(module).items()
                     if callable(v) and getattr(v, "__module__", None) == module.__name__ and v.__doc__]
            for name, doc in docs:
                if doc and ">>>" in doc:
                    globs = {**vars(module), "fmetrics": fmetrics, "torch": torch}
                    runner.run(parser.get_doctest(doc, globs, name, module.__file__, 0))
                    ran += 1
    return runner.summarize(verbose=False).failed, ran, missing
