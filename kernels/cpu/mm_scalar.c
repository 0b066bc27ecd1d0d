/* mm_scalar: portable matmul kernels for every weight type, one weight row
 * at a time: a piece of the row is unpacked to small integers once, then
 * dotted with every token. This is the reference the SIMD paths are tested
 * against and the path every CPU can run (force_scalar). Integer dot
 * products per block of 32 are exact; floats enter once per block. */
#include "cpu/mm_impl.h"

#include <math.h>
#include <string.h>

/* Q8_0-style activations per 32 columns, as the reference's portable
 * quantize_row_q8_0_ref: x scaled by 1/d of the unrounded d = max/127; the
 * stored d rounded to f16 as its Q8_0 blocks hold it, or kept in f32 (for
 * Q4_1/Q5_1, whose Q8_1 partner cannot be matched; docs/CORRECTNESS.md). The
 * SIMD paths follow its x86 code instead (x scaled by 127/max, a last-ulp
 * difference). */
/* Round to nearest, ties to even, for |v| < 2^22 (here |v| <= 127.5): adding
 * 1.5 * 2^23 leaves the rounded integer in the low mantissa bits, as the
 * reference's nearest_int does. */
static inline int round_half_even(float v)
{
    const float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static void quant32(const float *x, int64_t cols, int8_t *qs, float *d, int32_t *sum,
                    bool f16_d)
{
    for (int64_t b = 0; b < cols / 32; b++) {
        const float *xb = x + b * 32;
        float amax = 0.0f;
        /* a compare, not fmaxf: the same value (a NaN is skipped either
         * way), but it vectorizes, where a libm call per element does not
         * (it showed in the Q4_1 prefill profile) */
        for (int i = 0; i < 32; i++) amax = fabsf(xb[i]) > amax ? fabsf(xb[i]) : amax;
        const float d32 = amax / 127.0f, id = d32 != 0.0f ? 1.0f / d32 : 0.0f;
        int32_t s = 0;
        for (int i = 0; i < 32; i++) {
            /* nearest, ties to even, as lrintf and the SIMD conversions
             * round (a library lrintf call per element showed in the Q4_1
             * decode profile; this one vectorizes) */
            int q = round_half_even(xb[i] * id);
            qs[b * 32 + i] = (int8_t)q;
            s += q;
        }
        d[b] = f16_d ? mm_fp16_to_f32(f32_to_fp16(d32)) : d32;
        sum[b] = s;
    }
}

void mm_scalar_quant(const float *x, int64_t cols, int8_t *qs, float *d, int32_t *sum)
{
    quant32(x, cols, qs, d, sum, true);
}

void mm_q8_f32d_quant(const float *x, int64_t cols, int8_t *qs, float *d, int32_t *sum)
{
    quant32(x, cols, qs, d, sum, false);
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

/* ---- block-quantized types: unpack a piece of a weight row once, then
 * dot it with every token. Plain int8 loops the compiler vectorizes even
 * for baseline x86-64; bounded by those integer multiply-adds. ---- */

#define PIECE_BLOCKS 64   /* blocks of 32 unpacked at a time (2 KiB of quants) */

/* Block b (32 elements) of the piece: q[32] as small integers, with
 *   w_i = dsc·q_i + msc        (Q4_0 .. Q5_K), or
 *   w_i = dsc·sc16[h]·q_i      (Q6_K, h = i / 16). */
struct piece {
    int8_t q[PIECE_BLOCKS * 32];
    float dsc[PIECE_BLOCKS], msc[PIECE_BLOCKS];
    int8_t sc16[PIECE_BLOCKS * 2];
};

static void unpack_nib(const uint8_t *qs, int8_t *q, int off)
{
    for (int i = 0; i < 16; i++) {
        q[i] = (int8_t)((qs[i] & 0xF) - off);
        q[i + 16] = (int8_t)((qs[i] >> 4) - off);
    }
}

static void unpack_q5(const uint8_t *qs, const uint8_t qhb[4], int8_t *q, int off)
{
    uint32_t qh = (uint32_t)qhb[0] | (uint32_t)qhb[1] << 8 | (uint32_t)qhb[2] << 16 |
                  (uint32_t)qhb[3] << 24;
    for (int i = 0; i < 16; i++) {
        q[i] = (int8_t)(((qs[i] & 0xF) | (int)((qh >> i) & 1) << 4) - off);
        q[i + 16] = (int8_t)(((qs[i] >> 4) | (int)((qh >> (i + 16)) & 1) << 4) - off);
    }
}

/* Unpacks blocks [b0, b0 + nbk) of a row into p. */
static void unpack_piece(uint32_t wtype, const uint8_t *row, int64_t b0, int nbk, struct piece *p)
{
    for (int k = 0; k < nbk; k++) {
        int64_t b = b0 + k;
        int8_t *q = p->q + 32 * k;
        p->msc[k] = 0.0f;
        switch (wtype) {
        case QT_Q8_0: {
            const block_q8_0 *w = (const block_q8_0 *)row + b;
            memcpy(q, w->qs, 32);
            p->dsc[k] = mm_fp16_to_f32(w->d);
            break;
        }
        case QT_Q4_0: {
            const block_q4_0 *w = (const block_q4_0 *)row + b;
            unpack_nib(w->qs, q, 8);
            p->dsc[k] = mm_fp16_to_f32(w->d);
            break;
        }
        case QT_Q4_1: {
            const block_q4_1 *w = (const block_q4_1 *)row + b;
            unpack_nib(w->qs, q, 0);
            p->dsc[k] = mm_fp16_to_f32(w->d);
            p->msc[k] = mm_fp16_to_f32(w->m);
            break;
        }
        case QT_Q5_0: {
            const block_q5_0 *w = (const block_q5_0 *)row + b;
            unpack_q5(w->qs, w->qh, q, 16);
            p->dsc[k] = mm_fp16_to_f32(w->d);
            break;
        }
        case QT_Q5_1: {
            const block_q5_1 *w = (const block_q5_1 *)row + b;
            unpack_q5(w->qs, w->qh, q, 0);
            p->dsc[k] = mm_fp16_to_f32(w->d);
            p->msc[k] = mm_fp16_to_f32(w->m);
            break;
        }
        case QT_Q4_K: case QT_Q5_K: {
            /* sub-block sb of super-block b/8: 2c takes the low nibbles of
             * qs[32c ..], 2c+1 the high ones; Q5_K's fifth bit is bit sb of qh[i] */
            int sb = (int)(b & 7), sc, m;
            const uint8_t *scales, *qs, *qh = NULL;
            float d, dmin;
            if (wtype == QT_Q4_K) {
                const block_q4_K *w = (const block_q4_K *)row + b / 8;
                scales = w->scales; qs = w->qs; d = mm_fp16_to_f32(w->d); dmin = mm_fp16_to_f32(w->dmin);
            } else {
                const block_q5_K *w = (const block_q5_K *)row + b / 8;
                scales = w->scales; qs = w->qs; qh = w->qh;
                d = mm_fp16_to_f32(w->d); dmin = mm_fp16_to_f32(w->dmin);
            }
            mm_k4_scale_min(sb, scales, &sc, &m);
            const uint8_t *qq = qs + 32 * (sb / 2);
            int shift = (sb & 1) * 4;
            for (int i = 0; i < 32; i++) {
                int v = (qq[i] >> shift) & 0xF;
                if (qh) v |= ((qh[i] >> sb) & 1) << 4;
                q[i] = (int8_t)v;
            }
            p->dsc[k] = d * (float)sc;
            p->msc[k] = -dmin * (float)m;
            break;
        }
        case QT_Q6_K: {
            /* block k32 of a super-block: half h, quarter c; element l takes
             * its low bits from ql[64h + l + 32(c&1)] (nibble c/2) and its
             * high bits from bits 2c of qh[32h + l] */
            const block_q6_K *w = (const block_q6_K *)row + b / 8;
            int k32 = (int)(b & 7), h = k32 >> 2, c = k32 & 3;
            const uint8_t *ql = w->ql + 64 * h + 32 * (c & 1), *qh = w->qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                int lo = (ql[l] >> (4 * (c >> 1))) & 0xF, hi = (qh[l] >> (2 * c)) & 3;
                q[l] = (int8_t)((lo | hi << 4) - 32);
            }
            p->dsc[k] = mm_fp16_to_f32(w->d);
            p->sc16[2 * k] = w->scales[8 * h + 2 * c];
            p->sc16[2 * k + 1] = w->scales[8 * h + 2 * c + 1];
            break;
        }
        default:
            break;
        }
    }
}

static int32_t dot16_i8(const int8_t *a, const int8_t *b)
{
    int32_t s = 0;
    for (int i = 0; i < 16; i++) s += a[i] * b[i];
    return s;
}

static void k_quant(const struct mm_task *t, int64_t r0, int64_t r1)
{
    struct piece p;
    const int64_t nb = t->xq.nb;
    const bool q6 = t->wtype == QT_Q6_K;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = t->w + (size_t)r * t->row_bytes;
        for (int64_t j = 0; j < t->n; j++) t->y[j * t->rows + r] = 0.0f;
        for (int64_t b0 = 0; b0 < nb; b0 += PIECE_BLOCKS) {
            int nbk = nb - b0 < PIECE_BLOCKS ? (int)(nb - b0) : PIECE_BLOCKS;
            unpack_piece(t->wtype, row, b0, nbk, &p);
            for (int64_t j = 0; j < t->n; j++) {
                struct xq_tok x = xq_token(t, j);
                float s = 0.0f;
                for (int k = 0; k < nbk; k++) {
                    const int8_t *xb = x.qs + (b0 + k) * 32, *q = p.q + 32 * k;
                    int32_t lo = dot16_i8(q, xb), hi = dot16_i8(q + 16, xb + 16);
                    int32_t is = q6 ? p.sc16[2 * k] * lo + p.sc16[2 * k + 1] * hi : lo + hi;
                    s += x.d[b0 + k] * (p.dsc[k] * (float)is + p.msc[k] * (float)x.sum[b0 + k]);
                }
                t->y[j * t->rows + r] += s;
            }
        }
    }
}

/* Float weights: bounded by scalar multiply-adds, one element per cycle. */
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

mm_kernel_fn mm_scalar_kernel(uint32_t wtype)
{
    switch (wtype) {
    case QT_F32: return k_f32;
    case QT_F16: return k_f16;
    case QT_BF16: return k_bf16;
    case QT_Q8_0: case QT_Q4_0: case QT_Q4_1: case QT_Q5_0: case QT_Q5_1:
    case QT_Q4_K: case QT_Q5_K: case QT_Q6_K: return k_quant;
    default: return mm_lowbit_kernel(wtype);
    }
}
