/* attn_avx512: the attention tile kernel (attn_tile.inc) for AVX-512 CPUs,
 * 16 lanes (one zmm: a block of 16 keys per vector), chosen at run time by
 * the caller's isa. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define VW 16
#define QKN 8   /* query rows per QK pass: QKN x 16/VW accumulators */
#define PVN 4   /* rows per PV pass: PVN x 4 accumulators */
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

#include "attn_tile.inc"
