/* mm_prims_vnni512.h: mm_simd.inc's primitives (dot_u8s8, dot_acc_u8s8,
 * dot2_u8s8, dot_s8s8, bits_to_bytes) with AVX-512 VNNI/BW/VL on ymm, for
 * mm_avx512.c and mm_amx.c (which differ only in tile_pt16's sums). Include
 * after <immintrin.h>, in a file built with those flags. */
#ifndef TERN_MM_PRIMS_VNNI512_H
#define TERN_MM_PRIMS_VNNI512_H

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

#endif
