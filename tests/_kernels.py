"""Both paths of a module that uses the optional C kernels (`fmetrics._kernels.native`), for a fixture."""
import pytest


def on_path(path: str, monkeypatch, module) -> str:
    """``"native"``: the module's C kernels (a skip where they were not built); any other path: the module's
    numpy / torch code, with ``module._native`` set to ``None`` for the test."""
    if path != "native":
        monkeypatch.setattr(module, "_native", None)
    elif module._native is None:
        pytest.skip("fmetrics._native was not built (no C compiler at install)")
    return path
