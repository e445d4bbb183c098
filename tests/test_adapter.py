"""`adapters.TorchMetric` in one process: the torchmetrics API over an fmetrics metric.

Values are checked against the equivalent torchmetrics classes (the oracle);
the module behaviour (state_dict, deepcopy, pickling, reset, MetricCollection)
against what torchmetrics promises for its own metrics.
"""
import copy
import io
import pickle

import pytest
import torch
import torchmetrics
from torchmetrics import classification as tmc

import fmetrics as fm
from adapters import TorchMetric
from adapters.torch_metric import _squeeze_if_scalar
from fmetrics.testing import assert_values_close


def _batches(seed=0, n=(7, 0, 12, 5), num_classes=3):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(k, num_classes, generator=g).softmax(-1), torch.randint(0, num_classes, (k,), generator=g))
            for k in n]


def _binary(seed=0, n=(9, 4, 13)):
    g = torch.Generator().manual_seed(seed)
    out = []
    for k in n:
        p = torch.rand(k, generator=g)
        out.append((p, (torch.rand(k, generator=g) < p).long()))
    return out


_PAIRS = [
    ("multiclass_accuracy", lambda: fm.multiclass_accuracy(num_classes=3),
     lambda: tmc.MulticlassAccuracy(num_classes=3), _batches),
    ("multiclass_f1_score-micro", lambda: fm.multiclass_f1_score(num_classes=3, average="micro"),
     lambda: tmc.MulticlassF1Score(num_classes=3, average="micro"), _batches),
    ("binary_auroc-exact", fm.binary_auroc, tmc.BinaryAUROC, _binary),
    ("pearson", fm.pearson_corrcoef, torchmetrics.PearsonCorrCoef,
     lambda: [(p, t.float()) for p, t in _binary()]),
    ("mean", fm.mean, torchmetrics.MeanMetric, lambda: [(p,) for p, _ in _binary()]),
]


@pytest.mark.parametrize("name, make, make_tm, data", _PAIRS, ids=[p[0] for p in _PAIRS])
def test_update_compute_and_forward_match_torchmetrics(name, make, make_tm, data):
    ours, theirs = TorchMetric(make()), make_tm()
    assert isinstance(ours, torchmetrics.Metric)
    for batch in data():
        if batch[0].shape[0] == 0:  # torchmetrics cannot take an empty batch; it adds nothing anyway
            ours.update(*batch)
            continue
        assert_values_close(ours(*batch), theirs(*batch), 1e-5, 1e-6, f"{name}: forward (batch value)")
    assert_values_close(ours.compute(), theirs.compute(), 1e-5, 1e-6, f"{name}: compute")
    ours.reset()
    theirs.reset()
    batch = data()[0]
    ours.update(*batch)
    theirs.update(*batch)
    assert_values_close(ours.compute(), theirs.compute(), 1e-5, 1e-6, f"{name}: compute after reset")


def _counting(metric):
    calls = []

    def update(state, *args, **kwargs):
        calls.append(1)
        return metric.update(state, *args, **kwargs)

    return metric.replace(update=update), calls


def test_forward_runs_update_once_and_merges_the_batch():
    m, calls = _counting(fm.binary_auroc())
    wrapped = TorchMetric(m)
    data = _binary()
    for p, t in data:
        wrapped(p, t)
    assert len(calls) == len(data)
    assert wrapped.update_count == len(data)
    p, t = (torch.cat(x) for x in zip(*data))
    assert_values_close(wrapped.compute(), tmc.BinaryAUROC()(p, t), 1e-6, 1e-7, "compute after forwards")
    assert len(wrapped.fm_scores) == len(data)  # one chunk per batch: merged, not recomputed


