"""The SNR family: SNR, SI-SNR, SI-SDR, C-SI-SNR and SA-SDR, as stream means of per-example values.

All five reduce over the last axis (time; SA-SDR over speakers and time) with
torchmetrics' formulas and its ``eps = finfo(preds.dtype).eps`` guards. The
kernels take three inner products per example (``vecdot`` / ``vector_norm``: one read
of the data each, no temporaries) and form the residual ``preds - alpha *
target`` explicitly in one fused ``addcmul`` pass, so a nearly perfect
estimate keeps its accuracy (the closed form ``|p|^2 - <p, t>^2 / |t|^2``
would cancel). Half-precision inputs are computed in float32; values are
float64.
"""
from __future__ import annotations

import torch

from fmetrics.audio._mean import NanStrategy, check_bool, compute_dtype, nonempty, per_example_mean, signal_pair
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics import validation

__all__ = [
    "signal_noise_ratio",
    "scale_invariant_signal_noise_ratio",
    "scale_invariant_signal_distortion_ratio",
    "complex_scale_invariant_signal_noise_ratio",
    "source_aggregated_signal_distortion_ratio",
]

_META = dict(higher_is_better=True, is_differentiable=True, bounds=(None, None))


def dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``sum(a * b, -1)``: one pass, no temporary (``vecdot``; a squared norm when ``a is b``).

    Measured on 64 x 64,000 float32 (1 thread): ``vector_norm`` 0.4 ms, ``vecdot`` 1.7 ms,
    ``(a * b).sum(-1)`` 1.9 ms, a batched ``matmul`` 8.8 ms.
    """
    if a is b:
        return torch.linalg.vector_norm(a, dim=-1).square()
    return torch.linalg.vecdot(a, b)


def _prepare(preds, target, zero_mean: bool):
    eps = torch.finfo(preds.dtype).eps
    dtype = compute_dtype(preds)
    p, t = preds.to(dtype), target.to(dtype)
    if zero_mean:
        p = p - p.mean(-1, keepdim=True)
        t = t - t.mean(-1, keepdim=True)
    return p, t, eps


def _db(num: torch.Tensor, den: torch.Tensor, eps: float) -> torch.Tensor:
    return 10 * torch.log10((num.double() + eps) / (den.double() + eps))


def snr_values(preds, target, zero_mean: bool = False) -> torch.Tensor:
    """Per-example SNR ``10 log10((|t|^2 + eps) / (|t - p|^2 + eps))`` over the last axis."""
    p, t, eps = _prepare(preds, target, zero_mean)
    r = t - p
    return _db(dot(t, t), dot(r, r), eps)


def si_sdr_values(preds, target, zero_mean: bool = False) -> torch.Tensor:
    """Per-example SI-SDR over the last axis (torchmetrics' formula, see the module docstring)."""
    p, t, eps = _prepare(preds, target, zero_mean)
    stt = dot(t, t)
    alpha = (dot(p, t) + eps) / (stt + eps)
    r = torch.addcmul(p, alpha.unsqueeze(-1), t, value=-1)  # p - alpha t
    return _db(alpha * alpha * stt, dot(r, r), eps)


def pairwise_values(preds: torch.Tensor, target: torch.Tensor, kind: str, zero_mean: bool):
    """``(M, stats)``: ``M[b, i, j] ~ value(preds[b, j], target[b, i])`` for every speaker pair of
    ``(B, S, time)`` inputs, from one batched Gram product (``kind``: ``"snr"`` or ``"si_sdr"``).

    ``stats``: ``gram[b, i, j] = <target[b, i], preds[b, j]>``, ``tt = |target|^2``
    (both centered with ``zero_mean``) and the means of target and preds
    (``None`` without ``zero_mean``), which come from one ``target @ preds^T`` (all
    ``S^2`` dot products in one read of the data, as fast as a single
    ``vecdot``) and the norms; ``|t - p|^2 = |t|^2 - 2 <t, p> + |p|^2`` and
    ``|alpha t - p|^2 = alpha^2 |t|^2 - 2 alpha <t, p> + |p|^2`` are combined
    in float64. These closed forms lose accuracy for near-perfect pairs
    (cancellation), so ``M`` serves to *choose* the assignment; the chosen
    pairs are then scored with their residuals formed explicitly (`matched_values`).
    """
    eps = torch.finfo(preds.dtype).eps
    dtype = compute_dtype(preds)
    p, t = preds.to(dtype), target.to(dtype)
    gram = torch.matmul(t, p.transpose(-1, -2)).double()  # (B, S_target, S_pred)
    tt = torch.linalg.vector_norm(t, dim=-1).double().square()
    pp = torch.linalg.vector_norm(p, dim=-1).double().square()
    mt = mp = None
    if zero_mean:
        n = p.shape[-1]
        mt, mp = t.sum(-1).double() / n, p.sum(-1).double() / n
        gram = gram - n * mt.unsqueeze(-1) * mp.unsqueeze(-2)
        tt = tt - n * mt.square()
        pp = pp - n * mp.square()
    tc, pc = tt.unsqueeze(-1), pp.unsqueeze(-2)
    if kind == "snr":
        m = 10 * torch.log10((tc + eps) / ((tc - 2 * gram + pc).clamp(min=0) + eps))
    else:
        alpha = (gram + eps) / (tc + eps)
        sig = alpha.square() * tc
        m = 10 * torch.log10((sig + eps) / ((sig - 2 * alpha * gram + pc).clamp(min=0) + eps))
    return m, (gram, tt, mt, mp)


def matched_values(preds: torch.Tensor, target: torch.Tensor, perm: torch.Tensor, stats, kind: str) -> torch.Tensor:
    """Exact per-speaker values ``(B, S)`` of the pairs ``(preds[b, perm[b, i]], target[b, i])``.

    The residual ``preds[perm] - alpha target`` (``alpha = 1`` for SNR) is
    formed explicitly in one gather and one fused ``addcmul``, as
    `si_sdr_values` does (with ``zero_mean``, centered by subtracting
    ``mean(p) - alpha mean(t)`` from it in place: no centered copies);
    ``<p, t>`` and ``|t|^2`` come from `pairwise_values`' ``stats``.
    """
    gram, tt, mt, mp = stats
    eps = torch.finfo(preds.dtype).eps
    dtype = compute_dtype(preds)
    b, s = perm.shape
    rows = (torch.arange(b, device=perm.device).unsqueeze(1) * s + perm).reshape(-1)
    r = preds.reshape(b * s, -1).index_select(0, rows).to(dtype).reshape(b, s, -1)  # preds[b, perm[b, i]]
    if kind == "snr":
        alpha, sig = torch.ones_like(tt), tt
    else:
        pt = torch.gather(gram, 2, perm.unsqueeze(-1)).squeeze(-1)  # <t_i, p_perm(i)>
        alpha = (pt + eps) / (tt + eps)
        sig = alpha * alpha * tt
    r = r.addcmul_(alpha.to(dtype).unsqueeze(-1), target.to(dtype), value=-1)  # a fresh temporary: in place
    if mt is not None:
        r = r.sub_((torch.gather(mp, 1, perm) - alpha * mt).to(dtype).unsqueeze(-1))
    return _db(sig, dot(r, r), eps)


PAIRWISE = {  # factory name -> (kind, zero_mean from its arguments or fixed): PIT's all-pairs fast path
    "signal_noise_ratio": ("snr", None),
    "scale_invariant_signal_distortion_ratio": ("si_sdr", None),
    "scale_invariant_signal_noise_ratio": ("si_sdr", True),
}


@factory
def signal_noise_ratio(*, zero_mean: bool = False, per_example: bool = False,
                       nan_strategy: NanStrategy = "error") -> Metric:
    """Signal-to-noise ratio ``10 log10((|t|^2 + eps) / (|t - p|^2 + eps))`` in dB, averaged over examples.

    ``eps`` is the machine epsilon of ``preds``' dtype (as torchmetrics), so
    silence against silence is 0 dB.

    Args:
      zero_mean: ``False`` (default) or ``True``: subtract each signal's mean
        over time first.
      per_example: ``False`` (default): the mean over all examples seen;
        ``True``: every example's value, concatenated along the first axis
        (torchmetrics' functional output).
      nan_strategy: NaN / inf in ``preds`` or ``target``: ``"error"`` (default:
        raised at once on CPU in eager mode, quoting the values, the state
        untouched; elsewhere counted and raised by ``finalize``), ``"warn"`` /
        ``"ignore"`` (the example is left out, with / without a warning from
        ``finalize``) or ``"disable"`` (no check: NaN propagates).

    Inputs:
      ``update(state, preds, target)``: real floating tensors of one shape
      ``(..., time)``; every ``(...)`` entry is an example.

    Returns:
      A float64 0-d tensor (or the per-example values, shape ``(N, ...)``).

    Example::

        >>> target = torch.tensor([[3.0, -0.5, 2.0, 7.0]])
        >>> preds = torch.tensor([[2.5, 0.0, 2.0, 8.0]])
        >>> fmetrics.signal_noise_ratio()(preds, target)
        tensor(16.1805, dtype=torch.float64)
    """
    name = "signal_noise_ratio"
    check_bool(name, "zero_mean", zero_mean)

    def values(preds, target):
        signal_pair(name, preds, target)
        return snr_values(preds, target, zero_mean)

    return per_example_mean(name, values, per_example, ("snr", zero_mean), nan_strategy, **_META)


@factory
def scale_invariant_signal_distortion_ratio(*, zero_mean: bool = False, per_example: bool = False,
                                            nan_strategy: NanStrategy = "error") -> Metric:
    """Scale-invariant SDR in dB, averaged over examples.

    ``alpha = (<p, t> + eps) / (|t|^2 + eps)``;
    ``SI-SDR = 10 log10((|alpha t|^2 + eps) / (|alpha t - p|^2 + eps))``,
    ``eps`` the machine epsilon of ``preds``' dtype (torchmetrics' formula).

    Args:
      zero_mean: ``False`` (default) or ``True``: subtract each signal's mean
        over time first.
      per_example: ``False`` (default): the mean over all examples seen;
        ``True``: every example's value, concatenated along the first axis.
      nan_strategy: NaN / inf in ``preds`` or ``target``: ``"error"`` (default:
        raised at once on CPU in eager mode, quoting the values, the state
        untouched; elsewhere counted and raised by ``finalize``), ``"warn"`` /
        ``"ignore"`` (the example is left out, with / without a warning from
        ``finalize``) or ``"disable"`` (no check: NaN propagates).

    Inputs:
      ``update(state, preds, target)``: real floating tensors of one shape
      ``(..., time)``.

    Returns:
      A float64 0-d tensor (or the per-example values).

    Example::

        >>> target = torch.tensor([[3.0, -0.5, 2.0, 7.0]])
        >>> preds = torch.tensor([[2.5, 0.0, 2.0, 8.0]])
        >>> fmetrics.scale_invariant_signal_distortion_ratio()(preds, target)
        tensor(18.4030, dtype=torch.float64)
    """
    name = "scale_invariant_signal_distortion_ratio"
    check_bool(name, "zero_mean", zero_mean)

    def values(preds, target):
        signal_pair(name, preds, target)
        return si_sdr_values(preds, target, zero_mean)

    return per_example_mean(name, values, per_example, ("si_sdr", zero_mean), nan_strategy, **_META)


@factory
def scale_invariant_signal_noise_ratio(*, per_example: bool = False, nan_strategy: NanStrategy = "error") -> Metric:
    """Scale-invariant SNR: SI-SDR of zero-mean signals (``zero_mean=True``), in dB, averaged over examples.

    Args:
      per_example: ``False`` (default): the mean over all examples seen;
        ``True``: every example's value, concatenated along the first axis.
      nan_strategy: NaN / inf in ``preds`` or ``target``: ``"error"`` (default:
        raised at once on CPU in eager mode, quoting the values, the state
        untouched; elsewhere counted and raised by ``finalize``), ``"warn"`` /
        ``"ignore"`` (the example is left out, with / without a warning from
        ``finalize``) or ``"disable"`` (no check: NaN propagates).

    Inputs:
      ``update(state, preds, target)``: real floating tensors of one shape
      ``(..., time)``.

    Returns:
      A float64 0-d tensor (or the per-example values). It shares its state
      with ``scale_invariant_signal_distortion_ratio(zero_mean=True)``.

    Example::

        >>> target = torch.tensor([[3.0, -0.5, 2.0, 7.0]])
        >>> preds = torch.tensor([[2.5, 0.0, 2.0, 8.0]])
        >>> fmetrics.scale_invariant_signal_noise_ratio()(preds, target)
        tensor(15.0918, dtype=torch.float64)
    """
    name = "scale_invariant_signal_noise_ratio"

    def values(preds, target):
        signal_pair(name, preds, target)
        return si_sdr_values(preds, target, True)

    return per_example_mean(name, values, per_example, ("si_sdr", True), nan_strategy, **_META)


def _complex_view(name: str, arg: str, x) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise validation.fail(name, arg, "a tensor", type(x).__name__)
    view = torch.view_as_real(x) if x.is_complex() else x
    if not view.is_floating_point() or view.dim() < 3 or view.shape[-1] != 2:
        raise validation.fail(name, arg, "a complex tensor (..., frequency, time) or a real one "
                              "(..., frequency, time, 2)", f"{x.dtype} of shape {tuple(x.shape)}")
    nonempty(name, arg, x, "(..., frequency, time)" if x.is_complex() else "(..., frequency, time, 2)",
             axes=2 if x.is_complex() else 3)
    return view


@factory
def complex_scale_invariant_signal_noise_ratio(*, zero_mean: bool = False, per_example: bool = False,
                                               nan_strategy: NanStrategy = "error") -> Metric:
    """Complex SI-SNR: SI-SDR of the flattened (real, imaginary) spectrogram, in dB, averaged over examples.

    A spectrogram ``(..., F, T)`` is viewed as ``F * T * 2`` reals and scored
    with the SI-SDR formula (torchmetrics' definition).

    Args:
      zero_mean: ``False`` (default) or ``True``: subtract the mean of the
        flattened spectrogram first.
      per_example: ``False`` (default): the mean over all examples seen;
        ``True``: every example's value, concatenated along the first axis.
      nan_strategy: NaN / inf in ``preds`` or ``target``: ``"error"`` (default:
        raised at once on CPU in eager mode, quoting the values, the state
        untouched; elsewhere counted and raised by ``finalize``), ``"warn"`` /
        ``"ignore"`` (the example is left out, with / without a warning from
        ``finalize``) or ``"disable"`` (no check: NaN propagates).

    Inputs:
      ``update(state, preds, target)``: complex tensors ``(..., frequency,
      time)`` or real tensors ``(..., frequency, time, 2)`` of one shape.

    Returns:
      A float64 0-d tensor (or the per-example values, shape ``(...)``).

    Example::

        >>> target = torch.tensor([[[[1.0, 0.0], [0.0, 2.0]], [[1.0, 1.0], [3.0, 0.0]]]])
        >>> preds = torch.tensor([[[[1.0, 0.5], [0.0, 2.0]], [[1.0, 1.0], [2.5, 0.0]]]])
        >>> fmetrics.complex_scale_invariant_signal_noise_ratio()(preds, target)
        tensor(15.6307, dtype=torch.float64)
    """
    name = "complex_scale_invariant_signal_noise_ratio"
    check_bool(name, "zero_mean", zero_mean)

    def values(preds, target):
        p, t = _complex_view(name, "preds", preds), _complex_view(name, "target", target)
        if p.shape != t.shape:
            raise validation.fail(name, "target", f"the shape of preds {tuple(p.shape)}", tuple(t.shape))
        p, t = p.flatten(-3), t.flatten(-3)
        return si_sdr_values(p, t, zero_mean)

    return per_example_mean(name, values, per_example, ("c_si_snr", zero_mean), nan_strategy, **_META)


@factory
def source_aggregated_signal_distortion_ratio(*, scale_invariant: bool = True, zero_mean: bool = False,
                                              per_example: bool = False, nan_strategy: NanStrategy = "error") -> Metric:
    """Source-aggregated SDR (SA-SDR): one SDR over all speakers of an example, in dB, averaged over examples.

    With ``scale_invariant`` one ``alpha`` is shared by every speaker of an
    example: ``alpha = (sum_s <p_s, t_s> + eps) / (sum_s |t_s|^2 + eps)``,
    ``SA-SDR = 10 log10((sum_s |alpha t_s|^2 + eps) / (sum_s |alpha t_s - p_s|^2 + eps))``
    (``alpha = 1`` otherwise), torchmetrics' formula.

    Args:
      scale_invariant: ``True`` (default): the shared ``alpha`` above;
        ``False``: ``alpha = 1``.
      zero_mean: ``False`` (default) or ``True``: subtract each signal's mean
        over time first.
      per_example: ``False`` (default): the mean over all examples seen;
        ``True``: every example's value, concatenated along the first axis.
      nan_strategy: NaN / inf in ``preds`` or ``target``: ``"error"`` (default:
        raised at once on CPU in eager mode, quoting the values, the state
        untouched; elsewhere counted and raised by ``finalize``), ``"warn"`` /
        ``"ignore"`` (the example is left out, with / without a warning from
        ``finalize``) or ``"disable"`` (no check: NaN propagates).

    Inputs:
      ``update(state, preds, target)``: real floating tensors of one shape
      ``(..., speakers, time)``.

    Returns:
      A float64 0-d tensor (or the per-example values, shape ``(...)``).

    Example::

        >>> target = torch.tensor([[[3.0, -0.5, 2.0, 7.0], [1.0, 2.0, 0.0, -1.0]]])
        >>> preds = torch.tensor([[[2.5, 0.0, 2.0, 8.0], [1.0, 1.5, 0.5, -1.0]]])
        >>> fmetrics.source_aggregated_signal_distortion_ratio()(preds, target)
        tensor(16.4719, dtype=torch.float64)
    """
    name = "source_aggregated_signal_distortion_ratio"
    check_bool(name, "scale_invariant", scale_invariant)
    check_bool(name, "zero_mean", zero_mean)

    def values(preds, target):
        signal_pair(name, preds, target, min_dim=2, what="(..., speakers, time)")
        if zero_mean:
            preds = preds - preds.mean(-1, keepdim=True)
            target = target - target.mean(-1, keepdim=True)
        p, t = preds.flatten(-2), target.flatten(-2)
        return si_sdr_values(p, t) if scale_invariant else snr_values(p, t)

    return per_example_mean(name, values, per_example, ("sa_sdr", scale_invariant, zero_mean), nan_strategy,
                            **_META)
