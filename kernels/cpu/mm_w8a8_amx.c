/* mm_w8a8_amx: the opt-in W8A8 prefill on AMX int8 tiles (tdpbssd), a
 * change of numbers against the exact path (see matmul.h, mm_scratch.w8a8).
 *
 * Weights: per call, each 32-row strip is dequantized to f32 one row at a
 * time by a vector conversion (the same f32 values as dequant_row, bit for
 * bit), straight from the packed 8-row tiles (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 * Q4_K, Q5_K, Q6_K) or from the plain rows of the types mm_lowbit.c
 * multiplies (Q2_K, Q3_K, IQ4_NL, IQ4_XS: never packed), and
 * requantized to int8 with one scale per row and group of MM_W8A8_G
 * columns, s_w = max|w| / 127 of the dequantized values (computed here
 * every call: no copy of the model is kept). The strip is laid out as A
 * tiles: column step s (64 columns), row m at abuf + 2048 s + 64 m.
 * Activations: one scale per token and group, s_x = max|x| / 127, q =
 * round(x / s_x), as B tiles (mm_w8a8_x): token tile T (16 tokens), step s,
 * row p, token i holds the 4 bytes q[16T + i][64s + 4p .. 4p + 3], 1 KiB
 * per (T, s). A group reduces in int32 on the tiles (|Σ| ≤ G · 127², exact)
 * and its sum is turned to f32 once: y = Σ_g s_w,g · s_x,g · Σ_g.
 * One scale per whole row (the single float step per output) moved
 * SmolLM2's perplexity by 3.7 %, hence the groups (MM_W8A8_G, 256;
 * docs/PERFORMANCE.md, AMX int8 W8A8). */
#include "cpu/mm_impl.h"

#include <immintrin.h>

#include "cpu/matmul.h"
#include "cpu/tr16_avx512.h"

#define AMX_FENCE() __asm__ volatile("" ::: "memory")

#define W8_TB 256    /* tokens per block: 32 rows × 256 tokens of f32 sums, 32 KiB */
#define W8_SG 4      /* 32-row strips per pass: a token pair's B group (16 KiB) is reused
                      * from L1 by each, the strips' A groups (8 KiB each) too */

struct w8_tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

static void w8_configure(void)
{
    struct w8_tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) c.rows[i] = 16, c.colsb[i] = 64;   /* 0-3 C, 4-5 A, 6-7 B */
    AMX_FENCE();
    _tile_loadconfig(&c);
}

bool mm_w8a8_supported(uint32_t wtype)
{
    /* the types with a vector conversion (w8_row_f32); the others, and
     * plain rows of the packable types, keep the exact path (a scalar
     * dequant_row per row took longer than it: Q6_K 2048 × 8192, n = 512,
     * 86 ms against 65; vector, 16 ms) */
    switch (wtype) {
    case QT_Q4_0 | MM_PACKED: case QT_Q4_1 | MM_PACKED: case QT_Q8_0 | MM_PACKED:
    case QT_Q4_K | MM_PACKED: case QT_Q5_0 | MM_PACKED: case QT_Q6_K | MM_PACKED:
    case QT_Q5_1 | MM_PACKED: case QT_Q5_K | MM_PACKED:
    /* never packed (mm_lowbit.c reads plain rows) */
    case QT_Q2_K: case QT_Q3_K: case QT_IQ4_NL: case QT_IQ4_XS:
        return true;
    default: return false;
    }
}

static inline float w8_h(const uint8_t *p)
{
    return mm_fp16_to_f32(mm_rd16(p));
}

/* 16 bytes of 4-bit codes: low nibbles (elements 0-15) and high (16-31) as f32 d·q + m */
static inline void w8_nib16(const uint8_t *q, float d, float m, float *out)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)q), mask = _mm_set1_epi8(0xF);
    const __m512 vd = _mm512_set1_ps(d), vm = _mm512_set1_ps(m);
    const __m512i lo = _mm512_cvtepu8_epi32(_mm_and_si128(v, mask));
    const __m512i hi = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(v, 4), mask));
    _mm512_storeu_ps(out, _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), vd, vm));
    _mm512_storeu_ps(out + 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), vd, vm));
}

