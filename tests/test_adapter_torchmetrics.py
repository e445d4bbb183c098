"""`adapters.TorchMetric` as torchmetrics users expect it (issue 18): metadata and MetricTracker,
plots (rendered to PNG on the Agg backend), checkpoints that keep the state, migration snippets."""
import io
import re
import warnings
from pathlib import Path

import pytest
import torch
import torchmetrics
from torchmetrics.wrappers import MetricTracker

import fmetrics as fm
from adapters import TorchMetric
from fmetrics.testing import assert_values_close

REPO = Path(__file__).resolve().parent.parent


def _binary(seed=0, n=(40, 25, 33)):
    g = torch.Generator().manual_seed(seed)
    out = []
    for k in n:
        p = torch.rand(k, generator=g)
        out.append((p, (torch.rand(k, generator=g) < p).long()))
    return out


# ---------------------------------------------------------------- 1. metadata, MetricTracker


def test_metadata_comes_from_the_wrapped_metric():
    w = TorchMetric(fm.binary_auroc())
    assert (w.higher_is_better, w.is_differentiable, w.full_state_update) == (True, False, False)
    assert (w.plot_lower_bound, w.plot_upper_bound) == (0.0, 1.0)
    assert TorchMetric(fm.mean_squared_error()).higher_is_better is False
    assert TorchMetric(fm.mean_squared_error()).is_differentiable is True
    col = TorchMetric(fm.collection({"acc": fm.binary_accuracy(), "ece": fm.binary_calibration_error()},
                                    prefix="val/"))
    assert col.higher_is_better is None  # the members disagree: see member_metadata
    meta = col.member_metadata
    assert meta["val/acc"]["higher_is_better"] is True and meta["val/ece"]["higher_is_better"] is False
    assert meta["val/acc"]["bounds"] == (0.0, 1.0)


def test_metric_tracker_over_a_torch_metric_finds_the_best_step():
    tracker = MetricTracker(TorchMetric(fm.binary_accuracy()))  # maximize inferred from higher_is_better
    values = []
    for epoch in range(4):
        tracker.increment()
        for p, t in _binary(seed=epoch):
            tracker.update(p, t)
        p, t = (torch.cat(x) for x in zip(*_binary(seed=epoch)))
        values.append(torchmetrics.functional.classification.binary_accuracy(p, t).item())
    best, step = tracker.best_metric(return_step=True)
    assert step == max(range(4), key=values.__getitem__)
    assert best == pytest.approx(max(values), rel=1e-6)


def test_metric_tracker_over_a_metric_collection_of_torch_metrics():
    col = torchmetrics.MetricCollection({"acc": TorchMetric(fm.binary_accuracy()),
                                         "ece": TorchMetric(fm.binary_calibration_error(n_bins=10))})
    tracker = MetricTracker(col)
    assert tracker.maximize == [True, False]
    acc, ece = [], []
    for epoch in range(3):
        tracker.increment()
        for p, t in _binary(seed=10 + epoch):
            tracker.update(p, t)
        p, t = (torch.cat(x) for x in zip(*_binary(seed=10 + epoch)))
        acc.append(torchmetrics.functional.classification.binary_accuracy(p, t).item())
        ece.append(torchmetrics.functional.classification.binary_calibration_error(p, t, n_bins=10).item())
    best, steps = tracker.best_metric(return_step=True)
    assert steps == {"acc": max(range(3), key=acc.__getitem__), "ece": min(range(3), key=ece.__getitem__)}
    assert best["acc"] == pytest.approx(max(acc), rel=1e-6)
    assert best["ece"] == pytest.approx(min(ece), rel=1e-5)


# ---------------------------------------------------------------- 2. plots


@pytest.fixture
def agg():
    mpl = pytest.importorskip("matplotlib", reason="plots need matplotlib (the `plot` extra)")
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    data = buf.getvalue()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    return data


def test_plot_scalars_classes_steps_and_dicts(agg):
    p, t = _binary()[0]
    acc = TorchMetric(fm.binary_accuracy())
    acc.update(p, t)
    fig, ax = acc.plot()  # compute() by default
    _png(fig)
    assert ax.get_title() == "binary_accuracy" and ax.get_ylim()[0] < 0 < 1 < ax.get_ylim()[1]
    steps = [acc(*b) for b in _binary(seed=3)]
    fig, ax = acc.plot(steps)
    _png(fig)
    assert len(ax.lines[0].get_xdata()) == 3 and "best: step" in ax.get_legend().get_texts()[0].get_text()
    g = torch.Generator().manual_seed(0)
    pc = fm.multiclass_recall(num_classes=4, average=None)
    fig, ax = fm.plot(pc, pc(torch.randn(50, 4, generator=g), torch.randint(0, 4, (50,), generator=g)))
    _png(fig)
    assert len(ax.patches) == 4  # one bar per class
    col = fm.collection({"acc": fm.binary_accuracy(), "auroc": fm.binary_auroc()})
    fig, ax = fm.plot(col, col(p, t))
    _png(fig)
    assert [x.get_text() for x in ax.get_xticklabels()] == ["acc", "auroc"]
    fig, ax = fm.plot(col, [col(*b) for b in _binary(seed=4)])
    assert {x.get_text() for x in ax.get_legend().get_texts()} == {"acc", "auroc"}


