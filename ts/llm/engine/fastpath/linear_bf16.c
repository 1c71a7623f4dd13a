/* y = x W^T + b with bfloat16 weights read in place (CPU without a bfloat16 GEMM, e.g. AVX2).
 *
 * x (rows, K) and W (N, K), b (N) and y (rows, N) are bfloat16; arithmetic is float32. oneDNN has
 * no bfloat16 GEMM on such a CPU and torch emulates one (3-7x the CPU of float32); widening the
 * weights to a float32 copy at load doubles what a decode step reads from memory (a one-row step
 * is bound by it) and triples the weights' memory. Here the weights stay bfloat16 and are widened
 * in registers as they are read (a bfloat16 is the top half of a float32).
 *
 * Each output is one dot product over K in a fixed order: eight float32 lanes, each a chain of
 * fused multiply-adds over k = lane, lane + 8, ..., summed in a fixed tree, then the K % 8 tail,
 * the bias, and one rounding to bfloat16 (to nearest, ties to even). That order does not depend
 * on the row count, the tile an output falls in or the thread that computes it, so a sequence's
 * logits are the same bits whether it decodes alone or in a batch (a GEMM's blocking changes
 * with the row count, and with it the rounding).
 *
 * Blocking (the rows widened to float32 once per call): outputs in blocks of NB, a thread's blocks
 * contiguous; within a block, rows MR at a time; within those, k in slices of KC, over which every
 * NR-output tile of the block passes. A tile keeps MR x NR accumulators, NR weight vectors and a
 * row vector in the 16 AVX registers, and stores its accumulators to a small per-thread buffer at
 * the end of the slice (exactly, so the order above is kept): the rows' slice (4 KB) stays in L1
 * and the block's weights (NB x K bfloat16, 96-270 KB here) in L2 while the rows pass over them --
 * without the slices, every tile re-read its rows from L2 and was bound by it beyond a few rows.
 * Threads: OpenMP over the output blocks (torch's pool, ts/llm/engine/native.py); one thread runs
 * it serially.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define LANES 8
#endif

#define MR 4   /* rows of a tile */
#define NR 3   /* outputs of a tile */
#define NR1 8  /* outputs of a one-row tile (no row reuse: more weight streams in flight) */
#define NB 48  /* outputs of a block (a multiple of NR and NR1) */
#define KC 256 /* k of a block (a multiple of LANES) */

