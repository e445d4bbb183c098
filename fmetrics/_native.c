/* fmetrics._native: the optional C kernels (docs/design.md, "The optional C kernels").
 *
 * The eager CPU top-1 path of the multiclass counts (fmetrics/classification/_format.py). A row's argmax is its
 * first maximum (torch's and numpy's rule on ties, -0.0 == 0.0 included); a row holding a NaN has the first NaN as
 * its argmax (NaN ranks first). Each row is read in two passes while it sits in L1: the maximum with a NaN test,
 * then the first entry equal to it. Rows a few ahead are prefetched, so a batch streams at close to the memory
 * bandwidth: numpy's row argmax pays a fixed cost per row that does not overlap with the memory reads
 * (docs/classification.md, "Speed").
 *
 *   argmax_rows(x, labels, top)      labels[r] = argmax of row r, top[r] = x[r, labels[r]]
 *   top1_counts(x, target, counts)   counts[target[r]] += 1, counts[C + argmax] += 1, counts[2C + target[r]] += hit
 *                                    over the rows without NaN; returns the number of rows holding a NaN
 *
 * x: C-contiguous float32 / float64 (N, C); labels, target: int64 (N,); top: x's dtype (N,); counts: int64 (3C,).
 * On x86-64 the rows go through AVX2 where the CPU has it (checked once at import), elsewhere through portable C.
 *
 * STOI (fmetrics/audio/stoi.py, docs/audio.md):
 *
 *   polyphase(x, w, pad, down, out, slot)
 *                                    out[r, slot] = resample_poly's polyphase sums of row x[r] (w: the up phases'
 *                                    filters, x padded by pad zeros), the resampling to 10 kHz
 *   stoi_envelopes(z, first, second, window, edges, out)
 *                                    out[e, s, b, j] = level of band b of STFT frame j of the overlap-added kept
 *                                    frames of z[e, s]: frames, 512-point FFTs and band norms in one pass
 *   stoi_windows(tob, out, clip, extended=False)
 *                                    out[b, s] = (extended) STOI of the 30-frame window s of float64
 *                                    envelopes tob[b] (2, 15, F), clip = 1 + 10^(-beta / 20)
 *
 * On x86-64 the STOI kernels are compiled for AVX2 + FMA (GCC's target_clones) and, the resampling and envelopes,
 * for AVX-512 too; the CPU picks at import.
 * Every kernel releases the GIL (the top-1 path splits large batches over threads).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <float.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define FM_X86 1
#include <immintrin.h>
#endif

#ifdef __GNUC__
#define PREFETCH(p) __builtin_prefetch((p), 0, 3)
#else
#define PREFETCH(p) ((void)0)
#endif

enum { AHEAD = 8 };  /* rows prefetched ahead: 4 to 32 measured alike, none ~1.7x slower streamed */

static void prefetch_row(const char *row, int64_t bytes) {
    for (int64_t b = 0; b < bytes; b += 64) PREFETCH(row + b);
}

/* ------------------------------------------------------------ one row: portable C */

#define GENERIC_ROW(NAME, T)                                                        \
    static int64_t NAME(const T *row, int64_t c) {                                  \
        T m = row[0];                                                               \
        int nan = row[0] != row[0];                                                 \
        for (int64_t j = 1; j < c; j++) {                                           \
            m = row[j] > m ? row[j] : m;                                            \
            nan |= row[j] != row[j];                                                \
        }                                                                           \
        if (nan) return -1;                                                         \
        int64_t j = 0;                                                              \
        while (row[j] != m) j++;                                                    \
        return j;                                                                   \
    }

GENERIC_ROW(row_f32_c, float)
GENERIC_ROW(row_f64_c, double)

/* ------------------------------------------------------------ one row: AVX2 (rows of at least one vector) */

#ifdef FM_X86
/* V: vector type, W: lanes, P: intrinsic prefix, S: intrinsic suffix; FOLD reduces a vector to its maximum in
   every lane. The tail re-reads the row's last full vector (overlapping is harmless for a maximum and for the
   search: the entries read twice were not equal to the maximum the first time). */
