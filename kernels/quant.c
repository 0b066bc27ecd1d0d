/* quant: GGML tensor formats. The type table (names, block sizes, bytes per
 * block) for every type number GGUF files use, reference dequantization to f32
 * for the types tern runs, and the reference quantizers (Q8_0 / Q8_K for
 * activations, Q4_0 / Q4_1 for round-trip tests). Arithmetic follows ggml's
 * reference C code operation for operation, so results are bit-identical. */
#include "quant.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 layout");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 layout");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 layout");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(block_q8_1) == 36, "block_q8_1 layout");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K layout");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K layout");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K layout");
_Static_assert(sizeof(block_q8_K) == 292, "block_q8_K layout");
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K layout");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K layout");
_Static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl layout");
_Static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs layout");

#define N_TYPES 42

/* GGML numbering; gaps are retired type numbers. Sizes match ggml.c's
 * type_traits (and gguf-py's GGML_QUANT_SIZES, except Q8_1 whose scales are
 * f16 in ggml today). */
static const struct qtype_info types[N_TYPES] = {
    [QT_F32] = {"F32", 1, 4, true},
    [QT_F16] = {"F16", 1, 2, true},
    [QT_Q4_0] = {"Q4_0", 32, 18, true},
    [QT_Q4_1] = {"Q4_1", 32, 20, true},
    [QT_Q5_0] = {"Q5_0", 32, 22, true},
    [QT_Q5_1] = {"Q5_1", 32, 24, true},
    [QT_Q8_0] = {"Q8_0", 32, 34, true},
    [QT_Q8_1] = {"Q8_1", 32, 36, false},
    [QT_Q2_K] = {"Q2_K", 256, 84, true},
    [QT_Q3_K] = {"Q3_K", 256, 110, true},
    [QT_Q4_K] = {"Q4_K", 256, 144, true},
    [QT_Q5_K] = {"Q5_K", 256, 176, true},
    [QT_Q6_K] = {"Q6_K", 256, 210, true},
    [QT_Q8_K] = {"Q8_K", 256, 292, true},
    [16] = {"IQ2_XXS", 256, 66, false},
    [17] = {"IQ2_XS", 256, 74, false},
    [18] = {"IQ3_XXS", 256, 98, false},
    [19] = {"IQ1_S", 256, 50, false},
    [QT_IQ4_NL] = {"IQ4_NL", 32, 18, true},
    [21] = {"IQ3_S", 256, 110, false},
    [22] = {"IQ2_S", 256, 82, false},
    [QT_IQ4_XS] = {"IQ4_XS", 256, 136, true},
    [24] = {"I8", 1, 1, false},
    [25] = {"I16", 1, 2, false},
    [26] = {"I32", 1, 4, false},
    [27] = {"I64", 1, 8, false},
    [28] = {"F64", 1, 8, false},
    [29] = {"IQ1_M", 256, 56, false},
    [QT_BF16] = {"BF16", 1, 2, true},
    [34] = {"TQ1_0", 256, 54, false},
    [35] = {"TQ2_0", 256, 66, false},
    [39] = {"MXFP4", 32, 17, false},
    [40] = {"NVFP4", 64, 36, false},
    [41] = {"Q1_0", 128, 18, false},
};

const struct qtype_info *qtype_get(uint32_t type)
{
    if (type >= N_TYPES || !types[type].name) return NULL;
    return &types[type];
}

const char *qtype_name(uint32_t type)
{
    const struct qtype_info *qi = qtype_get(type);
    return qi ? qi->name : "unknown";
}

size_t qtype_row_bytes(uint32_t type, uint64_t n)
{
    const struct qtype_info *qi = qtype_get(type);
    if (!qi || n % qi->block_size) return 0;
    uint64_t blocks = n / qi->block_size;
    if (blocks > SIZE_MAX / qi->type_size) return 0;
    return (size_t)(blocks * qi->type_size);
}