def test_reset_restores_init_and_clears_chunks():
    wrapped = TorchMetric(fm.collection({"auroc": fm.binary_auroc(), "mean": fm.mean()}))
    for p, t in _binary():
        wrapped.update(p, t)
    wrapped.reset()
    assert wrapped.update_count == 0
    assert wrapped.fm_s0_scores == [] and wrapped.fm_s0_labels == []
    assert wrapped.fm_s1_weight.item() == 0.0
    p, t = _binary()[0]
    wrapped.update(p, t)
    assert_values_close(wrapped.compute()["auroc"], tmc.BinaryAUROC()(p, t), 1e-6, 1e-7, "after reset")


def _filled():
    wrapped = TorchMetric(fm.collection({"auroc": fm.binary_auroc(), "mean": fm.mean(), "pearson": fm.pearson_corrcoef()}))
    for p, t in _binary():
        wrapped.update(p, t.float())
    return wrapped


@pytest.mark.filterwarnings("ignore:The ``compute`` method")  # loading a state does not count as an update
def test_state_dict_round_trip():
    src = _filled()
    assert src.state_dict() == {}  # torchmetrics' default: states are not persistent
    src.persistent(True)
    sd = src.state_dict()
    assert {"fm_s0_scores", "fm_s1_weighted_sum", "fm_s2_sums", "fm_s2_shift"} <= set(sd)
    assert sd["fm_recipe"] == repr(src.metric)
    dst = TorchMetric(fm.collection({"auroc": fm.binary_auroc(), "mean": fm.mean(), "pearson": fm.pearson_corrcoef()}))
    dst.load_state_dict(sd)
    assert_values_close(dst.compute(), src.compute(), 0.0, 0.0, "compute after load_state_dict")
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    dst.load_state_dict(torch.load(buf))
    assert_values_close(dst.compute(), src.compute(), 0.0, 0.0, "compute after torch.save/load")


def test_deepcopy_is_independent():
    src = _filled()
    want = src.compute()
    dup = copy.deepcopy(src)
    p, t = _binary(seed=5)[0]
    dup.update(p, t.float())
    assert_values_close(src.compute(), want, 0.0, 0.0, "original after updating the copy")
    assert dup.update_count == src.update_count + 1
    assert repr(dup.metric) == repr(src.metric)  # copied by its recipe; the state is not shared


def test_pickle_round_trip_keeps_state_and_closures():
    src = _filled()
    for dumps in (pickle.dumps, lambda m: (lambda b: (torch.save(m, b), b.getvalue())[1])(io.BytesIO())):
        blob = dumps(src)
        dst = pickle.loads(blob) if blob[:1] == b"\x80" else torch.load(io.BytesIO(blob), weights_only=False)
        assert_values_close(dst.compute(), src.compute(), 0.0, 0.0, "compute after unpickling")
        p, t = _binary(seed=3)[0]
        dst.update(p, t.float())  # the unpickled closures still run
        assert dst.update_count == src.update_count + 1


def test_to_moves_every_state_and_default():
    wrapped = _filled().to("meta")
    assert wrapped.device == torch.device("meta")
    for name in wrapped._defaults:
        value = getattr(wrapped, name)
        for x in value if isinstance(value, list) else [value]:
            assert x.device.type == "meta", name
    wrapped.reset()
    assert wrapped.fm_s1_weight.device.type == "meta"


def test_metric_collection_groups_only_equal_state_keys():
    col = torchmetrics.MetricCollection({
        "acc": TorchMetric(fm.multiclass_accuracy(num_classes=3)),
        "f1": TorchMetric(fm.multiclass_f1_score(num_classes=3)),  # same state key: one compute group
        "acc_c": TorchMetric(fm.multiclass_accuracy(num_classes=3, ignore_index=7)),  # equal states, other key
    })
    tm_acc, tm_f1 = tmc.MulticlassAccuracy(num_classes=3), tmc.MulticlassF1Score(num_classes=3)
    for p, t in _batches(n=(7, 12, 5)):
        col.update(p, t)
        tm_acc.update(p, t)
        tm_f1.update(p, t)
    groups = sorted(sorted(g) for g in col.compute_groups.values())
    assert groups == [["acc", "f1"], ["acc_c"]]
    out = col.compute()
    assert_values_close(out["acc"], tm_acc.compute(), 1e-6, 1e-7, "acc")
    assert_values_close(out["f1"], tm_f1.compute(), 1e-6, 1e-7, "f1")
    assert_values_close(out["acc_c"], tm_acc.compute(), 1e-6, 1e-7, "acc with an unused ignore_index")