#define AVX2_ROW(NAME, T, V, W, S, FOLD)                                                              \
    __attribute__((target("avx2"))) static int64_t NAME(const T *row, int64_t c) {                    \
        V first = _mm256_loadu_##S(row), m0 = first, m1 = first, m2 = first, m3 = first;              \
        V un = _mm256_cmp_##S(first, first, _CMP_UNORD_Q);                                            \
        int64_t j = W;                                                                                \
        for (; j + 4 * W <= c; j += 4 * W) {                                                          \
            V a = _mm256_loadu_##S(row + j), b = _mm256_loadu_##S(row + j + W);                       \
            V d = _mm256_loadu_##S(row + j + 2 * W), e = _mm256_loadu_##S(row + j + 3 * W);           \
            m0 = _mm256_max_##S(m0, a); m1 = _mm256_max_##S(m1, b);                                   \
            m2 = _mm256_max_##S(m2, d); m3 = _mm256_max_##S(m3, e);                                   \
            un = _mm256_or_##S(un, _mm256_or_##S(_mm256_cmp_##S(a, b, _CMP_UNORD_Q),                  \
                                                 _mm256_cmp_##S(d, e, _CMP_UNORD_Q)));                \
        }                                                                                             \
        for (; j < c; j += W) {                                                                       \
            V a = _mm256_loadu_##S(row + (j + W <= c ? j : c - W));                                   \
            m0 = _mm256_max_##S(m0, a);                                                               \
            un = _mm256_or_##S(un, _mm256_cmp_##S(a, a, _CMP_UNORD_Q));                               \
        }                                                                                             \
        if (_mm256_movemask_##S(un)) return -1;                                                       \
        V m = _mm256_max_##S(_mm256_max_##S(m0, m1), _mm256_max_##S(m2, m3));                        \
        FOLD;                                                                                         \
        for (j = 0;; j += W) {                                                                        \
            int64_t k = j + W <= c ? j : c - W;                                                       \
            int hit = _mm256_movemask_##S(_mm256_cmp_##S(_mm256_loadu_##S(row + k), m, _CMP_EQ_OQ)); \
            if (hit) return k + __builtin_ctz(hit);                                                   \
        }                                                                                             \
    }

AVX2_ROW(row_f32_avx2, float, __m256, 8, ps,
         m = _mm256_max_ps(m, _mm256_permute2f128_ps(m, m, 1));
         m = _mm256_max_ps(m, _mm256_shuffle_ps(m, m, 0x4e));
         m = _mm256_max_ps(m, _mm256_shuffle_ps(m, m, 0xb1)))
AVX2_ROW(row_f64_avx2, double, __m256d, 4, pd,
         m = _mm256_max_pd(m, _mm256_permute2f128_pd(m, m, 1));
         m = _mm256_max_pd(m, _mm256_shuffle_pd(m, m, 0x5)))
#endif

/* ------------------------------------------------------------ batches */

/* ROW(row, c): the row's argmax, or -1 where it holds a NaN (then its first NaN is the argmax). */
#define BATCHES(SUFFIX, T, ROW, ATTR)                                                                \
    ATTR static void argmax_##SUFFIX(const T *x, int64_t n, int64_t c, int64_t *labels, T *top) {     \
        for (int64_t r = 0; r < n; r++) {                                                             \
            const T *row = x + r * c;                                                                 \
            if (r + AHEAD < n) prefetch_row((const char *)(row + AHEAD * c), c * (int64_t)sizeof(T)); \
            int64_t k = ROW(row, c);                                                                  \
            if (k < 0) for (k = 0; row[k] == row[k]; k++) {}                                          \
            labels[r] = k;                                                                            \
            top[r] = row[k];                                                                          \
        }                                                                                             \
    }                                                                                                 \
    ATTR static int64_t counts_##SUFFIX(const T *x, int64_t n, int64_t c, const int64_t *t,           \
                                        int64_t *counts) {                                            \
        int64_t nan_rows = 0;                                                                         \
        for (int64_t r = 0; r < n; r++) {                                                             \
            const T *row = x + r * c;                                                                 \
            if (r + AHEAD < n) prefetch_row((const char *)(row + AHEAD * c), c * (int64_t)sizeof(T)); \
            int64_t k = ROW(row, c), tr = t[r];                                                       \
            if (k < 0) { nan_rows++; continue; }                                                      \
            counts[tr]++;                                                                             \
            counts[c + k]++;                                                                          \
            counts[2 * c + tr] += k == tr;                                                            \
        }                                                                                             \
        return nan_rows;                                                                              \
    }

BATCHES(f32_c, float, row_f32_c, )
BATCHES(f64_c, double, row_f64_c, )
#ifdef FM_X86
BATCHES(f32_avx2, float, row_f32_avx2, __attribute__((target("avx2"))))
BATCHES(f64_avx2, double, row_f64_avx2, __attribute__((target("avx2"))))
#endif

/* ------------------------------------------------------------ STOI windows */

enum { STOI_N = 30, STOI_BANDS = 15, LANES = 32, ESTOI_LANES = 32 };

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-math-errno")  /* sqrt as one instruction, so the loops over the windows vectorize */
#endif

#ifdef __GNUC__
#define ALWAYS_INLINE inline __attribute__((always_inline))  /* into each clone of stoi_all, compiled for its target */
#else
#define ALWAYS_INLINE inline
#endif

#if defined(FM_X86) && !defined(__clang__) && __GNUC__ >= 12  /* target_clones("arch=x86-64-v3"): GCC 12 on */
#define STOI_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))  /* AVX2 + FMA where the CPU has them */
#else
#define STOI_CLONES
#endif

/* W consecutive windows s0 .. s0 + W - 1 of one band, x and y its target and estimate envelopes: each window's
   clipped correlation (fmetrics.audio.stoi._stoi, term by term, two passes) over the band count, added to d.
   The loops run over the W windows innermost: independent lanes, which the compiler vectorizes (LANES = 32:
   1.3-1.8x faster than 8, 16 or 64 on 8 x 4 s of envelopes). */
ALWAYS_INLINE static void stoi_band(const double *x, const double *y, int64_t s0, int W, double clip, double *d) {
    double sx[LANES] = {0}, sy[LANES] = {0}, a[LANES], mx[LANES] = {0}, my[LANES] = {0};
    double dot[LANES] = {0}, nx[LANES] = {0}, ny[LANES] = {0};
    for (int k = 0; k < STOI_N; k++)
        for (int w = 0; w < W; w++) {
            double xv = x[s0 + w + k], yv = y[s0 + w + k];
            sx[w] += xv * xv;
            sy[w] += yv * yv;
        }
    for (int w = 0; w < W; w++) a[w] = sqrt(sx[w]) / ((sqrt(sy[w]) + DBL_EPSILON) * clip);
    for (int k = 0; k < STOI_N; k++)
        for (int w = 0; w < W; w++) {
            double xv = x[s0 + w + k], yp = y[s0 + w + k] * a[w];
            mx[w] += xv;
            my[w] += xv < yp ? xv : yp;  /* torch's clamp_max: a NaN estimate stays NaN */
        }
    for (int w = 0; w < W; w++) {
        mx[w] /= STOI_N;
        my[w] /= STOI_N;
    }
    for (int k = 0; k < STOI_N; k++)
        for (int w = 0; w < W; w++) {
            double xv = x[s0 + w + k], yp = y[s0 + w + k] * a[w];
            double yc = (xv < yp ? xv : yp) - my[w], xc = xv - mx[w];
            dot[w] += yc * xc;
            ny[w] += yc * yc;
            nx[w] += xc * xc;
        }
    for (int w = 0; w < W; w++)
        d[w] += dot[w] * clip / ((sqrt(ny[w]) * clip + DBL_EPSILON) * (sqrt(nx[w]) + DBL_EPSILON)) / STOI_BANDS;
}