/* ---- scalar formats ------------------------------------------------------ */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float fp16_to_f32(qt_f16 h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13)); /* inf, nan */
    if (exp == 0) {
        /* Subnormal (or zero): man * 2^-24, exact in f32. */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

qt_f16 f32_to_fp16(float f)
{
    /* Round to nearest even, as the F16C instruction and ggml do. */
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (qt_f16)(sign | 0x7e00 | ((ax >> 13) & 0x3ff)); /* nan */
    if (ax >= 0x477ff000u) return (qt_f16)(sign | 0x7c00); /* rounds to >= 65536: inf */
    if (ax < 0x38800000u) {
        /* Result is subnormal in f16: scale so the integer part is the mantissa. */
        float v = bits_f32(ax) * 0x1p24f; /* exact: power-of-two scale */
        float r = nearbyintf(v);          /* default mode: nearest even */
        return (qt_f16)(sign | (uint32_t)r);
    }
    uint32_t man = ax & 0x7fffff;
    uint32_t h = ((ax >> 23) - 112) << 10 | (man >> 13);
    uint32_t rest = man & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++; /* carries into exp correctly */
    return (qt_f16)(sign | h);
}

float bf16_to_f32(qt_bf16 h)
{
    return bits_f32((uint32_t)h << 16);
}

qt_bf16 f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (qt_bf16)((u >> 16) | 64); /* quiet nan */
    return (qt_bf16)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

/* ---- dequantization ------------------------------------------------------ */
/* All of these are bound by memory bandwidth when used on whole tensors; they
 * are the reference path (tests, loading), not the matmul kernels. */

static void deq_f16(const qt_f16 *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = fp16_to_f32(x[i]);
}

static void deq_bf16(const qt_bf16 *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = bf16_to_f32(x[i]);
}

static void deq_q4_0(const block_q4_0 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += QK4_0) {
        const float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = (float)((x[i].qs[j] & 0x0f) - 8) * d;
            y[j + QK4_0 / 2] = (float)((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void deq_q4_1(const block_q4_1 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += QK4_1) {
        const float d = fp16_to_f32(x[i].d), m = fp16_to_f32(x[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            y[j] = (float)(x[i].qs[j] & 0x0f) * d + m;
            y[j + QK4_1 / 2] = (float)(x[i].qs[j] >> 4) * d + m;
        }
    }
}

/* Q5: the fifth bit of element j lives in bit j of the 32-bit qh. */
static void deq_q5_0(const block_q5_0 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += QK5_0) {
        const float d = fp16_to_f32(x[i].d);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
            y[j] = (float)(((x[i].qs[j] & 0x0f) | h0) - 16) * d;
            y[j + QK5_0 / 2] = (float)(((x[i].qs[j] >> 4) | h1) - 16) * d;
        }
    }
}

static void deq_q5_1(const block_q5_1 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += QK5_1) {
        const float d = fp16_to_f32(x[i].d), m = fp16_to_f32(x[i].m);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
            y[j] = (float)((x[i].qs[j] & 0x0f) | h0) * d + m;
            y[j + QK5_1 / 2] = (float)((x[i].qs[j] >> 4) | h1) * d + m;
        }
    }
}

static void deq_q8_0(const block_q8_0 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += QK8_0) {
        const float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < QK8_0; j++) y[j] = (float)x[i].qs[j] * d;
    }
}

static void deq_q8_K(const block_q8_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += QK_K)
        for (int j = 0; j < QK_K; j++) y[j] = x[i].d * (float)x[i].qs[j];
}

/* K-quants pack eight 6-bit (scale, min) pairs into 12 bytes: the low 6 bits
 * of bytes 0..7 hold pairs 0..3, pairs 4..7 borrow the top 2 bits. */
static void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static void deq_q4_K(const block_q4_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *q = x[i].qs;
        const float d = fp16_to_f32(x[i].d), min = fp16_to_f32(x[i].dmin);
        for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, q += 32) {
            uint8_t sc, m;
            scale_min_k4(is, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xf) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

static void deq_q5_K(const block_q5_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        const float d = fp16_to_f32(x[i].d), min = fp16_to_f32(x[i].dmin);
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
            uint8_t sc, m;
            scale_min_k4(is, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)((ql[l] & 0xf) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

static void deq_q6_K(const block_q6_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_f32(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int n = 0; n < QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * sc[is] * (float)q1;
                y[l + 32] = d * sc[is + 2] * (float)q2;
                y[l + 64] = d * sc[is + 4] * (float)q3;
                y[l + 96] = d * sc[is + 6] * (float)q4;
            }
        }
    }
}

static void deq_q2_K(const block_q2_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_f32(x[i].d), min = fp16_to_f32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int n = 0; n < QK_K; n += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int h = 0; h < 2; h++) {
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * (float)(sc & 0xF), ml = min * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++)
                        *y++ = dl * (float)((int8_t)((q[l + 16 * h] >> shift) & 3)) - ml;
                }
            }
        }
    }
}

