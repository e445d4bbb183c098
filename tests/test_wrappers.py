"""Wrappers: draws, bootstrap coverage, semantics vs torchmetrics' wrappers, bad input."""
import math

import numpy as np
import pytest
import torch
import torchmetrics
from scipy import stats
from torchmetrics import wrappers as tmw

import fmetrics as fm
from fmetrics import wrappers as W
from fmetrics.state import unstack
from fmetrics.testing import assert_values_close
from fmetrics.wrappers import _draws, min_max_reset
from tests.cases.wrappers import diff_median, median, poisson_counts

# ---------------------------------------------------------------- counter-based draws


def test_poisson_draws_follow_poisson1_and_are_independent():
    keys = _draws.sample_keys(7, torch.arange(20_000))
    counts = poisson_counts(keys, 50)  # (50, 20000)
    observed = np.bincount(counts.ravel(), minlength=8)[:8].astype(float)
    pmf = stats.poisson.pmf(np.arange(8), 1.0)
    expected = pmf * counts.size
    observed[-1] += counts.size - observed.sum()  # tail into the last bin
    expected[-1] += counts.size - expected.sum()
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    corr = np.corrcoef(counts)  # replicate vs replicate over the same samples
    assert np.abs(corr[np.triu_indices(50, 1)]).max() < 0.04  # ~ 5 sigma for n = 20000
    lag = np.corrcoef(counts[:, :-1].ravel(), counts[:, 1:].ravel())[0, 1]  # neighbouring samples
    assert abs(lag) < 0.01


def test_draws_depend_on_seed_and_stream_only_through_the_key():
    ids = torch.arange(1000)
    a = poisson_counts(_draws.sample_keys(0, ids), 4)
    assert np.array_equal(a, poisson_counts(_draws.sample_keys(0, ids), 4))  # reproducible
    assert not np.array_equal(a, poisson_counts(_draws.sample_keys(1, ids), 4))  # seed matters
    s0 = poisson_counts(_draws.sample_keys(0, ids, 0), 4)
    s1 = poisson_counts(_draws.sample_keys(0, ids, 1), 4)
    assert abs(np.corrcoef(s0.ravel(), s1.ravel())[0, 1]) < 0.05  # streams (ranks) draw independently


def test_multinomial_draws_resample_each_batch():
    h = _draws.replicate_hashes(_draws.sample_keys(3, torch.arange(257)), 30)
    counts = _draws.multinomial(h, torch.float64)
    assert counts.shape == (30, 257) and bool((counts.sum(1) == 257).all())
    assert abs(counts.double().var().item() - (1 - 1 / 257)) < 0.05  # Binomial(n, 1/n) variance


# ---------------------------------------------------------------- bootstrap


def _coverage(data, truth, seed):
    """Fraction of trials (rows of ``data``) whose 95% bootstrap interval of the mean covers ``truth``.

    All trials are updated at once by vmapping the bootstrap update over them (each its own sample ids).
    """
    m = W.bootstrap(fm.mean(), num_samples=200, sample_ids=True, seed=seed)
    trials, n = data.shape
    ids = torch.arange(trials * n).reshape(trials, n)
    states = torch.func.vmap(m.update, in_dims=(None, 0, 0))(m.init(), ids, data)
    inside = []
    for state in unstack(states):
        q = m.finalize(state)["quantile"]
        inside.append(bool(q[0] <= truth <= q[1]))
    return float(np.mean(inside))


def test_bootstrap_interval_covers_the_truth_at_the_nominal_rate():
    """Synthetic data with a known sampling distribution: 95% percentile intervals of the mean of N(mu, 1)."""
    trials, n, mu = 300, 200, 0.7
    g = torch.Generator().manual_seed(0)
    data = torch.randn(trials, n, generator=g) + mu
    rate = _coverage(data, mu, seed=11)
    print(f"bootstrap 95% interval coverage (mean of N(0.7, 1), n=200): {rate:.3f} over {trials} trials")
    assert 0.91 <= rate <= 0.985  # nominal 0.95; binomial sd over 300 trials is 0.013