/* out (b, f - 29): the mean over the 15 bands of each window's value; tob (b, 2, 15, f). */
STOI_CLONES static void stoi_all(const double *tob, int64_t b, int64_t f, double clip, double *out) {
    int64_t s = f - STOI_N + 1;
    memset(out, 0, (size_t)(b * s) * sizeof(double));
    for (int64_t e = 0; e < b; e++)
        for (int j = 0; j < STOI_BANDS; j++) {
            const double *x = tob + (e * 2 * STOI_BANDS + j) * f, *y = x + STOI_BANDS * f;
            double *d = out + e * s;
            int64_t s0 = 0;
            for (; s0 + LANES <= s; s0 += LANES) stoi_band(x, y, s0, LANES, clip, d + s0);
            for (; s0 < s; s0++) stoi_band(x, y, s0, 1, clip, d + s0);
        }
}

/* W consecutive windows s0 .. s0 + W - 1 of one example's envelopes t (2, 15, f): extended STOI
   (fmetrics.audio.stoi._estoi, term by term): each band's window row-centred and scaled to unit norm (a constant
   row to zero), then each frame's column centred over the bands; the mean over the frames of the column
   correlations (0 where a column is constant, NaN where it holds a NaN), into d. Only each row's mean and scale are kept; the centred
   values are recomputed in both passes over the bands. */
ALWAYS_INLINE static void estoi_block(const double *t, int64_t f, int64_t s0, int W, double *d) {
    double mean[2][STOI_BANDS][ESTOI_LANES], scale[2][STOI_BANDS][ESTOI_LANES], acc[ESTOI_LANES] = {0};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < STOI_BANDS; j++) {
            const double *v = t + (i * STOI_BANDS + j) * f + s0;
            double m[ESTOI_LANES] = {0}, ss[ESTOI_LANES] = {0};
            for (int k = 0; k < STOI_N; k++)
                for (int w = 0; w < W; w++) m[w] += v[w + k];
            for (int w = 0; w < W; w++) m[w] /= STOI_N;
            for (int k = 0; k < STOI_N; k++)
                for (int w = 0; w < W; w++) ss[w] += (v[w + k] - m[w]) * (v[w + k] - m[w]);
            for (int w = 0; w < W; w++) {
                mean[i][j][w] = m[w];
                scale[i][j][w] = ss[w] > 0 ? 1 / sqrt(ss[w]) : 0;
            }
        }
    for (int k = 0; k < STOI_N; k++) {
        double c0[ESTOI_LANES] = {0}, c1[ESTOI_LANES] = {0}, dot[ESTOI_LANES] = {0}, q0[ESTOI_LANES] = {0}, q1[ESTOI_LANES] = {0};
        for (int j = 0; j < STOI_BANDS; j++) {
            const double *x = t + j * f + s0 + k, *y = t + (STOI_BANDS + j) * f + s0 + k;
            for (int w = 0; w < W; w++) {
                c0[w] += (x[w] - mean[0][j][w]) * scale[0][j][w];
                c1[w] += (y[w] - mean[1][j][w]) * scale[1][j][w];
            }
        }
        for (int w = 0; w < W; w++) {
            c0[w] /= STOI_BANDS;
            c1[w] /= STOI_BANDS;
        }
        for (int j = 0; j < STOI_BANDS; j++) {
            const double *x = t + j * f + s0 + k, *y = t + (STOI_BANDS + j) * f + s0 + k;
            for (int w = 0; w < W; w++) {
                double a = (x[w] - mean[0][j][w]) * scale[0][j][w] - c0[w];
                double b = (y[w] - mean[1][j][w]) * scale[1][j][w] - c1[w];
                dot[w] += a * b;
                q0[w] += a * a;
                q1[w] += b * b;
            }
        }
        for (int w = 0; w < W; w++) {
            double den = sqrt(q0[w] * q1[w]);
            acc[w] += den == 0 ? 0 : dot[w] / den;  /* a NaN column stays NaN, as in the torch windows */
        }
    }
    for (int w = 0; w < W; w++) d[w] = acc[w] / STOI_N;
}

/* out (b, f - 29): extended STOI of every window; tob (b, 2, 15, f). */
STOI_CLONES static void estoi_all(const double *tob, int64_t b, int64_t f, double *out) {
    int64_t s = f - STOI_N + 1;
    for (int64_t e = 0; e < b; e++) {
        const double *t = tob + e * 2 * STOI_BANDS * f;
        int64_t s0 = 0;
        for (; s0 + ESTOI_LANES <= s; s0 += ESTOI_LANES) estoi_block(t, f, s0, ESTOI_LANES, out + e * s + s0);
        for (; s0 < s; s0++) estoi_block(t, f, s0, 1, out + e * s + s0);
    }
}

/* ------------------------------------------------------------ STOI envelopes */

enum { HOP = 128, HALF = 256 };  /* STOI's hop; half the 512-point FFT: its complex length */

static double fft_cos[HALF], fft_sin[HALF];  /* e^{-2 pi i j / 256} = cos - i sin */
static double rfft_cos[HALF + 1], rfft_sin[HALF + 1];  /* e^{-2 pi i k / 512}, k <= 256 */
static int bitrev[HALF];  /* 8-bit reversal: where a decimation-in-frequency FFT leaves bin k */

static void envelope_tables(void) {
    for (int j = 0; j < HALF; j++) fft_cos[j] = cos(2 * Py_MATH_PI * j / HALF), fft_sin[j] = sin(2 * Py_MATH_PI * j / HALF);
    for (int k = 0; k <= HALF; k++) rfft_cos[k] = cos(Py_MATH_PI * k / HALF), rfft_sin[k] = sin(Py_MATH_PI * k / HALF);
    for (int k = 0; k < HALF; k++) {
        int r = 0;
        for (int bit = 0; bit < 8; bit++) r |= (k >> bit & 1) << (7 - bit);
        bitrev[k] = r;
    }
}

#ifdef __GNUC__
typedef float v8f __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));
typedef double v8d __attribute__((vector_size(64)));
#define LOADV(V, p) ({ V v_; memcpy(&v_, (p), sizeof v_); v_; })  /* an unaligned load */
#define STOREV(p, v) do { __typeof__(v) stored_ = (v); memcpy((p), &stored_, sizeof stored_); } while (0)
#else  /* one lane a "vector" */
#define LOADV(V, p) (*(p))
#define STOREV(p, v) (*(p) = (v))
#endif

