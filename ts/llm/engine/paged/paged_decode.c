/* Decode attention that reads the paged KV pool in place (CPU; a float32 or bfloat16 pool).
 *
 * One query token per row: row r's heads attend to the first lengths[r] tokens of its sequence,
 * token t sitting at slot t % block_size of block tables[r][t / block_size] in the pool. The
 * gather the engine does otherwise copies every row's blocks (padded to the widest table) before
 * SDPA; here each row reads only its own tokens, block by block (grouped-query attention: head h
 * uses kv head h / groups, as Hugging Face's repeat_interleave does).
 *
 * Queries, scores, softmax and outputs are float32 (SDPA's CPU kernels accumulate in float32 for
 * bfloat16 too); a bfloat16 pool's keys and values are widened as they are read (a bfloat16 is
 * the top half of a float32). Softmax in two passes over a head's scores (max, then exp and sum;
 * the weighted values are divided by the sum once, at the end). The kernel is bound by reading
 * the pool: a 32-row step reads megabytes of keys and values, more than a core's L2 holds. A
 * head's keys and values are read four tokens at a time; the heads of one kv head read it again
 * from L1 (a row's tokens of one kv head are a few tens of kilobytes).
 *
 * Rows are shared among OpenMP threads: loaded into a process that has imported torch, the
 * library binds to torch's own libgomp (the same soname), so it runs on torch's thread pool with
 * torch.get_num_threads() threads, and one thread runs it serially. Built and loaded by native.py
 * (ctypes); no Python or torch headers, so it compiles in well under a second.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

static inline float widen_f32(float x) { return x; }

static inline float widen_bf16(uint16_t x) {
    const uint32_t bits = (uint32_t)x << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* exp(x) for x <= 0 (a score minus its row's largest), in plain arithmetic the compiler vectorizes
 * (libm's expf is a call per score, about a fifth of the kernel's time, and -ffast-math's vector
 * exp is refused: it turns on flush-to-zero for the whole process). 2^(x log2 e) = 2^k 2^f with k
 * the nearest integer (rounded by adding 1.5 * 2^23, whose low bits then hold k) and |f| <= 1/2;
 * e^(f ln 2) by its Taylor series to the 6th power: relative error below 2e-7, about libm's.
 * Below 2^-126 the result is exactly 0 (no subnormals: a weight below 2^-126 is negligible beside
 * the row's 1). */
static inline float exp_nonpositive(float x) {
    const float shifter = 12582912.f;
    float t = x * 1.44269504088896341f;
    t = t < -126.f ? -126.f : t;
    const float r = t + shifter;
    const float g = (t - (r - shifter)) * 0.693147180559945309f;
    const float p = 1.f + g * (1.f + g * (0.5f + g * (1.f / 6 + g * (1.f / 24 + g * (1.f / 120 + g * (1.f / 720))))));
    int32_t k;
    memcpy(&k, &r, sizeof k);
    const int32_t bits = (k - 0x4B400000 + 127) * (1 << 23);
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x * 1.44269504088896341f < -126.f ? 0.f : p * scale;
}

/* Flush-to-zero and denormals-are-zero on this thread while the kernel runs (x86's MXCSR; restored
 * after): a weight just above 2^-126 times a small value is a subnormal product, and each costs a
 * microcode assist (~100 cycles) on Intel cores -- peaked attention, whose weights are mostly tiny,
 * ran ~8x slower than flat attention without it on an AVX-512 Xeon (issue 42; an AVX2 EPYC showed
 * no penalty either way, benchmarks/decode_attention.py). Set per OpenMP thread, never left on
 * for the process. */
#if defined(__SSE2__)
#define FTZ_DAZ 0x8040u
typedef unsigned int fp_mode;
static inline fp_mode fast_fp_begin(void) {
    const fp_mode saved = _mm_getcsr();
    _mm_setcsr(saved | FTZ_DAZ);
    return saved;
}
static inline void fast_fp_end(fp_mode saved) { _mm_setcsr(saved); }
#else
typedef int fp_mode;
static inline fp_mode fast_fp_begin(void) { return 0; }
static inline void fast_fp_end(fp_mode saved) { (void)saved; }
#endif

