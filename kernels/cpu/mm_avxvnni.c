/* mm_avxvnni: the SIMD kernels (mm_simd.inc) for AVX2 CPUs with AVX-VNNI
 * (the VEX-encoded vpdpbusd on ymm: Alder Lake and later, Zen 5) but no
 * AVX-512: 16 ymm registers as mm_avx2.c, the dot products of mm_avx512.c
 * (one exact u8·s8 → int32 instruction instead of maddubs + madd). The
 * integer sums are exact either way and the float steps are the same, so
 * the results are bit-identical to the other paths. */
#include "cpu/mm_impl.h"

#include <immintrin.h>

#include "cpu/mm_ymm.h"

#define MM_PREFIX(name) mm_avxvnni_##name
#define MR 4   /* 16 registers, as mm_avx2.c */
#define QT 2
#define QTT 8
#define MM_Q8_BIASED 1  /* vpdpbusd does not saturate: see wt_signed */
#define MM_I16ACC 0  /* vpdpbusd accumulates in int32 */
#define MM_ZMM 0
#define MT 2

/* vpdpbusd (VEX): 4 u8·s8 products summed into each int32 lane, exact. */
static inline __attribute__((always_inline)) __m256i dot_u8s8(__m256i u, __m256i s)
{
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
}

static inline __attribute__((always_inline)) __m256i dot_acc_u8s8(__m256i acc, __m256i u, __m256i s)
{
    return _mm256_dpbusd_avx_epi32(acc, u, s);
}

/* Σ u0·s0 + u1·s1 per int32 lane (packed weights: two half blocks). */
static inline __attribute__((always_inline)) __m256i dot2_u8s8(__m256i u0, __m256i s0, __m256i u1,
                                                                __m256i s1)
{
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u0, s0), u1, s1);
}

static inline __attribute__((always_inline)) __m256i dot_s8s8(__m256i w, __m256i s)
{
    return dot_u8s8(_mm256_abs_epi8(w), _mm256_sign_epi8(s, w));
}

#include "cpu/mm_simd.inc"
