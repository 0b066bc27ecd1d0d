/* mm_lowbit: matmul kernels for Q2_K, Q3_K, IQ4_NL and IQ4_XS weights with
 * 8-bit activations (struct mm_xq: blocks of 32, f32 scale). Portable C, used
 * on every ISA and the reference of the SIMD forms (mm_lowbit_simd.inc,
 * which give its bits): each row's super-block is expanded once to int8
 * quants with an integer scale and min per 16 columns, then dotted with
 * every token in integers, so a prefill batch pays the expansion once per
 * row. The weight value is d · s_g · q − dmin · m_g, as the reference's
 * dequantization defines it. */
#include "mm_impl.h"

#include <math.h>

/* The reference's Q8_K activations (quantize_row_q8_K_ref, also its x86
 * path): one scale per 256 columns, iscale = -127 / x_max with x_max the
 * signed element of largest magnitude, q = min(127, nearest(iscale · x)),
 * d = 1 / iscale (negative when x_max > 0). Stored in struct mm_xq's blocks
 * of 32, each of the 8 carrying the same d, so every K-quant kernel reads it
 * unchanged. Activations quantized per 32 instead are finer, but differ from
 * the reference's by more than its own flash-attention rounding: measured
 * in docs/CORRECTNESS.md. Bit-identical on every ISA (portable only). */
static int q8k_nearest(float f)   /* the reference's nearest_int: ties to even */
{
    float v = f + 12582912.f;
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}

void mm_q8k_quant(const float *x, int64_t cols, int8_t *qs, float *d, int32_t *sum)
{
    for (int64_t sb = 0; sb < cols / QK_K; sb++) {
        const float *xb = x + sb * QK_K;
        float amax = 0.0f, max = 0.0f;
        for (int i = 0; i < QK_K; i++) {
            const float ax = fabsf(xb[i]);
            if (ax > amax) {
                amax = ax;
                max = xb[i];
            }
        }
        const float iscale = amax != 0.0f ? -127.f / max : 0.0f;
        for (int b = 0; b < QK_K / 32; b++) {
            int32_t s = 0;
            for (int i = 0; i < 32; i++) {
                int v = q8k_nearest(iscale * xb[32 * b + i]);
                v = v < 127 ? v : 127;
                qs[sb * QK_K + 32 * b + i] = (int8_t)v;
                s += v;
            }
            d[sb * 8 + b] = amax != 0.0f ? 1 / iscale : 0.0f;
            sum[sb * 8 + b] = s;
        }
    }
}

/* One super-block of weights: L columns (256, or 32 for IQ4_NL) as int8
 * quants with an integer scale and min per 16 columns and the block's f16
 * factors d, dmin. */
struct lb_block {
    int8_t q[QK_K];
    int32_t s[QK_K / 16], m[QK_K / 16];
    float d, dmin;
};

static void expand_q2_K(const block_q2_K *x, struct lb_block *b)
{
    b->d = mm_fp16_to_f32(x->d);
    b->dmin = mm_fp16_to_f32(x->dmin);
    for (int is = 0; is < 16; is++) {   /* 16 columns each; see deq_q2_K */
        const int n2 = is / 8, s = (is % 8) / 2, h = is % 2;
        const uint8_t sc = x->scales[is];
        b->s[is] = sc & 0xF;
        b->m[is] = sc >> 4;
        for (int l = 0; l < 16; l++) b->q[16 * is + l] = (int8_t)((x->qs[n2 * 32 + 16 * h + l] >> (2 * s)) & 3);
    }
}

static void expand_q3_K(const block_q3_K *x, struct lb_block *b)
{
    const uint8_t *a = x->scales;
    b->d = mm_fp16_to_f32(x->d);
    b->dmin = 0.0f;
    for (int is = 0; is < 16; is++) {
        /* 6-bit scale: low 4 bits from byte is % 8 (nibble is / 8), high 2 from 8 + is % 4 */
        const int lo = (a[is % 8] >> (4 * (is / 8))) & 0xF;
        const int hi = (a[8 + is % 4] >> (2 * (is / 4))) & 3;
        const int n2 = is / 8, s = (is % 8) / 2, h = is % 2;
        b->s[is] = (lo | hi << 4) - 32;
        b->m[is] = 0;
        const uint8_t bit = (uint8_t)(1u << (n2 * 4 + s));
        for (int l = 0; l < 16; l++) {
            const int q = (x->qs[n2 * 32 + 16 * h + l] >> (2 * s)) & 3;
            b->q[16 * is + l] = (int8_t)(q - ((x->hmask[16 * h + l] & bit) ? 0 : 4));
        }
    }
}