def test_bootstrap_proportion_interval_coverage():
    """Count state: the interval of a Bernoulli(0.3) accuracy covers 0.3 at about 95%."""
    trials, n, p = 300, 300, 0.3
    g = torch.Generator().manual_seed(1)
    hits = (torch.rand(trials, n, generator=g) < p).double()
    rate = _coverage(hits, p, seed=4)
    print(f"bootstrap 95% interval coverage (Bernoulli(0.3) rate, n=300): {rate:.3f} over {trials} trials")
    assert 0.90 <= rate <= 0.985


def test_bootstrap_is_reproducible_and_seeded():
    x = torch.randn(300)
    a = W.bootstrap(fm.mean(), num_samples=20, seed=1)(x)
    b = W.bootstrap(fm.mean(), num_samples=20, seed=1)(x)
    c = W.bootstrap(fm.mean(), num_samples=20, seed=2)(x)
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.equal(a["std"], c["std"])


def test_bootstrap_statistics_match_torchmetrics_bootstrapper_in_distribution():
    """Different generators, same estimand: the bootstrap sd of MSE agrees with torchmetrics' within MC error."""
    g = torch.Generator().manual_seed(2)
    preds, target = torch.randn(2000, generator=g), torch.randn(2000, generator=g)
    ours = W.bootstrap(fm.mean_squared_error(), num_samples=400, seed=0, quantiles=None)
    state = ours.init()
    for i in range(0, 2000, 1000):
        state = ours.update(state, preds[i:i + 1000], target[i:i + 1000])
    mine = ours.finalize(state)
    torch.manual_seed(0)
    tm = tmw.BootStrapper(torchmetrics.MeanSquaredError(), num_bootstraps=400, sampling_strategy="poisson")
    for i in range(0, 2000, 1000):
        tm.update(preds[i:i + 1000], target[i:i + 1000])
    theirs = tm.compute()
    full = ((preds - target) ** 2).double().mean()
    # sd of the sd estimate over 400 replicates is ~ sd / sqrt(2 * 399) = 3.5%
    assert abs(mine["std"].item() / theirs["std"].item() - 1) < 0.15
    assert abs(mine["mean"].item() - full.item()) < 3 * mine["std"].item() / math.sqrt(400) + 1e-9


def test_bootstrap_sample_ids_make_it_independent_of_batching_and_order():
    ids = torch.randperm(100)
    x = torch.randn(100)
    m = W.bootstrap(fm.mean_squared_error(), num_samples=32, sample_ids=True)
    one = m(ids, x, torch.zeros(100))
    s = m.init()
    for lo, hi in ((60, 100), (0, 13), (13, 60)):
        s = m.update(s, ids[lo:hi], x[lo:hi], torch.zeros(hi - lo))
    torch.testing.assert_close(m.finalize(s), one)


def test_bootstrap_without_ids_draws_independently_for_batches_from_fresh_states():
    """torchmetrics' forward (and TorchMetric's) updates each batch from init() and merges: offsets restart at 0,
    the row contents still separate the draws."""
    x1 = torch.randn(200)
    x2 = x1 + 1e-3  # same offsets, nearly the same values: equal weights would make the replicates ~ identical
    m = W.bootstrap(fm.sum(), num_samples=100, raw=True)
    raw1, raw2 = m(x1)["raw"], m(x2)["raw"]
    assert abs(np.corrcoef(raw1.numpy(), raw2.numpy())[0, 1]) < 0.4


def test_bootstrap_raw_values_match_explicit_resamples_of_a_cat_metric():
    ids = torch.arange(40) * 3
    x = torch.randn(40)
    out = W.bootstrap(median(), num_samples=6, sample_ids=True, raw=True, quantiles=0.5, seed=9)(ids, x)
    counts = poisson_counts(_draws.sample_keys(9, ids), 6)
    want = [np.median(np.repeat(x.double().numpy(), c)) for c in counts]
    np.testing.assert_allclose(out["raw"].numpy(), want)
    assert out["quantile"].shape == ()
    np.testing.assert_allclose(out["quantile"].item(), np.quantile(want, 0.5))