/* 16 bytes of 4-bit codes with their fifth bits (bit l of hlo: element l of
 * the low nibbles, of hhi: of the high): low nibbles as d0·q + m0 into lo,
 * high as d1·q + m1 into hi. d·q is exact in f32 (an f16 d times a 6-bit
 * scale times a 5-bit q), so the fma rounds as dequant_row's d·q + m. */
static inline void w8_nib16_h(__m128i v, uint32_t hlo, uint32_t hhi, float d0, float m0, float d1,
                              float m1, float *lo, float *hi)
{
    const __m128i mask = _mm_set1_epi8(0xF);
    const __m512i s16 = _mm512_set1_epi32(16);
    __m512i a = _mm512_cvtepu8_epi32(_mm_and_si128(v, mask));
    __m512i b = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(v, 4), mask));
    a = _mm512_mask_add_epi32(a, (__mmask16)hlo, a, s16);
    b = _mm512_mask_add_epi32(b, (__mmask16)hhi, b, s16);
    _mm512_storeu_ps(lo, _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), _mm512_set1_ps(d0), _mm512_set1_ps(m0)));
    _mm512_storeu_ps(hi, _mm512_fmadd_ps(_mm512_cvtepi32_ps(b), _mm512_set1_ps(d1), _mm512_set1_ps(m1)));
}

/* 16 bytes of IQ4 codes: the levels of the low nibbles (elements 0-15)
 * and the high (16-31) times d, as dequant_row (one product each). */
static inline void w8_iq4_16(const uint8_t *q, __m128i levels, float d, float *out)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)q), mask = _mm_set1_epi8(0xF);
    const __m128i lo = _mm_shuffle_epi8(levels, _mm_and_si128(v, mask));
    const __m128i hi = _mm_shuffle_epi8(levels, _mm_and_si128(_mm_srli_epi16(v, 4), mask));
    const __m512 vd = _mm512_set1_ps(d);
    _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)), vd));
    _mm512_storeu_ps(out + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi)), vd));
}

/* The packed fifth bits of one row (packed Q5_0 / Q5_1 blocks, Q5_K
 * sub-blocks: the pair's two u32 at h): bit l for element l of the 32. */
static inline uint32_t w8_h32(const uint8_t *h, int second)
{
    uint32_t h0, h1;
    memcpy(&h0, h, 4);
    memcpy(&h1, h + 4, 4);
    return second ? (h0 >> 16) | (h1 & 0xFFFF0000u) : (h0 & 0xFFFFu) | (h1 << 16);
}

/* Plain rows of the types mm_lowbit.c multiplies (never packed): Q2_K,
 * Q3_K, IQ4_NL, IQ4_XS, as dequant_row computes them. Bounded by the
 * row's blocks; each step converts 16 or 32 elements. */