def test_compute_on_cpu_keeps_chunks_on_cpu():
    wrapped = TorchMetric(fm.binary_auroc(), compute_on_cpu=True)
    for p, t in _binary():
        wrapped.update(p, t)
    assert all(c.device.type == "cpu" for c in wrapped.fm_scores)
    assert wrapped.compute().device.type == "cpu"


def test_merge_state_folds_another_wrapper():
    a, b = TorchMetric(fm.binary_auroc()), TorchMetric(fm.binary_auroc())
    data = _binary()
    a.update(*data[0])
    for batch in data[1:]:
        b.update(*batch)
    a.merge_state(b)
    p, t = (torch.cat(x) for x in zip(*data))
    assert_values_close(a.compute(), tmc.BinaryAUROC()(p, t), 1e-6, 1e-7, "merged")


def test_bad_arguments():
    with pytest.raises(TypeError, match="expected a fmetrics.Metric"):
        TorchMetric(tmc.BinaryAUROC())
    with pytest.raises(ValueError, match="dist_sync_fn"):
        TorchMetric(fm.mean(), dist_sync_fn=lambda x, group=None: [x])
    with pytest.raises(ValueError, match="compute_on_cpu"):
        TorchMetric(fm.mean(), compute_on_cpu="yes")


# ---------------------------------------------------------------- every registered metric


def _every_case():
    from tests.cases import all_cases

    return all_cases()


def _nonempty(batches):
    from fmetrics.testing import _num_samples

    return [b if isinstance(b, tuple) else (b,) for b in batches if _num_samples(b if isinstance(b, tuple) else (b,))]


@pytest.mark.filterwarnings("ignore")
def test_every_registered_metric_works_through_the_wrapper():
    """update / forward / compute / reset / pickle / deepcopy for every case of the registry.

    The contract here is equivalence with the wrapped metric's own functions
    (its values are checked against oracles by the law suite).
    """
    from fmetrics.testing import concat_inputs

    failures = []
    for case in _every_case():
        try:
            m = case.make()
            batches = _nonempty(case.batches(0))[:3]
            canonical = case.check.get("canonical", lambda v: v)
            tol = (case.check.get("rtol", 1e-6), case.check.get("atol", 1e-8))
            want = canonical(m.finalize(m.update(m.init(), *concat_inputs(batches))))
            wrapped = TorchMetric(m)
            for b in batches[:-1]:
                wrapped.update(*b)
            batch_value = wrapped(*batches[-1])
            # forward squeezes one-element values to 0-d, as torchmetrics' compute does
            assert_values_close(canonical(batch_value), canonical(_squeeze_if_scalar(m(*batches[-1]))), *tol,
                                "forward")
            if "split invariance" in case.check.get("laws", ("split invariance",)):
                assert_values_close(canonical(wrapped.compute()), want, *tol, "compute")
            copied = pickle.loads(pickle.dumps(wrapped))
            assert_values_close(canonical(copied.compute()), canonical(wrapped.compute()), 0, 0, "unpickled")
            assert_values_close(canonical(copy.deepcopy(wrapped).compute()), canonical(wrapped.compute()), 0, 0,
                                "deepcopy")
            wrapped.reset()
            wrapped.update(*batches[-1])
            assert_values_close(canonical(wrapped.compute()), canonical(batch_value), *tol, "after reset")
        except Exception as err:  # noqa: BLE001 - collected, reported together
            failures.append(f"{case.id}: {type(err).__name__}: {str(err)[:300]}")
    assert not failures, f"{len(failures)} cases fail through TorchMetric:\n" + "\n".join(failures)
