/* attn_avx512: the attention tile kernel (attn_tile.inc) for AVX-512 CPUs,
 * 16 lanes (one zmm: a block of 16 keys per vector), chosen at run time by
 * the caller's isa. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define VW 16
#define QKN 8   /* query rows per QK pass: QKN x 16/VW accumulators */
#define PVN 4   /* rows per PV pass: PVN x 4 accumulators */
#define ATTN_DEQ_OFF (-8.0f)   /* o = -8 s: q4_0's bias (attn_tile.inc's deq_off) */
#define VTYPE __m512
#define ATTN_PREFIX(name) attn_avx512_##name

static inline __attribute__((always_inline)) __m512 vfma(__m512 a, __m512 b, __m512 c)
{
    return _mm512_fmadd_ps(a, b, c);
}

static inline __attribute__((always_inline)) __m512 splat(float x)
{
    return _mm512_set1_ps(x);
}

/* a > b ? a : b and a < b ? a : b per lane (maxps / minps). */
static inline __attribute__((always_inline)) __m512 vmaxv(__m512 a, __m512 b)
{
    return _mm512_max_ps(a, b);
}

static inline __attribute__((always_inline)) __m512 vminv(__m512 a, __m512 b)
{
    return _mm512_min_ps(a, b);
}

static inline __attribute__((always_inline)) __m512 cvt16(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

/* x rounded to f16 and back (round to nearest even, as ops_round_f16). */
static inline __attribute__((always_inline)) __m512 rnd16(__m512 x)
{
    return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

/* *acc += four floats as doubles (one vcvtps2pd; the generic conversion
 * was split in halves). */
static inline __attribute__((always_inline)) void add4pd(void *acc, const float *p)
{
    __m256d a;
    memcpy(&a, acc, sizeof a);
    a = _mm256_add_pd(a, _mm256_cvtps_pd(_mm_loadu_ps(p)));
    memcpy(acc, &a, sizeof a);
}

/* 16 signed bytes times per-lane scales sc (or d, sc NULL) into dst: the
 * quantized K and V values (attn_tile.inc's load_block_tq, load_row_q). */
static inline __attribute__((always_inline)) void deq16(float *dst, __m128i q, const float *sc,
                                                        float d)
{
    const __m512 s = sc ? _mm512_loadu_ps(sc) : _mm512_set1_ps(d);
    _mm512_storeu_ps(dst, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), s));
}

/* 16 signed bytes times s (deq8v), and 16 q4_0 nibbles, the low or
 * (hi) the high ones of 16 bytes, times s plus o = -8 s (deq_off; deq4v; deq8o:
 * bytes without the bias, d · (u - 8) as one exact fused multiply-add):
 * the quantized K and V values read in place (attn_tile.inc's qk_rows, pv_rows). */
static inline __attribute__((always_inline)) __m512 deq8v(const int8_t *p, __m512 s, __m512 o)
{
    (void)o;
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                             _mm_loadu_si128((const __m128i *)p))), s);
}

static inline __attribute__((always_inline)) __m512 deq8o(const int8_t *p, __m512 s,
                                                        __m512 o)
{
    const __m512i x = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(x), s, o);
}

static inline __attribute__((always_inline)) __m512 deq4v(const uint8_t *p, int hi, __m512 s,
                                                        __m512 o)
{
    __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    if (hi) x = _mm512_srli_epi32(x, 4);
    x = _mm512_and_si512(x, _mm512_set1_epi32(0x0F));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(x), s, o);
}

/* 16 values of a q5_0 block (q4c's V rows) at element d (0 or 16): the
 * nibbles as deq4v's, the fifth bits (16 bits of qh, a mask loaded as one)
 * or-ed in, times s plus o = -16 s (ATTN_DEQ5_OFF; exact as deq4v's). */
#define ATTN_DEQ5_OFF (-16.0f)
static inline __attribute__((always_inline)) __m512 deq5v(const char *blk, int d, __m512 s,
                                                        __m512 o)
{
    uint16_t h;
    memcpy(&h, blk + 2 + d / 8, sizeof h);
    __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 6)));
    if (d) x = _mm512_srli_epi32(x, 4);
    x = _mm512_and_si512(x, _mm512_set1_epi32(0x0F));
    x = _mm512_mask_or_epi32(x, _cvtu32_mask16(h), x, _mm512_set1_epi32(16));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(x), s, o);
}

/* 16 f16 scales to floats (pv_rows_q5's per-key block scales). */
static inline __attribute__((always_inline)) void deq5_scales(float *dst, const uint16_t *h)
{
    _mm512_store_ps(dst, _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)h)));
}

/* The 32 values of a q5_0 block of scale s as s · (c - 16), c the 5-bit
 * code (pv_rows_q5): c - 16 is the nibble where the fifth bit is set, else
 * the nibble minus 16, i.e. the nibble with every higher bit set, so an or
 * and a masked and give it; the product is exact (an 11-bit scale times a
 * 5-bit integer), so the values are deq5v's. */
static inline __attribute__((always_inline)) void deq5s(const char *blk, float s, void *lo,
                                                        void *hi)
{
    const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 6)));
    const __m512i nib = _mm512_set1_epi32(0x0F), up = _mm512_set1_epi32(~0x0F);
    __m512i l = _mm512_or_si512(x, up), h = _mm512_or_si512(_mm512_srli_epi32(x, 4), up);
    __mmask16 kl, kh;   /* kmovw from memory: GCC's movzwl and kmovw took a shuffle port */
    __asm__("kmovw %1, %0" : "=k"(kl) : "m"(*(const uint16_t *)(blk + 2)));
    __asm__("kmovw %1, %0" : "=k"(kh) : "m"(*(const uint16_t *)(blk + 4)));
    l = _mm512_mask_and_epi32(l, kl, l, nib);
    h = _mm512_mask_and_epi32(h, kh, h, nib);
    const __m512 vs = _mm512_set1_ps(s);
    const __m512 fl = _mm512_mul_ps(_mm512_cvtepi32_ps(l), vs);
    const __m512 fh = _mm512_mul_ps(_mm512_cvtepi32_ps(h), vs);
    memcpy(lo, &fl, sizeof fl);
    memcpy(hi, &fh, sizeof fh);
}

#include "attn_tile.inc"