static void w8_lowbit_row_f32(const struct mm_task *t, uint32_t wtype, int64_t row, float *out)
{
    const uint8_t *src = t->w + (size_t)row * t->row_bytes;
    const int64_t cols = t->cols;
    const __m128i levels = _mm_loadu_si128((const __m128i *)qt_iq4nl_values);
    if (wtype == QT_IQ4_NL) {
        for (int64_t b = 0; b < cols / QK4_NL; b++) {
            const block_iq4_nl *x = (const block_iq4_nl *)(src + (size_t)b * sizeof(block_iq4_nl));
            w8_iq4_16(x->qs, levels, w8_h((const uint8_t *)&x->d), out + 32 * b);
        }
        return;
    }
    if (wtype == QT_IQ4_XS) {
        for (int64_t S = 0; S < cols / QK_K; S++) {
            const uint8_t *x = src + (size_t)S * sizeof(block_iq4_xs);
            const float d = w8_h(x + offsetof(block_iq4_xs, d));
            const uint16_t sh = mm_rd16(x + offsetof(block_iq4_xs, scales_h));
            const uint8_t *sl = x + offsetof(block_iq4_xs, scales_l), *qs = x + offsetof(block_iq4_xs, qs);
            for (int ib = 0; ib < QK_K / 32; ib++) {
                const int ls = ((sl[ib / 2] >> 4 * (ib % 2)) & 0xF) | (((sh >> 2 * ib) & 3) << 4);
                w8_iq4_16(qs + 16 * ib, levels, d * (float)(ls - 32), out + 256 * S + 32 * ib);
            }
        }
        return;
    }
    const __m128i m3 = _mm_set1_epi8(3);
    if (wtype == QT_Q2_K) {   /* dl·q − ml, dl = d·(sc & 15), ml = dmin·(sc >> 4): dl·q exact */
        for (int64_t S = 0; S < cols / QK_K; S++) {
            const block_q2_K *x = (const block_q2_K *)(src + (size_t)S * sizeof(block_q2_K));
            const float d = w8_h((const uint8_t *)&x->d), dmin = w8_h((const uint8_t *)&x->dmin);
            float *e = out + 256 * S;
            for (int n = 0; n < 2; n++)   /* halves of 128: q bytes 32n .. 32n + 31 */
                for (int sh = 0; sh < 4; sh++)
                    for (int h = 0; h < 2; h++, e += 16) {
                        const uint8_t sc = x->scales[8 * n + 2 * sh + h];
                        const __m128i v = _mm_loadu_si128((const __m128i *)(x->qs + 32 * n + 16 * h));
                        const __m128i q = _mm_and_si128(_mm_srl_epi16(v, _mm_cvtsi32_si128(2 * sh)), m3);
                        _mm512_storeu_ps(e, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q)),
                                                            _mm512_set1_ps(d * (float)(sc & 0xF)),
                                                            _mm512_set1_ps(-(dmin * (float)(sc >> 4)))));
                    }
        }
        return;
    }
    /* Q3_K: dl·(q − 4 where the hmask bit is clear), dl = d·(scale − 32) */
    const __m512i s4 = _mm512_set1_epi32(4);
    for (int64_t S = 0; S < cols / QK_K; S++) {
        const block_q3_K *x = (const block_q3_K *)(src + (size_t)S * sizeof(block_q3_K));
        const float d = w8_h((const uint8_t *)&x->d);
        uint32_t aux[4];   /* the 16 6-bit scales, as dequant_row unpacks them */
        memcpy(aux, x->scales, 12);
        const uint32_t k1 = 0x03030303u, k2 = 0x0f0f0f0fu, tmp = aux[2];
        aux[2] = ((aux[0] >> 4) & k2) | (((tmp >> 4) & k1) << 4);
        aux[3] = ((aux[1] >> 4) & k2) | (((tmp >> 6) & k1) << 4);
        aux[0] = (aux[0] & k2) | (((tmp >> 0) & k1) << 4);
        aux[1] = (aux[1] & k2) | (((tmp >> 2) & k1) << 4);
        int8_t scales[16];
        memcpy(scales, aux, 16);
        float *e = out + 256 * S;
        for (int n = 0; n < 2; n++)
            for (int sh = 0; sh < 4; sh++)
                for (int h = 0; h < 2; h++, e += 16) {
                    const __m128i v = _mm_loadu_si128((const __m128i *)(x->qs + 32 * n + 16 * h));
                    const __m128i hm = _mm_loadu_si128((const __m128i *)(x->hmask + 16 * h));
                    const __m128i q = _mm_and_si128(_mm_srl_epi16(v, _mm_cvtsi32_si128(2 * sh)), m3);
                    const __mmask16 set = _mm_test_epi8_mask(hm, _mm_set1_epi8((char)(1 << (4 * n + sh))));
                    __m512i qi = _mm512_cvtepu8_epi32(q);
                    qi = _mm512_mask_sub_epi32(qi, (__mmask16)~set, qi, s4);
                    _mm512_storeu_ps(e, _mm512_mul_ps(_mm512_cvtepi32_ps(qi),
                                                      _mm512_set1_ps(d * (float)(scales[8 * n + 2 * sh + h] - 32))));
                }
    }
}

