/* attn_avx2: the attention tile kernel (attn_tile.inc) for AVX2 + FMA +
 * F16C CPUs, 8 lanes (one ymm), chosen at run time by the caller's isa. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define VW 8
#define QKN 6   /* query rows per QK pass: QKN x 16/VW accumulators */
#define PVN 2   /* rows per PV pass: PVN x 4 accumulators */
#define VTYPE __m256
#define ATTN_PREFIX(name) attn_avx2_##name

static inline __attribute__((always_inline)) __m256 vfma(__m256 a, __m256 b, __m256 c)
{
    return _mm256_fmadd_ps(a, b, c);
}

static inline __attribute__((always_inline)) __m256 splat(float x)
{
    return _mm256_set1_ps(x);
}

/* a > b ? a : b and a < b ? a : b per lane (maxps / minps). */
static inline __attribute__((always_inline)) __m256 vmaxv(__m256 a, __m256 b)
{
    return _mm256_max_ps(a, b);
}

static inline __attribute__((always_inline)) __m256 vminv(__m256 a, __m256 b)
{
    return _mm256_min_ps(a, b);
}

static inline __attribute__((always_inline)) __m256 cvt16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* x rounded to f16 and back (round to nearest even, as ops_round_f16). */
static inline __attribute__((always_inline)) __m256 rnd16(__m256 x)
{
    return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
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
    const __m256 s0 = sc ? _mm256_loadu_ps(sc) : _mm256_set1_ps(d);
    const __m256 s1 = sc ? _mm256_loadu_ps(sc + 8) : s0;
    _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), s0));
    _mm256_storeu_ps(dst + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                                                _mm_srli_si128(q, 8))), s1));
}

/* 8 signed bytes times s (deq8v), and 8 q4_0 nibbles, the low or (hi)
 * the high ones of 8 bytes, times s plus o = -8 s (deq4v; deq8o: bytes
 * without the bias, d · (u - 8) as one exact fused multiply-add): the
 * quantized K and V values read in place (attn_tile.inc's qk_rows, ldq). */
static inline __attribute__((always_inline)) __m256 deq8v(const int8_t *p, __m256 s)
{
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                             _mm_loadl_epi64((const __m128i *)p))), s);
}

static inline __attribute__((always_inline)) __m256 deq8o(const int8_t *p, __m256 s,
                                                        __m256 o)
{
    const __m256i x = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(x), s, o);
}

static inline __attribute__((always_inline)) __m256 deq4v(const uint8_t *p, int hi, __m256 s,
                                                        __m256 o)
{
    __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    if (hi) x = _mm256_srli_epi32(x, 4);
    x = _mm256_and_si256(x, _mm256_set1_epi32(0x0F));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(x), s, o);
}

#include "attn_tile.inc"
