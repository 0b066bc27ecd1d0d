/* mm_scalar: portable matmul kernels for every weight type, one weight row
 * against one token at a time. This is the reference the SIMD paths are
 * tested against and the path every x86-64 (or other) CPU can run. Integer
 * dot products per block of 32 are exact; floats enter once per block. */
#include "cpu/mm_impl.h"

#include <math.h>

void mm_scalar_quant(const float *x, int64_t cols, int8_t *qs, float *d, int32_t *sum)
{
    for (int64_t b = 0; b < cols / 32; b++) {
        const float *xb = x + b * 32;
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(xb[i]));
        float db = amax / 127.0f, id = db != 0.0f ? 1.0f / db : 0.0f;
        int32_t s = 0;
        for (int i = 0; i < 32; i++) {
            /* lrintf rounds to nearest even, as the SIMD conversions do. */
            int q = (int)lrintf(xb[i] * id);
            qs[b * 32 + i] = (int8_t)q;
            s += q;
        }
        d[b] = db;
        sum[b] = s;
    }
}

/* Token j's quantized activations. */
struct xq_tok {
    const int8_t *qs;
    const float *d;
    const int32_t *sum;
};

static struct xq_tok xq_token(const struct mm_task *t, int64_t j)
{
    struct xq_tok q = { t->xq.qs + j * t->cols, t->xq.d + j * t->xq.nb,
                        t->xq.sum + j * t->xq.nb };
    return q;
}

static float dot_f32(const uint8_t *row, const struct mm_task *t, int64_t j)
{
    const float *x = t->x + j * t->cols;
    float s = 0.0f;
    for (int64_t i = 0; i < t->cols; i++) {
        float w;
        memcpy(&w, row + 4 * i, 4);
        s += w * x[i];
    }
    return s;
}

static float dot_f16(const uint8_t *row, const struct mm_task *t, int64_t j)
{
    const float *x = t->x + j * t->cols;
    float s = 0.0f;
    for (int64_t i = 0; i < t->cols; i++) s += mm_fp16_to_f32(mm_rd16(row + 2 * i)) * x[i];
    return s;
}

static float dot_bf16(const uint8_t *row, const struct mm_task *t, int64_t j)
{
    const float *x = t->x + j * t->cols;
    float s = 0.0f;
    for (int64_t i = 0; i < t->cols; i++) s += mm_bf16_to_f32(mm_rd16(row + 2 * i)) * x[i];
    return s;
}

static float dot_q8_0(const uint8_t *row, const struct mm_task *t, int64_t j)
{
    struct xq_tok x = xq_token(t, j);
    float s = 0.0f;
    for (int64_t b = 0; b < t->xq.nb; b++) {
        const block_q8_0 *w = (const block_q8_0 *)row + b;
        int32_t is = 0;
        for (int i = 0; i < 32; i++) is += w->qs[i] * x.qs[b * 32 + i];
        s += mm_fp16_to_f32(w->d) * x.d[b] * (float)is;
    }
    return s;
}

/* Q4_0 / Q4_1: element i < 16 is the low nibble of qs[i], i ≥ 16 the high
 * nibble of qs[i - 16]. */
static int32_t dot_nib32(const uint8_t *qs, const int8_t *xq)
{
    int32_t is = 0;
    for (int i = 0; i < 16; i++)
        is += (qs[i] & 0xF) * xq[i] + (qs[i] >> 4) * xq[i + 16];
    return is;
}

static float dot_q4_0(const uint8_t *row, const struct mm_task *t, int64_t j)
{
    struct xq_tok x = xq_token(t, j);
    float s = 0.0f;
    for (int64_t b = 0; b < t->xq.nb; b++) {
        const block_q4_0 *w = (const block_q4_0 *)row + b;
        int32_t is = dot_nib32(w->qs, x.qs + b * 32) - 8 * x.sum[b];
        s += mm_fp16_to_f32(w->d) * x.d[b] * (float)is;
    }
    return s;
}