/* Row `row` of the weights as f32 (cols values into out). */
static void w8_row_f32(const struct mm_task *t, int64_t row, float *out)
{
    const uint32_t wtype = t->wtype & ~MM_PACKED;
    const int64_t cols = t->cols, nb = cols / 32;
    if (!(t->wtype & MM_PACKED)) {
        w8_lowbit_row_f32(t, wtype, row, out);
        return;
    }
    const int i = (int)(row % 8), p = i % 4, second = i / 4;
    if (wtype == QT_Q5_K) {   /* pack_k4: Q4_K's layout, the fifth bits at MM_PK_Q5K_H */
        const size_t sup = MM_PK_Q5K_SUPER;
        const uint8_t *tile = t->w + (size_t)(row / 8) * (size_t)(cols / QK_K) * sup;
        for (int64_t S = 0; S < cols / QK_K; S++) {
            const uint8_t *b = tile + (size_t)S * sup;
            const float d = w8_h(b + 2 * i), dmin = w8_h(b + 16 + 2 * i);
            for (int c = 0; c < 4; c++) {   /* sub-blocks 2c (low nibbles) and 2c + 1 (high) */
                const uint8_t *o = b + MM_PK_Q5K_Q + 256 * c + 64 * p;
                const uint32_t ha = w8_h32(b + MM_PK_Q5K_H + 32 * (2 * c) + 8 * p, second);
                const uint32_t hb = w8_h32(b + MM_PK_Q5K_H + 32 * (2 * c + 1) + 8 * p, second);
                const float d0 = d * (float)b[32 + 8 * (2 * c) + i], m0 = -(dmin * (float)b[96 + 8 * (2 * c) + i]);
                const float d1 = d * (float)b[32 + 8 * (2 * c + 1) + i], m1 = -(dmin * (float)b[96 + 8 * (2 * c + 1) + i]);
                float *e = out + 256 * S + 64 * c;
                for (int h = 0; h < 2; h++)   /* elements 16h .. 16h + 15 of each sub-block */
                    w8_nib16_h(_mm_loadu_si128((const __m128i *)(o + 32 * h + 16 * second)),
                               ha >> 16 * h, hb >> 16 * h, d0, m0, d1, m1, e + 16 * h, e + 32 + 16 * h);
            }
        }
        return;
    }
    if (wtype == QT_Q4_K) {
        const size_t sup = MM_PK_Q4K_SUPER;
        const uint8_t *tile = t->w + (size_t)(row / 8) * (size_t)(cols / QK_K) * sup;
        for (int64_t S = 0; S < cols / QK_K; S++) {
            const uint8_t *b = tile + (size_t)S * sup;
            const float d = w8_h(b + 2 * i), dmin = w8_h(b + 16 + 2 * i);
            for (int c = 0; c < 4; c++) {
                const uint8_t *o = b + MM_PK_K4_Q + 256 * c + 64 * p;
                const float d0 = d * (float)b[32 + 8 * (2 * c) + i], m0 = -dmin * (float)b[96 + 8 * (2 * c) + i];
                const float d1 = d * (float)b[32 + 8 * (2 * c + 1) + i], m1 = -dmin * (float)b[96 + 8 * (2 * c + 1) + i];
                /* qs bytes 0-15 at o + 16 second, 16-31 at o + 32 + 16 second: low nibbles are
                 * elements 64c + l (scale 2c), high 64c + 32 + l (scale 2c + 1) */
                float *e = out + 256 * S + 64 * c;
                for (int h = 0; h < 2; h++) {
                    const __m128i v = _mm_loadu_si128((const __m128i *)(o + 32 * h + 16 * second));
                    const __m128i mask = _mm_set1_epi8(0xF);
                    const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(v, mask)));
                    const __m512 hi = _mm512_cvtepi32_ps(
                        _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(v, 4), mask)));
                    _mm512_storeu_ps(e + 16 * h, _mm512_fmadd_ps(lo, _mm512_set1_ps(d0), _mm512_set1_ps(m0)));
                    _mm512_storeu_ps(e + 32 + 16 * h, _mm512_fmadd_ps(hi, _mm512_set1_ps(d1), _mm512_set1_ps(m1)));
                }
            }
        }
        return;
    }
    if (wtype == QT_Q6_K) {
        const size_t sup = MM_PK_Q6K_SUPER;
        const uint8_t *tile = t->w + (size_t)(row / 8) * (size_t)(cols / QK_K) * sup;
        const __m128i m6 = _mm_set1_epi8(0x3F), mh = _mm_set1_epi8((char)0xC0), o32 = _mm_set1_epi8(32);
        for (int64_t S = 0; S < cols / QK_K; S++) {
            const uint8_t *sb = tile + (size_t)S * sup;
            const float d = w8_h(sb + 2 * i);
            for (int b = 0; b < 8; b++) {
                /* layout at pack_q6k: sc[half][row], then the codes of W[2p], W[2p + 1]
                 * in V[0..2][p / 2] (the fourth vector of a group in bits 6-7) */
                const uint8_t *o = sb + 16 + MM_PK_Q6K_BLOCK * b;
                const uint8_t *v = o + 16 + 32 * (p / 2) + 16 * second;
                const __m128i v0 = _mm_loadu_si128((const __m128i *)v);
                const __m128i v1 = _mm_loadu_si128((const __m128i *)(v + 64));
                const __m128i v2 = _mm_loadu_si128((const __m128i *)(v + 128));
                __m128i wa, wb;
                if (p % 2 == 0) {
                    wa = _mm_and_si128(v0, m6);
                    wb = _mm_and_si128(v1, m6);
                } else {
                    wa = _mm_and_si128(v2, m6);
                    wb = _mm_or_si128(_mm_srli_epi16(_mm_and_si128(v0, mh), 6),
                                      _mm_or_si128(_mm_srli_epi16(_mm_and_si128(v1, mh), 4),
                                                   _mm_srli_epi16(_mm_and_si128(v2, mh), 2)));
                }
                /* a row's dwords alternate between elements 0-15 and 16-31 */
                const __m128i q0 = _mm_sub_epi8(_mm_castps_si128(_mm_shuffle_ps(_mm_castsi128_ps(wa), _mm_castsi128_ps(wb), 0x88)), o32);
                const __m128i q1 = _mm_sub_epi8(_mm_castps_si128(_mm_shuffle_ps(_mm_castsi128_ps(wa), _mm_castsi128_ps(wb), 0xDD)), o32);
                /* as dequant_row: (d · sc) · q */
                const float d0 = d * (float)(int8_t)o[i], d1 = d * (float)(int8_t)o[8 + i];
                float *e = out + 256 * S + 32 * b;
                _mm512_storeu_ps(e, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)),
                                                  _mm512_set1_ps(d0)));
                _mm512_storeu_ps(e + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)),
                                                       _mm512_set1_ps(d1)));
            }
        }
        return;
    }
    const size_t bb = t->row_bytes / (size_t)nb;
    const uint8_t *tile = t->w + (size_t)(row / 8) * 8 * t->row_bytes;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = tile + (size_t)b * 8 * bb;
        const float d = w8_h(blk + 2 * i);
        float *e = out + 32 * b;
        if (wtype == QT_Q8_0) {
            const uint8_t *q = blk + 16 + 64 * p + 16 * second;
            const __m512 vd = _mm512_set1_ps(d);
            const __m512i a = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)q));
            const __m512i c = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + 32)));
            _mm512_storeu_ps(e, _mm512_mul_ps(_mm512_cvtepi32_ps(a), vd));
            _mm512_storeu_ps(e + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(c), vd));
        } else if (wtype == QT_Q5_0) {   /* (q − 16) · d, q = nibble | fifth bit << 4 */
            uint32_t h0, h1;   /* layout at pack_block: u32 h[8] after d, quants after them */
            memcpy(&h0, blk + 16 + 8 * p, 4);
            memcpy(&h1, blk + 20 + 8 * p, 4);
            const uint32_t qh = second ? (h0 >> 16) | (h1 & 0xFFFF0000u) : (h0 & 0xFFFFu) | (h1 << 16);
            const __m128i v = _mm_loadu_si128((const __m128i *)(blk + 48 + 32 * p + 16 * second));
            const __m128i mask = _mm_set1_epi8(0xF);
            const __m512i s16 = _mm512_set1_epi32(16);
            __m512i lo = _mm512_cvtepu8_epi32(_mm_and_si128(v, mask));
            __m512i hi = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(v, 4), mask));
            lo = _mm512_sub_epi32(_mm512_mask_add_epi32(lo, (__mmask16)qh, lo, s16), s16);
            hi = _mm512_sub_epi32(_mm512_mask_add_epi32(hi, (__mmask16)(qh >> 16), hi, s16), s16);
            const __m512 vd = _mm512_set1_ps(d);
            _mm512_storeu_ps(e, _mm512_mul_ps(_mm512_cvtepi32_ps(lo), vd));
            _mm512_storeu_ps(e + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(hi), vd));
        } else if (wtype == QT_Q5_1) {   /* q · d + m, q = nibble | fifth bit << 4 */
            const float m = w8_h(blk + 16 + 2 * i);   /* layout at pack_block: d, m, u32 h[8], quants */
            const uint32_t qh = w8_h32(blk + 32 + 8 * p, second);
            w8_nib16_h(_mm_loadu_si128((const __m128i *)(blk + 64 + 32 * p + 16 * second)), qh, qh >> 16,
                       d, m, d, m, e, e + 16);
        } else if (wtype == QT_Q4_0) {
            w8_nib16(blk + 16 + 32 * p + 16 * second, d, -8.0f * d, e);
        } else {   /* Q4_1: d·q + m */
            w8_nib16(blk + 32 + 32 * p + 16 * second, d, w8_h(blk + 16 + 2 * i), e);
        }
    }
}

