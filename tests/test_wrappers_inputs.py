"""feature_share and the input transformers: network calls counted, values against torchmetrics' wrappers."""
import pickle

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

import fmetrics as fm
from fmetrics import wrappers as W
from tests.cases.wrappers import flip

tm = pytest.importorskip("torchmetrics")


class CountingNet(torch.nn.Module):
    """A feature network that counts its forward passes (the counter is shared by eval views of it)."""

    def __init__(self, d_in=12, d_out=4, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.lin = torch.nn.Linear(d_in, d_out)
        self.num_features = d_out
        self.calls = [0]

    def forward(self, x):
        self.calls[0] += 1
        return self.lin(x.float().flatten(1))


def _images(seed, n=24):
    g = torch.Generator().manual_seed(seed)
    real = torch.randint(0, 256, (n, 3, 2, 2), generator=g, dtype=torch.uint8)
    fake = (real.float() * 0.6 + torch.randint(0, 80, real.shape, generator=g)).to(torch.uint8)
    return real, fake


def _members(net, n):
    return {"fid": fm.frechet_inception_distance(feature=net),
            "kid": fm.kernel_inception_distance(feature=net, subsets=1, subset_size=n),
            "mifid": fm.memorization_informed_frechet_inception_distance(feature=net)}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_feature_share_runs_the_network_once_per_batch(seed):
    net, n = CountingNet(seed=seed), 24
    members = _members(net, n)
    fs = W.feature_share(members)
    real, fake = _images(seed, n)
    s = fs.update(fs.init(), real, True)
    assert net.calls[0] == 1  # three members, one forward pass
    s = fs.update(s, fake, False)
    assert net.calls[0] == 2
    shared = fs.finalize(s)
    net.calls[0] = 0
    apart = {k: m.finalize(m.update(m.update(m.init(), real, True), fake, False)) for k, m in members.items()}
    assert net.calls[0] == 6  # one pass per member and batch without sharing
    for k in apart:
        torch.testing.assert_close(shared[k], apart[k], rtol=0, atol=0)


def test_feature_share_against_torchmetrics():
    from torchmetrics.image.fid import FrechetInceptionDistance
    from torchmetrics.image.kid import KernelInceptionDistance
    from torchmetrics.wrappers import FeatureShare
    n = 24
    for seed in range(3):
        net = CountingNet(seed=seed)
        real, fake = _images(seed, n)
        ours = W.feature_share(_members(net, n))
        s = ours.update(ours.update(ours.init(), real, True), fake, False)
        got = ours.finalize(s)
        theirs = FeatureShare({"fid": FrechetInceptionDistance(feature=net),
                               "kid": KernelInceptionDistance(feature=net, subsets=1, subset_size=n)})
        theirs.update(real, real=True)
        theirs.update(fake, real=False)
        want = theirs.compute()
        np.testing.assert_allclose(float(got["fid"]), float(want["fid"]), rtol=1e-4)
        # one subset of every image: the subset mean is the full unbiased MMD^2 whatever the permutation
        np.testing.assert_allclose(float(got["kid"][0]), float(want["kid"][0]), rtol=1e-4, atol=1e-6)


def test_feature_share_distinct_networks_and_named_inputs():
    a, b = CountingNet(seed=0), CountingNet(seed=1)
    fs = W.feature_share({
        "fid_a": fm.frechet_inception_distance(feature=a).from_output("imgs", "real"),
        "is_a": fm.inception_score(feature=a, splits=1).from_output("imgs"),
        "fid_b": fm.frechet_inception_distance(feature=b).from_output("imgs", "real")})
    real, fake = _images(3)
    s = fs.update(fs.init(), {"imgs": real, "real": True})
    s = fs.update(s, {"imgs": fake, "real": False})
    assert (a.calls[0], b.calls[0]) == (2, 2)  # one pass per network and batch
    v = fs.finalize(s)
    solo = fm.inception_score(feature=a, splits=1)
    torch.testing.assert_close(v["is_a"], solo(torch.cat([real, fake])))
    assert not torch.equal(v["fid_a"], v["fid_b"])


def test_feature_share_outside_an_update_nothing_is_remembered():
    net = CountingNet()
    fs = W.feature_share(_members(net, 8))
    real, _ = _images(0, 8)
    s = fs.update(fs.init(), real, True)
    s = fs.update(s, real, True)  # the same tensor again: a new batch, a new forward pass
    assert net.calls[0] == 2
    assert pickle.loads(pickle.dumps(fs)).state_key == fs.state_key


def test_feature_share_max_cache_size_one_still_shares_consecutive_calls():
    net = CountingNet()
    fs = W.feature_share(_members(net, 8), max_cache_size=1)
    fs.update(fs.init(), _images(0, 8)[0], True)
    assert net.calls[0] == 1


def _binary(seed, n=40):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, generator=g), torch.randint(0, 2, (n,), generator=g)


