"""ARNIQA, DISTS and PPL against torchmetrics' own code on the same tiny random networks.

torchmetrics' ARNIQA and DISTS build torchvision networks with downloaded weights in their constructors, and
its PPL checks that torchvision is importable; none is installed here (nor downloadable). So the oracles are
torchmetrics' forward passes with the constructor bypassed: `_ARNIQA` / `DISTSNetwork` objects whose encoder /
stages are our tiny networks (DISTS' stages built with torchmetrics' own ``L2pooling``), ARNIQA's two
torchvision transforms written here by their documented definitions (``Resize`` on tensors: bilinear,
antialiased; ``Normalize``), and torchmetrics' functional ``perceptual_path_length`` with its torchvision
flag set, fed the same global seed so it draws the same latents.
"""
from __future__ import annotations

import copy
import importlib
import types

import pytest
import torch
import torch.nn.functional as F

import fmetrics
from fmetrics import validation
from fmetrics.image.dists import DISTSBackbone
from fmetrics.image.ppl import sample_latents

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def _close(a, b, rtol=1e-6, atol=1e-9):
    torch.testing.assert_close(torch.as_tensor(a).double(), torch.as_tensor(b).double(), rtol=rtol, atol=atol)


# ------------------------------------------------------------------ ARNIQA

def _arniqa_nets(seed=0):
    torch.manual_seed(seed)
    enc = torch.nn.Sequential(torch.nn.Conv2d(3, 5, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(5, 4, 3),
                              torch.nn.AdaptiveAvgPool2d(1)).double()
    return enc, torch.nn.Linear(8, 1).double()


def _tm_arniqa(img, enc, reg, dataset, normalize, reduction, monkeypatch):
    T = importlib.import_module("torchmetrics.functional.image.arniqa")
    shim = types.SimpleNamespace(
        Resize=lambda size: lambda x: F.interpolate(x, size=size, mode="bilinear", align_corners=False,
                                                    antialias=True),
        Normalize=lambda mean, std: lambda x: (x - torch.tensor(mean, dtype=x.dtype)[:, None, None])
        / torch.tensor(std, dtype=x.dtype)[:, None, None])
    monkeypatch.setattr(T, "transforms", shim, raising=False)
    m = T._ARNIQA.__new__(T._ARNIQA)
    torch.nn.Module.__init__(m)
    m.regressor_dataset, m.imagenet_norm_mean, m.imagenet_norm_std = dataset, MEAN, STD
    m.feat_dim, m.encoder, m.regressor = 4, copy.deepcopy(enc), copy.deepcopy(reg)
    m.eval()
    with torch.no_grad():
        scores, n = T._arniqa_update(img, m, normalize=normalize)
        return T._arniqa_compute(scores.reshape(-1), n, reduction)


@pytest.mark.parametrize("dataset", ["koniq10k", "kadid10k"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("normalize", [True, False])
def test_arniqa_matches_torchmetrics(dataset, reduction, normalize, monkeypatch):
    enc, reg = _arniqa_nets(1)
    g = torch.Generator().manual_seed(2)
    img = torch.rand(5, 3, 15, 18, generator=g, dtype=torch.float64)  # odd sizes: H // 2 rounds down
    if not normalize:
        img = (img - torch.tensor(MEAN, dtype=img.dtype)[:, None, None]) / torch.tensor(STD, dtype=img.dtype)[:, None, None]
    m = fmetrics.arniqa(encoder=enc, regressor=reg, regressor_dataset=dataset, reduction=reduction,
                        normalize=normalize)
    s = m.update(m.init(), img[:2])
    s = m.update(s, img[2:])
    _close(m.finalize(s), _tm_arniqa(img, enc, reg, dataset, normalize, reduction, monkeypatch))


def test_arniqa_eval_mode_without_touching_the_module():
    enc, reg = _arniqa_nets()
    enc = torch.nn.Sequential(torch.nn.Dropout(0.9), enc).train()
    img = torch.rand(4, 3, 8, 8, dtype=torch.float64)
    m = fmetrics.arniqa(encoder=enc, regressor=reg, reduction="none")
    a, b = m(img), m(img)
    assert torch.equal(a, b) and enc.training and enc[0].training  # dropout off in the metric, flags kept


def test_arniqa_bad_input():
    enc, reg = _arniqa_nets()
    m = fmetrics.arniqa(encoder=enc, regressor=reg)
    good = torch.rand(3, 3, 8, 8, dtype=torch.float64)
    s = m.update(m.init(), good)
    with pytest.raises(ValueError, match=r"arniqa: img must be in \[0, 1\].*found 1\.0.*entries"):
        m.update(s, good + 0.5)
    with pytest.raises(ValueError, match=r"arniqa: argument `img` expected a batch of RGB images"):
        m.update(s, torch.rand(2, 1, 8, 8))
    with pytest.raises(ValueError, match="arniqa: img must be finite"):
        m.update(s, torch.full((1, 3, 8, 8), float("nan")))
    _close(m.finalize(s), m(good))  # the state is intact
    with validation.mode("deferred"):  # the accelerator path: counted, raised by finalize
        bad = m.update(s, good + 0.5)
    with pytest.raises(ValueError, match=r"arniqa.*\[0, 1\]"):
        m.finalize(bad)
    with pytest.raises(ValueError, match="arniqa: argument `regressor_dataset`"):
        fmetrics.arniqa(encoder=enc, regressor=reg, regressor_dataset="live")
    with pytest.raises(ValueError, match="arniqa: argument `encoder` expected an nn.Module"):
        fmetrics.arniqa(encoder="resnet50", regressor=reg)
    nan_reg = torch.nn.Linear(8, 1).double()
    torch.nn.init.constant_(nan_reg.weight, float("nan"))
    with pytest.raises(ValueError, match="arniqa: the network returned non-finite scores"):
        fmetrics.arniqa(encoder=enc, regressor=nan_reg)(good)
    with pytest.warns(UserWarning, match="arniqa: no samples were seen"):
        assert torch.isnan(m.finalize(m.update(m.init(), good[:0])))


# ------------------------------------------------------------------ DISTS

def _vgg(seed=0):
    """A 5-stage VGG-style feature stack (DISTS' layout): channels 4, 5, 5, 6, 6."""
    torch.manual_seed(seed)
    conv = lambda i, o: [torch.nn.Conv2d(i, o, 3, padding=1), torch.nn.ReLU()]  # noqa: E731
    pool = [torch.nn.MaxPool2d(2, 2)]
    layers = conv(3, 4) + conv(4, 4) + pool + conv(4, 5) + pool + conv(5, 5) + pool + conv(5, 6) + pool \
        + conv(6, 6) + pool
    return torch.nn.Sequential(*layers).double()


def _tm_dists(vgg, alpha, beta, x, y):
    T = importlib.import_module("torchmetrics.functional.image.dists")
    net = T.DISTSNetwork.__new__(T.DISTSNetwork)
    torch.nn.Module.__init__(net)
    stages, cur, chans = [], [], 3
    for layer in vgg[:-1]:  # DISTS uses the layers before the last max pool
        if isinstance(layer, torch.nn.MaxPool2d):
            stages.append(cur)
            cur = [T.L2pooling(channels=chans).double()]
        else:
            cur.append(layer)
            chans = layer.out_channels if isinstance(layer, torch.nn.Conv2d) else chans
    stages.append(cur)
    for i, st in enumerate(stages):
        setattr(net, f"stage{i + 1}", torch.nn.Sequential(*st))
    net.register_buffer("mean", torch.tensor(MEAN, dtype=torch.float64).view(1, -1, 1, 1))
    net.register_buffer("std", torch.tensor(STD, dtype=torch.float64).view(1, -1, 1, 1))
    net.chns = [3, 4, 5, 5, 6, 6]
    net.alpha = torch.nn.Parameter(alpha.reshape(1, -1, 1, 1).clone())
    net.beta = torch.nn.Parameter(beta.reshape(1, -1, 1, 1).clone())
    return net(x, y).reshape(-1)


@pytest.mark.parametrize("weights", ["learned", "equal"])
def test_dists_matches_torchmetrics(weights):
    vgg = _vgg(3)
    g = torch.Generator().manual_seed(4)
    x = torch.rand(4, 3, 32, 30, generator=g, dtype=torch.float64)
    y = (x + 0.2 * torch.randn(x.shape, generator=g, dtype=torch.float64)).clamp(0, 1)
    a = 0.1 + 0.01 * torch.randn(29, generator=g, dtype=torch.float64)
    b = 0.1 + 0.01 * torch.randn(29, generator=g, dtype=torch.float64)
    kw = {"alpha": a, "beta": b} if weights == "learned" else {}
    ref = _tm_dists(vgg, a, b, x, y) if weights == "learned" else _tm_dists(vgg, torch.ones(29), torch.ones(29), x, y)
    net = DISTSBackbone(vgg)
    for reduction, expected in (("none", ref), (None, ref), ("mean", ref.mean()), ("sum", ref.sum())):
        m = fmetrics.deep_image_structure_and_texture_similarity(net=net, reduction=reduction, **kw)
        s = m.update(m.init(), x[:1], y[:1])
        s = m.update(s, x[1:], y[1:])
        _close(m.finalize(s), expected)  # torchmetrics rounds its L2 pooling taps to float32


def test_dists_identical_images_and_bad_input():
    net = DISTSBackbone(_vgg())
    m = fmetrics.deep_image_structure_and_texture_similarity(net=net)
    x = torch.rand(3, 3, 16, 16, dtype=torch.float64)
    _close(m(x, x), 0.0, atol=1e-12)
    s = m.update(m.init(), x, x.flip(-1))
    with pytest.raises(ValueError, match="deep_image_structure_and_texture_similarity: argument `target`"):
        m.update(s, x, x[:2])
    with pytest.raises(ValueError, match="deep_image_structure_and_texture_similarity: argument `preds`.*RGB"):
        m.update(s, x[:, :1], x[:, :1])
    with pytest.raises(ValueError, match="deep_image_structure_and_texture_similarity: preds must be finite"):
        m.update(s, torch.full_like(x, float("nan")), x)
    with pytest.raises(ValueError, match="argument `alpha` expected one weight per channel .*29"):
        fmetrics.deep_image_structure_and_texture_similarity(net=net, alpha=torch.ones(5), beta=torch.ones(5))(x, x)
    with pytest.raises(ValueError, match="argument `alpha` expected alpha and beta both given"):
        fmetrics.deep_image_structure_and_texture_similarity(net=net, alpha=torch.ones(29))
    _close(m.finalize(s), m(x, x.flip(-1)))


# ------------------------------------------------------------------ PPL

class _Gen(torch.nn.Module):
    def __init__(self, z=3, size=8, num_classes=None):
        super().__init__()
        self.z, self.size = z, size
        self.lin = torch.nn.Linear(z + (num_classes or 0), 3 * size * size).double()
        if num_classes:
            self.num_classes = num_classes

    def forward(self, z, labels=None):
        if labels is not None:
            z = torch.cat((z, F.one_hot(labels, self.num_classes).to(z.dtype)), 1)
        return 255 * torch.sigmoid(self.lin(z)).reshape(-1, 3, self.size, self.size)

    def sample(self, n):
        return torch.randn(n, self.z, dtype=torch.float64)


class _Sim(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3).double()

    def forward(self, a, b):
        return ((torch.tanh(self.conv(a)) - torch.tanh(self.conv(b))) ** 2).mean((1, 2, 3))


def _tm_ppl(monkeypatch, seed, gen, sim, **kw):
    T = importlib.import_module("torchmetrics.functional.image.perceptual_path_length")
    monkeypatch.setattr(T, "_TORCHVISION_AVAILABLE", True)
    torch.manual_seed(seed)
    return T.perceptual_path_length(gen, sim_net=sim, **kw)


@pytest.mark.parametrize("kw", [
    {"interpolation_method": "lerp"},
    {"interpolation_method": "slerp_any", "batch_size": 7},
    {"interpolation_method": "slerp_unit", "lower_discard": None, "upper_discard": 0.9},
    {"lower_discard": 0.2, "upper_discard": None, "epsilon": 1e-2},
    {"conditional": True, "batch_size": 5},
])
def test_ppl_matches_torchmetrics(kw, monkeypatch):
    gen, sim = _Gen(num_classes=4 if kw.get("conditional") else None), _Sim()
    common = dict(num_samples=37, resize=None, **kw)
    mean, std, dist = _tm_ppl(monkeypatch, 5, gen, sim, **common)
    m = fmetrics.perceptual_path_length(generator=gen, sim_net=sim, **common)
    torch.manual_seed(5)
    ours = m(*sample_latents(m))
    for a, b in zip(ours, (mean, std, dist)):
        _close(a, b)


def test_ppl_resize_as_torchmetrics_lpips(monkeypatch):
    from torchmetrics.functional.image.lpips import _resize_tensor

    class Resized(torch.nn.Module):  # torchmetrics resizes inside its LPIPS nets only: the same, around ours
        def __init__(self, net, size):
            super().__init__()
            self.net, self.size = net, size

        def forward(self, a, b):
            return self.net(_resize_tensor(a, self.size), _resize_tensor(b, self.size))

    gen, sim = _Gen(size=12), _Sim()
    for size in (6, 16):  # shrink (area) and grow (bilinear)
        ref = _tm_ppl(monkeypatch, 6, gen, Resized(sim, size), num_samples=20, resize=size)
        m = fmetrics.perceptual_path_length(generator=gen, sim_net=sim, num_samples=20, resize=size)
        torch.manual_seed(6)
        for a, b in zip(m(*sample_latents(m)), ref):
            _close(a, b)


def test_ppl_slerp_degenerate_pairs(monkeypatch):
    """Collinear and zero latents fall back to lerp, as torchmetrics' masks."""
    T = importlib.import_module("torchmetrics.functional.image.perceptual_path_length")
    from fmetrics.image.ppl import interpolate
    g = torch.Generator().manual_seed(0)
    z1 = torch.randn(6, 4, generator=g, dtype=torch.float64)
    z2 = torch.randn(6, 4, generator=g, dtype=torch.float64)
    z2[0], z2[1], z1[2], z2[3] = 3 * z1[0], -z1[1], 0.0, z1[3]
    for method in ("lerp", "slerp_any", "slerp_unit"):
        _close(interpolate(z1, z2, 0.3, method), T._interpolate(z1, z2, 0.3, method), atol=1e-12)


def test_ppl_bad_input_and_empty():
    gen, sim = _Gen(), _Sim()
    m = fmetrics.perceptual_path_length(generator=gen, sim_net=sim, resize=None)
    z = torch.randn(10, 3, dtype=torch.float64)
    s = m.update(m.init(), z, z.flip(0))
    with pytest.raises(ValueError, match="perceptual_path_length: argument `z2` expected the shape of z1"):
        m.update(s, z, z[:4])
    with pytest.raises(ValueError, match="perceptual_path_length: z1 must be finite"):
        m.update(s, torch.full_like(z, float("inf")), z)
    with pytest.raises(ValueError, match="perceptual_path_length: argument `labels` expected None"):
        m.update(s, z, z, torch.zeros(10, dtype=torch.int64))
    mc = fmetrics.perceptual_path_length(generator=_Gen(num_classes=3), sim_net=sim, conditional=True)
    with pytest.raises(ValueError, match="argument `labels` expected int class labels of shape \\(10,\\)"):
        mc.update(mc.init(), z, z)
    with pytest.raises(ValueError, match="argument `generator` expected an int num_classes"):
        fmetrics.perceptual_path_length(generator=gen, sim_net=sim, conditional=True)
    with pytest.raises(ValueError, match="argument `sim_net` expected an nn.Module"):
        fmetrics.perceptual_path_length(generator=gen, sim_net="vgg")
    with pytest.raises(ValueError, match="argument `epsilon` expected a positive float"):
        fmetrics.perceptual_path_length(generator=gen, sim_net=sim, epsilon=0)
    with pytest.raises(ValueError, match="argument `upper_discard` expected a number in \\[0, 1\\]"):
        fmetrics.perceptual_path_length(generator=gen, sim_net=sim, upper_discard=1.5)
    for a, b in zip(m.finalize(s), m(z, z.flip(0))):  # the state is intact
        _close(a, b)
    with pytest.warns(UserWarning, match="perceptual_path_length: no samples were seen"):
        mean, std, d = m.finalize(m.init())
    assert torch.isnan(mean) and torch.isnan(std) and d.shape == (0,)
    broken = _Sim()
    torch.nn.init.constant_(broken.conv.bias, float("nan"))
    bad = fmetrics.perceptual_path_length(generator=gen, sim_net=broken, resize=None)
    with pytest.raises(ValueError, match="perceptual_path_length: the generator / sim_net gave non-finite"):
        bad(z, z.flip(0))
