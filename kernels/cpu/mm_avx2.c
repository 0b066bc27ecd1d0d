/* mm_avx2: the SIMD kernels (mm_simd.inc) for AVX2 + FMA + F16C CPUs, built
 * with those flags only and chosen at run time by cpu_isa_detect. */
#include "cpu/mm_impl.h"

#include <immintrin.h>

#include "cpu/mm_ymm.h"

#define MM_PREFIX(name) mm_avx2_##name
#define MR 4   /* 4 × 2 float accumulators + 4 weight vectors fit 16 registers */
#define QT 2   /* decode: tokens per 8-row tile */
#define QTT 8  /* prefill: tokens per transposed 8-row tile */
#define MM_Q8_BIASED 0  /* see wt_signed */
#define MM_I16ACC 1  /* maddubs sums added in int16 (see tile_pt) */
#define MM_ZMM 0  /* 512-bit prefill tiles of 16 rows (tile_pt16) */
#define MT 2

/* maddubs sums byte pairs into int16: |u·s| ≤ 128·127·2 < 32768 for every
 * caller (Q8_0 goes through the sign trick below), so it never saturates. */
static inline __attribute__((always_inline)) __m256i dot_u8s8(__m256i u, __m256i s)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

static inline __attribute__((always_inline)) __m256i dot_acc_u8s8(__m256i acc, __m256i u, __m256i s)
{
    return _mm256_add_epi32(acc, dot_u8s8(u, s));
}

/* Σ u0·s0 + u1·s1 per int32 lane (packed weights: two half blocks). */
static inline __attribute__((always_inline)) __m256i dot2_u8s8(__m256i u0, __m256i s0, __m256i u1,
                                                                __m256i s1)
{
    return _mm256_add_epi32(dot_u8s8(u0, s0), dot_u8s8(u1, s1));
}

static inline __attribute__((always_inline)) __m256i dot_s8s8(__m256i w, __m256i s)
{
    return dot_u8s8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(s, w));
}

#include "cpu/mm_simd.inc"