def test_plot_roc_and_pr_curves_with_their_area(agg):
    p, t = (torch.cat(x) for x in zip(*_binary()))
    roc = TorchMetric(fm.binary_roc())
    roc.update(p, t)
    fig, ax = roc.plot()
    _png(fig)
    label = ax.get_legend().get_texts()[0].get_text()
    auc = float(re.search(r"AUC=([0-9.]+)", label).group(1))
    assert auc == pytest.approx(fm.binary_auroc()(p, t).item(), abs=1e-3)
    pr = fm.binary_precision_recall_curve()
    fig, ax = fm.plot(pr, pr(p, t))
    _png(fig)
    assert ax.get_xlabel() == "recall" and "AUC=" in ax.get_legend().get_texts()[0].get_text()
    g = torch.Generator().manual_seed(1)
    mc = fm.multiclass_roc(num_classes=3)
    fig, ax = fm.plot(mc, mc(torch.randn(60, 3, generator=g).softmax(-1), torch.randint(0, 3, (60,), generator=g)))
    _png(fig)
    assert [x.get_text().split(" ")[:2] for x in ax.get_legend().get_texts()] == [["class", str(c)] for c in range(3)]


def test_plot_confusion_matrices(agg):
    p, t = (torch.cat(x) for x in zip(*_binary()))
    cm = TorchMetric(fm.binary_confusion_matrix())
    cm.update(p, t)
    fig, ax = cm.plot()
    _png(fig)
    texts = sorted(int(x.get_text()) for x in ax.texts)
    assert texts == sorted(cm.compute().reshape(-1).tolist())
    ml = fm.multilabel_confusion_matrix(num_labels=3)
    g = torch.Generator().manual_seed(2)
    fig, axes = fm.plot(ml, ml(torch.rand(30, 3, generator=g), torch.randint(0, 2, (30, 3), generator=g)))
    _png(fig)
    assert len(axes) == 3


def test_plot_without_matplotlib_names_the_extra(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_mpl(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_mpl)
    with pytest.raises(ModuleNotFoundError, match=r"pip install matplotlib"):
        fm.plot(fm.mean(), torch.tensor(1.0))


# ---------------------------------------------------------------- 3. checkpoints


class _Model(torch.nn.Module):
    def __init__(self, persistent: bool):
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.auroc = TorchMetric(fm.binary_auroc(), persistent=persistent)
        self.metrics = TorchMetric(fm.collection({"acc": fm.binary_accuracy(), "mean": fm.mean()}),
                                   persistent=persistent)

    def step(self, p, t):
        self.auroc.update(p, t)
        self.metrics.update(p, t)

    def epoch_values(self):
        return {"auroc": self.auroc.compute(), **self.metrics.compute()}


@pytest.mark.filterwarnings("ignore:The ``compute`` method")
def test_a_run_interrupted_mid_epoch_and_resumed_reports_the_uninterrupted_value():
    batches = _binary(seed=7, n=(9, 14, 3, 20, 11, 6, 17, 8))
    whole = _Model(persistent=True)
    for b in batches:
        whole.step(*b)
    want = whole.epoch_values()
    first = _Model(persistent=True)
    for b in batches[:5]:
        first.step(*b)
    buf = io.BytesIO()
    torch.save({"state_dict": first.state_dict()}, buf)  # the checkpoint; then the process dies
    del first
    buf.seek(0)
    resumed = _Model(persistent=True)
    resumed.load_state_dict(torch.load(buf)["state_dict"])  # weights_only: states and recipes are plain data
    for b in batches[5:]:
        resumed.step(*b)
    assert_values_close(resumed.epoch_values(), want, 0, 0, "resumed mid-epoch vs uninterrupted")


def test_a_checkpoint_without_state_warns_when_it_would_lose_accumulated_data():
    src = _Model(persistent=False)
    for b in _binary():
        src.step(*b)
    sd = src.state_dict()
    assert set(sd) == {"layer.weight", "layer.bias"}
    fresh = _Model(persistent=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fresh.load_state_dict(sd)  # nothing accumulated yet: nothing to say
    busy = _Model(persistent=False)
    busy.step(*_binary()[0])
    with pytest.warns(UserWarning, match=r"carries no state for this metric .*persistent=True"):
        busy.load_state_dict(sd)


# ---------------------------------------------------------------- 5. the migration page runs


def _python_blocks(path: Path) -> list[tuple[int, str]]:
    text = path.read_text()
    return [(text[:m.start()].count("\n") + 2, m.group(1)) for m in re.finditer(r"```python\n(.*?)```", text, re.S)]


@pytest.mark.filterwarnings("ignore")
def test_every_snippet_of_the_migration_page_runs(agg):
    blocks = _python_blocks(REPO / "docs" / "migrating.md")
    assert len(blocks) >= 10
    namespace: dict = {}
    for line, code in blocks:  # one namespace, in page order: a block may use the data of the first
        try:
            exec(compile(code, f"docs/migrating.md:{line}", "exec"), namespace)
        except Exception as err:  # noqa: BLE001 - re-raised with the block's line
            raise AssertionError(f"docs/migrating.md, the block at line {line} fails: "
                                 f"{type(err).__name__}: {err}") from err