void mm_w8a8_row_f32(const struct mm_task *t, int64_t row, float *out)
{
    w8_row_f32(t, row, out);
}

/* The strip's rows r .. r + nr (nr ≤ 32; rows past nr zero) as int8 A
 * tiles (layout above) and their scales, one per row and group of
 * MM_W8A8_G columns: sw[32 g + m]. */
static void w8_strip(const struct mm_task *t, int64_t r, int nr, int8_t *abuf, float *sw,
                     float *rowf)
{
    const int64_t cols = t->cols, ng = (cols + MM_W8A8_G - 1) / MM_W8A8_G;
    for (int m = 0; m < 32; m++) {
        if (m >= nr) {
            for (int64_t g = 0; g < ng; g++) sw[32 * g + m] = 0.0f;
            for (int64_t s = 0; s < cols / 64; s++) memset(abuf + 2048 * s + 64 * m, 0, 64);
            continue;
        }
        w8_row_f32(t, r + m, rowf);
        for (int64_t g = 0; g < ng; g++) {
            const int64_t c0 = g * MM_W8A8_G, c1 = c0 + MM_W8A8_G < cols ? c0 + MM_W8A8_G : cols;
            __m512 amax = _mm512_setzero_ps();
            for (int64_t c = c0; c < c1; c += 16)
                amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(rowf + c)));
            const float mx = _mm512_reduce_max_ps(amax);
            sw[32 * g + m] = mx / 127.0f;
            const __m512 inv = _mm512_set1_ps(mx > 0.0f ? 127.0f / mx : 0.0f);
            for (int64_t s = c0 / 64; s < c1 / 64; s++) {
                int8_t *o = abuf + 2048 * s + 64 * m;
                for (int k = 0; k < 4; k++) {
                    const __m512i q =
                        _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(rowf + 64 * s + 16 * k), inv));
                    _mm_store_si128((__m128i *)(o + 16 * k), _mm512_cvtsepi32_epi8(q));
                }
            }
        }
    }
}