@pytest.mark.parametrize("seed", range(4))
def test_lambda_input_transformer_matches_torchmetrics(seed):
    from torchmetrics.classification import BinaryAccuracy, BinaryAUROC
    from torchmetrics.wrappers import LambdaInputTransformer
    p, t = _binary(seed)
    for ours, theirs in ((fm.binary_accuracy(), BinaryAccuracy()), (fm.binary_auroc(), BinaryAUROC())):
        m = W.lambda_input_transformer(ours, transform_pred=flip, transform_target=lambda x: 1 - x)
        ref = LambdaInputTransformer(theirs, transform_pred=flip, transform_target=lambda x: 1 - x)
        ref.update(p, t)
        np.testing.assert_allclose(float(m(p, t)), float(ref.compute()), rtol=1e-6)
    # and against sklearn on the transformed inputs
    got = W.lambda_input_transformer(fm.binary_auroc(), transform_pred=flip)(p, t)
    np.testing.assert_allclose(float(got), skm.roc_auc_score(t.numpy(), 1 - p.numpy()), rtol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_binary_target_transformer_matches_torchmetrics(seed):
    from torchmetrics.retrieval import RetrievalMRR
    from torchmetrics.wrappers import BinaryTargetTransformer
    g = torch.Generator().manual_seed(seed)
    n = 60
    p, t = torch.rand(n, generator=g), torch.randint(0, 4, (n,), generator=g).float() * 0.7
    q = torch.randint(0, 6, (n,), generator=g)
    for threshold in (0, 1, 1.2):
        ref = BinaryTargetTransformer(RetrievalMRR(), threshold=threshold)
        ref.update(p, t, indexes=q)
        got = W.binary_target_transformer(fm.retrieval_reciprocal_rank(), threshold=threshold)(p, t, q)
        np.testing.assert_allclose(float(got), float(ref.compute()), rtol=1e-6)


def test_binary_target_transformer_keeps_the_target_dtype_and_threshold_is_strict():
    seen = []
    probe = fm.Metric(init=lambda: (torch.zeros(()),), update=lambda s, p, t: seen.append(t) or s,
                      merge=lambda a, b: a, finalize=lambda s: s[0])
    W.binary_target_transformer(probe, threshold=1).update(probe.init(), torch.zeros(3), torch.tensor([0, 1, 2]))
    assert seen[0].dtype == torch.int64 and seen[0].tolist() == [0, 0, 1]


def test_transformers_pickle_by_recipe_and_share_state_keys():
    m = W.lambda_input_transformer(fm.binary_accuracy(), transform_pred=flip)
    back = pickle.loads(pickle.dumps(m))
    p, t = _binary(0)
    torch.testing.assert_close(back(p, t), m(p, t))
    assert back.state_key == m.state_key
    c = fm.collection({"a": m, "b": W.lambda_input_transformer(fm.binary_precision(), transform_pred=flip)})
    assert len(c.init()) == 1  # one stat-scores state for both, as without the wrapper
    anon = W.lambda_input_transformer(fm.binary_accuracy(), transform_pred=lambda x: 1 - x)
    other = W.lambda_input_transformer(fm.binary_precision(), transform_pred=lambda x: 1 - x)
    assert len(fm.collection({"a": anon, "b": other}).init()) == 2  # two lambdas: never assumed equal
    assert "0x" not in repr(anon.state_key)  # no address: the distributed fingerprint is process-independent
    with pytest.raises(Exception):
        pickle.dumps(anon)


def test_transformers_bad_config_and_input():
    with pytest.raises(ValueError, match="binary_target_transformer: argument `threshold`"):
        W.binary_target_transformer(fm.binary_accuracy(), threshold="0.5")
    with pytest.raises(ValueError, match="lambda_input_transformer: argument `transform_pred`"):
        W.lambda_input_transformer(fm.binary_accuracy(), transform_pred=3)
    with pytest.raises(ValueError, match="metric_input_transformer: argument `metric`"):
        W.metric_input_transformer(3)
    with pytest.raises(ValueError, match="feature_share: argument `max_cache_size`"):
        W.feature_share({"a": fm.mean()}, max_cache_size=0)
    with pytest.raises(ValueError, match="feature_share: argument `metrics`"):
        W.feature_share({})
    m = W.lambda_input_transformer(fm.binary_accuracy(), transform_pred=flip)
    s = m.init()
    with pytest.raises(ValueError, match=r"lambda_input_transformer\(binary_accuracy\).*transform_pred"):
        m.update(s, [0.1, 0.2], torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="binary_accuracy"):  # the wrapped metric's own rule, on CPU at once
        m.update(s, torch.tensor([0.1, 0.2]), torch.tensor([0, 3]))
    torch.testing.assert_close(m.finalize(m.update(s, torch.tensor([0.9]), torch.tensor([0]))),
                               torch.tensor(1.0, dtype=torch.float64))


class ClipLike(torch.nn.Module):
    """A CLIP-style network (``get_image_features`` / ``get_text_features``) counting its calls."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.img, self.txt = torch.nn.Linear(12, 5), torch.nn.Embedding(10, 5)
        self.calls = [0]

    def get_image_features(self, pixel_values):
        self.calls[0] += 1
        return self.img(pixel_values.flatten(1))

    def get_text_features(self, input_ids, attention_mask):
        return self.txt(input_ids).mean(1)


def clip_processor(text=None, images=None, **kwargs):
    if images is not None:
        return {"pixel_values": torch.stack([i.float() for i in images])}
    return {"input_ids": torch.tensor([[len(t) % 10, 3] for t in text]), "attention_mask": torch.ones(len(text), 2)}


def test_feature_share_with_clip_score_members():
    model = ClipLike()
    members = {"clip": fm.clip_score(model=model, processor=clip_processor),
               "clip_pair": fm.clip_score(model=model, processor=clip_processor, clamp="pair")}
    imgs, texts = torch.rand(4, 3, 2, 2), ["a cat", "two dogs", "x", "a red car"]
    fs = W.feature_share(members)
    got = fs(imgs, texts)
    for k, m in members.items():
        torch.testing.assert_close(got[k], m(imgs, texts))
    # the members' processors make their own pixel tensors, so each member runs the image tower itself
    # (by identity, as torchmetrics' cache, which does not even see get_image_features)
    model.calls[0] = 0
    fs(imgs, texts)
    assert model.calls[0] == 2


def test_feature_share_lpips_members_share_both_image_passes():
    class Maps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(2)
            self.conv, self.calls = torch.nn.Conv2d(3, 4, 1), [0]

        def forward(self, x):
            self.calls[0] += 1
            return [self.conv(x), self.conv(x).relu()]

    net = Maps()
    members = {"mean": fm.learned_perceptual_image_patch_similarity(net=net),
               "sum": fm.learned_perceptual_image_patch_similarity(net=net, reduction="sum")}
    a, b = torch.rand(5, 3, 4, 4) * 2 - 1, torch.rand(5, 3, 4, 4) * 2 - 1
    fs = W.feature_share(members)
    got = fs(a, b)
    assert net.calls[0] == 2  # img1 and img2 once each, for both members
    for k, m in members.items():
        torch.testing.assert_close(got[k], m(a, b), rtol=0, atol=0)


def test_feature_share_normalize_members_share_one_scaled_batch():
    net = CountingNet()
    members = {"fid": fm.frechet_inception_distance(feature=net, normalize=True),
               "kid": fm.kernel_inception_distance(feature=net, subsets=1, subset_size=12, normalize=True),
               "is": fm.inception_score(feature=net, splits=1, normalize=True).from_output("imgs"),
               "fid_raw": fm.frechet_inception_distance(feature=net)}  # reads the images unscaled: its own pass
    fs = W.feature_share({k: m if k == "is" else m.from_output("imgs", "real") for k, m in members.items()})
    g = torch.Generator().manual_seed(0)
    real, fake = torch.rand(12, 3, 2, 2, generator=g), torch.rand(12, 3, 2, 2, generator=g) ** 2
    s = fs.update(fs.init(), {"imgs": real, "real": True})
    s = fs.update(s, {"imgs": fake, "real": False})
    assert net.calls[0] == 4  # per batch: one pass on the scaled images (3 members), one on the raw ones
    got = fs.finalize(s)
    for k, m in members.items():
        inputs = [({"imgs": real},), ({"imgs": fake},)] if k == "is" else [(real, True), (fake, False)]
        st = m.init()
        for x in inputs:
            st = m.update(st, *x)
        want = m.finalize(st)
        torch.testing.assert_close(got[k], want, rtol=0, atol=0)
