/* mm_avx512: the SIMD kernels (mm_simd.inc) for AVX-512 F/BW/VL/DQ + VNNI
 * CPUs (Zen 4, Ice Lake and later), chosen at run time by cpu_isa_detect. */
#include "cpu/mm_impl.h"

#include <immintrin.h>

#define MM_PREFIX(name) mm_avx512_##name
#define MR 4   /* 16 accumulators + 4 weight vectors of the 32 registers */
#define QT 4   /* decode: tokens per 8-row tile */
#define QTT 16  /* prefill: tokens per transposed 8-row tile */
#define MM_Q8_BIASED 1  /* see wt_signed */
#define MM_I16ACC 0  /* vpdpbusd accumulates in int32 */
#define MM_ZMM 1  /* 512-bit prefill tiles of 16 rows (tile_pt16) */
#define MT 4

/* vpdpbusd: 4 u8·s8 products summed into each int32 lane, exact. */
static inline __attribute__((always_inline)) __m256i dot_u8s8(__m256i u, __m256i s)
{
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

/* acc + Σ u·s over each int32 lane's 4 bytes, in one instruction. */
static inline __attribute__((always_inline)) __m256i dot_acc_u8s8(__m256i acc, __m256i u, __m256i s)
{
    return _mm256_dpbusd_epi32(acc, u, s);
}

/* Σ u0·s0 + u1·s1 per int32 lane (packed weights: two half blocks). */
static inline __attribute__((always_inline)) __m256i dot2_u8s8(__m256i u0, __m256i s0, __m256i u1,
                                                                __m256i s1)
{
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u0, s0), u1, s1);
}

static inline __attribute__((always_inline)) __m256i dot_s8s8(__m256i w, __m256i s)
{
    return dot_u8s8(_mm256_abs_epi8(w), _mm256_sign_epi8(s, w));
}

static inline __attribute__((always_inline)) __m256i bits_to_bytes(uint32_t bits)
{
    return _mm256_movm_epi8((__mmask32)bits);
}

#include "cpu/mm_simd.inc"