static float dot_q4_1(const uint8_t *row, const struct mm_task *t, int64_t j)
{
    struct xq_tok x = xq_token(t, j);
    float s = 0.0f;
    for (int64_t b = 0; b < t->xq.nb; b++) {
        const block_q4_1 *w = (const block_q4_1 *)row + b;
        int32_t is = dot_nib32(w->qs, x.qs + b * 32);
        s += mm_fp16_to_f32(w->d) * x.d[b] * (float)is
           + mm_fp16_to_f32(w->m) * x.d[b] * (float)x.sum[b];
    }
    return s;
}

/* Q5_0 / Q5_1: the fifth bit of element i is bit i of the 32-bit qh. */
static int32_t dot_q5_32(const uint8_t *qs, const uint8_t qh_bytes[4], const int8_t *xq)
{
    uint32_t qh = (uint32_t)qh_bytes[0] | (uint32_t)qh_bytes[1] << 8 |
                  (uint32_t)qh_bytes[2] << 16 | (uint32_t)qh_bytes[3] << 24;
    int32_t is = 0;
    for (int i = 0; i < 16; i++) {
        int lo = (qs[i] & 0xF) | (int)((qh >> i) & 1) << 4;
        int hi = (qs[i] >> 4) | (int)((qh >> (i + 16)) & 1) << 4;
        is += lo * xq[i] + hi * xq[i + 16];
    }
    return is;
}

static float dot_q5_0(const uint8_t *row, const struct mm_task *t, int64_t j)
{
    struct xq_tok x = xq_token(t, j);
    float s = 0.0f;
    for (int64_t b = 0; b < t->xq.nb; b++) {
        const block_q5_0 *w = (const block_q5_0 *)row + b;
        int32_t is = dot_q5_32(w->qs, w->qh, x.qs + b * 32) - 16 * x.sum[b];
        s += mm_fp16_to_f32(w->d) * x.d[b] * (float)is;
    }
    return s;
}

static float dot_q5_1(const uint8_t *row, const struct mm_task *t, int64_t j)
{
    struct xq_tok x = xq_token(t, j);
    float s = 0.0f;
    for (int64_t b = 0; b < t->xq.nb; b++) {
        const block_q5_1 *w = (const block_q5_1 *)row + b;
        int32_t is = dot_q5_32(w->qs, w->qh, x.qs + b * 32);
        s += mm_fp16_to_f32(w->d) * x.d[b] * (float)is
           + mm_fp16_to_f32(w->m) * x.d[b] * (float)x.sum[b];
    }
    return s;
}

/* Q4_K: 8 sub-blocks of 32 (w = d·sc·q − dmin·m); sub-block 2c takes the low
 * nibbles of qs[32c .. 32c+31], sub-block 2c+1 the high nibbles. */
static float dot_q4_K(const uint8_t *row, const struct mm_task *t, int64_t j)
{
    struct xq_tok x = xq_token(t, j);
    float s = 0.0f;
    for (int64_t b = 0; b < t->cols / QK_K; b++) {
        const block_q4_K *w = (const block_q4_K *)row + b;
        float d = mm_fp16_to_f32(w->d), dmin = mm_fp16_to_f32(w->dmin);
        for (int sb = 0; sb < 8; sb++) {
            int sc, m;
            mm_k4_scale_min(sb, w->scales, &sc, &m);
            const uint8_t *q = w->qs + 32 * (sb / 2);
            int shift = (sb & 1) * 4;
            int64_t xb = b * 8 + sb;
            const int8_t *xq = x.qs + xb * 32;
            int32_t is = 0;
            for (int i = 0; i < 32; i++) is += ((q[i] >> shift) & 0xF) * xq[i];
            s += x.d[xb] * (d * (float)sc * (float)is - dmin * (float)m * (float)x.sum[xb]);
        }
    }
    return s;
}