void mm_w8a8_x(const float *x, int64_t cols, int64_t n, int64_t T0, int64_t T1, int8_t *xb,
               float *sx)
{
    const int64_t ks = cols / 64, ng = (cols + MM_W8A8_G - 1) / MM_W8A8_G;
    for (int64_t T = T0; T < T1; T++)
        for (int64_t g = 0; g < ng; g++) {
            const int64_t c0 = g * MM_W8A8_G, c1 = c0 + MM_W8A8_G < cols ? c0 + MM_W8A8_G : cols;
            __m512 inv[16];
            for (int i = 0; i < 16; i++) {
                const int64_t j = 16 * T + i;
                float mx = 0.0f;
                if (j < n) {
                    __m512 amax = _mm512_setzero_ps();
                    for (int64_t c = c0; c < c1; c += 16)
                        amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(x + j * cols + c)));
                    mx = _mm512_reduce_max_ps(amax);
                }
                sx[(T * ng + g) * 16 + i] = mx / 127.0f;   /* 0 past n */
                inv[i] = _mm512_set1_ps(mx > 0.0f ? 127.0f / mx : 0.0f);
            }
            for (int64_t s = c0 / 64; s < c1 / 64; s++) {
                __m512i in[16], out[16];
                for (int i = 0; i < 16; i++) {
                    const int64_t j = 16 * T + i;
                    if (j >= n) {
                        in[i] = _mm512_setzero_si512();
                        continue;
                    }
                    const float *src = x + j * cols + 64 * s;
                    __m128i b[4];
                    for (int k = 0; k < 4; k++)
                        b[k] = _mm512_cvtsepi32_epi8(
                            _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(src + 16 * k), inv[i])));
                    in[i] = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(
                                _mm512_castsi128_si512(b[0]), b[1], 1), b[2], 2), b[3], 3);
                }
                tr16_epi32(in, out);   /* row p: bytes 4p .. 4p + 3 of each token */
                int8_t *o = xb + ((size_t)T * (size_t)ks + (size_t)s) * 1024;
                for (int p = 0; p < 16; p++) _mm512_store_si512((__m512i *)(o + 64 * p), out[p]);
            }
        }
}