static void deq_q3_K(const block_q3_K *x, float *y, int64_t nb)
{
    const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    for (int64_t i = 0; i < nb; i++) {
        const float d_all = fp16_to_f32(x[i].d);
        const uint8_t *q = x[i].qs, *hm = x[i].hmask;
        uint8_t m = 1;
        /* 16 6-bit scales: low 4 bits in bytes 0..7, high 2 bits in 8..11 */
        uint32_t aux[4];
        memcpy(aux, x[i].scales, 12);
        const uint32_t tmp = aux[2];
        aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
        aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
        aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
        aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
        int8_t scales[16];
        memcpy(scales, aux, 16);
        int is = 0;
        for (int n = 0; n < QK_K; n += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int h = 0; h < 2; h++) {
                    const float dl = d_all * (float)(scales[is++] - 32);
                    for (int l = 16 * h; l < 16 * h + 16; l++)
                        *y++ = dl * (float)((int8_t)((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
            }
        }
    }
}

const int8_t qt_iq4nl_values[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
                                     1, 13, 25, 38, 53, 69, 89, 113 };

static void deq_iq4_nl(const block_iq4_nl *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += QK4_NL) {
        const float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < QK4_NL / 2; j++) {
            y[j] = d * (float)qt_iq4nl_values[x[i].qs[j] & 0xf];
            y[j + QK4_NL / 2] = d * (float)qt_iq4nl_values[x[i].qs[j] >> 4];
        }
    }
}

static void deq_iq4_xs(const block_iq4_xs *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_f32(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < QK_K / 32; ib++, y += 32, qs += 16) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
                           (((x[i].scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)qt_iq4nl_values[qs[j] & 0xf];
                y[j + 16] = dl * (float)qt_iq4nl_values[qs[j] >> 4];
            }
        }
    }
}

bool dequant_row(uint32_t type, const void *src, float *dst, int64_t n)
{
    const struct qtype_info *qi = qtype_get(type);
    if (!qi || !qi->supported || n < 0 || n % qi->block_size) return false;
    int64_t nb = n / qi->block_size;
    switch (type) {
    case QT_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return true;
    case QT_F16: deq_f16(src, dst, n); return true;
    case QT_BF16: deq_bf16(src, dst, n); return true;
    case QT_Q4_0: deq_q4_0(src, dst, nb); return true;
    case QT_Q4_1: deq_q4_1(src, dst, nb); return true;
    case QT_Q5_0: deq_q5_0(src, dst, nb); return true;
    case QT_Q5_1: deq_q5_1(src, dst, nb); return true;
    case QT_Q8_0: deq_q8_0(src, dst, nb); return true;
    case QT_Q8_K: deq_q8_K(src, dst, nb); return true;
    case QT_Q4_K: deq_q4_K(src, dst, nb); return true;
    case QT_Q5_K: deq_q5_K(src, dst, nb); return true;
    case QT_Q6_K: deq_q6_K(src, dst, nb); return true;
    case QT_Q2_K: deq_q2_K(src, dst, nb); return true;
    case QT_Q3_K: deq_q3_K(src, dst, nb); return true;
    case QT_IQ4_NL: deq_iq4_nl(src, dst, nb); return true;
    case QT_IQ4_XS: deq_iq4_xs(src, dst, nb); return true;
    default: return false;
    }
}

/* ---- quantization -------------------------------------------------------- */

/* roundf (halves away from zero) for |v| < 2^31 without a libm call, so the
 * loop vectorizes: v - trunc(v) is exact in float for such v. */
static inline int round_away(float v)
{
    int i = (int)v;
    float f = v - (float)i;
    return i + (f >= 0.5f) - (f <= -0.5f);
}

/* Used for the Q8_0 KV cache rows; ~10x faster than calling roundf/fmaxf,
 * same bytes as ggml's quantize_row_q8_0_ref. */
