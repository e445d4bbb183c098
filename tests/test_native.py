"""fmetrics._native: the fused row kernels of the eager CPU top-1 path against numpy's row ``argmax`` and
``bincount`` on every width from 1 to 40 and wider, in both dtypes and on every kernel the CPU has (AVX-512, AVX2,
portable C); STOI's resampling against scipy's ``resample_poly``, its envelopes and windows against the torch
stages (pystoi parity on both paths: tests/test_audio_stoi.py)."""
import shutil
import sysconfig

import numpy as np
import pytest
import torch

from fmetrics._kernels import native as _native


def test_the_kernels_are_built_where_a_compiler_is():
    """`pip install` builds them where it finds a C compiler (`setup.py`: optional, so never a failed install)."""
    if shutil.which(sysconfig.get_config_var("CC").split()[0] if sysconfig.get_config_var("CC") else "cc") is None:
        pytest.skip("no C compiler here")
    assert _native is not None, "fmetrics._native is missing or out of date: rebuild it with `pip install -e .`"


needs_native = pytest.mark.skipif(_native is None, reason="fmetrics._native was not built")


@pytest.fixture(params=["avx512", "avx2", "c"])
def simd(request):
    try:
        was = _native.simd(request.param)
    except ValueError:
        pytest.skip(f"no {request.param} here")
    yield request.param
    _native.simd(was)


def _rows(rng, dtype, n, c, kind):
    if kind == "randn":
        return rng.standard_normal((n, c)).astype(dtype)
    if kind == "ties":
        return rng.integers(-2, 3, (n, c)).astype(dtype)
    if kind == "specials":  # NaN, +-inf, signed zeros and subnormals
        values = np.array([0.0, -0.0, np.finfo(dtype).smallest_subnormal, 1.0, np.inf, -np.inf, np.nan], dtype)
        return rng.choice(values, (n, c), p=[0.2, 0.2, 0.15, 0.15, 0.1, 0.1, 0.1])
    x = rng.standard_normal((n, c)).astype(dtype)  # "nan": a few NaN scores
    x[rng.random((n, c)) < 0.03] = np.nan
    return x


@needs_native
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_argmax_and_counts_match_numpy(dtype, simd):
    rng = np.random.default_rng(5)
    for c in [*range(1, 41), 100, 257]:
        for kind in ("randn", "ties", "specials", "nan"):
            x, n = _rows(rng, dtype, 37, c, kind), 37
            labels, top = np.empty(n, np.int64), np.empty(n, dtype)
            _native.argmax_rows(x, labels, top)
            want = x.argmax(1)  # the first maximum; the first NaN where the row holds one
            np.testing.assert_array_equal(labels, want, err_msg=f"{c} classes, {kind}")
            np.testing.assert_array_equal(top, x[np.arange(n), want])
            t = rng.integers(0, c, n)
            counts = np.zeros(3 * c, np.int64)
            ok = ~np.isnan(x).any(1)
            assert _native.top1_counts(x, t, counts) == n - ok.sum()
            lab, tt = want[ok], t[ok]
            hits = tt[lab == tt]
            want_counts = np.concatenate([np.bincount(v, minlength=c) for v in (tt, lab, hits)])
            np.testing.assert_array_equal(counts, want_counts, err_msg=f"{c} classes, {kind}")


@needs_native
def test_counts_add_to_what_the_buffer_holds():
    x, t = np.eye(3, dtype=np.float32), np.array([0, 2, 2])
    counts = np.arange(9, dtype=np.int64)
    assert _native.top1_counts(x, t, counts) == 0
    # targets 0, 2, 2 -> [1, 0, 2]; labels 0, 1, 2 -> [1, 1, 1]; hits: rows 0 and 2 -> [1, 0, 1]
    np.testing.assert_array_equal(counts, np.arange(9) + [1, 0, 2, 1, 1, 1, 1, 0, 1])


@needs_native
def test_wrong_buffers_and_targets_raise():
    x, t, counts = np.zeros((3, 4), np.float32), np.zeros(3, np.int64), np.zeros(12, np.int64)
    for args in ((x.astype(np.float16), t, counts), (x, t.astype(np.int32), counts), (x, t, counts[:11]),
                 (x[0], t, counts), (x, t[:2], counts)):
        with pytest.raises(TypeError, match="top1_counts"):
            _native.top1_counts(*args)
    with pytest.raises(ValueError):  # not C-contiguous (the buffer protocol refuses)
        _native.top1_counts(x[:, ::2], t, counts[:6])
    with pytest.raises(TypeError, match="argmax_rows"):
        _native.argmax_rows(x, np.zeros(3, np.int64), np.zeros(3, np.float64))
    with pytest.raises(ValueError, match=r"target 4 at row 1 is not a label in \[0, 4\)"):
        _native.top1_counts(x, np.array([0, 4, 1]), counts)
    np.testing.assert_array_equal(counts, 0)  # checked before any count
    with pytest.raises(ValueError, match="not available"):
        _native.simd("neon")