/* Token tiles 0 .. tiles (even) of the block (first token tile T0 of the
 * call) against the strip's column group g (steps s0 .. s0 + ns): the
 * group's int32 sums on tiles, then acc (f32; row tile h, token tile T at
 * acc + 256 (h·W8_TB/16 + T), row m, token i at 16 m + i) += sums · s_w · s_x. */
static void w8_group(const int8_t *abuf0, float *acc0, int64_t tiles, const int8_t *xb, int64_t ks,
                     int64_t s0, int64_t ns, const float *sw0, const float *sx, int64_t T0,
                     int64_t ng, int64_t g, int nst)
{
    /* two sum buffers, alternating: the next products' tile stores do not
     * wait for this float step's loads */
    _Alignas(64) int32_t cb[2][4][256];
    int cur = 0;
    const size_t astr = (size_t)(32 * 64) * (size_t)ks;   /* one strip's A tiles */
    for (int64_t T = 0; T < tiles; T += 2)
    for (int k = 0; k < nst; k++) {   /* the token pair's B group stays in L1 across the strips */
        const int8_t *abuf = abuf0 + k * astr;
        float *acc = acc0 + (size_t)k * 32 * W8_TB;
        const float *swg = sw0 + (size_t)k * 32 * (size_t)ng + 32 * g;
        int32_t (*c)[256] = cb[cur];
        cur ^= 1;
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
        const int8_t *b0 = xb + ((size_t)T * (size_t)ks + (size_t)s0) * 1024;
        const int8_t *b1 = b0 + (size_t)ks * 1024;
        const int8_t *a = abuf + 2048 * s0;
        for (int64_t s = 0; s < ns; s++) {
            _tile_loadd(4, a + 2048 * s, 64);
            _tile_loadd(6, b0 + 1024 * s, 64);
            _tile_loadd(5, a + 2048 * s + 1024, 64);
            _tile_loadd(7, b1 + 1024 * s, 64);
            _tile_dpbssd(0, 4, 6);
            _tile_dpbssd(1, 4, 7);
            _tile_dpbssd(2, 5, 6);
            _tile_dpbssd(3, 5, 7);
        }
        _tile_stored(0, c[0], 64);
        _tile_stored(1, c[1], 64);
        _tile_stored(2, c[2], 64);
        _tile_stored(3, c[3], 64);
        AMX_FENCE();
        for (int q = 0; q < 4; q++) {   /* tile q: row tile q / 2, token tile T + q % 2 */
            const int h = q / 2, tt = q % 2;
            const __m512 vx = _mm512_loadu_ps(sx + ((T0 + T + tt) * ng + g) * 16);
            float *o = acc + 256 * (h * (W8_TB / 16) + T + tt);
            for (int m = 0; m < 16; m++) {
                const __m512 sc = _mm512_mul_ps(vx, _mm512_set1_ps(swg[16 * h + m]));
                const __m512 v = _mm512_cvtepi32_ps(_mm512_load_si512((const void *)(c[q] + 16 * m)));
                _mm512_store_ps(o + 16 * m, g == 0 ? _mm512_mul_ps(v, sc)
                                                   : _mm512_fmadd_ps(v, sc, _mm512_load_ps(o + 16 * m)));
            }
        }
    }
}