bool quant_row_q8_0(const float *src, block_q8_0 *dst, int64_t n)
{
    if (n < 0 || n % QK8_0) return false;
    for (int64_t i = 0; i < n / QK8_0; i++, src += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) {
            const float a = fabsf(src[j]);
            amax = amax > a ? amax : a;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        dst[i].d = f32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++) dst[i].qs[j] = (int8_t)round_away(src[j] * id);
    }
    return true;
}

/* Round to nearest, ties to even, for |f| < 2^22 (ggml's nearest_int). */
static int nearest_int(float f)
{
    float v = f + 12582912.0f; /* 1.5 * 2^23: pushes the fraction out of the mantissa */
    uint32_t u = f32_bits(v);
    return (int)(u & 0x007fffff) - 0x00400000;
}

bool quant_row_q8_K(const float *src, block_q8_K *dst, int64_t n)
{
    if (n < 0 || n % QK_K) return false;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < QK_K; j++)
            if (fabsf(src[j]) > amax) {
                amax = fabsf(src[j]);
                max = src[j];
            }
        if (amax == 0.0f) {
            memset(&dst[i], 0, sizeof dst[i]);
            continue;
        }
        /* Signed max maps to -127 so the largest value keeps full precision. */
        const float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j++) {
            int v = nearest_int(iscale * src[j]);
            dst[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int k = 0; k < 16; k++) sum += dst[i].qs[j * 16 + k];
            dst[i].bsums[j] = (int16_t)sum;
        }
        dst[i].d = 1.0f / iscale;
    }
    return true;
}

bool quant_row_q4_0(const float *src, block_q4_0 *dst, int64_t n)
{
    if (n < 0 || n % QK4_0) return false;
    for (int64_t i = 0; i < n / QK4_0; i++, src += QK4_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK4_0; j++)
            if (amax < fabsf(src[j])) {
                amax = fabsf(src[j]);
                max = src[j];
            }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        dst[i].d = f32_to_fp16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            int x0 = (int)(int8_t)(src[j] * id + 8.5f);
            int x1 = (int)(int8_t)(src[j + QK4_0 / 2] * id + 8.5f);
            x0 = x0 < 15 ? x0 : 15;
            x1 = x1 < 15 ? x1 : 15;
            dst[i].qs[j] = (uint8_t)(x0 | (x1 << 4));
        }
    }
    return true;
}

bool quant_row_q5_0(const float *src, block_q5_0 *dst, int64_t n)
{
    if (n < 0 || n % QK5_0) return false;
    for (int64_t i = 0; i < n / QK5_0; i++, src += QK5_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK5_0; j++)
            if (amax < fabsf(src[j])) {
                amax = fabsf(src[j]);
                max = src[j];
            }
        const float d = max / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        dst[i].d = f32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            int x0 = (int)(int8_t)(src[j] * id + 16.5f);
            int x1 = (int)(int8_t)(src[j + QK5_0 / 2] * id + 16.5f);
            x0 = x0 < 31 ? x0 : 31;
            x1 = x1 < 31 ? x1 : 31;
            dst[i].qs[j] = (uint8_t)((x0 & 0x0F) | ((x1 & 0x0F) << 4));
            /* the fifth bits: element j's in bit j of qh (deq_q5_0) */
            qh |= (uint32_t)(x0 >> 4 & 1) << j;
            qh |= (uint32_t)(x1 >> 4 & 1) << (j + QK5_0 / 2);
        }
        memcpy(dst[i].qh, &qh, sizeof qh);
    }
    return true;
}

bool quant_row_q4_1(const float *src, block_q4_1 *dst, int64_t n)
{
    if (n < 0 || n % QK4_1) return false;
    for (int64_t i = 0; i < n / QK4_1; i++, src += QK4_1) {
        float min = INFINITY, max = -INFINITY;
        for (int j = 0; j < QK4_1; j++) {
            if (src[j] < min) min = src[j];
            if (src[j] > max) max = src[j];
        }
        const float d = (max - min) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        dst[i].d = f32_to_fp16(d);
        dst[i].m = f32_to_fp16(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            int x0 = (int)(int8_t)((src[j] - min) * id + 0.5f);
            int x1 = (int)(int8_t)((src[j + QK4_1 / 2] - min) * id + 0.5f);
            x0 = x0 < 15 ? x0 : 15;
            x1 = x1 < 15 ? x1 : 15;
            dst[i].qs[j] = (uint8_t)(x0 | (x1 << 4));
        }
    }
    return true;
}