@needs_native
@pytest.mark.parametrize("frames", [30, 31, 45, 46, 200])  # 1, 2, 16, 17 and 171 windows: every lane remainder
def test_stoi_and_estoi_windows_match_the_torch_windows(frames):
    from fmetrics.audio import stoi as S

    g = torch.Generator().manual_seed(frames)
    level = torch.logspace(0, -3, frames, dtype=torch.float64)  # levels swinging by 60 dB along the frames
    tob = torch.rand(5, 2, 15, frames, generator=g, dtype=torch.float64) * level
    tob[0, 1] = 0.0  # a silent estimate
    tob[1, 0, 4] = 0.5  # a constant target band
    tob[2, 1] = 3 * tob[2, 0]  # a scaled copy: correlation 1
    tob[3, 1, 2, frames // 2] = float("nan")  # NaN propagates to the windows holding it (nan_strategy="disable")
    tob[4, 0, 7, 0] = float("nan")
    out = np.empty((5, frames - 29))
    _native.stoi_windows(tob.numpy(), out, 1 + 10 ** (-S.BETA / 20))
    want = S._stoi(tob).numpy()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    assert np.isnan(out[3]).any() and np.isnan(out[4, 0])
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-14)
    np.testing.assert_allclose(out[2], 1.0, rtol=0, atol=1e-12)
    # extended STOI: a constant row normalizes to zero; a window holding a NaN is NaN, as in the torch windows
    _native.stoi_windows(tob.numpy(), out, 0.0, True)
    want = S._estoi(tob).numpy()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    assert np.isnan(out[3]).any() and np.isnan(out[4, 0]) and not np.isnan(out[:3]).any()
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-14)
    np.testing.assert_allclose(out[2], 1.0, rtol=0, atol=1e-12)


@needs_native
def test_stoi_windows_refuse_wrong_buffers():
    tob, out = np.zeros((2, 2, 15, 40)), np.zeros((2, 11))
    for args in ((tob.astype(np.float32), out), (np.zeros((2, 1, 15, 40)), out), (np.zeros((2, 2, 15, 29)), np.zeros((2, 0))), (tob, np.zeros((2, 10))),
                 (tob, out.astype(np.float32))):
        with pytest.raises(TypeError, match="stoi_windows"):
            _native.stoi_windows(*args, 2.0)


@needs_native
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_envelopes_match_the_torch_frames_ffts_and_band_norms(dtype, simd):
    """Frames, FFTs and band levels in one pass against `_overlap_add`, `torch.fft.rfft` and the band norms (float64
    torch); dropped frames, a partial last lane block, every bin range (0 to 257 bins)."""
    from fmetrics.audio import stoi as S

    g = torch.Generator().manual_seed(2)
    b, frames = 3, 23  # 3 x 2 x 22 = 132 frames: not a multiple of 4, 8 or 16 lanes
    z = torch.randn(b, 2, (frames + 1) * S.HOP + 77, generator=g, dtype=torch.float64)
    z[1, 1] *= torch.logspace(0, -4, z.shape[-1], dtype=torch.float64)  # levels down by 80 dB
    energy = torch.rand(b, frames, generator=g, dtype=torch.float64)
    energy[0, ::3] = 1e-12  # every third frame dropped (more than 40 dB down)
    energy[2, 5:] = 1e-12  # all but five dropped: the rest read zero chunks
    first, second, kept = S._kept_frames(energy)
    assert kept.tolist() == [15, 23, 5]
    edges = np.array([[0, 0], [0, 1], [1, 3], [7, 30], [100, 257], [256, 257], *S.BAND_EDGES[-2:]], np.int64)
    out = torch.empty(b, 2, len(edges), frames - 1, dtype=dtype)
    _native.stoi_envelopes(z.to(dtype).numpy(), first.numpy(), second.numpy(), S.HANN.to(dtype).numpy(), edges,
                           out.numpy())
    halves = S._overlap_add(z.to(dtype).double(), S.HANN, first, second)
    spec = torch.view_as_real(torch.fft.rfft(halves.flatten(-2).unfold(-1, 256, 128) * S.HANN, n=512, dim=-1))
    want = torch.stack([torch.linalg.vector_norm(spec[..., lo:hi, :], dim=(-2, -1)) for lo, hi in edges], -2)
    assert not out[..., 0, :].any() and (want[..., 1:, :] > 0).any()
    scale = want.amax(-1, keepdim=True)  # each band's loudest frame: the FFT's error is relative to it
    tol = 1e-13 if dtype == torch.float64 else 3e-6
    torch.testing.assert_close(out.double() / scale.clamp_min(1e-300), want / scale.clamp_min(1e-300), rtol=0,
                               atol=tol)


