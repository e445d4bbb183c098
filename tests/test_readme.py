"""The README's code blocks run as written."""
import importlib
import pathlib
import re
import sys

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_opens_with_two_commands():
    first = re.search(r"```bash\n(.*?)```", README.read_text(), flags=re.S).group(1).strip().splitlines()
    assert len(first) == 2 and "pytest" in first[1]


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    # each block becomes an importable module, as in a user's project (states must pickle)
    blocks = _python_blocks()
    assert len(blocks) >= 2
    monkeypatch.syspath_prepend(str(tmp_path))
    for i, code in enumerate(blocks):
        (tmp_path / f"readme_block_{i}.py").write_text(code)
        importlib.import_module(f"readme_block_{i}")
        sys.modules.pop(f"readme_block_{i}")


def test_ci_runs_the_readme_test_command():
    test_cmd = re.search(r"```bash\n(.*?)```", README.read_text(), flags=re.S).group(1).strip().splitlines()[1]
    ci = (README.parent / ".ci" / "run").read_text()
    assert test_cmd in ci
