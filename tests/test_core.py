"""The Metric record, state helpers and collections."""
import io
from typing import NamedTuple

import pytest
import torch

import fmetrics as fm
from fmetrics import state as S


class Pair(NamedTuple):
    total: torch.Tensor
    chunks: tuple


def test_metric_is_immutable_and_replace_copies():
    m = fm.mean()
    with pytest.raises(AttributeError, match="immutable"):
        m.name = "other"
    r = m.replace(name="avg")
    assert r.name == "avg" and m.name == "mean" and r._update is m._update


def test_metric_requires_callables_and_hashable_key():
    with pytest.raises(TypeError, match="argument `update` must be callable"):
        fm.Metric(init=lambda: 0, update=None, merge=lambda a, b: a, finalize=lambda s: s, name="x")
    with pytest.raises(TypeError):
        fm.Metric(init=lambda: 0, update=lambda s: s, merge=lambda a, b: a, finalize=lambda s: s, state_key=[1])


def test_one_shot_call_equals_four_functions():
    x = torch.randn(10)
    m = fm.mean()
    assert torch.equal(m(x), m.finalize(m.update(m.init(), x)))


def test_merge_fields_by_tag():
    merge = S.merge_fields(Pair(total="max", chunks="cat"))
    a = Pair(torch.tensor(1.0), (torch.ones(1),))
    b = Pair(torch.tensor(3.0), (torch.zeros(2),))
    out = merge(a, b)
    assert out.total.item() == 3.0 and len(out.chunks) == 2 and type(out) is Pair
    with pytest.raises(TypeError, match="field tag 'avg'"):
        S.merge_fields(Pair(total="avg", chunks="cat"))(a, b)


def test_cat_chunks_joins_once():
    assert torch.equal(S.cat_chunks((torch.ones(2), torch.zeros(1)), torch.empty(0)), torch.tensor([1.0, 1.0, 0.0]))
    assert S.cat_chunks((), torch.empty(0)).numel() == 0


def test_stack_unstack_fold():
    m = fm.mean()
    states = [m.update(m.init(), torch.tensor([float(i), float(i + 1)])) for i in range(3)]
    stacked = S.stack(states)
    assert stacked.weighted_sum.shape == (3,)
    back = S.unstack(stacked)
    assert all(torch.equal(a.weighted_sum, b.weighted_sum) for a, b in zip(back, states))
    folded = S.fold(m.merge, states)
    assert m.finalize(folded).item() == pytest.approx(torch.tensor([0.0, 1, 1, 2, 2, 3]).mean().item())


def test_vmap_over_stacked_state():
    m = fm.sum()
    stacked = S.stack([m.init(), m.init()])
    out = torch.func.vmap(m.update)(stacked, torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert out.total.tolist() == [3.0, 7.0]


def test_to_device_and_init_device():
    s = fm.mean().init("cpu")
    assert all(x.device.type == "cpu" for x in S.leaves(s))
    assert S.device_of((1, {"a": torch.ones(1)})).type == "cpu"
    assert S.device_of((1, "x")) is None


def test_state_round_trips_through_torch_save():
    m = fm.cat()
    s = m.update(m.init(), torch.arange(3.0))
    buf = io.BytesIO()
    torch.save(s, buf)
    buf.seek(0)
    assert torch.equal(m.finalize(torch.load(buf, weights_only=False)), torch.arange(3.0))


def test_collection_shares_state_between_equal_keys_and_counts_updates():
    calls = {"n": 0}
    base = fm.mean()

    def counting_update(s, *a):
        calls["n"] += 1
        return base.update(s, *a)

    shared = base.replace(update=counting_update)
    # three members over one state key (same config), one over another
    c = fm.collection(
        {"m1": shared, "m2": shared.replace(name="m2"), "m3": shared.replace(finalize=lambda s: s.weight), "mx": fm.max()},
        prefix="val/",
        postfix="_epoch",
    )
    s = c.init()
    assert len(s) == 2  # one state for the three mean-keyed members, one for max
    x = torch.tensor([1.0, 2.0, 6.0])
    s = c.update(s, x)
    s = c.update(s, x)
    assert calls["n"] == 2  # one update per batch, not three
    out = c.finalize(s)
    assert set(out) == {"val/m1_epoch", "val/m2_epoch", "val/m3_epoch", "val/mx_epoch"}
    assert out["val/m1_epoch"].item() == pytest.approx(3.0)
    assert out["val/m3_epoch"].item() == 6.0  # total weight: 6 values
    assert out["val/mx_epoch"].item() == 6.0


def test_collection_flattens_dict_values():
    m = fm.mean()
    both = m.replace(finalize=lambda s: {"mean": m.finalize(s), "weight": s.weight}, state_key=None)
    out = fm.collection({"stats": both})(torch.tensor([2.0, 4.0]))
    assert set(out) == {"stats_mean", "stats_weight"}
    assert out["stats_mean"].item() == 3.0 and out["stats_weight"].item() == 2.0


def test_collection_rejects_bad_members():
    with pytest.raises(ValueError, match="collection: argument `metrics`"):
        fm.collection({})
    with pytest.raises(TypeError, match="member 'x' expected a fmetrics.Metric"):
        fm.collection({"x": torch.nn.Linear(1, 1)})


def test_collection_state_key_and_reductions():
    c = fm.collection({"a": fm.mean(), "b": fm.sum()})
    assert c.reductions[0]._fields == ("weighted_sum", "weight", "nan_count")
    assert c.state_key == fm.collection({"a": fm.mean(), "b": fm.sum()}).state_key