/* (xr + i xi) e^{-2 pi i m / 256} stored at (pr, pi). */
#define TWIDDLE(V, T, pr, pi, xr, xi, m)                                              \
    do {                                                                              \
        V xr_ = (xr), xi_ = (xi);                                                     \
        T cos_ = (T)fft_cos[m], sin_ = (T)fft_sin[m];                                 \
        STOREV(pr, xr_ * cos_ + xi_ * sin_);                                          \
        STOREV(pi, xi_ * cos_ - xr_ * sin_);                                          \
    } while (0)

/* STOI's one-third-octave envelopes of the overlap-added kept frames, out (E, 2, nb, F - 1): STFT frame j of signal
   z[e, s] (t samples) is [w1 h_j, w2 h_{j+1}] with h_j = w1 c[o_j] + w2 c[p_j] (c[k] the k-th 128-sample chunk, zero
   for k > F; o, p = first[e], second[e]; w1, w2 the window's halves: fmetrics.audio.stoi._overlap_add), zero-padded
   to 512; level b the norm of its FFT's bins [edges[b, 0], edges[b, 1]).
   VL frames at a time, one per vector lane: the real 512-point FFT as a 256-point complex FFT of the even and odd
   samples (x[2m] + i x[2m + 1]: only m < 128 nonzero, so the first radix-2 stage is one product), decimation in
   frequency (then radix 4: two stages a pass over the buffer), then each bin from the bins k and 256 - k (no
   shuffles across lanes: every lane its own frame). */
#define STOI_ENVELOPES(NAME, T, V, VL, ATTR)                                                                  \
    ATTR static void NAME(const T *z, int64_t e, int64_t t, int64_t f, const int64_t *first,                  \
                          const int64_t *second, const T *win, const int64_t *edges, int64_t nb, T *out) {    \
        static const T zero[HOP];                                                                             \
        T w11[HOP], w12[HOP], w22[HOP], re[HALF * VL], im[HALF * VL];                                         \
        for (int u = 0; u < HOP; u++) {                                                                       \
            w11[u] = win[u] * win[u];                                                                         \
            w12[u] = win[u] * win[HOP + u];                                                                   \
            w22[u] = win[HOP + u] * win[HOP + u];                                                             \
        }                                                                                                     \
        int64_t frames = f - 1, total = e * 2 * frames;                                                       \
        for (int64_t i0 = 0; i0 < total; i0 += VL) {                                                          \
            for (int l = 0; l < VL; l++) {  /* lane l: the frame's samples, even in re, odd in im */          \
                if (i0 + l >= total) {                                                                        \
                    for (int m = 0; m < HALF / 2; m++) re[m * VL + l] = im[m * VL + l] = 0;                   \
                    continue;                                                                                 \
                }                                                                                             \
                int64_t sig = (i0 + l) / frames, j = (i0 + l) % frames;                                       \
                const T *c = z + sig * t;                                                                     \
                const int64_t *o = first + sig / 2 * f, *p = second + sig / 2 * f;                           \
                const T *a0 = o[j] <= f ? c + o[j] * HOP : zero, *b0 = p[j] <= f ? c + p[j] * HOP : zero;     \
                const T *a1 = o[j + 1] <= f ? c + o[j + 1] * HOP : zero;                                      \
                const T *b1 = p[j + 1] <= f ? c + p[j + 1] * HOP : zero;                                      \
                for (int m = 0; m < HOP / 2; m++) {                                                           \
                    int u = 2 * m;                                                                            \
                    re[m * VL + l] = w11[u] * a0[u] + w12[u] * b0[u];                                         \
                    im[m * VL + l] = w11[u + 1] * a0[u + 1] + w12[u + 1] * b0[u + 1];                         \
                    re[(m + HOP / 2) * VL + l] = w12[u] * a1[u] + w22[u] * b1[u];                             \
                    im[(m + HOP / 2) * VL + l] = w12[u + 1] * a1[u + 1] + w22[u + 1] * b1[u + 1];             \
                }                                                                                             \
            }                                                                                                 \
            for (int m = 0; m < HALF / 2; m++)  /* first stage: the upper half is zero */                     \
                TWIDDLE(V, T, re + (m + HALF / 2) * VL, im + (m + HALF / 2) * VL, LOADV(V, re + m * VL),      \
                        LOADV(V, im + m * VL), m);                                                            \
            for (int q = HALF / 8; q >= 2; q /= 4)  /* two radix-2 stages at once (spans 2q, q) */          \
                for (int g = 0; g < HALF; g += 4 * q)                                                         \
                    for (int j = 0; j < q; j++) {                                                             \
                        T *pr = re + (g + j) * VL, *pi = im + (g + j) * VL;                                   \
                        V ar = LOADV(V, pr), ai = LOADV(V, pi), br = LOADV(V, pr + q * VL);                   \
                        V bi = LOADV(V, pi + q * VL), cr = LOADV(V, pr + 2 * q * VL);                         \
                        V ci = LOADV(V, pi + 2 * q * VL), dr = LOADV(V, pr + 3 * q * VL);                     \
                        V di = LOADV(V, pi + 3 * q * VL);                                                     \
                        V t1r = ar + cr, t1i = ai + ci, t2r = br + dr, t2i = bi + di;                         \
                        V t3r = ar - cr, t3i = ai - ci, t4r = br - dr, t4i = bi - di;                         \
                        int w = j * (HALF / 4 / q);  /* W_{4q}^j = W_256^w */                                 \
                        STOREV(pr, t1r + t2r);                                                                \
                        STOREV(pi, t1i + t2i);                                                                \
                        TWIDDLE(V, T, pr + q * VL, pi + q * VL, t1r - t2r, t1i - t2i, 2 * w);                 \
                        TWIDDLE(V, T, pr + 2 * q * VL, pi + 2 * q * VL, t3r + t4i, t3i - t4r, w);             \
                        TWIDDLE(V, T, pr + 3 * q * VL, pi + 3 * q * VL, t3r - t4i, t3i + t4r, 3 * w);         \
                    }                                                                                         \
            for (int g = 0; g < HALF; g += 2) {  /* the last stage: span 1, no twiddle */                    \
                V ar = LOADV(V, re + g * VL), ai = LOADV(V, im + g * VL);                                     \
                V br = LOADV(V, re + (g + 1) * VL), bi = LOADV(V, im + (g + 1) * VL);                         \
                STOREV(re + g * VL, ar + br);                                                                 \
                STOREV(im + g * VL, ai + bi);                                                                 \
                STOREV(re + (g + 1) * VL, ar - br);                                                           \
                STOREV(im + (g + 1) * VL, ai - bi);                                                           \
            }                                                                                                 \
            for (int64_t b = 0; b < nb; b++) {                                                                \
                V acc = LOADV(V, zero);                                                                       \
                for (int64_t k = edges[2 * b]; k < edges[2 * b + 1]; k++) {                                  \
                    int kk = bitrev[k & (HALF - 1)], mk = bitrev[(HALF - k) & (HALF - 1)];                    \
                    V zr = LOADV(V, re + kk * VL), zi = LOADV(V, im + kk * VL);                               \
                    V cr = LOADV(V, re + mk * VL), ci = LOADV(V, im + mk * VL);                               \
                    V er = (zr + cr) * (T)0.5, ei = (zi - ci) * (T)0.5;  /* the even samples' bin */          \
                    V or_ = (zi + ci) * (T)0.5, oi = (cr - zr) * (T)0.5;  /* the odd samples' */              \
                    T tc = (T)rfft_cos[k], ts = (T)rfft_sin[k];                                               \
                    V xr = er + or_ * tc + oi * ts, xi = ei + oi * tc - or_ * ts;                             \
                    acc += xr * xr + xi * xi;                                                                 \
                }                                                                                             \
                T lanes[VL];                                                                                  \
                STOREV(lanes, acc);                                                                           \
                for (int l = 0; l < VL && i0 + l < total; l++) {                                              \
                    int64_t sig = (i0 + l) / frames, j = (i0 + l) % frames;                                   \
                    out[(sig * nb + b) * frames + j] = (T)sqrt(lanes[l]);                                     \
                }                                                                                             \
            }                                                                                                 \
        }                                                                                                     \
    }

