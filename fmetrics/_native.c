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
 * Two stages of STOI (fmetrics/audio/stoi.py, docs/audio.md):
 *
 *   band_levels(spec, edges, out)    out[m, b, j] = norm of the bins [edges[b, 0], edges[b, 1]) of spectrum
 *                                    spec[m, j] ((re, im) pairs), summed in float64
 *   stoi_windows(tob, out, clip, extended=False)
 *                                    out[b, s] = (extended) STOI of the 30-frame window s of float64
 *                                    envelopes tob[b] (2, 15, F), clip = 1 + 10^(-beta / 20)
 *
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
#define STOI_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))  /* AVX2 + FMA where the CPU has them */
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

/* ------------------------------------------------------------ STOI band levels */

/* out[e, b, j] = sqrt(sum over the bins [lo_b, hi_b) of |spec[e, j, bin]|^2), spec as (re, im) pairs; the sums in
   float64 over 8 partial sums (vector lanes), whatever T. */
#define BAND_LEVELS(NAME, T)                                                                                  \
    STOI_CLONES static void NAME(const T *spec, int64_t m, int64_t f, int64_t bins, const int64_t *edges,     \
                                 int64_t nb, T *out) {                                                        \
        for (int64_t e = 0; e < m; e++)                                                                       \
            for (int64_t j = 0; j < f; j++) {                                                                 \
                const T *row = spec + (e * f + j) * bins * 2;                                                 \
                for (int64_t b = 0; b < nb; b++) {                                                            \
                    double acc[8] = {0};                                                                      \
                    int64_t k = 2 * edges[2 * b], hi = 2 * edges[2 * b + 1];                                  \
                    for (; k + 8 <= hi; k += 8)                                                               \
                        for (int u = 0; u < 8; u++) acc[u] += (double)row[k + u] * row[k + u];                \
                    for (int u = 0; k < hi; k++, u++) acc[u] += (double)row[k] * row[k];                      \
                    out[(e * nb + b) * f + j] = (T)sqrt(((acc[0] + acc[1]) + (acc[2] + acc[3])) +             \
                                                        ((acc[4] + acc[5]) + (acc[6] + acc[7])));             \
                }                                                                                             \
            }                                                                                                 \
    }

BAND_LEVELS(bands_f32, float)
BAND_LEVELS(bands_f64, double)

static int use_avx2 = 0;  /* set once at import */

/* ------------------------------------------------------------ Python */

/* The buffers of a call's array arguments, C-contiguous with their formats; released by `release`. */
typedef struct { Py_buffer b[3]; int held; } Bufs;

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

/* band_levels(spec, edges, out): spec C-contiguous float32 / float64 (M, F, bins, 2), edges int64 (B, 2) bin ranges
   within [0, bins), out of spec's dtype (M, B, F). */
static PyObject *band_levels(PyObject *self, PyObject *args) {
    PyObject *o[3];
    Bufs g;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO", &o[0], &o[1], &o[2]) || acquire(&g, o, 3, 4) < 0) return NULL;
    const Py_buffer *sp = &g.b[0], *ed = &g.b[1], *out = &g.b[2];
    int ok = sp->ndim == 4 && sp->shape[3] == 2 && is_real(sp) && ed->ndim == 2 && ed->shape[1] == 2 && is_int64(ed) &&
             out->ndim == 3 && out->shape[0] == sp->shape[0] && out->shape[1] == ed->shape[0] &&
             out->shape[2] == sp->shape[1] && same_real(sp, out);
    const int64_t *e = ed->buf;
    for (Py_ssize_t b = 0; ok && b < ed->shape[0]; b++)
        ok = 0 <= e[2 * b] && e[2 * b] <= e[2 * b + 1] && e[2 * b + 1] <= sp->shape[2];
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        if (sp->format[0] == 'f') bands_f32(sp->buf, sp->shape[0], sp->shape[1], sp->shape[2], e, ed->shape[0], out->buf);
        else bands_f64(sp->buf, sp->shape[0], sp->shape[1], sp->shape[2], e, ed->shape[0], out->buf);
        Py_END_ALLOW_THREADS
    } else {
        PyErr_SetString(PyExc_TypeError, "band_levels(spec, edges, out): spec C-contiguous float32/float64 (M, F, bins, 2), "
                                         "edges int64 (B, 2) ranges within [0, bins], out of spec's dtype (M, B, F)");
    }
    release(&g);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* simd() -> the kernel in use; simd(name) selects "c" or "avx2" (where the CPU has it) and returns the previous. */
static PyObject *simd(PyObject *self, PyObject *args) {
    const char *name = NULL, *was = use_avx2 ? "avx2" : "c";
    (void)self;
    if (!PyArg_ParseTuple(args, "|s", &name)) return NULL;
    if (name && strcmp(name, "c") == 0) use_avx2 = 0;
#ifdef FM_X86
    else if (name && strcmp(name, "avx2") == 0 && __builtin_cpu_supports("avx2")) use_avx2 = 1;
#endif
    else if (name) return PyErr_Format(PyExc_ValueError, "simd: %s is not available here", name);
    return PyUnicode_FromString(was);
}

static PyMethodDef methods[] = {
    {"argmax_rows", argmax_rows, METH_VARARGS, "argmax_rows(x, labels, top): each row's first maximum (first NaN) and its score."},
    {"top1_counts", top1_counts, METH_VARARGS, "top1_counts(x, target, counts) -> NaN rows: adds target, argmax and hit counts."},
    {"stoi_windows", stoi_windows, METH_VARARGS,
     "stoi_windows(tob, out, clip, extended=False): (extended) STOI of every 30-frame window, float64."},
    {"band_levels", band_levels, METH_VARARGS, "band_levels(spec, edges, out): the norm of each band's bins, per frame."},
    {"simd", simd, METH_VARARGS, "simd([name]) -> 'avx2' or 'c': the row kernel in use (selects name, returning the previous)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "fmetrics' fused row kernels.", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) {
#ifdef FM_X86
    __builtin_cpu_init();
    use_avx2 = __builtin_cpu_supports("avx2");
#endif
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "VERSION", 2) < 0) {  /* fmetrics/_kernels.py's VERSION */
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