static inline float widen(uint16_t x) {
    const uint32_t bits = (uint32_t)x << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint16_t narrow(float f) { /* to nearest, ties to even; NaN stays a quiet NaN */
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((bits >> 16) | 0x0040u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

#if defined(LANES)
static inline __m256 load_widened(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

static inline float lane_sum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#else
#define LANES 8
typedef struct { float v[LANES]; } lanes_t;
#endif

/* the running sums of rows [m, m + mr) x outputs [n, n + nr) over k in [k0, k1) (multiples of LANES):
 * acc holds each output's LANES lanes, (row, output) at acc[(row * NB + output) * LANES]; loaded,
 * carried through this range of k and stored back, so blocking k changes no arithmetic */
static inline __attribute__((always_inline)) void tile(const float *x, const uint16_t *w, float *acc, int64_t k0,
                                                       int64_t k1, int64_t k_len, int mr, int nr) {
#if defined(__AVX2__) && defined(__FMA__)
    __m256 a[MR][NR1];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            a[i][j] = _mm256_loadu_ps(acc + (i * NB + j) * LANES);
    for (int64_t k = k0; k < k1; k += LANES) {
        __m256 wv[NR1];
        for (int j = 0; j < nr; j++)
            wv[j] = load_widened(w + j * k_len + k);
        for (int i = 0; i < mr; i++) {
            __m256 xv = _mm256_loadu_ps(x + i * k_len + k);
            __asm__("" : "+x"(xv)); /* one load per row vector, not one folded into each of its NR FMAs */
            for (int j = 0; j < nr; j++)
                a[i][j] = _mm256_fmadd_ps(xv, wv[j], a[i][j]);
        }
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            _mm256_storeu_ps(acc + (i * NB + j) * LANES, a[i][j]);
#else
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float *lane = acc + (i * NB + j) * LANES;
            for (int64_t k = k0; k < k1; k += LANES)
                for (int l = 0; l < LANES; l++)
                    lane[l] = __builtin_fmaf(x[i * k_len + k + l], widen(w[j * k_len + k + l]), lane[l]);
        }
#endif
}

static inline float sum_lanes(const float *lane) {
#if defined(__AVX2__) && defined(__FMA__)
    return lane_sum(_mm256_loadu_ps(lane));
#else /* the AVX2 path's tree: halves, then pairs, then the last two */
    float h[4];
    for (int l = 0; l < 4; l++)
        h[l] = lane[l] + lane[l + 4];
    return (h[0] + h[2]) + (h[1] + h[3]);
#endif
}

/* rows [m, m + mr) against outputs [n0, n1) (at most NB): k block by k block (the rows' part of the
 * block stays in L1 while every output of the block passes over it), then each output's lanes
 * summed, the K % LANES tail, the bias and the rounding */
static void rows_by_block(const float *x, const uint16_t *w, const uint16_t *bias, uint16_t *y, float *acc, int mr,
                          int64_t n0, int64_t n1, int64_t k_len, int64_t n_out, int64_t kc) {
    const int64_t k_main = k_len - k_len % LANES;
    memset(acc, 0, sizeof(float) * MR * NB * LANES);
    for (int64_t k0 = 0; k0 < k_main; k0 += kc) {
        const int64_t k1 = k0 + kc < k_main ? k0 + kc : k_main;
        int64_t n = n0;
        if (mr == 1)
            for (; n + NR1 <= n1; n += NR1)
                tile(x, w + n * k_len, acc + (n - n0) * LANES, k0, k1, k_len, 1, NR1);
        for (; n + NR <= n1; n += NR) {
            const uint16_t *ws = w + n * k_len;
            float *as = acc + (n - n0) * LANES;
            switch (mr) {
            case 4: tile(x, ws, as, k0, k1, k_len, 4, NR); break;
            case 3: tile(x, ws, as, k0, k1, k_len, 3, NR); break;
            case 2: tile(x, ws, as, k0, k1, k_len, 2, NR); break;
            default: tile(x, ws, as, k0, k1, k_len, 1, NR); break;
            }
        }
        for (; n < n1; n++)
            for (int i = 0; i < mr; i++)
                tile(x + i * k_len, w + n * k_len, acc + (i * NB + n - n0) * LANES, k0, k1, k_len, 1, 1);
    }
    for (int i = 0; i < mr; i++)
        for (int64_t n = n0; n < n1; n++) {
            float s = sum_lanes(acc + (i * NB + n - n0) * LANES);
            for (int64_t k = k_main; k < k_len; k++)
                s = __builtin_fmaf(x[i * k_len + k], widen(w[n * k_len + k]), s);
            if (bias)
                s += widen(bias[n]);
            y[i * n_out + n] = narrow(s);
        }
}

/* y (rows, n_out) = x (rows, k_len) w^T (+ bias), all bfloat16; returns 0, or -1 when memory for
 * the widened rows could not be allocated */
int linear_bf16(const uint16_t *x, const uint16_t *w, const uint16_t *bias, uint16_t *y, int64_t rows,
                int64_t n_out, int64_t k_len) {
    float *x32 = malloc((size_t)(rows * k_len) * sizeof(float) + 64);
    if (!x32)
        return -1;
    for (int64_t i = 0; i < rows * k_len; i++)
        x32[i] = widen(x[i]);
    const int64_t blocks = (n_out + NB - 1) / NB;
    /* k in slices only when rows share them: a few rows read each weight once, and whole weight
     * rows are the streams the hardware prefetches well */
    const int64_t kc = rows > MR ? KC : (k_len > 0 ? k_len : LANES);
    int failed = 0;
    _Pragma("omp parallel if (rows * n_out * k_len >= (1 << 20)) reduction(|:failed)")
    {
        float *acc = malloc(sizeof(float) * MR * NB * LANES);
        if (!acc)
            failed = 1;
        /* a contiguous range of output blocks per thread; each block's weights (NB x K) stay in L2
         * while the rows pass over them, MR at a time */
        _Pragma("omp for schedule(static)")
        for (int64_t b = 0; b < blocks; b++) {
            if (!acc)
                continue;
            const int64_t n0 = b * NB, n1 = n0 + NB < n_out ? n0 + NB : n_out;
            for (int64_t m = 0; m < rows; m += MR) {
                const int mr = rows - m < MR ? (int)(rows - m) : MR;
                rows_by_block(x32 + m * k_len, w, bias, y + m * n_out, acc, mr, n0, n1, k_len, n_out, kc);
            }
        }
        free(acc);
    }
    free(x32);
    return failed ? -1 : 0;
}
