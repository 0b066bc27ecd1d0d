/* attn_avx2: the attention tile kernel (attn_tile.inc) for AVX2 + FMA +
 * F16C CPUs, 8 lanes (one ymm), chosen at run time by the caller's isa. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define VW 8
#define QKN 6   /* query rows per QK pass: QKN x 16/VW accumulators */
#define PVN 3   /* rows per PV pass: PVN x 4 accumulators (3: a GQA group of 3, e.g.
                 * SmolLM2, reads each V vector once, not in passes of 2 and 1) */
#define ATTN_DEQ_OFF (-12582912.0f)   /* o = -1.5 · 2^23 · s (deq8v below) */
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

/* The quantized K and V values read in place (attn_tile.inc's qk_rows,
 * pv_rows): 8 signed bytes times the block scale s (deq8v), 8 q4_0 nibbles
 * without their bias of 8 (deq8o: bytes; deq4v: the low or (hi) the high
 * nibbles of 8 bytes) as d · (u - 8). The bits of vcvtdq2ps and vmulps
 * without them (one float operation instead of two, per 8 values: the
 * FMA ports are what a quantized decode is short of on AVX2): x + 0x4B400000
 * as an f32 is 1.5 · 2^23 + x (|x| < 2^22), and fma(1.5 · 2^23 + x, s, o)
 * with o = -1.5 · 2^23 · s (ATTN_DEQ_OFF; exact, 13 bits) is x · s exactly
 * (19 bits), rounded once from an exact value. */
static inline __attribute__((always_inline)) __m256 deq_magic(__m256i x, __m256 s, __m256 o,
                                                            int bias)
{
    const __m256i f = _mm256_add_epi32(x, _mm256_set1_epi32(0x4B400000 - bias));
    return _mm256_fmadd_ps(_mm256_castsi256_ps(f), s, o);
}

static inline __attribute__((always_inline)) __m256 deq8v(const int8_t *p, __m256 s, __m256 o)
{
    return deq_magic(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)), s, o, 0);
}

static inline __attribute__((always_inline)) __m256 deq8o(const int8_t *p, __m256 s,
                                                        __m256 o)
{
    return deq_magic(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)), s, o, 8);
}

static inline __attribute__((always_inline)) __m256 deq4v(const uint8_t *p, int hi, __m256 s,
                                                        __m256 o)
{
    __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    if (hi) x = _mm256_srli_epi32(x, 4);
    return deq_magic(_mm256_and_si256(x, _mm256_set1_epi32(0x0F)), s, o, 8);
}

/* A byte of q5_0's fifth bits as 8 dwords of 0 or 16, with deq_magic's
 * constant and q5_0's bias of 16 folded in (deq5v): one add from memory per
 * 8 values gives the nibble's float bits, where moving the bits in
 * registers took four instructions on the ports the FMAs need and the or
 * and the add one more. 8 KiB. */
#define Q5H1(b, i) (0x4B400000 - 16 + ((b) >> (i) & 1) * 16)
#define Q5H8(b) { Q5H1(b, 0), Q5H1(b, 1), Q5H1(b, 2), Q5H1(b, 3), \
                  Q5H1(b, 4), Q5H1(b, 5), Q5H1(b, 6), Q5H1(b, 7) }
#define Q5H32(b) Q5H8(b), Q5H8(b + 1), Q5H8(b + 2), Q5H8(b + 3), Q5H8(b + 4), Q5H8(b + 5), \
                 Q5H8(b + 6), Q5H8(b + 7)
#define Q5H256(b) Q5H32(b), Q5H32(b + 8), Q5H32(b + 16), Q5H32(b + 24), Q5H32(b + 32), \
                  Q5H32(b + 40), Q5H32(b + 48), Q5H32(b + 56)
static const int32_t q5_high[256][8] __attribute__((aligned(32))) = {
    Q5H256(0), Q5H256(64), Q5H256(128), Q5H256(192)
};

/* 8 values of a q5_0 block (q4c's V rows) at element d (0, 8, 16 or 24):
 * the nibbles as deq4v's (the high ones need no mask), plus byte d / 8 of
 * qh through q5_high: deq_magic's bits for c - 16, then its FMA. */
#define ATTN_DEQ5_OFF ATTN_DEQ_OFF
static inline __attribute__((always_inline)) __m256 deq5v(const char *blk, int d, __m256 s,
                                                        __m256 o)
{
    const uint8_t hb = (uint8_t)blk[2 + d / 8];
    __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 6 + d % 16)));
    x = d >= 16 ? _mm256_srli_epi32(x, 4) : _mm256_and_si256(x, _mm256_set1_epi32(0x0F));
    x = _mm256_add_epi32(x, _mm256_load_si256((const __m256i *)q5_high[hb]));
    return _mm256_fmadd_ps(_mm256_castsi256_ps(x), s, o);
}

#include "attn_tile.inc"