/* ------------------------------------------------------------ STOI resampling */

/* resample_poly's polyphase sum over rows x (rows, n): out[r, up q + ph] = sum_i w[ph, i] xp[q down + i] for
   up q + ph < n_out, xp = the row after pad zeros (zeros past its end). wt (groups, k, PG): the up phases' filters
   (rows past up zero) in groups of PG, tap-major, group g nonzero within taps [lo[g], hi[g]).
   The padded row is first cut in its down phases, X[p][q] = xp[q down + p] (scratch: down rows of len), so that
   consecutive outputs of one phase read consecutive entries, xp[q down + i] = X[i % down][q + i / down]: two vectors
   of V (VL lanes each) hold 2 VL consecutive outputs of a phase, and the PG phases of a group read the same entries
   for a tap: per tap two loads, PG broadcasts and 2 PG independent multiply-adds (no sums across lanes). */
enum { PG = 5 };  /* 10 accumulators, 2 loads and 5 broadcasts: within AVX2's 16 registers */

#ifdef __GNUC__
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

/* One block: lanes[h][u] = output q0 + u (u < 2 VL) of phase g PG + h. Its own function, so that its 2 PG
   accumulators get the registers to themselves. */
#define POLYPHASE_BLOCK(NAME, T, V, VL, ATTR)                                                                 \
    ATTR NOINLINE static void NAME(const T *scratch, int64_t len, int64_t down, const T *wt, int64_t lo,      \
                                   int64_t hi, T lanes[PG][2 * VL]) {                                         \
        V a0[PG], a1[PG];  /* two arrays, not one: each small enough to be kept in registers */               \
        for (int h = 0; h < PG; h++) a0[h] = a1[h] = (V){0};                                                  \
        int64_t p = lo % down, d = lo / down;                                                                 \
        for (int64_t i = lo; i < hi; i++) {                                                                   \
            const T *v = scratch + p * len + d, *wi = wt + i * PG;                                            \
            V x0 = LOADV(V, v), x1 = LOADV(V, v + VL);                                                        \
            for (int h = 0; h < PG; h++) {                                                                    \
                a0[h] += wi[h] * x0;                                                                          \
                a1[h] += wi[h] * x1;                                                                          \
            }                                                                                                 \
            if (++p == down) p = 0, d++;                                                                      \
        }                                                                                                     \
        for (int h = 0; h < PG; h++) {                                                                        \
            V v0 = a0[h], v1 = a1[h];  /* copies: a0, a1 are never addressed */                               \
            memcpy(lanes[h], &v0, sizeof v0);                                                                 \
            memcpy(lanes[h] + VL, &v1, sizeof v1);                                                            \
        }                                                                                                     \
    }