static void expand_iq4_xs(const block_iq4_xs *x, struct lb_block *b)
{
    b->d = mm_fp16_to_f32(x->d);
    b->dmin = 0.0f;
    for (int ib = 0; ib < QK_K / 32; ib++) {
        const int ls = ((x->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
                       (((x->scales_h >> 2 * ib) & 3) << 4);
        b->s[2 * ib] = b->s[2 * ib + 1] = ls - 32;
        b->m[2 * ib] = b->m[2 * ib + 1] = 0;
        for (int j = 0; j < 16; j++) {
            b->q[32 * ib + j] = qt_iq4nl_values[x->qs[16 * ib + j] & 0xf];
            b->q[32 * ib + 16 + j] = qt_iq4nl_values[x->qs[16 * ib + j] >> 4];
        }
    }
}

static void expand_iq4_nl(const block_iq4_nl *x, struct lb_block *b)
{
    b->d = mm_fp16_to_f32(x->d);
    b->dmin = 0.0f;
    b->s[0] = b->s[1] = 1;
    b->m[0] = b->m[1] = 0;
    for (int j = 0; j < 16; j++) {
        b->q[j] = qt_iq4nl_values[x->qs[j] & 0xf];
        b->q[16 + j] = qt_iq4nl_values[x->qs[j] >> 4];
    }
}

/* Per super-block of row r and token j (exact integers, |·| < 2^31):
 *   isum = Σ_g s_g · Σ q·x,  imin = Σ_g m_g · Σ x   (g: 16 columns)
 * then, in this order and rounding (the SIMD kernels follow it to the bit):
 *   y += (d · dx) · isum − (dmin · dx) · imin   (the min term: Q2_K only)
 * as the reference's vec_dot_q2_K_q8_K (dall, dmin) does. Separate
 * statements: no FMA contraction under any compiler's default. */
static void k_lowbit(const struct mm_task *t, int64_t r0, int64_t r1)
{
    const int L = t->wtype == QT_IQ4_NL ? 32 : QK_K;
    const size_t bb = t->wtype == QT_Q2_K    ? sizeof(block_q2_K)
                      : t->wtype == QT_Q3_K  ? sizeof(block_q3_K)
                      : t->wtype == QT_IQ4_XS ? sizeof(block_iq4_xs)
                                              : sizeof(block_iq4_nl);
    const bool has_min = t->wtype == QT_Q2_K;
    const int64_t nsb = t->cols / L;
    struct lb_block b;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = t->w + (size_t)r * t->row_bytes;
        for (int64_t j = 0; j < t->n; j++) t->y[j * t->rows + r] = 0.0f;
        for (int64_t sb = 0; sb < nsb; sb++) {
            const void *blk = row + (size_t)sb * bb;
            switch (t->wtype) {
            case QT_Q2_K: expand_q2_K(blk, &b); break;
            case QT_Q3_K: expand_q3_K(blk, &b); break;
            case QT_IQ4_XS: expand_iq4_xs(blk, &b); break;
            default: expand_iq4_nl(blk, &b); break;
            }
            for (int64_t j = 0; j < t->n; j++) {
                const int8_t *xq = t->xq.qs + j * t->cols + sb * L;
                const float dx = t->xq.d[j * t->xq.nb + sb * (L / 32)];
                int32_t isum = 0, imin = 0;
                for (int g = 0; g < L / 16; g++) {   /* 16 columns: |dot| < 2^15 */
                    int32_t dot = 0, xs = 0;
                    for (int l = 0; l < 16; l++) {
                        dot += (int32_t)b.q[16 * g + l] * xq[16 * g + l];
                        xs += xq[16 * g + l];
                    }
                    isum += b.s[g] * dot;
                    imin += b.m[g] * xs;
                }
                const float dall = b.d * dx;
                float v = dall * (float)isum;
                if (has_min) {
                    const float dmm = b.dmin * dx;
                    const float vm = dmm * (float)imin;
                    v = v - vm;
                }
                t->y[j * t->rows + r] += v;
            }
        }
    }
}

mm_kernel_fn mm_lowbit_kernel(uint32_t wtype)
{
    switch (wtype) {
    case QT_Q2_K: case QT_Q3_K: case QT_IQ4_NL: case QT_IQ4_XS: return k_lowbit;
    default: return NULL;
    }
}