def test_bootstrap_of_a_dict_valued_metric_summarizes_each_key():
    m = W.bootstrap(fm.collection({"mse": fm.mean_squared_error(), "mae": fm.mean_absolute_error()}),
                    num_samples=10)
    p, t = torch.randn(50), torch.randn(50)
    out = m(p, t)
    assert set(out) == {"mse", "mae"} and set(out["mse"]) == {"mean", "std", "quantile"}
    for key, member in (("mse", fm.mean_squared_error()), ("mae", fm.mean_absolute_error())):
        alone = W.bootstrap(member, num_samples=10)(p, t)  # the same rows and inputs: the same draws
        assert_values_close(out[key], alone, 1e-12, 0, key)


def test_bootstrap_state_is_one_stacked_state():
    m = W.bootstrap(fm.mean_squared_error(), num_samples=200)
    s = m.update(m.init(), torch.randn(64), torch.randn(64))
    assert s.replicates.total.shape == (200, 1) and s.replicates.count.dtype == torch.int64
    assert [type(x) for x in s] == [type(s.replicates), tuple, torch.Tensor]
    assert s.rows == ()  # sum states keep no rows


def _renamed_moments(metric):
    """``metric`` without its closed-form row weighting (`Metric.weigh_rows`): its rows are weighted by merges."""
    return metric.replace(weigh_rows=None, state_key=None)


