"""Binary exact curves on the host sort the state's chunks part by part (`_keys.sort_flagged_parts`): no joined
copy of the scores, 4 bytes a row of keys. Values against scikit-learn on chunked states with ties, NaN,
ignore_index, logits batches and empty chunks; the wide-key fallback; the memory bound."""
import tracemalloc

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

import fmetrics as fm
from fmetrics import _keys


def _chunks(seed, n=3000, pieces=(0, 1, 700, 1299, 1000), ties=False):
    g = torch.Generator().manual_seed(seed)
    target = torch.randint(0, 2, (n,), generator=g)
    preds = torch.rand(n, generator=g) * 0.6 + 0.3 * target
    if ties:
        preds = torch.round(preds * 8) / 8
    cuts = np.cumsum((0,) + pieces)
    return [(preds[a:b], target[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]


def _run(metric, chunks):
    s = metric.init()
    for p, t in chunks:
        s = metric.update(s, p, t)
    return metric.finalize(s)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_chunked_binary_curves_match_scikit_learn(seed, ties):
    chunks = _chunks(seed, ties=ties)
    p = torch.cat([c[0] for c in chunks]).double().numpy()
    t = torch.cat([c[1] for c in chunks]).numpy()
    assert float(_run(fm.binary_auroc(), chunks)) == pytest.approx(skm.roc_auc_score(t, p), abs=1e-12)
    assert float(_run(fm.binary_average_precision(), chunks)) == pytest.approx(
        skm.average_precision_score(t, p), abs=1e-12)
    fpr, tpr, _ = _run(fm.binary_roc(), chunks)
    want_fpr, want_tpr, _ = skm.roc_curve(t, p, drop_intermediate=False)
    np.testing.assert_allclose(fpr.numpy(), want_fpr, atol=1e-12)
    np.testing.assert_allclose(tpr.numpy(), want_tpr, atol=1e-12)


def test_ignore_index_and_logits_chunks_are_decoded_per_chunk():
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(500, generator=g) * 3
    probs = torch.rand(400, generator=g)
    t1, t2 = torch.randint(0, 2, (500,), generator=g), torch.randint(0, 2, (400,), generator=g)
    t2[::7] = -1
    chunks = [(logits, t1), (probs, t2)]
    m = fm.binary_auroc(ignore_index=-1)
    keep = t2 >= 0
    p = torch.cat([torch.sigmoid(logits), probs[keep]]).double().numpy()
    t = torch.cat([t1, t2[keep]]).numpy()
    assert float(_run(m, chunks)) == pytest.approx(skm.roc_auc_score(t, p), abs=1e-12)


def test_keys_too_wide_for_int32_fall_back_to_the_joined_sort(monkeypatch):
    x = np.array([-5.0, 3.0, 4.0, -2.5], dtype=np.float32)  # both signs beyond magnitude 2: span >= 2**30
    assert _keys.sort_flagged_parts(lambda: [(x, np.array([0, 1, 1, 0], dtype=np.int8))]) is None
    chunks = _chunks(7, ties=True)
    want = [float(_run(make(), chunks)) for make in (fm.binary_auroc, fm.binary_average_precision)]
    calls = []
    monkeypatch.setattr(_keys, "sort_flagged_parts", lambda parts: calls.append(len(list(parts()))))  # always None
    got = [float(_run(make(), chunks)) for make in (fm.binary_auroc, fm.binary_average_precision)]
    assert calls and got == want


def test_the_parts_sort_equals_the_joined_sort():
    g = torch.Generator().manual_seed(5)
    xs = [torch.rand(n, generator=g) for n in (0, 3, 70_000, 5)]
    xs[2][::3] = 0.25  # ties across blocks
    fs = [torch.randint(0, 2, (x.shape[0],), generator=g).to(torch.int8) for x in xs]
    keys, flags, offset = _keys.sort_flagged_parts(lambda: [(x.numpy(), f.numpy()) for x, f in zip(xs, fs)])
    want = _keys.sort_flagged_floats(torch.cat(xs).numpy(), torch.cat(fs).numpy())
    assert offset == want[2]
    np.testing.assert_array_equal(keys.astype(np.int64) + offset, want[0].astype(np.int64) + want[2])
    np.testing.assert_array_equal(flags, want[1])


def test_finalize_memory_stays_under_twice_the_state():
    g = torch.Generator().manual_seed(6)
    chunks = [(torch.rand(50_000, generator=g), torch.randint(0, 2, (50_000,), generator=g)) for _ in range(10)]
    m = fm.binary_auroc()
    s = m.init()
    for p, t in chunks:
        s = m.update(s, p, t)
    state_bytes = sum(x.numel() * x.element_size() for x in s.scores + s.labels)
    tracemalloc.start()
    try:
        m.finalize(s)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * state_bytes, (peak, state_bytes)


@pytest.mark.parametrize("n, step", [(100_000, 64), (70_000, 1)])
def test_the_host_walk_carries_tie_runs_across_blocks(n, step):
    """Runs of equal scores longer than a block of the host walk (1/64 steps: ~1,500 rows a run; ``step`` 1:
    one run of every row), and runs that close exactly at a block edge."""
    from fmetrics.classification.curves import _curve

    g = torch.Generator().manual_seed(8)
    target = torch.randint(0, 2, (n,), generator=g)
    preds = torch.floor(torch.rand(n, generator=g) * step) / (2 * step) + 0.25 + 0.01 * target * (step > 1)
    chunks = [(preds[a:a + 9000], target[a:a + 9000]) for a in range(0, n, 9000)]
    want = skm.roc_auc_score(target.numpy(), preds.double().numpy())
    assert float(_run(fm.binary_auroc(), chunks)) == pytest.approx(want, abs=1e-12)
    edge = torch.cat([torch.full((_curve._BLOCK,), 0.25), torch.full((_curve._BLOCK + 3,), 0.75)])  # a run ends on a block edge
    y = torch.randint(0, 2, (edge.shape[0],), generator=g)
    assert float(fm.binary_auroc()(edge, y)) == pytest.approx(skm.roc_auc_score(y.numpy(), edge.numpy()), abs=1e-12)