/* attend_row_<name>_d<D>: attend_row_<name> with dim the constant D */
#define ROW_WITH_DIM(NAME, T, D)                                                                          \
static void attend_row_##NAME##_d##D(const float *qr, const T *keys, const T *values, const int64_t *table, \
                                     int64_t n, float *orow, float *scores, int64_t heads, int64_t groups, \
                                     int64_t block_size, int64_t token_stride, int64_t block_stride,       \
                                     float scale) {                                                        \
    attend_row_##NAME(qr, keys, values, table, n, orow, scores, heads, groups, D, block_size, token_stride, \
                      block_stride, scale);                                                                \
}

/* attend_row_<name>: one row, its query heads qr (heads, dim) over its first n tokens into orow;
 * scores: heads * n floats. Keys and values are taken four tokens at a time: four dot products
 * (or four weighted values) in one pass over dim keep four independent sums in flight, where one
 * at a time waits on each multiply-add's latency. attend_row_<name>_d<D> is the same with dim a
 * constant (64 and 128, the usual head sizes), so the compiler unrolls dim into registers.
 * paged_decode_attention_<name>: every row (see below). */
#define PAGED_DECODE(NAME, T, WIDEN)                                                                      \
static inline __attribute__((always_inline)) void                                                           \
attend_row_##NAME(const float *qr, const T *keys, const T *values, const int64_t *table, int64_t n,         \
                  float *orow, float *scores, int64_t heads, int64_t groups, int64_t dim,                  \
                  int64_t block_size, int64_t token_stride, int64_t block_stride, float scale) {           \
    for (int64_t h = 0; h < heads; h++) {                                                                  \
        const float *qh = qr + h * dim;                                                                    \
        float *s = scores + h * n;                                                                         \
        for (int64_t start = 0, b = 0; start < n; start += block_size, b++) {                              \
            const int64_t end = start + block_size < n ? start + block_size : n;                           \
            const T *k0 = keys + table[b] * block_stride + (h / groups) * dim;                             \
            int64_t t = start;                                                                             \
            for (; t + 4 <= end; t += 4, k0 += 4 * token_stride) {                                         \
                const T *k1 = k0 + token_stride, *k2 = k1 + token_stride, *k3 = k2 + token_stride;         \
                float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;                                              \
                _Pragma("omp simd reduction(+:d0, d1, d2, d3)")                                            \
                for (int64_t d = 0; d < dim; d++) {                                                        \
                    d0 += qh[d] * WIDEN(k0[d]);                                                            \
                    d1 += qh[d] * WIDEN(k1[d]);                                                            \
                    d2 += qh[d] * WIDEN(k2[d]);                                                            \
                    d3 += qh[d] * WIDEN(k3[d]);                                                            \
                }                                                                                          \
                s[t] = d0 * scale, s[t + 1] = d1 * scale, s[t + 2] = d2 * scale, s[t + 3] = d3 * scale;    \
            }                                                                                              \
            for (; t < end; t++, k0 += token_stride) {                                                     \
                float dot = 0.f;                                                                           \
                _Pragma("omp simd reduction(+:dot)")                                                       \
                for (int64_t d = 0; d < dim; d++) dot += qh[d] * WIDEN(k0[d]);                             \
                s[t] = dot * scale;                                                                        \
            }                                                                                              \
        }                                                                                                  \
        float top = -INFINITY, sum = 0.f;                                                                  \
        for (int64_t t = 0; t < n; t++) top = s[t] > top ? s[t] : top;                                     \
        _Pragma("omp simd reduction(+:sum)")                                                               \
        for (int64_t t = 0; t < n; t++) {                                                                  \
            s[t] = exp_nonpositive(s[t] - top);                                                            \
            sum += s[t];                                                                                   \
        }                                                                                                  \
        const float inv = 1.f / sum;                                                                       \
        float *oh = orow + h * dim;                                                                        \
        memset(oh, 0, sizeof(float) * (size_t)dim);                                                        \
        for (int64_t start = 0, b = 0; start < n; start += block_size, b++) {                              \
            const int64_t end = start + block_size < n ? start + block_size : n;                           \
            const T *v0 = values + table[b] * block_stride + (h / groups) * dim;                           \
            int64_t t = start;                                                                             \
            for (; t + 4 <= end; t += 4, v0 += 4 * token_stride) {                                         \
                const T *v1 = v0 + token_stride, *v2 = v1 + token_stride, *v3 = v2 + token_stride;         \
                const float p0 = s[t], p1 = s[t + 1], p2 = s[t + 2], p3 = s[t + 3];                        \
                _Pragma("omp simd")                                                                        \
                for (int64_t d = 0; d < dim; d++)                                                          \
                    oh[d] += p0 * WIDEN(v0[d]) + p1 * WIDEN(v1[d]) + p2 * WIDEN(v2[d]) + p3 * WIDEN(v3[d]); \
            }                                                                                              \
            for (; t < end; t++, v0 += token_stride) {                                                     \
                const float p = s[t];                                                                      \
                _Pragma("omp simd")                                                                        \
                for (int64_t d = 0; d < dim; d++) oh[d] += p * WIDEN(v0[d]);                               \
            }                                                                                              \
        }                                                                                                  \
        _Pragma("omp simd")                                                                                \
        for (int64_t d = 0; d < dim; d++) oh[d] *= inv;                                                    \
    }                                                                                                      \
}                                                                                                          \
                                                                                                           \
