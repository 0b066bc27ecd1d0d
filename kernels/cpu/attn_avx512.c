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

/* 16 signed bytes times s (deq8v), and 16 bytes of q4_0 codes without
 * their bias times s plus o = -8 s (deq_off; deq8o: d · (u - 8) as one
 * exact fused multiply-add): the quantized K and V values read in place
 * (attn_tile.inc's qk_rows, pv_rows). */
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

/* q4_0's 16 values of a block, d · u - 8d for u = 0..15 (deq_off's o),
 * each the one exact fused multiply-add deq8o computes: deq4v looks its
 * nibbles up here (ldq builds it once per block and key). */
#define ATTN_Q4_TABLE 1
static inline __attribute__((always_inline)) __m512 q4_table(__m512 s, __m512 o)
{
    const __m512 u = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return _mm512_fmadd_ps(u, s, o);
}

/* 16 q4_0 nibbles, the low or (hi) the high ones of 16 bytes, as values of
 * the block's table t (q4_table). The bytes are broadcast by the load and
 * spread to a dword each within the 128-bit lanes (vpshufb, not the
 * cross-lane vpmovzxbd: on Zen 4 those shuffles bounded the V pass);
 * vpermps reads an index's low 4 bits, so the low nibble needs no mask, and
 * one lookup stands for the mask, the conversion and the multiply-add. */
static inline __attribute__((always_inline)) __m512 deq4v(const uint8_t *p, int hi, __m512 t,
                                                        __m512 o)
{
    (void)o;
    /* dword i: byte i of the 16, then three zeroed bytes */
    const __m512i ctl = _mm512_or_si512(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32((int)0x80808000));
    __m512i x = _mm512_shuffle_epi8(
        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p)), ctl);
    if (hi) x = _mm512_srli_epi32(x, 4);
    return _mm512_permutexvar_ps(x, t);
}

#include "attn_tile.inc"
