"""examples/plot_curves.py renders the README's picture (headless)."""
import importlib.util
import pathlib

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "plot_curves.py"


def test_plot_example_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    spec = importlib.util.spec_from_file_location("plot_curves_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = module.main(tmp_path / "curves.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
