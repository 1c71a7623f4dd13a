/* Decode attention that reads the paged KV pool in place (CPU; a float32 or bfloat16 pool).
 *
 * One query token per row: row r's heads attend to the first lengths[r] tokens of its sequence,
 * token t sitting at slot t % block_size of block tables[r][t / block_size] in the pool. The
 * gather the engine does otherwise copies every row's blocks (padded to the widest table) before
 * SDPA; here each row reads only its own tokens, block by block, every query head at each token
 * while its keys are in cache (grouped-query attention: head h uses kv head h / groups, as
 * Hugging Face's repeat_interleave does).
 *
 * Queries, scores, softmax and outputs are float32 (SDPA's CPU kernels accumulate in float32 for
 * bfloat16 too); a bfloat16 pool's keys and values are widened as they are read (a bfloat16 is
 * the top half of a float32). Softmax in two passes over the row's scores (max, then exp and
 * sum). Rows are shared among OpenMP threads: loaded into a process that has imported torch, the
 * library binds to torch's own libgomp (the same soname), so it runs on torch's thread pool with
 * torch.get_num_threads() threads, and one thread runs it serially. Built and loaded by native.py
 * (ctypes); no Python or torch headers, so it compiles in well under a second.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline float widen_f32(float x) { return x; }

static inline float widen_bf16(uint16_t x) {
    const uint32_t bits = (uint32_t)x << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* attend_row_<name>: one row, its query heads qr (heads, dim) over its first n tokens into orow;
 * scores: heads * n floats. paged_decode_attention_<name>: every row (see below). */
#define PAGED_DECODE(NAME, T, WIDEN)                                                                      \
static void attend_row_##NAME(const float *qr, const T *keys, const T *values, const int64_t *table,        \
                              int64_t n, float *orow, float *scores, int64_t heads, int64_t groups,        \
                              int64_t dim, int64_t block_size, int64_t token_stride, int64_t block_stride, \
                              float scale) {                                                               \
    for (int64_t start = 0, b = 0; start < n; start += block_size, b++) {                                  \
        const int64_t end = start + block_size < n ? start + block_size : n;                               \
        const T *kt = keys + table[b] * block_stride;                                                      \
        for (int64_t t = start; t < end; t++, kt += token_stride) {                                        \
            for (int64_t h = 0; h < heads; h++) {                                                          \
                const T *k = kt + (h / groups) * dim;                                                      \
                const float *qh = qr + h * dim;                                                            \
                float dot = 0.f;                                                                           \
                _Pragma("omp simd reduction(+:dot)")                                                       \
                for (int64_t d = 0; d < dim; d++) dot += qh[d] * WIDEN(k[d]);                              \
                scores[h * n + t] = dot * scale;                                                           \
            }                                                                                              \
        }                                                                                                  \
    }                                                                                                      \
    for (int64_t h = 0; h < heads; h++) {                                                                  \
        float *s = scores + h * n;                                                                         \
        float top = -INFINITY, sum = 0.f;                                                                  \
        for (int64_t t = 0; t < n; t++) top = s[t] > top ? s[t] : top;                                     \
        for (int64_t t = 0; t < n; t++) {                                                                  \
            s[t] = expf(s[t] - top);                                                                       \
            sum += s[t];                                                                                   \
        }                                                                                                  \
        const float inv = 1.f / sum;                                                                       \
        for (int64_t t = 0; t < n; t++) s[t] *= inv;                                                       \
    }                                                                                                      \
    memset(orow, 0, sizeof(float) * (size_t)(heads * dim));                                                \
    for (int64_t start = 0, b = 0; start < n; start += block_size, b++) {                                  \
        const int64_t end = start + block_size < n ? start + block_size : n;                               \
        const T *vt = values + table[b] * block_stride;                                                    \
        for (int64_t t = start; t < end; t++, vt += token_stride) {                                        \
            for (int64_t h = 0; h < heads; h++) {                                                          \
                const float p = scores[h * n + t];                                                         \
                const T *v = vt + (h / groups) * dim;                                                      \
                float *oh = orow + h * dim;                                                                \
                _Pragma("omp simd")                                                                        \
                for (int64_t d = 0; d < dim; d++) oh[d] += p * WIDEN(v[d]);                                \
            }                                                                                              \
        }                                                                                                  \
    }                                                                                                      \
}                                                                                                          \
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
        float *scores = malloc(sizeof(float) * (size_t)(heads * longest));                                 \
        if (scores == NULL) failed = 1;                                                                    \
        _Pragma("omp for schedule(dynamic, 2)")                                                            \
        for (int64_t r = 0; r < rows; r++) {                                                               \
            if (scores != NULL)                                                                            \
                attend_row_##NAME(q + r * heads * dim, keys, values, tables + r * width, lengths[r],       \
                                  out + r * heads * dim, scores, heads, groups, dim, block_size,           \
                                  token_stride, block_stride, scale);                                      \
        }                                                                                                  \
        free(scores);                                                                                      \
    }                                                                                                      \
    return failed ? -1 : 0;                                                                                \
}

/* q: (rows, heads, dim) float32; keys, values: (blocks, block_size, kv_heads, dim) of the pool's
 * dtype; tables: (rows, width) block ids; lengths: (rows,), each at least 1; out: (rows, heads,
 * dim) float32. All contiguous. Return 0, or -1 when a thread's scores buffer cannot be allocated. */
PAGED_DECODE(f32, float, widen_f32)
PAGED_DECODE(bf16, uint16_t, widen_bf16)