def test_bootstrap_weighted_moments_match_repeated_merges():
    """The closed-form weighted Chan moments (Pearson's path) give the same replicates as merge_rows' merges."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(200, 3, generator=g) * 3 + 1e3  # offset data: the closed form must not cancel
    y = 0.5 * x + torch.randn(200, 3, generator=g)
    ids = torch.arange(200)
    # exact=True keeps the centred Chan moments; the default's shifted sums are checked through their values below
    closed = W.bootstrap(fm.pearson_corrcoef(num_outputs=3, exact=True), num_samples=9, sample_ids=True, raw=True)
    merged = W.bootstrap(_renamed_moments(fm.pearson_corrcoef(num_outputs=3, exact=True)), num_samples=9,
                         sample_ids=True, raw=True)
    fast = W.bootstrap(fm.pearson_corrcoef(num_outputs=3), num_samples=9, sample_ids=True, raw=True)
    c = fast.init()
    a, b = closed.init(), merged.init()
    for lo, hi in ((0, 1), (1, 37), (37, 200)):  # a one-row first batch, then larger ones
        a = closed.update(a, ids[lo:hi], x[lo:hi], y[lo:hi])
        b = merged.update(b, ids[lo:hi], x[lo:hi], y[lo:hi])
        c = fast.update(c, ids[lo:hi], x[lo:hi], y[lo:hi])
    assert torch.equal(a.replicates.n, b.replicates.n)
    for u, v in zip(a.replicates[1:4], b.replicates[1:4]):
        torch.testing.assert_close(u, v, rtol=1e-10, atol=1e-8)
    torch.testing.assert_close(closed.finalize(a)["raw"], merged.finalize(b)["raw"], rtol=1e-10, atol=0)
    torch.testing.assert_close(fast.finalize(c)["raw"], closed.finalize(a)["raw"], rtol=1e-6, atol=0)
    r2 = W.bootstrap(fm.r2_score(), num_samples=9, sample_ids=True, raw=True)
    want = [skm_r2(y[:, 0].double().numpy(), x[:, 0].double().numpy(), c) for c in
            poisson_counts(_draws.sample_keys(0, ids), 9)]
    # the default's float32 residual squares (docs/regression.md, "Precision"): 1e-6
    assert np.allclose(r2.finalize(r2.update(r2.init(), ids, x[:, 0], y[:, 0]))["raw"].numpy(), want, rtol=1e-6)


def skm_r2(target, preds, counts):
    from sklearn.metrics import r2_score

    return r2_score(np.repeat(target, counts), np.repeat(preds, counts))


# ---------------------------------------------------------------- grouped / running / min_max


def test_grouped_matches_per_group_torchmetrics():
    g = torch.Generator().manual_seed(3)
    group = torch.randint(0, 4, (500,), generator=g)
    preds, target = torch.randn(500, generator=g), torch.randn(500, generator=g)
    got = W.grouped(fm.mean_squared_error(), num_groups=4)(group, preds, target)
    for k in range(4):
        want = torchmetrics.functional.mean_squared_error(preds[group == k], target[group == k])
        torch.testing.assert_close(got[k].float(), want, rtol=1e-5, atol=1e-6)


def test_grouped_out_of_range_is_counted_and_raised_at_finalize():
    m = W.grouped(fm.mean(), num_groups=2)
    with pytest.raises(ValueError, match=r"grouped\(mean\): argument `group` expected indices in \[0, 2\), got -1 and 2"):
        m.update(m.init(), torch.tensor([0, 2, -1, 1]), torch.ones(4))  # CPU, eager: at once
    with fm.validation.mode("deferred"):  # as on a GPU: counted, raised by finalize
        s = m.update(m.init(), torch.tensor([0, 2, -1, 1]), torch.ones(4))
    with pytest.raises(ValueError, match=r"grouped\(mean\): 2 input entries broke the rule: argument `group` in \[0, 2\)"):
        m.finalize(s)


def test_running_matches_torchmetrics_running():
    tm = tmw.Running(torchmetrics.SumMetric(), window=3)
    m = W.running(fm.sum(), window=3)
    s = m.init()
    for i in range(7):
        x = torch.arange(i + 1.0)
        tm.update(x)
        s = m.update(s, x)
        torch.testing.assert_close(m.finalize(s).float(), tm.compute())


def test_running_merge_aligns_the_most_recent_updates():
    m = W.running(fm.sum(), window=2)
    a = m.init()
    for x in (1.0, 2.0, 3.0):
        a = m.update(a, torch.tensor([x]))
    b = m.update(m.init(), torch.tensor([10.0]))
    assert m.finalize(m.merge(a, b)).item() == 2 + 3 + 10  # rank b's only update is its most recent


def test_min_max_matches_torchmetrics_across_rounds():
    tm = tmw.MinMaxMetric(torchmetrics.MeanMetric())
    m = W.min_max(fm.mean())
    s = m.init()
    for values in ([1.0, 2.0], [5.0], [0.5, 0.5, 2.0], [3.0]):
        x = torch.tensor(values)
        tm.update(x)
        s = m.update(s, x)
        want, got = tm.compute(), m.finalize(s)
        for k in ("raw", "min", "max"):
            torch.testing.assert_close(got[k].float(), want[k])
        tm.reset()  # keeps min_val / max_val
        s = min_max_reset(m, s)


def test_min_max_finalize_is_pure():
    m = W.min_max(fm.mean())
    s = m.update(m.init(), torch.tensor([4.0]))
    m.finalize(s)
    assert s.low.item() == math.inf and s.high.item() == -math.inf


# ---------------------------------------------------------------- classwise / multitask / multioutput


def test_classwise_names_like_torchmetrics():
    base = W.multioutput(fm.mean(), num_outputs=3)
    x = torch.randn(20, 3)
    got = W.classwise(base, labels=["a", "b", "c"], prefix="acc/")(x)
    assert list(got) == ["acc/a", "acc/b", "acc/c"]
    torch.testing.assert_close(torch.stack(list(got.values())), x.double().mean(0))
    assert list(W.classwise(base, postfix="_x")(x)) == ["0_x", "1_x", "2_x"]
    assert list(W.classwise(base)(x)) == ["multioutput(mean)_0", "multioutput(mean)_1", "multioutput(mean)_2"]


def test_classwise_shares_state_with_its_metric_in_a_collection():
    base = W.multioutput(fm.mean(), num_outputs=2)
    c = fm.collection({"m": base, "cw": W.classwise(base, labels=["x", "y"], prefix="")})
    assert len(c.init()) == 1
    out = c(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert out["cw_x"].item() == 2.0 and out["cw_y"].item() == 3.0


def test_multitask_matches_torchmetrics():
    g = torch.Generator().manual_seed(4)
    p = {"cls": torch.rand(30, generator=g), "reg": torch.randn(30, generator=g)}
    t = {"cls": torch.randint(0, 2, (30,), generator=g), "reg": torch.randn(30, generator=g)}
    tm = tmw.MultitaskWrapper({"cls": torchmetrics.MeanAbsoluteError(), "reg": torchmetrics.MeanSquaredError()})
    tm.update(p, {"cls": t["cls"].float(), "reg": t["reg"]})
    want = tm.compute()
    got = W.multitask({"cls": fm.mean_absolute_error(), "reg": fm.mean_squared_error()})(
        p, {"cls": t["cls"].float(), "reg": t["reg"]})
    for k in want:
        torch.testing.assert_close(got[k].float(), want[k])


def test_multioutput_matches_torchmetrics_with_nan_rows():
    g = torch.Generator().manual_seed(5)
    preds, target = torch.randn(200, 3, generator=g), torch.randn(200, 3, generator=g)
    preds[torch.rand(200, 3, generator=g) < 0.2] = float("nan")
    target[torch.rand(200, 3, generator=g) < 0.2] = float("nan")
    tm = tmw.MultioutputWrapper(torchmetrics.MeanSquaredError(), num_outputs=3)
    m = W.multioutput(fm.mean_squared_error(), num_outputs=3)
    s = m.init()
    for lo in range(0, 200, 64):
        tm.update(preds[lo:lo + 64], target[lo:lo + 64])
        s = m.update(s, preds[lo:lo + 64], target[lo:lo + 64])
    torch.testing.assert_close(m.finalize(s).float(), tm.compute(), rtol=1e-5, atol=1e-6)


def test_multioutput_of_a_merge_only_metric_drops_nan_rows_by_merges():
    g = torch.Generator().manual_seed(6)
    x, y = torch.randn(120, 2, generator=g), torch.randn(120, 2, generator=g)
    x[::7, 0] = float("nan")
    y[::5, 1] = float("nan")
    closed = W.multioutput(fm.pearson_corrcoef(), num_outputs=2)(x, y)  # weighted moments in closed form
    merged = W.multioutput(_renamed_moments(fm.pearson_corrcoef()), num_outputs=2)(x, y)  # by repeated merges
    for got in (closed, merged):
        for j in range(2):
            keep = ~(torch.isnan(x[:, j]) | torch.isnan(y[:, j]))
            assert abs(got[j].item() - stats.pearsonr(x[keep, j].double(), y[keep, j].double())[0]) < 1e-10


def test_multioutput_of_a_cat_metric_drops_nan_rows_per_output():
    p = torch.tensor([[1.0, 5.0], [float("nan"), 6.0], [3.0, float("nan")], [4.0, 7.0]])
    t = torch.zeros(4, 2)
    got = W.multioutput(diff_median(), num_outputs=2)(p, t)
    torch.testing.assert_close(got, torch.tensor([3.0, 6.0], dtype=torch.float64))


def test_multioutput_without_squeeze_and_other_dim():
    x = torch.randn(3, 10)  # outputs along dim 0, samples along dim 1
    got = W.multioutput(fm.sum(), num_outputs=3, output_dim=0, squeeze_outputs=False, remove_nans=False)(x)
    torch.testing.assert_close(got, x.double().sum(1))


# ---------------------------------------------------------------- bad input


def _cat_with_untagged_field():
    m = fm.cat()
    return m.replace(reductions=m.reductions._replace(nan_count=None))


@pytest.mark.parametrize("make, match", [
    (lambda: W.bootstrap(fm.mean(), num_samples=0), r"bootstrap: argument `num_samples` expected an integer >= 1"),
    (lambda: W.bootstrap(fm.mean(), num_samples=2.5), r"bootstrap: argument `num_samples`"),
    (lambda: W.bootstrap(fm.mean(), quantiles=(0.5, 1.2)), r"bootstrap: argument `quantiles` expected numbers in"),
    (lambda: W.bootstrap(fm.mean(), quantiles=-0.1), r"bootstrap: argument `quantiles`"),
    (lambda: W.bootstrap(fm.mean(), sampling="jackknife"), r"bootstrap: argument `sampling`"),
    (lambda: W.bootstrap(_cat_with_untagged_field()), r"bootstrap: argument `metric` expected a metric whose "),
    (lambda: W.bootstrap("mse"), r"bootstrap: argument `metric` expected a fmetrics.Metric"),
    (lambda: W.grouped(fm.mean(), num_groups=0), r"grouped: argument `num_groups`"),
    (lambda: W.grouped(fm.mean(), num_groups=2, labels=["a"]), r"grouped: argument `labels` expected 2 distinct labels"),
    (lambda: W.running(fm.mean(), window=0), r"running: argument `window` expected an integer >= 1"),
    (lambda: W.multitask({}), r"multitask: argument `metrics`"),
    (lambda: W.multioutput(fm.mean(), num_outputs=0), r"multioutput: argument `num_outputs`"),
    (lambda: W.multioutput(_cat_with_untagged_field(), num_outputs=2), r"multioutput: argument `metric` expected a metric"),
    (lambda: W.grouped(_cat_with_untagged_field(), num_groups=2), r"grouped: argument `metric` expected a metric whose"),
    (lambda: W.classwise(fm.mean(), labels=["a", "a"]), r"classwise: argument `labels` expected distinct"),
])
def test_bad_configuration(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"multitask: argument `inputs\[1\]` expected exactly the task keys"):
        W.multitask({"a": fm.mean_squared_error(), "b": fm.mean_squared_error()})(
            {"a": torch.ones(2), "b": torch.ones(2)}, {"a": torch.ones(2)})
    with pytest.raises(ValueError, match=r"grouped\(mean\): argument `group` expected an integer tensor of shape \(3,\)"):
        W.grouped(fm.mean(), num_groups=2)(torch.tensor([0.0, 1.0, 1.0]), torch.ones(3))
    with pytest.raises(ValueError, match=r"bootstrap\(mean\): argument `ids` expected an integer tensor of shape \(3,\)"):
        W.bootstrap(fm.mean(), sample_ids=True)(torch.arange(2), torch.ones(3))
    with pytest.raises(ValueError, match=r"multioutput\(mean\): argument `inputs\[0\]` expected 3 outputs along dim -1"):
        W.multioutput(fm.mean(), num_outputs=3)(torch.ones(4, 2))
    with pytest.raises(ValueError, match=r"classwise: argument `labels` expected a value with 3 classes"):
        W.classwise(W.multioutput(fm.mean(), num_outputs=2), labels=["a", "b", "c"])(torch.ones(4, 2))
    with pytest.raises(ValueError, match=r"min_max: argument `metric` expected a metric with a scalar value"):
        W.min_max(W.multioutput(fm.mean(), num_outputs=2))(torch.ones(4, 2))


def test_multioutput_keeps_nans_when_asked():
    got = W.multioutput(fm.mean(nan_strategy="disable"), num_outputs=2, remove_nans=False)(torch.tensor([[1.0, float("nan")]]))
    assert got[0].item() == 1.0 and math.isnan(got[1].item())


# ---------------------------------------------------------------------- core v2: docs, lengths, metadata, compile

def test_every_wrapper_example_runs_and_every_factory_documents_itself():
    from tests import _doctests

    failed, ran, missing = _doctests.run(W)
    assert not missing, f"factories without Args/Returns/Example: {missing}"
    assert failed == 0, f"{failed} doctest examples failed (see the output)"


def test_wrapper_configuration_is_keyword_only():
    with pytest.raises(TypeError, match="positional|keyword"):
        W.grouped(fm.mean(), 2)
    with pytest.raises(TypeError, match="positional|keyword"):
        W.bootstrap(fm.mean(), 10)


@pytest.mark.parametrize("make,args,short", [
    (lambda: W.bootstrap(fm.mean_squared_error(), num_samples=4, sample_ids=True),
     (torch.arange(3), torch.rand(4), torch.rand(4)), "ids"),
    (lambda: W.bootstrap(fm.mean_squared_error(), num_samples=4), (torch.rand(5), torch.rand(4)), r"inputs\[1\]"),
    (lambda: W.grouped(fm.mean_squared_error(), num_groups=2),
     (torch.tensor([0, 1, 1]), torch.rand(4), torch.rand(4)), "group"),
    (lambda: W.grouped(fm.mean_squared_error(), num_groups=2),
     (torch.tensor([0, 1, 1, 0]), torch.rand(4), torch.rand(3)), r"inputs\[1\]"),
    (lambda: W.multioutput(fm.mean_squared_error(), num_outputs=2),
     (torch.rand(5, 2), torch.rand(4, 2)), r"inputs\[1\]"),
])
def test_length_mismatch_names_the_short_argument(make, args, short):
    m = make()
    with pytest.raises(ValueError, match=rf"argument `{short}` expected"):
        m.update(m.init(), *args)


def test_wrappers_inherit_metadata():
    base = fm.r2_score()
    for w in (W.bootstrap(base), W.grouped(base, num_groups=2), W.running(base), W.multioutput(base, num_outputs=2),
              W.classwise(base), W.min_max(base)):
        assert w.higher_is_better is True and w.bounds == (None, 1.0), w.name
    assert W.running(fm.mean_squared_error()).is_differentiable


@pytest.mark.parametrize("make", [lambda: W.running(fm.mean(), window=3),
                                  lambda: W.bootstrap(fm.mean_squared_error(), num_samples=8, sample_ids=True)])
def test_running_and_bootstrap_pass_the_compile_epoch_law(make):
    from fmetrics.testing import check_metric

    g = torch.Generator().manual_seed(0)
    m = make()
    if m.name.startswith("bootstrap"):
        ids = torch.randperm(60, generator=g)
        batches, lo = [], 0
        for n in (9, 1, 14, 6, 11, 8, 5, 6):
            batches.append((ids[lo:lo + n], torch.randn(n, generator=g), torch.randn(n, generator=g)))
            lo += n
    else:
        batches = [(torch.randn(n, generator=g),) for n in (9, 1, 14, 6, 11, 8, 5, 6)]
    check_metric(m, batches, laws=["compile epoch"])


def test_a_deferred_invalid_record_does_not_make_a_metric_merge_only():
    """A `validation.Invalid` field (tag None) is weighted by its own rule: accuracy stays row-decomposable."""
    from fmetrics.wrappers import _rows

    m = fm.multiclass_accuracy(num_classes=4, average="micro")
    tags = _rows.decomposable_tags("bootstrap", m)
    assert tags is not None and "invalid" in {t for t in tags if isinstance(t, str)}
    g = torch.Generator().manual_seed(3)
    ids, p, t = torch.arange(60), torch.rand(60, 4, generator=g), torch.randint(0, 4, (60,), generator=g)
    b = W.bootstrap(m, num_samples=6, sample_ids=True, raw=True)
    s = b.update(b.update(b.init(), ids[:25], p[:25], t[:25]), ids[25:], p[25:], t[25:])
    torch.testing.assert_close(b.finalize(s)["raw"], b(ids, p, t)["raw"])
    with fm.validation.mode("deferred"):
        s = b.update(b.init(), ids[:3], p[:3], torch.tensor([0, 9, 1]))
    with pytest.raises(ValueError, match="the first was 9"):
        b.finalize(s)