#define POLYPHASE(NAME, T, V, VL, ATTR)                                                                       \
    POLYPHASE_BLOCK(NAME##_block, T, V, VL, ATTR)                                                             \
    ATTR static void NAME(const T *x, int64_t rows, int64_t n, const T *wt, int64_t up, int64_t k,            \
                          const int64_t *lo, const int64_t *hi, int64_t pad, int64_t down, T *out,            \
                          int64_t n_out, int64_t stride, T *scratch, int64_t len) {                           \
        for (int64_t r = 0; r < rows; r++) {                                                                  \
            const T *xr = x + r * n;                                                                          \
            for (int64_t c0 = 0; c0 < len; c0 += 64)  /* 64 columns at a time: their samples stay in L1 */    \
                for (int64_t p = 0; p < down; p++)                                                            \
                    for (int64_t q = c0; q < c0 + 64 && q < len; q++) {                                       \
                        int64_t at = q * down + p - pad;                                                      \
                        scratch[p * len + q] = at >= 0 && at < n ? xr[at] : 0;                                \
                    }                                                                                         \
            T *o = out + r * stride;                                                                          \
            for (int64_t q0 = 0; q0 < (n_out + up - 1) / up; q0 += 2 * VL)                                    \
                for (int64_t g = 0; g * PG < up; g++) {                                                       \
                    T lanes[PG][2 * VL];                                                                      \
                    NAME##_block(scratch + q0, len, down, wt + g * k * PG, lo[g], hi[g], lanes);              \
                    for (int h = 0; h < PG && g * PG + h < up; h++) {                                         \
                        int64_t ph = g * PG + h, count = (n_out - ph + up - 1) / up;                          \
                        for (int64_t u = 0; u < 2 * VL && q0 + u < count; u++) o[up * (q0 + u) + ph] = lanes[h][u]; \
                    }                                                                                         \
                }                                                                                             \
        }                                                                                                     \
    }

/* Both kernels in both dtypes, VF / VD the vectors of float / double with LF / LD lanes. */
#define STOI_KERNELS(SUFFIX, VF, LF, VD, LD, ATTR)                     \
    POLYPHASE(polyphase_f32##SUFFIX, float, VF, LF, ATTR)              \
    POLYPHASE(polyphase_f64##SUFFIX, double, VD, LD, ATTR)             \
    STOI_ENVELOPES(envelopes_f32##SUFFIX, float, VF, LF, ATTR)         \
    STOI_ENVELOPES(envelopes_f64##SUFFIX, double, VD, LD, ATTR)

#ifdef __GNUC__
STOI_KERNELS(, v8f, 8, v4d, 4, STOI_CLONES)
#else
STOI_KERNELS(, float, 1, double, 1, )
#endif
#if defined(FM_X86) && !defined(__clang__) && __GNUC__ >= 12  /* AVX-512: vectors of 64 bytes in 32 registers */
#define FM_AVX512 1
STOI_KERNELS(_avx512, v16f, 16, v8d, 8, __attribute__((target("arch=x86-64-v4"))))
#endif

static int use_avx2 = 0, use_avx512 = 0;  /* set once at import */

/* KERNEL##_f32 / _f64 (f32: x's dtype), their AVX-512 builds where selected, called with the arguments. */
#ifdef FM_AVX512
#define STOI_CALL(KERNEL, f32, ...)                                                   \
    do {                                                                              \
        if (use_avx512 && (f32)) KERNEL##_f32_avx512(__VA_ARGS__);                    \
        else if (use_avx512) KERNEL##_f64_avx512(__VA_ARGS__);                        \
        else if (f32) KERNEL##_f32(__VA_ARGS__);                                      \
        else KERNEL##_f64(__VA_ARGS__);                                               \
    } while (0)
#else
#define STOI_CALL(KERNEL, f32, ...)                                                   \
    do {                                                                              \
        if (f32) KERNEL##_f32(__VA_ARGS__);                                           \
        else KERNEL##_f64(__VA_ARGS__);                                               \
    } while (0)
#endif

/* ------------------------------------------------------------ Python */

/* The buffers of a call's array arguments, C-contiguous with their formats; released by `release`. */
typedef struct { Py_buffer b[6]; int held; } Bufs;

static void release(Bufs *g) {
    while (g->held > 0) PyBuffer_Release(&g->b[--g->held]);
}

/* Acquires objs[0 .. n - 1], writable where bit i of `writable` is set; on failure releases what it took. */
static int acquire(Bufs *g, PyObject *const *objs, int n, int writable) {
    g->held = 0;
    for (int i = 0; i < n; i++) {
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | ((writable >> i & 1) ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(objs[i], &g->b[i], flags) < 0) {
            release(g);
            return -1;
        }
        g->held++;
    }
    return 0;
}

static int is_format(const Py_buffer *b, const char *chars, Py_ssize_t itemsize) {
    return b->itemsize == itemsize && b->format && b->format[0] && strchr(chars, b->format[0]) && b->format[1] == 0;
}

static int is_float64(const Py_buffer *b) { return is_format(b, "d", 8); }

static int is_int64(const Py_buffer *b) { return is_format(b, "lq", 8); }

static int is_real(const Py_buffer *b) { return is_format(b, "f", 4) || is_float64(b); }

static int same_real(const Py_buffer *a, const Py_buffer *b) { return is_real(b) && a->format[0] == b->format[0]; }

/* x: (N, C) float32 / float64 with C >= 1; a: (N,) int64; b: (N,) of x's dtype (argmax) or (3C,) int64 (counts). */
static int parse(PyObject *args, Bufs *g, int counts) {
    PyObject *o[3];
    if (!PyArg_ParseTuple(args, "OOO", &o[0], &o[1], &o[2]) || acquire(g, o, 3, counts ? 4 : 6) < 0) return -1;
    const Py_buffer *x = &g->b[0], *a = &g->b[1], *b = &g->b[2];
    int ok = x->ndim == 2 && x->shape[1] >= 1 && is_real(x) && a->ndim == 1 && a->shape[0] == x->shape[0] &&
             is_int64(a) && b->ndim == 1 &&
             (counts ? is_int64(b) && b->shape[0] == 3 * x->shape[1] : b->shape[0] == x->shape[0] && same_real(x, b));
    if (!ok) {
        PyErr_SetString(PyExc_TypeError, counts
            ? "top1_counts(x, target, counts): x C-contiguous float32/float64 (N, C), target int64 (N,), counts int64 (3C,)"
            : "argmax_rows(x, labels, top): x C-contiguous float32/float64 (N, C), labels int64 (N,), top (N,) of x's dtype");
        release(g);
        return -1;
    }
    return 0;
}

static PyObject *argmax_rows(PyObject *self, PyObject *args) {
    Bufs g;
    (void)self;
    if (parse(args, &g, 0) < 0) return NULL;
    const Py_buffer *x = &g.b[0];
    int64_t n = x->shape[0], c = x->shape[1];
    int f32 = x->format[0] == 'f';
    void *labels = g.b[1].buf, *top = g.b[2].buf;
    Py_BEGIN_ALLOW_THREADS
#ifdef FM_X86
    if (use_avx2 && c >= (f32 ? 8 : 4)) {
        if (f32) argmax_f32_avx2(x->buf, n, c, labels, top);
        else argmax_f64_avx2(x->buf, n, c, labels, top);
    } else
#endif
    if (f32) argmax_f32_c(x->buf, n, c, labels, top);
    else argmax_f64_c(x->buf, n, c, labels, top);
    Py_END_ALLOW_THREADS
    release(&g);
    Py_RETURN_NONE;
}

static PyObject *top1_counts(PyObject *self, PyObject *args) {
    Bufs g;
    (void)self;
    if (parse(args, &g, 1) < 0) return NULL;
    const Py_buffer *x = &g.b[0];
    int64_t n = x->shape[0], c = x->shape[1], nan_rows = 0;
    const int64_t *t = g.b[1].buf;
    int64_t *counts = g.b[2].buf;
    for (int64_t r = 0; r < n; r++) {  /* the caller checked the targets; an index outside the counts never runs */
        if (t[r] < 0 || t[r] >= c) {
            PyErr_Format(PyExc_ValueError, "top1_counts: target %lld at row %lld is not a label in [0, %lld)",
                         (long long)t[r], (long long)r, (long long)c);
            release(&g);
            return NULL;
        }
    }
    int f32 = x->format[0] == 'f';
    Py_BEGIN_ALLOW_THREADS
#ifdef FM_X86
    if (use_avx2 && c >= (f32 ? 8 : 4))
        nan_rows = f32 ? counts_f32_avx2(x->buf, n, c, t, counts) : counts_f64_avx2(x->buf, n, c, t, counts);
    else
#endif
    nan_rows = f32 ? counts_f32_c(x->buf, n, c, t, counts) : counts_f64_c(x->buf, n, c, t, counts);
    Py_END_ALLOW_THREADS
    release(&g);
    return PyLong_FromLongLong(nan_rows);
}

/* stoi_windows(tob, out, clip, extended=False): tob C-contiguous float64 (B, 2, 15, F), F >= 30; out float64
   (B, F - 29); extended STOI (clip unused) where extended. */
static PyObject *stoi_windows(PyObject *self, PyObject *args) {
    PyObject *o[2];
    double clip;
    int extended = 0;
    Bufs g;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOd|p", &o[0], &o[1], &clip, &extended) || acquire(&g, o, 2, 2) < 0) return NULL;
    const Py_buffer *t = &g.b[0], *out = &g.b[1];
    int ok = t->ndim == 4 && t->shape[1] == 2 && t->shape[2] == STOI_BANDS && t->shape[3] >= STOI_N &&
             is_float64(t) && out->ndim == 2 && out->shape[0] == t->shape[0] &&
             out->shape[1] == t->shape[3] - STOI_N + 1 && is_float64(out);
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        if (extended) estoi_all(t->buf, t->shape[0], t->shape[3], out->buf);
        else stoi_all(t->buf, t->shape[0], t->shape[3], clip, out->buf);
        Py_END_ALLOW_THREADS
    } else {
        PyErr_SetString(PyExc_TypeError,
                        "stoi_windows(tob, out, clip, extended=False): tob C-contiguous float64 (B, 2, 15, F >= 30), "
                        "out float64 (B, F - 29)");
    }
    release(&g);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* stoi_envelopes(z, first, second, window, edges, out): z C-contiguous float32 / float64 (E, 2, T), first and second
   int64 (E, F) chunk indices (> F: a zero chunk; none negative), F >= 2 and (F + 1) 128 <= T, window (256,) of z's
   dtype, edges int64 (B, 2) bin ranges within [0, 257], out of z's dtype (E, 2, B, F - 1). */
static PyObject *stoi_envelopes(PyObject *self, PyObject *args) {
    PyObject *o[6];
    Bufs g;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5]) || acquire(&g, o, 6, 32) < 0)
        return NULL;
    const Py_buffer *z = &g.b[0], *fi = &g.b[1], *se = &g.b[2], *win = &g.b[3], *ed = &g.b[4], *out = &g.b[5];
    int ok = z->ndim == 3 && z->shape[1] == 2 && is_real(z) && fi->ndim == 2 && is_int64(fi) && se->ndim == 2 &&
             is_int64(se) && fi->shape[0] == z->shape[0] && se->shape[0] == z->shape[0] && fi->shape[1] >= 2 &&
             se->shape[1] == fi->shape[1] && (fi->shape[1] + 1) * HOP <= z->shape[2] && win->ndim == 1 &&
             win->shape[0] == 2 * HOP && same_real(z, win) && ed->ndim == 2 && ed->shape[1] == 2 && is_int64(ed) &&
             out->ndim == 4 && out->shape[0] == z->shape[0] && out->shape[1] == 2 && out->shape[2] == ed->shape[0] &&
             out->shape[3] == fi->shape[1] - 1 && same_real(z, out);
    const int64_t *e = ed->buf, *a = fi->buf, *b = se->buf;
    for (Py_ssize_t k = 0; ok && k < ed->shape[0]; k++)
        ok = 0 <= e[2 * k] && e[2 * k] <= e[2 * k + 1] && e[2 * k + 1] <= HALF + 1;
    if (!ok) {
        PyErr_SetString(PyExc_TypeError, "stoi_envelopes(z, first, second, window, edges, out): z C-contiguous "
                                         "float32/float64 (E, 2, T), first and second int64 (E, F) with F >= 2 and "
                                         "(F + 1) 128 <= T, window (256,) of z's dtype, edges int64 (B, 2) ranges "
                                         "within [0, 257], out of z's dtype (E, 2, B, F - 1)");
        release(&g);
        return NULL;
    }
    int64_t f = fi->shape[1], count = fi->shape[0] * f;
    for (int64_t i = 0; i < count; i++)
        if (a[i] < 0 || b[i] < 0) {
            PyErr_Format(PyExc_ValueError, "stoi_envelopes: chunk index %lld < 0", (long long)(a[i] < 0 ? a[i] : b[i]));
            release(&g);
            return NULL;
        }
    Py_BEGIN_ALLOW_THREADS
    STOI_CALL(envelopes, z->format[0] == 'f', z->buf, z->shape[0], z->shape[2], f, a, b, win->buf, e, ed->shape[0],
              out->buf);
    Py_END_ALLOW_THREADS
    release(&g);
    Py_RETURN_NONE;
}

/* polyphase(x, w, pad, down, out, slot): x C-contiguous float32 / float64 (R, n), w (up, k) and out (R, S, n_out) of
   x's dtype, pad >= 0, down >= 1, 0 <= slot < S: out[:, slot] = resample_poly's polyphase sums of the rows. */
static PyObject *polyphase(PyObject *self, PyObject *args) {
    PyObject *o[3];
    long long pad, down, slot;
    Bufs g;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOLLOL", &o[0], &o[1], &pad, &down, &o[2], &slot) || acquire(&g, o, 3, 4) < 0)
        return NULL;
    const Py_buffer *x = &g.b[0], *w = &g.b[1], *out = &g.b[2];
    int ok = x->ndim == 2 && is_real(x) && w->ndim == 2 && w->shape[0] >= 1 && w->shape[1] >= 1 && same_real(x, w) &&
             out->ndim == 3 && out->shape[0] == x->shape[0] && same_real(x, out) && pad >= 0 && down >= 1 &&
             slot >= 0 && slot < out->shape[1];
    if (!ok) {
        PyErr_SetString(PyExc_TypeError, "polyphase(x, w, pad, down, out, slot): x C-contiguous float32/float64 (R, n), "
                                         "w (up, k) and out (R, S, n_out) of x's dtype, pad >= 0, down >= 1, "
                                         "0 <= slot < S");
        release(&g);
        return NULL;
    }
    int64_t up = w->shape[0], k = w->shape[1], n_out = out->shape[2], size = x->itemsize, groups = (up + PG - 1) / PG;
    int64_t len = (n_out + up - 1) / up + 2 * 16 + k / down + 1;  /* the last block's columns: at most 2 x 16 lanes */
    int64_t *lo = PyMem_Malloc(2 * groups * sizeof(int64_t));
    char *wt = PyMem_Calloc(groups * k * PG, size);
    void *scratch = PyMem_Malloc(down * len * size);
    if (!lo || !wt || !scratch) {
        PyMem_Free(lo);
        PyMem_Free(wt);
        PyMem_Free(scratch);
        release(&g);
        return PyErr_NoMemory();
    }
    int64_t *hi = lo + groups;
    for (int64_t gr = 0; gr < groups; gr++) lo[gr] = k, hi[gr] = 0;
    for (int64_t ph = 0; ph < up; ph++)  /* wt[ph / PG, i, ph % PG] = w[ph, i]; each group's nonzero taps */
        for (int64_t i = 0; i < k; i++) {
            const char *src = (const char *)w->buf + (ph * k + i) * size;
            int64_t gr = ph / PG;
            memcpy(wt + ((gr * k + i) * PG + ph % PG) * size, src, size);
            if (size == 4 ? *(const float *)src != 0 : *(const double *)src != 0) {
                lo[gr] = i < lo[gr] ? i : lo[gr];
                hi[gr] = i + 1 > hi[gr] ? i + 1 : hi[gr];
            }
        }
    int64_t rows = x->shape[0], n = x->shape[1], stride = out->shape[1] * n_out;
    void *taps = wt, *dest = (char *)out->buf + slot * n_out * size;
    Py_BEGIN_ALLOW_THREADS
    STOI_CALL(polyphase, size == 4, x->buf, rows, n, taps, up, k, lo, hi, pad, down, dest, n_out, stride, scratch, len);
    Py_END_ALLOW_THREADS
    PyMem_Free(lo);
    PyMem_Free(wt);
    PyMem_Free(scratch);
    release(&g);
    Py_RETURN_NONE;
}

/* simd() -> the kernels in use: "avx512" (AVX-512 resampling and envelopes, AVX2 rows), "avx2" or "c" (portable C rows;
   the STOI kernels of GCC's target_clones still pick their target by the CPU); simd(name) selects one of those the
   CPU has and returns the previous. */
static PyObject *simd(PyObject *self, PyObject *args) {
    const char *name = NULL, *was = use_avx512 ? "avx512" : use_avx2 ? "avx2" : "c";
    (void)self;
    if (!PyArg_ParseTuple(args, "|s", &name)) return NULL;
    if (name && strcmp(name, "c") == 0) use_avx2 = use_avx512 = 0;
#ifdef FM_X86
    else if (name && strcmp(name, "avx2") == 0 && __builtin_cpu_supports("avx2")) use_avx2 = 1, use_avx512 = 0;
#endif
#ifdef FM_AVX512
    else if (name && strcmp(name, "avx512") == 0 && __builtin_cpu_supports("x86-64-v4")) use_avx2 = use_avx512 = 1;
#endif
    else if (name) return PyErr_Format(PyExc_ValueError, "simd: %s is not available here", name);
    return PyUnicode_FromString(was);
}

static PyMethodDef methods[] = {
    {"argmax_rows", argmax_rows, METH_VARARGS, "argmax_rows(x, labels, top): each row's first maximum (first NaN) and its score."},
    {"top1_counts", top1_counts, METH_VARARGS, "top1_counts(x, target, counts) -> NaN rows: adds target, argmax and hit counts."},
    {"stoi_windows", stoi_windows, METH_VARARGS,
     "stoi_windows(tob, out, clip, extended=False): (extended) STOI of every 30-frame window, float64."},
    {"stoi_envelopes", stoi_envelopes, METH_VARARGS,
     "stoi_envelopes(z, first, second, window, edges, out): one-third-octave envelopes of the kept frames."},
    {"polyphase", polyphase, METH_VARARGS, "polyphase(x, w, pad, down, out, slot): resample_poly's polyphase sums."},
    {"simd", simd, METH_VARARGS,
     "simd([name]) -> 'avx512', 'avx2' or 'c': the kernels in use (selects name, returning the previous)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "fmetrics' fused row kernels.", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) {
    envelope_tables();
#ifdef FM_X86
    __builtin_cpu_init();
    use_avx2 = __builtin_cpu_supports("avx2");
#ifdef FM_AVX512
    use_avx512 = use_avx2 && __builtin_cpu_supports("x86-64-v4");
#endif
#endif
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "VERSION", 3) < 0) {  /* fmetrics/_kernels.py's VERSION */
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
