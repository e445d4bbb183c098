"""The benchmark harness (`python -m benchmarks`) on tiny workloads."""
import io
import json
import math
import os
import subprocess
import sys

import pytest
import torch

from benchmarks import harness
from benchmarks.registry import Measured, Skip, Workload

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE_BANDWIDTH = {"read_gbps": 10.0, "copy_gbps": 8.0, "gbps": 10.0, "buffer_bytes": 1}


@pytest.fixture(autouse=True)
def _no_bandwidth_pass(monkeypatch):
    # The real 256 MiB pass is tested once, below; the others need not repeat it.
    monkeypatch.setattr(harness, "measure_bandwidth", lambda quick, device=None: dict(FAKE_BANDWIDTH))
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)  # --threads changes the process-wide setting


def _workload(name, build, **kw):
    return Workload(name=name, domain="test", build=build, **kw)


def _tiny(quick):
    x = torch.arange(1000, dtype=torch.float32)
    return {"fmetrics": lambda: x.double().mean(), "torchmetrics": lambda: x.mean()}


def _run(argv, workloads):
    out, err = io.StringIO(), io.StringIO()
    rc = harness.main(argv, workloads=workloads, out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def _report(tmp_path, argv, workloads):
    path = tmp_path / "out.json"
    rc, out, err = _run(["--quick", "--repeats", "2", "--json", str(path), *argv], workloads)
    return rc, out, err, json.loads(path.read_text())


def test_tiny_workload_runs_end_to_end(tmp_path):
    w = {"t/tiny": _workload("t/tiny", _tiny, samples=lambda q: 1000, bytes=lambda q: 4000)}
    rc, out, err, rep = _report(tmp_path, [], w)
    assert rc == 0, err
    (row,) = rep["rows"]
    assert row["status"] == "ok" and row["peer"] == "torchmetrics" and row["agree"] is True
    assert row["rounds"] == 2 and len(row["baseline"]["times_s"]) == 2 and len(row["peer_stats"]["times_s"]) == 2
    assert row["max_abs_diff"] < 1e-4
    assert row["ratio"] == pytest.approx(row["peer_stats"]["median_s"] / row["baseline"]["median_s"])
    base = row["baseline"]
    assert base["samples_per_s"] == pytest.approx(1000 / base["median_s"])
    assert base["bandwidth_fraction"] == pytest.approx(4000 / base["median_s"] / 10e9)
    # aligned table: header, rule, one line, all starting columns at the same offsets
    lines = out.splitlines()
    assert lines[0] == "device: cpu"
    assert lines[1].startswith("workload") and lines[3].startswith("t/tiny")
    assert "torchmetrics" in lines[3] and "ok" in lines[3].split()
    assert "[1/1] t/tiny" in err


def test_table_columns_are_aligned():
    rows = []
    for name, t in (("a", 1e-3), ("a-much-longer-name", 2.5)):
        st = {"median_s": t, "iqr_s": 0.0, "samples_per_s": 1e6, "bandwidth_fraction": 0.5, "extra": {}}
        rows.append({"workload": name, "peer": "torchmetrics", "status": "ok", "reason": None, "baseline": st,
                     "peer_stats": st, "ratio": 1.0, "max_abs_diff": 0.0})
    lines = harness.format_table(rows).splitlines()
    header, rule = lines[0], lines[1]
    for col in ("peer ", "peer/fm", "check"):
        i = header.index(col)
        assert rule[i] == "-" and rule[i - 1] == " "
    # right-aligned numeric columns end at the same offset on every line
    ends = {line.index("1.00x") + len("1.00x") for line in lines[2:]}
    assert len(ends) == 1 and ends == {header.index("peer/fm") + len("peer/fm")}


def test_json_schema(tmp_path):
    w = {"t/tiny": _workload("t/tiny", _tiny, samples=lambda q: 1000)}
    _, _, _, rep = _report(tmp_path, ["--threads", "1"], w)
    assert rep["schema"] == harness.SCHEMA
    assert set(rep) >= {"schema", "date", "quick", "argv", "machine", "bandwidth", "wall_s", "interrupted",
                        "import_errors", "rows"}
    assert rep["quick"] is True and rep["interrupted"] is False and rep["import_errors"] == []
    assert rep["machine"]["threads"] == 1 and rep["machine"]["torch"] == torch.__version__
    assert set(rep["machine"]) >= {"platform", "cpu", "cpu_count", "python", "packages", "loadavg"}
    assert rep["bandwidth"]["gbps"] > 0 and rep["wall_s"] > 0
    (row,) = rep["rows"]
    assert set(row) >= {"workload", "domain", "description", "peer", "status", "reason", "baseline", "peer_stats",
                        "ratio", "max_abs_diff", "agree", "tolerance", "rounds", "wall_s", "build_s", "samples", "bytes"}
    assert 0 <= row["build_s"] <= row["wall_s"]
    for st in (row["baseline"], row["peer_stats"]):
        assert set(st) == {"median_s", "iqr_s", "min_s", "max_s", "times_s", "samples_per_s",
                           "bandwidth_fraction", "extra", "first_call_s"}
        assert st["min_s"] <= st["median_s"] <= st["max_s"] and st["iqr_s"] >= 0
    assert row["bytes"] is None and row["baseline"]["bandwidth_fraction"] is None


def test_planted_disagreement_is_flagged(tmp_path):
    x = torch.ones(10)

    def build(quick):
        return {"fmetrics": lambda: {"a": x.sum(), "b": (x.mean(), x[:3])},
                "torchmetrics": lambda: {"a": x.sum(), "b": (x.mean() + 0.5, x[:3])}}

    def build_shape(quick):
        return {"fmetrics": lambda: x, "torchmetrics": lambda: x[:5]}

    w = {"t/bad": _workload("t/bad", build), "t/shape": _workload("t/shape", build_shape)}
    rc, out, err, rep = _report(tmp_path, [], w)
    row, shape = rep["rows"]
    assert row["status"] == "mismatch" and row["agree"] is False
    assert row["max_abs_diff"] == pytest.approx(0.5)
    assert "b[0]" in row["reason"]
    assert "MISMATCH" in out and rc == 1 and "flagged" in err
    assert shape["status"] == "mismatch" and shape["max_abs_diff"] == "inf"  # strict JSON: no Infinity
    assert "Infinity" not in (tmp_path / "out.json").read_text()


def test_unknown_only_lists_workloads():
    w = {n: _workload(n, _tiny, description=f"{n} doc") for n in ("a/one", "b/two")}
    rc, out, err = _run(["--only", "nope*"], w)
    assert rc == 2 and out == ""
    assert "no workload matches --only 'nope*'" in err and "a/one  -- a/one doc" in err and "b/two" in err
    rc, out, err = _run(["--only", "a/one,typo"], w)  # one unknown pattern among known ones
    assert rc == 2 and "no workload matches --only 'typo'" in err and out == ""


def test_only_patterns_substring_glob_and_lists():
    w = {n: _workload(n, _tiny) for n in ("reg/mse", "reg/mae", "cls/acc")}
    def names(only):
        chosen, unknown = harness.select(w, only)
        return [x.name for x in chosen], unknown

    assert names("mse") == (["reg/mse"], [])
    assert names("reg/*") == (["reg/mae", "reg/mse"], [])
    assert names("cls, mae") == (["cls/acc", "reg/mae"], [])
    assert names("mae,typo") == (["reg/mae"], ["typo"])
    assert len(names(None)[0]) == 3


def test_missing_peers_are_skipped_not_errors(tmp_path):
    def build(quick):
        def needs_missing():
            import fmetrics_no_such_peer  # noqa: F401

        return {"fmetrics": lambda: torch.tensor(1.0), "torcheval": needs_missing, "sklearn": None}

    def build_missing(quick):
        import fmetrics_no_such_peer  # noqa: F401

    w = {"t/a": _workload("t/a", build, peers=("torchmetrics",)), "t/b": _workload("t/b", build_missing)}
    rc, out, err, rep = _report(tmp_path, [], w)
    assert rc == 0, err
    rows = {(r["workload"], r["peer"]): r for r in rep["rows"]}
    assert set(rows) == {("t/a", "torcheval"), ("t/a", "sklearn"), ("t/a", "torchmetrics"), ("t/b", None)}
    assert all(r["status"] == "skipped" for r in rows.values())
    assert "fmetrics_no_such_peer" in rows["t/a", "torcheval"]["reason"]
    assert rows["t/a", "torchmetrics"]["reason"] == "not installed"
    assert rows["t/a", "sklearn"]["baseline"]["median_s"] > 0  # fmetrics still timed
    assert out.count("skipped") == 4


def test_failing_contender_is_an_error_row(tmp_path):
    def build(quick):
        def boom():
            raise RuntimeError("kaput")

        return {"fmetrics": lambda: torch.tensor(1.0), "torchmetrics": boom}

    rc, out, _, rep = _report(tmp_path, [], {"t/e": _workload("t/e", build)})
    (row,) = rep["rows"]
    assert row["status"] == "error" and "RuntimeError: kaput" in row["reason"] and rc == 1
    rc, _, _, rep = _report(tmp_path, [], {"t/e": _workload("t/e", lambda q: {"torchmetrics": lambda: 1})})
    assert rep["rows"][0]["status"] == "error" and "no 'fmetrics'" in rep["rows"][0]["reason"] and rc == 1


def test_measured_extras_and_self_timed_contenders(tmp_path):
    def build(quick):
        return {"fmetrics": lambda: Measured(torch.tensor(2.0), {"collectives": 1, "bytes": 80}, seconds=0.25),
                "torchmetrics": lambda: Measured(torch.tensor(2.0), {"collectives": 10, "bytes": 800}, seconds=1.0)}

    rc, out, _, rep = _report(tmp_path, [], {"sync/x": _workload("sync/x", build)})
    (row,) = rep["rows"]
    assert rc == 0 and row["baseline"]["times_s"] == [0.25, 0.25] and row["ratio"] == pytest.approx(4.0)
    assert row["baseline"]["extra"] == {"collectives": 1, "bytes": 80}
    assert row["peer_stats"]["extra"] == {"collectives": 10, "bytes": 800}
    assert "collectives 1 vs 10; bytes 80 vs 800" in out


def test_compare_recursive():
    t = torch.tensor
    assert harness.compare({"a": t([1.0, float("nan")]), "b": [1, 2.0]},
                           {"a": t([1.0, float("nan")]), "b": (1, 2)}, 1e-6) == (0.0, True, None)
    diff, ok, note = harness.compare(t(1000.05), t(1000.0), 1e-4)  # relative to |reference|
    assert diff == pytest.approx(0.05, rel=1e-3) and ok
    diff, ok, _ = harness.compare(t([0.0, float("nan")]), t([0.0, 1.0]), 1e-4)
    assert diff == math.inf and not ok
    assert harness.compare({"a": 1}, {"b": 1}, 1e-4)[:2] == (math.inf, False)
    assert harness.compare(t([1.0, 2.0]), t([1.0, 2.0, 3.0]), 1e-4)[:2] == (math.inf, False)
    assert harness.compare(t([[1.0, 2.0]]), t([1.0, 2.0]), 1e-4)[:2] == (0.0, True)  # squeezable shapes
    assert harness.compare("x", "y", 1e-4)[1] is False
    assert harness.compare(t(float("inf")), t(float("inf")), 1e-4) == (0.0, True, None)


def test_budget_rounds():
    quick, full = harness.Budget(True), harness.Budget(False)
    assert quick.total_s < 120 and full.total_s < 1200
    assert quick.another_round(0, 100.0, 100.0, 1.0)  # below the minimum: always
    assert not quick.another_round(quick.min_rounds, 0.9, 0.2, 1.0)  # share spent
    assert quick.another_round(quick.min_rounds, 0.1, 0.2, 1.0)
    assert not quick.another_round(quick.max_rounds, 0.0, 0.0, 1.0)
    fixed = harness.Budget(True, repeats=4)
    assert fixed.another_round(3, 1e9, 1e9, 0.0) and not fixed.another_round(4, 0.0, 0.0, 1e9)
    assert quick.share(1) <= quick.cap_s
    # rounds of 0.4 s in a 1 s share: 3 do not fit, so as many as fit (one after the warm-up's 0.4 s)
    assert quick.another_round(0, 0.4, 0.4, 1.0) and not quick.another_round(1, 0.8, 0.4, 1.0)
    assert quick.rounds_for(1.0, 2.5, 2.0) == 0 and quick.rounds_for(1.0, 0.4, 2.0) == 2
    assert quick.rounds_for(1.0, 1e-6, 2.0) == quick.max_rounds and fixed.rounds_for(1.0, 2.5, 2.0) == 4  # --repeats
    assert quick.rounds_for(0.0, 0.01, 2.0) == quick.min_rounds  # cheap calls get their minimum, even late
    quick.start -= quick.total_s + 1  # over budget: a single round
    assert quick.another_round(0, 0.0, 0.1, quick.share(1)) and not quick.another_round(1, 0.1, 0.1, quick.share(1))
    assert quick.share(1) == 0.0


def test_discover_reports_broken_modules(tmp_path, monkeypatch):
    pkg = tmp_path / "fake_bench_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "good.py").write_text("IMPORTED = True\n")
    (pkg / "broken.py").write_text("raise RuntimeError('oops')\n")
    (pkg / "test_skip_me.py").write_text("raise AssertionError('test modules are not imported')\n")
    (pkg / "conftest.py").write_text("raise AssertionError('conftest is not imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    errors = harness.discover("fake_bench_pkg")
    assert errors == [("fake_bench_pkg.broken", "RuntimeError: oops")]
    assert sys.modules["fake_bench_pkg.good"].IMPORTED


def test_plot_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "ratios.png"
    rc, _, err = _run(["--quick", "--repeats", "1", "--plot", str(path)],
                      {"t/tiny": _workload("t/tiny", _tiny)})
    assert rc == 0 and f"wrote {path}" in err
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    rc, out, err = _run(["--plot", str(tmp_path / "x.png")], {"t/tiny": _workload("t/tiny", _tiny)})
    assert rc == 2 and "matplotlib is not installed" in err and out == ""


def test_progress_line_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    s = Tty()
    p = harness.Progress(s)
    p.start(1, 3, "x/y")
    p.step("round 1: fmetrics")
    p.done(0.5, [{"status": "mismatch"}])
    text = s.getvalue()
    assert text.startswith("\r[1/3] x/y") and "round 1: fmetrics" in text and text.rstrip(" \n").endswith("(mismatch)") and text.endswith("\n")


def test_bandwidth_is_measured(monkeypatch):
    monkeypatch.undo()
    bw = harness.measure_bandwidth(True)
    assert bw["gbps"] == max(bw["read_gbps"], bw["copy_gbps"]) > 0.1 and bw["buffer_bytes"] == 2**28


def test_aggregation_workloads_agree_with_torchmetrics(tmp_path):
    pytest.importorskip("torchmetrics")
    import benchmarks.aggregation  # noqa: F401 - registers its workloads
    from benchmarks.registry import WORKLOADS

    agg = {k: w for k, w in WORKLOADS.items() if k.startswith("aggregation/")}
    rc, out, err, rep = _report(tmp_path, ["--repeats", "1", "--threads", "1"], agg)
    names = {r["workload"] for r in rep["rows"]}
    assert {"aggregation/mean", "aggregation/sum", "aggregation/max", "aggregation/cat"} <= names
    agg = [r for r in rep["rows"] if r["workload"].startswith("aggregation/")]
    assert all(r["status"] == "ok" and r["peer"] == "torchmetrics" for r in agg), out
    assert all(r["baseline"]["bandwidth_fraction"] > 0 for r in agg)


def test_cli_unknown_only_exits_nonzero():
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--only", "no-such-workload-xyz"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "no workload matches" in proc.stderr and "aggregation/mean" in proc.stderr


def test_noisy_times_are_marked(tmp_path):
    def build(quick):
        seconds = iter([9.0, 1.0, 5.0])  # warm-up, then two rounds: IQR 2 s around a 3 s median
        return {"fmetrics": lambda: Measured(1.0, seconds=next(seconds)),
                "torchmetrics": lambda: Measured(1.0, seconds=3.0)}

    rc, out, _, rep = _report(tmp_path, [], {"t/n": _workload("t/n", build)})
    (row,) = rep["rows"]
    assert row["noisy"] is True and row["ratio"] == pytest.approx(1.0) and rc == 0
    assert "1.00x?" in out and "?: noisy" in out


def test_a_time_measured_once_is_one_round(tmp_path):
    """``Measured(once=True)``: a time from one run made while building is one timing, not round copies."""
    def build(quick):
        return {"fmetrics": lambda: Measured(1.0, seconds=2.0, once=True),
                "torchmetrics": lambda: Measured(1.0, seconds=4.0)}

    rc, out, _, rep = _report(tmp_path, [], {"t/once": _workload("t/once", build)})
    (row,) = rep["rows"]
    assert row["baseline"]["times_s"] == [2.0] and len(row["peer_stats"]["times_s"]) > 1
    assert "2 s 1 round" in out and rc == 0


def test_interrupt_reports_finished_rows(tmp_path):
    def build_interrupt(quick):
        def stop():
            raise KeyboardInterrupt

        return {"fmetrics": stop}

    w = {"a/first": _workload("a/first", _tiny), "b/second": _workload("b/second", build_interrupt)}
    rc, out, err, rep = _report(tmp_path, [], w)
    assert rc == 130 and rep["interrupted"] is True and "interrupted" in err
    assert [r["workload"] for r in rep["rows"]] == ["a/first"] and "a/first" in out


def test_busy_machine_warning():
    quiet = {"loadavg": [0.2, 0.2, 0.2], "cpu_count": 2, "threads": 2}
    assert harness._busy(quiet) is None
    busy = harness._busy({**quiet, "loadavg": [1.8, 1.0, 1.0]})
    assert "load average 1.8 on 2 CPUs" in busy and busy.endswith("--threads 1")
    assert harness._busy({**quiet, "loadavg": [1.2, 1.0, 1.0], "threads": 1}) is None
    assert harness._busy({**quiet, "loadavg": [2.5, 1.0, 1.0], "threads": 1}).endswith("use a quiet machine")


# ---------------------------------------------------------------- --device


def test_device_defaults_to_cpu_and_is_reported(tmp_path):
    seen = []

    def build(quick, device="cpu"):
        seen.append(device)
        return _tiny(quick)

    rc, out, err, rep = _report(tmp_path, [], {"t/dev": _workload("t/dev", build)})
    assert rc == 0, err
    assert seen == [torch.device("cpu")]
    assert rep["device"] == "cpu" and rep["machine"]["device"] == "cpu"
    assert all(r["device"] == "cpu" for r in rep["rows"])
    assert out.splitlines()[0] == "device: cpu" and "device cpu" in out and "device cpu" in err
    rc, _, _, rep = _report(tmp_path, ["--device", "cpu"], {"t/dev": _workload("t/dev", build)})
    assert rc == 0 and rep["device"] == "cpu" and "--device" in rep["argv"]


def test_device_errors_are_clear():
    w = {"t/tiny": _workload("t/tiny", _tiny)}
    rc, out, err = _run(["--device", "nonsense"], w)
    assert rc == 2 and out == "" and "--device" in err
    rc, out, err = _run(["--device", "meta"], w)
    assert rc == 2 and "only cpu and cuda" in err
    if not torch.cuda.is_available():
        rc, out, err = _run(["--device", "cuda"], w)
        assert rc == 2 and out == "" and "torch.cuda.is_available() is False" in err


def test_builders_without_device_run_on_cpu_only():
    from benchmarks.registry import Unsupported

    w = _workload("t/old", _tiny)
    assert set(w.make(True, "cpu")) == {"fmetrics", "torchmetrics"}
    with pytest.raises(Unsupported, match="CPU only"):
        w.make(True, "cuda")  # no CUDA needed: the builder is never called
    rows = harness.run_workload(w, True, harness.Budget(True, 1), 1, None, device="cuda")
    assert [(r["status"], r["device"]) for r in rows] == [("skipped", "cuda")]
    assert rows[0]["reason"].startswith("not on cuda: ")


def test_unsupported_builder_is_skipped_with_its_reason(tmp_path):
    from benchmarks.registry import Unsupported

    def build(quick, device="cpu"):
        raise Unsupported("host only")

    rc, out, _, rep = _report(tmp_path, [], {"t/u": _workload("t/u", build)})
    (row,) = rep["rows"]
    assert rc == 0 and row["status"] == "skipped" and row["reason"] == "not on cpu: host only"


def test_every_registered_builder_takes_a_device():
    from benchmarks.registry import WORKLOADS, takes_device

    assert harness.discover() == []
    missing = sorted(n for n, w in WORKLOADS.items() if not takes_device(w.build))
    assert not missing, f"workloads whose builder has no device parameter (CPU only): {missing}"


def test_on_device_moves_nested_tensors_and_keeps_other_leaves():
    from benchmarks.registry import on_device

    batches = [(torch.ones(2), ["a", "b"], {"boxes": torch.zeros(1, 4), "n": 3})]
    assert on_device(batches, "cpu") is batches  # no copies on the host
    moved = on_device(batches, "meta")
    (x, words, d), = moved
    assert x.device.type == "meta" and d["boxes"].device.type == "meta"
    assert words == ["a", "b"] and d["n"] == 3 and isinstance(moved[0], tuple)


def test_cuda_times_are_synchronized(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    dev = torch.device("cuda", 0)
    out, seconds = harness._timed(lambda: (calls.append("run"), 7)[1], dev)
    assert out == 7 and seconds >= 0
    assert calls == [dev, "run", dev]  # queued work flushed before the clock starts, and waited for after


def test_contenders_follow_the_data_device():
    import fmetrics
    from benchmarks.registry import fmetrics_run, torchmetrics_run

    batches = [(torch.tensor([1.0, 3.0]),)]
    assert fmetrics_run(fmetrics.mean(), batches)().item() == 2.0

    class Fake:
        moved_to = None

        def to(self, device):
            Fake.moved_to = device
            return self

        def update(self, x):
            pass

        def compute(self):
            return 0

    torchmetrics_run(Fake, batches)()
    assert Fake.moved_to is None  # on the CPU nothing moves
    torchmetrics_run(Fake, [(torch.empty(2, device="meta"),)])()
    assert Fake.moved_to == torch.device("meta")


def test_a_single_timing_says_one_round_not_a_spread():
    one = {"median_s": 0.002, "iqr_s": 0.0, "times_s": [0.002]}
    two = {"median_s": 0.002, "iqr_s": 0.0002, "times_s": [0.0019, 0.0021]}
    assert harness._fmt_stats(one) == "2 ms 1 round"
    assert harness._fmt_stats(two) == "2 ms ±5%"


def test_slow_contenders_are_timed_by_their_first_call(tmp_path, monkeypatch):
    """Contenders whose one call overruns their part of the share are not called again: the first calls are
    their single timing (listed in ``first_calls``) and the row says "1 round"."""
    calls = {"fmetrics": 0, "torchmetrics": 0}

    def build(quick):
        def run(who, seconds):
            def call():
                calls[who] += 1
                return Measured(1.0, seconds=seconds)
            return call
        return {"fmetrics": run("fmetrics", 30.0), "torchmetrics": run("torchmetrics", 60.0)}

    path = tmp_path / "out.json"
    rc, out, _ = _run(["--quick", "--json", str(path)], {"t/slow": _workload("t/slow", build)})
    (row,) = json.loads(path.read_text())["rows"]
    assert rc == 0 and calls == {"fmetrics": 1, "torchmetrics": 1}
    assert row["rounds"] == 1 and row["first_calls"] == ["fmetrics", "torchmetrics"]
    assert row["ratio"] == pytest.approx(2.0) and "1 round" in out and "±0%" not in out


def test_a_contender_whose_first_call_fits_half_the_share_gets_one_warm_round(tmp_path):
    """A first call is cold (lazy set-up, new kernel shapes): it is a contender's timing only when not even one
    more call fits in half the workload's share (5 s for one quick workload: 2.5 s)."""
    calls = {}

    def build(quick):
        def run(who, first, then):
            def call():
                calls[who] = calls.get(who, 0) + 1
                return Measured(1.0, seconds=first if calls[who] == 1 else then)
            return call
        return {"fmetrics": run("fmetrics", 0.01, 0.01), "a": run("a", 2.0, 1.0), "b": run("b", 0.01, 0.01),
                "c": run("c", 3.0, 1.5)}

    path = tmp_path / "out.json"
    rc, _, _ = _run(["--quick", "--json", str(path)], {"t/cold": _workload("t/cold", build)})
    rows = {r["peer"]: r for r in json.loads(path.read_text())["rows"]}
    assert rc == 0 and calls["a"] == 2 and calls["c"] == 1
    assert rows["a"]["peer_stats"]["times_s"] == [1.0] and rows["c"]["peer_stats"]["times_s"] == [3.0]
    assert rows["a"]["first_calls"] == ["c"]


def test_a_slow_peer_stops_while_fmetrics_keeps_its_rounds(tmp_path):
    """Each contender gets its part of the share: a 60 s peer is timed by its first call, a fast fmetrics
    call in several interleaved rounds."""
    calls = {"fmetrics": 0, "torchmetrics": 0}

    def build(quick):
        def fm_call():
            calls["fmetrics"] += 1
            return Measured(1.0, seconds=0.001)

        def tm_call():
            calls["torchmetrics"] += 1
            return Measured(1.0, seconds=60.0)
        return {"fmetrics": fm_call, "torchmetrics": tm_call}

    path = tmp_path / "out.json"
    rc, out, _ = _run(["--quick", "--json", str(path)], {"t/mixed": _workload("t/mixed", build)})
    (row,) = json.loads(path.read_text())["rows"]
    assert rc == 0 and calls["torchmetrics"] == 1 and calls["fmetrics"] > 3
    assert row["first_calls"] == ["torchmetrics"] and len(row["baseline"]["times_s"]) == calls["fmetrics"] - 1
    assert row["peer_stats"]["times_s"] == [60.0] and row["ratio"] == pytest.approx(60000.0)


def test_a_full_only_workload_is_skipped_by_quick_runs_saying_why(tmp_path):
    built = []
    w = Workload("t/heavy", "t", lambda quick: built.append(quick) or {"fmetrics": lambda: 1.0},
                          full_only="it spawns processes")
    path = tmp_path / "out.json"
    rc, out, _ = _run(["--quick", "--json", str(path)], {"t/heavy": w})
    (row,) = json.loads(path.read_text())["rows"]
    assert rc == 0 and built == [] and row["status"] == "skipped"
    assert row["reason"] == "full run only: it spawns processes"


def test_a_peer_the_builder_skips_is_reported_with_its_reason(tmp_path):
    def build(quick):
        return {"fmetrics": lambda: 1.0, "ranx": Skip("full run only: it compiles") if quick else lambda: 1.0}

    rc, _, _, rep = _report(tmp_path, [], {"t/jit": _workload("t/jit", build, peers=("ranx",))})
    (row,) = rep["rows"]
    assert rc == 0 and (row["peer"], row["status"], row["reason"]) == ("ranx", "skipped", "full run only: it compiles")


def test_over_budget_a_cheap_contender_is_timed_warm_not_on_its_first_call():
    """Over the run's budget (share 0) each contender whose first call took under ``floor_s / 2`` still gets
    one timed call: a first call (lazy imports) is no timing; a slower one keeps its first call as its time."""
    calls = {"fmetrics": 0, "slow": 0}

    def contender(name, first, warm):
        def run():
            calls[name] += 1
            return Measured(1.0, seconds=first if calls[name] == 1 else warm)
        return run

    budget = harness.Budget(True)
    budget.total_s = 0.0  # over budget from the start
    w = _workload("t/over", lambda quick: {"fmetrics": contender("fmetrics", 0.1, 0.01),
                                           "slow": contender("slow", budget.floor_s, 0.01)})
    (row,) = harness.run_workload(w, True, budget, 1, None)
    assert row["baseline"]["times_s"] == [0.01] and row["first_calls"] == ["slow"]
    assert row["peer_stats"]["times_s"] == [budget.floor_s] and calls == {"fmetrics": 2, "slow": 1}


def test_match_pools_gives_the_blas_pools_torchs_thread_count(monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import numpy  # noqa: F401 - its OpenBLAS pool

    monkeypatch.setattr(harness, "_pools_set", (0, 0))
    with threadpoolctl.threadpool_limits(limits=None):  # restores the pools' sizes on exit
        harness.match_pools(1)
        assert {p["num_threads"] for p in threadpoolctl.threadpool_info()} == {1}


def test_a_busy_machine_gives_the_rounds_a_smaller_budget():
    assert harness.load_slowdown(0.3, 2) == 1.0  # quiet: the full budget
    assert harness.load_slowdown(2.0, 2) == pytest.approx(1.5)  # two busy processes share 2 CPUs with the run
    assert harness.Budget(True, slowdown=1.5).total_s == pytest.approx(harness.Budget(True).total_s / 1.5)
    assert harness.Budget(False, slowdown=0.5).total_s == harness.Budget(False).total_s  # never larger


def test_a_busy_machine_gets_fewer_threads_unless_threads_is_given():
    assert harness.fewer_threads(2.0, 2, 2) == 1  # two busy processes on 2 CPUs: 1 thread, not 0
    assert harness.fewer_threads(0.2, 2, 2) == 2  # quiet: torch's default
    assert harness.fewer_threads(1.0, 16, 16) == 15 and harness.fewer_threads(0.0, 16, 8) == 8


def test_the_share_a_fast_contender_leaves_goes_to_the_slow_ones():
    """`Budget.plan` splits what is left of a workload's share fastest first: fmetrics at 1 ms takes its 15 rounds
    (15 ms), and the two 0.2 s peers share the rest: 0.985 s / 2 holds 2 calls each, where an equal split
    (1/3 s each) gives each peer a single call."""
    quick = harness.Budget(True)
    caps = quick.plan({"torchmetrics": 0.2, "fmetrics": 0.001, "peer": 0.2}, 1.0, 1.0)
    assert caps == {"fmetrics": quick.max_rounds, "torchmetrics": 2, "peer": 2}
    assert [quick.rounds_for(1.0 / 3, c, 1.0) for c in (0.001, 0.2, 0.2)] == [quick.max_rounds, 1, 1]
    # integer calls: what one peer cannot use flows on (0.985 / 2 holds one 0.3 s call, the 0.685 s left two)
    assert quick.plan({"a": 0.3, "fmetrics": 0.001, "b": 0.3}, 1.0, 1.0) == {"fmetrics": quick.max_rounds,
                                                                              "a": 1, "b": 2}
    # when every contender's min_rounds fit, they come first: a 0.2 s peer gets 3 calls beside a 50 ms fmetrics
    # (which then takes 2 more in the 0.25 s left), where splitting first would give fmetrics 10 and the peer 2
    assert quick.plan({"fmetrics": 0.05, "peer": 0.2}, 1.0, 1.0) == {"fmetrics": 5, "peer": 3}
    fixed = harness.Budget(True, repeats=4)
    assert fixed.plan({"fmetrics": 0.001, "peer": 9.0}, 1.0, 1.0) == {"fmetrics": 4, "peer": 4}  # --repeats