/* Q5_K: as Q4_K plus a fifth bit: bit sb of qh[i] for element i of sub-block sb. */
static float dot_q5_K(const uint8_t *row, const struct mm_task *t, int64_t j)
{
    struct xq_tok x = xq_token(t, j);
    float s = 0.0f;
    for (int64_t b = 0; b < t->cols / QK_K; b++) {
        const block_q5_K *w = (const block_q5_K *)row + b;
        float d = mm_fp16_to_f32(w->d), dmin = mm_fp16_to_f32(w->dmin);
        for (int sb = 0; sb < 8; sb++) {
            int sc, m;
            mm_k4_scale_min(sb, w->scales, &sc, &m);
            const uint8_t *q = w->qs + 32 * (sb / 2);
            int shift = (sb & 1) * 4;
            int64_t xb = b * 8 + sb;
            const int8_t *xq = x.qs + xb * 32;
            int32_t is = 0;
            for (int i = 0; i < 32; i++) {
                int v = ((q[i] >> shift) & 0xF) | ((w->qh[i] >> sb) & 1) << 4;
                is += v * xq[i];
            }
            s += x.d[xb] * (d * (float)sc * (float)is - dmin * (float)m * (float)x.sum[xb]);
        }
    }
    return s;
}

/* Q6_K: 16 sub-blocks of 16 with int8 scales; q = (4 low bits | 2 high bits) − 32.
 * Per 128-element half h, element l + 32k (l < 32, k < 4) takes its low bits
 * from ql[64h + l + 32(k&1)] (nibble k/2) and its high bits from bits 2k of
 * qh[32h + l]. */
static float dot_q6_K(const uint8_t *row, const struct mm_task *t, int64_t j)
{
    struct xq_tok x = xq_token(t, j);
    float s = 0.0f;
    for (int64_t b = 0; b < t->cols / QK_K; b++) {
        const block_q6_K *w = (const block_q6_K *)row + b;
        float d = mm_fp16_to_f32(w->d);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w->ql + 64 * h, *qh = w->qh + 32 * h;
            for (int k = 0; k < 4; k++) {
                int64_t xb = b * 8 + h * 4 + k;   /* activation block of 32 */
                const int8_t *xq = x.qs + xb * 32;
                int32_t is[2] = { 0, 0 };
                for (int l = 0; l < 32; l++) {
                    int lo = (ql[l + 32 * (k & 1)] >> (4 * (k >> 1))) & 0xF;
                    int hi = (qh[l] >> (2 * k)) & 3;
                    is[l / 16] += ((lo | hi << 4) - 32) * xq[l];
                }
                const int8_t *sc = w->scales + 8 * h + 2 * k;
                s += d * x.d[xb] * (float)(sc[0] * is[0] + sc[1] * is[1]);
            }
        }
    }
    return s;
}

/* Bounded by scalar integer multiply-adds: about one element per cycle. */
#define SCALAR_KERNEL(name, dot)                                              \
    static void name(const struct mm_task *t, int64_t r0, int64_t r1)        \
    {                                                                         \
        for (int64_t r = r0; r < r1; r++) {                                   \
            const uint8_t *row = t->w + (size_t)r * t->row_bytes;             \
            for (int64_t j = 0; j < t->n; j++) t->y[j * t->rows + r] = dot(row, t, j); \
        }                                                                     \
    }

SCALAR_KERNEL(k_f32, dot_f32)
SCALAR_KERNEL(k_f16, dot_f16)
SCALAR_KERNEL(k_bf16, dot_bf16)
SCALAR_KERNEL(k_q8_0, dot_q8_0)
SCALAR_KERNEL(k_q4_0, dot_q4_0)
SCALAR_KERNEL(k_q4_1, dot_q4_1)
SCALAR_KERNEL(k_q5_0, dot_q5_0)
SCALAR_KERNEL(k_q5_1, dot_q5_1)
SCALAR_KERNEL(k_q4_K, dot_q4_K)
SCALAR_KERNEL(k_q5_K, dot_q5_K)
SCALAR_KERNEL(k_q6_K, dot_q6_K)

mm_kernel_fn mm_scalar_kernel(uint32_t wtype)
{
    switch (wtype) {
    case QT_F32: return k_f32;
    case QT_F16: return k_f16;
    case QT_BF16: return k_bf16;
    case QT_Q8_0: return k_q8_0;
    case QT_Q4_0: return k_q4_0;
    case QT_Q4_1: return k_q4_1;
    case QT_Q5_0: return k_q5_0;
    case QT_Q5_1: return k_q5_1;
    case QT_Q4_K: return k_q4_K;
    case QT_Q5_K: return k_q5_K;
    case QT_Q6_K: return k_q6_K;
    default: return NULL;
    }
}
