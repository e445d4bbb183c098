"""Model-based image metrics (issue 29) beside torchmetrics on the same tiny random networks.

torchmetrics' PPL refuses to run without torchvision (not installed here): its torchvision flag is set for the
call. Its DISTS builds a downloaded VGG-16 in the constructor: the row runs torchmetrics' ``DISTSNetwork.forward``
on an object built without its constructor, over the same tiny VGG-style stack (its own ``L2pooling``).
"""
from __future__ import annotations

import importlib

import torch

import fmetrics
from benchmarks.registry import fmetrics_run, register
from fmetrics.image.dists import DISTSBackbone
from fmetrics.image.ppl import sample_latents


class _Gen(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 3 * 32 * 32)

    def forward(self, z):
        return 255 * torch.sigmoid(self.lin(z)).reshape(-1, 3, 32, 32)

    def sample(self, n):
        return torch.randn(n, 8)


class _Sim(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)

    def forward(self, a, b):
        return ((torch.tanh(self.conv(a)) - torch.tanh(self.conv(b))) ** 2).mean((1, 2, 3))


def _ppl_n(quick: bool) -> int:
    return 128 if quick else 2048


@register("image/perceptual_path_length", domain="image", samples=_ppl_n, peers=("torchmetrics",), tolerance=1e-4,
          description="PPL of a tiny linear generator (8 -> 3x32x32) with a 1-conv distance net, 2048 latent pairs "
                      "(128 with --quick) in batches of 64, vs torchmetrics' functional perceptual_path_length")
def perceptual_path_length(quick: bool, device="cpu"):
    torch.manual_seed(0)
    gen, sim, n = _Gen().to(device), _Sim().to(device), _ppl_n(quick)
    m = fmetrics.perceptual_path_length(generator=gen, sim_net=sim, num_samples=n, resize=None)

    def ours():
        torch.manual_seed(1)
        return m(*(None if z is None else z.to(device) for z in sample_latents(m)))[:2]

    runs = {"fmetrics": ours}
    try:
        T = importlib.import_module("torchmetrics.functional.image.perceptual_path_length")

        def theirs():
            flag, T._TORCHVISION_AVAILABLE = T._TORCHVISION_AVAILABLE, True
            try:
                torch.manual_seed(1)
                return T.perceptual_path_length(gen, num_samples=n, resize=None, sim_net=sim)[:2]
            finally:
                T._TORCHVISION_AVAILABLE = flag
        runs["torchmetrics"] = theirs
    except ImportError:
        pass
    return runs


def _vgg():
    torch.manual_seed(0)
    layers, c = [], 3
    for i, o in enumerate((8, 16, 16, 32, 32)):
        if i:
            layers.append(torch.nn.MaxPool2d(2, 2))
        layers += [torch.nn.Conv2d(c, o, 3, padding=1), torch.nn.ReLU()]
        c = o
    return torch.nn.Sequential(*layers)


def _tm_dists(vgg, alpha, beta):
    T = importlib.import_module("torchmetrics.functional.image.dists")
    net = T.DISTSNetwork.__new__(T.DISTSNetwork)
    torch.nn.Module.__init__(net)
    stages, cur, c = [], [], 3
    for layer in vgg:
        if isinstance(layer, torch.nn.MaxPool2d):
            stages.append(cur)
            cur = [T.L2pooling(channels=c)]
        else:
            cur.append(layer)
            c = layer.out_channels if isinstance(layer, torch.nn.Conv2d) else c
    stages.append(cur)
    for i, st in enumerate(stages):
        setattr(net, f"stage{i + 1}", torch.nn.Sequential(*st))
    net.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, -1, 1, 1))
    net.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, -1, 1, 1))
    net.chns = [3, 8, 16, 16, 32, 32]
    net.alpha = torch.nn.Parameter(alpha.reshape(1, -1, 1, 1))
    net.beta = torch.nn.Parameter(beta.reshape(1, -1, 1, 1))
    return net


def _dists_n(quick: bool) -> int:
    return 16 if quick else 128


@register("image/deep_image_structure_and_texture_similarity", domain="image", samples=_dists_n,
          peers=("torchmetrics",), tolerance=1e-4,
          description="DISTS (mean) of 128 pairs 3x64x64 (16 with --quick) in batches of 16 through a tiny 5-stage "
                      "VGG-style stack, vs torchmetrics' DISTSNetwork.forward on the same layers")
def dists(quick: bool, device="cpu"):
    n = _dists_n(quick)
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(n, 3, 64, 64, generator=g).to(device), torch.rand(n, 3, 64, 64, generator=g).to(device)
    a, b = 0.1 + 0.01 * torch.randn(107, generator=g), 0.1 + 0.01 * torch.randn(107, generator=g)
    a, b, vgg = a.to(device), b.to(device), _vgg().to(device)
    batches = list(zip(x.split(16), y.split(16)))
    m = fmetrics.deep_image_structure_and_texture_similarity(net=DISTSBackbone(vgg), alpha=a, beta=b)
    runs = {"fmetrics": fmetrics_run(m, batches)}
    try:
        net = _tm_dists(vgg, a, b)

        def theirs():  # torchmetrics' class: a float sum of the scores and a count
            total, count = torch.zeros(()), 0
            for p, t in batches:
                total, count = total + net(p, t).sum(), count + p.shape[0]
            return total / count
        runs["torchmetrics"] = theirs
    except ImportError:
        pass
    return runs
