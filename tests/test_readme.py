"""The README's code blocks run as written."""
import importlib
import pathlib
import re
import sys

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def _bash_blocks():
    return [b.strip().splitlines() for b in re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)]


def test_readme_opens_with_the_main_example():
    """Safe to paste: the install and the example, each with its duration; the test suite has its own block."""
    first = _bash_blocks()[0]
    commands = [line.split("#")[0].split()[:2] for line in first]
    assert commands == [["pip", "install"], ["python", "examples/retrieval_ddp.py"]]
    assert all("# about" in line for line in first) and "pytest" not in "".join(first)


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    # each block becomes an importable module, as in a user's project (states must pickle)
    blocks = _python_blocks()
    assert len(blocks) >= 2
    monkeypatch.syspath_prepend(str(tmp_path))
    for i, code in enumerate(blocks):
        (tmp_path / f"readme_block_{i}.py").write_text(code)
        importlib.import_module(f"readme_block_{i}")
        sys.modules.pop(f"readme_block_{i}")


def test_ci_runs_the_readme_test_commands():
    """One command for both: CI runs the README's test block line for line and installs nothing apart but torch."""
    block = next(b for b in _bash_blocks() if any("pytest" in line for line in b))
    commands = [line.split("#")[0].strip() for line in block]
    assert commands == ['pip install -e ".[dev]"', 'python -m pytest -q -m "not slow" -n 2']
    assert all(re.search(r"# about \d+ min", line) for line in block)  # how long each takes
    ci = [line.strip() for line in (README.parent / ".ci" / "run").read_text().splitlines()]
    assert all(c in ci for c in commands)
    installs = [line for line in ci if "pip install" in line and not line.startswith("#") and line not in commands]
    assert installs == ["python -m pip install -q --upgrade pip", "python -m pip install -q torch==2.13.0"], installs