/* y rows r .. r + nr, tokens j0 .. j0 + jn from acc, transposed. */
static void w8_write_y(const struct mm_task *t, const float *acc, int64_t r, int nr, int64_t j0,
                       int64_t jn)
{
    for (int h = 0; h < 2 && 16 * h < nr; h++)
        for (int64_t T = 0; T * 16 < jn; T++) {
            const float *c = acc + 256 * (h * (W8_TB / 16) + T);
            __m512i in[16], out[16];
            for (int m = 0; m < 16; m++) in[m] = _mm512_load_si512((const void *)(c + 16 * m));
            tr16_epi32(in, out);
            const int64_t ni = jn - 16 * T < 16 ? jn - 16 * T : 16;
            const int nh = nr - 16 * h < 16 ? nr - 16 * h : 16;
            const __mmask16 k = (__mmask16)((1u << nh) - 1);
            for (int64_t i = 0; i < ni; i++)
                _mm512_mask_storeu_ps(t->y + (j0 + 16 * T + i) * t->rows + r + 16 * h, k,
                                      _mm512_castsi512_ps(out[i]));
        }
}

/* One thread's buffers, carved from `work` (64-byte aligned pieces): the
 * strips' A tiles (W8_SG × 32 × cols int8, 1 MiB at 8192 columns: L2),
 * their scales, one row as f32, the f32 block. */
static size_t w8_up64(size_t b)
{
    return (b + 63) & ~(size_t)63;
}

size_t mm_w8a8_work_bytes(int64_t cols)
{
    const size_t ng = (size_t)((cols + MM_W8A8_G - 1) / MM_W8A8_G);
    return w8_up64((size_t)W8_SG * 32 * (size_t)cols) + w8_up64((size_t)cols * sizeof(float)) +
           w8_up64((size_t)W8_SG * 32 * ng * sizeof(float)) +
           (size_t)W8_SG * 32 * W8_TB * sizeof(float);
}

void mm_w8a8_run(const struct mm_task *t, int64_t r0, int64_t r1, void *work)
{
    const int64_t cols = t->cols, n = t->n, ks = cols / 64, ng = (cols + MM_W8A8_G - 1) / MM_W8A8_G;
    uint8_t *wp = work;
    int8_t *abuf = (int8_t *)wp;
    wp += w8_up64((size_t)W8_SG * 32 * (size_t)cols);
    float *rowf = (float *)wp;
    wp += w8_up64((size_t)cols * sizeof(float));
    float *sw = (float *)wp;
    wp += w8_up64((size_t)(W8_SG * 32 * ng) * sizeof(float));
    float *acc = (float *)wp;
    w8_configure();
    for (int64_t r = r0; r < r1; r += W8_SG * 32) {
        const int nst = (int)((r1 - r + 31) / 32 < W8_SG ? (r1 - r + 31) / 32 : W8_SG);
        for (int k = 0; k < nst; k++) {
            const int64_t rk = r + 32 * k;
            w8_strip(t, rk, r1 - rk < 32 ? (int)(r1 - rk) : 32, abuf + (size_t)k * 32 * (size_t)cols,
                     sw + (size_t)k * 32 * (size_t)ng, rowf);
        }
        AMX_FENCE();
        for (int64_t j0 = 0; j0 < n; j0 += W8_TB) {
            const int64_t jn = n - j0 < W8_TB ? n - j0 : W8_TB;
            const int64_t tiles = (jn + 31) / 32 * 2;   /* token tiles, in pairs (xb is padded) */
            const int8_t *xb = t->x8 + (size_t)(j0 / 16) * (size_t)ks * 1024;
            for (int64_t g = 0; g < ng; g++) {
                const int64_t s0 = g * (MM_W8A8_G / 64);
                const int64_t ns = ks - s0 < MM_W8A8_G / 64 ? ks - s0 : MM_W8A8_G / 64;
                w8_group(abuf, acc, tiles, xb, ks, s0, ns, sw, t->sx, j0 / 16, ng, g, nst);
            }
            for (int k = 0; k < nst; k++) {
                const int64_t rk = r + 32 * k;
                w8_write_y(t, acc + (size_t)k * 32 * W8_TB, rk, r1 - rk < 32 ? (int)(r1 - rk) : 32, j0, jn);
            }
        }
    }
    _tile_release();
}