@needs_native
def test_envelopes_refuse_wrong_buffers_and_indices():
    from fmetrics.audio import stoi as S

    z, first, hann = np.zeros((2, 2, 5 * 128)), np.zeros((2, 4), np.int64), S.HANN.numpy()
    edges, out = np.array([[0, 2], [2, 257]], np.int64), np.zeros((2, 2, 2, 3))
    _native.stoi_envelopes(z, first, first, hann, edges, out)
    for args in ((z.astype(np.float32), first, first, hann, edges, out), (z[:, :, :-1].copy(), first, first, hann, edges, out),
                 (z, first.astype(np.int32), first, hann, edges, out), (z, first, first[:, :3].copy(), hann, edges, out),
                 (z, first, first, hann[:128].copy(), edges, out), (z, first, first, hann, np.array([[0, 258]]), out),
                 (z, first, first, hann, np.array([[3, 2], [2, 5]]), out), (z, first, first, hann, edges, out[..., :2].copy())):
        with pytest.raises(TypeError, match="stoi_envelopes"):
            _native.stoi_envelopes(*args)
    with pytest.raises(ValueError, match="chunk index -1 < 0"):
        _native.stoi_envelopes(z, first - 1, first, hann, edges, out)


@needs_native
@pytest.mark.parametrize("fs", [8000, 16000, 22050, 44100])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_polyphase_matches_scipy_resample_poly(fs, dtype, simd):
    """The resampling to 10 kHz against scipy's ``resample_poly`` with pystoi's filter: every phase, both signal
    ends (partial last lane blocks), rows written into one slot of a wider output."""
    from scipy.signal import resample_poly

    from fmetrics.audio import stoi as S

    up, down, h = S.resample_filter(fs)
    _, _, pad, w = S._polyphase(fs)
    x = np.random.default_rng(fs).standard_normal((3, fs // 7 + 13))
    x[1, :40] = 0  # a silent start
    want = np.stack([resample_poly(r, up, down, window=h / up) for r in x])
    out = np.full((3, 2, want.shape[-1]), np.nan, dtype)
    _native.polyphase(x.astype(dtype), w[:, 0].numpy().astype(dtype), pad, down, out, 1)
    assert np.isnan(out[:, 0]).all()  # the other slot untouched
    np.testing.assert_allclose(out[:, 1], want, rtol=0, atol=1e-13 if dtype == np.float64 else 2e-5)


@needs_native
def test_polyphase_refuses_wrong_buffers():
    x, w, out = np.zeros((2, 50)), np.ones((5, 9)), np.zeros((2, 1, 30))
    _native.polyphase(x, w, 3, 8, out, 0)
    for args in ((x.astype(np.float32), w, 3, 8, out, 0), (x, w.astype(np.float32), 3, 8, out, 0),
                 (x, w, -1, 8, out, 0), (x, w, 3, 0, out, 0), (x, w, 3, 8, out, 1), (x, w, 3, 8, out[:1], 0),
                 (x, w[:0], 3, 8, out, 0)):
        with pytest.raises(TypeError, match="polyphase"):
            _native.polyphase(*args)


def test_an_out_of_date_build_is_left_out_with_a_warning(monkeypatch):
    """A checkout updated without `pip install -e .` keeps an older module: fmetrics runs without it."""
    import importlib
    import sys
    import types

    import fmetrics
    import fmetrics._kernels as kernels

    stale = types.ModuleType("fmetrics._native")
    stale.VERSION, stale.__file__ = kernels.VERSION - 1, "/old/_native.so"
    monkeypatch.setitem(sys.modules, "fmetrics._native", stale)
    monkeypatch.setattr(fmetrics, "_native", stale, raising=False)
    try:
        with pytest.warns(UserWarning, match=r"built from an older fmetrics/_native.c.*pip install -e \."):
            importlib.reload(kernels)
        assert kernels.native is None
    finally:
        monkeypatch.undo()
        importlib.reload(kernels)
    assert (kernels.native is None) == (_native is None)