ROW_WITH_DIM(NAME, T, 64)                                                                                  \
ROW_WITH_DIM(NAME, T, 128)                                                                                 \
                                                                                                           \
int paged_decode_attention_##NAME(const float *q, const T *keys, const T *values, const int64_t *tables,   \
                                  const int64_t *lengths, float *out, int64_t rows, int64_t heads,         \
                                  int64_t kv_heads, int64_t dim, int64_t block_size, int64_t width,        \
                                  float scale) {                                                           \
    const int64_t groups = heads / kv_heads;                                                               \
    const int64_t token_stride = kv_heads * dim, block_stride = block_size * token_stride;                 \
    int64_t longest = 1;                                                                                   \
    for (int64_t r = 0; r < rows; r++)                                                                     \
        if (lengths[r] > longest) longest = lengths[r];                                                    \
    int failed = 0;                                                                                        \
    /* a thread's hand-off costs about a few rows' work: small batches stay on one thread */               \
    _Pragma("omp parallel if (rows >= 8) reduction(|:failed)")                                             \
    {                                                                                                      \
        const fp_mode saved = fast_fp_begin();                                                             \
        float *scores = malloc(sizeof(float) * (size_t)(heads * longest));                                 \
        if (scores == NULL) failed = 1;                                                                    \
        _Pragma("omp for schedule(dynamic, 2)")                                                            \
        for (int64_t r = 0; r < rows; r++) {                                                               \
            if (scores == NULL)                                                                            \
                continue;                                                                                  \
            const float *qr = q + r * heads * dim;                                                         \
            const int64_t *table = tables + r * width;                                                     \
            float *orow = out + r * heads * dim;                                                           \
            if (dim == 64)                                                                                 \
                attend_row_##NAME##_d64(qr, keys, values, table, lengths[r], orow, scores, heads, groups,  \
                                        block_size, token_stride, block_stride, scale);                    \
            else if (dim == 128)                                                                           \
                attend_row_##NAME##_d128(qr, keys, values, table, lengths[r], orow, scores, heads, groups, \
                                         block_size, token_stride, block_stride, scale);                   \
            else                                                                                           \
                attend_row_##NAME(qr, keys, values, table, lengths[r], orow, scores, heads, groups, dim,   \
                                  block_size, token_stride, block_stride, scale);                          \
        }                                                                                                  \
        free(scores);                                                                                      \
        fast_fp_end(saved);                                                                                \
    }                                                                                                      \
    return failed ? -1 : 0;                                                                                \
}

/* q: (rows, heads, dim) float32; keys, values: (blocks, block_size, kv_heads, dim) of the pool's
 * dtype; tables: (rows, width) block ids; lengths: (rows,), each at least 1; out: (rows, heads,
 * dim) float32. All contiguous. Return 0, or -1 when a thread's scores buffer cannot be allocated. */
PAGED_DECODE(f32, float, widen_f32)
PAGED_DECODE(bf16, uint16_t, widen_bf16)
