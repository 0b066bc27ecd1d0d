/* mm_amx: the AVX-512 kernels (mm_simd.inc) with the packed prefill tiles'
 * integer sums on Intel AMX int8 tiles (tile_pt16, MM_AMX), for Sapphire
 * Rapids and later once the process has the tile state (cpu_amx_usable).
 * Everything else, decode included, is the AVX-512 code compiled again. */
#include "cpu/mm_impl.h"

#include <immintrin.h>

#define MM_PREFIX(name) mm_amx_##name
#define MR 4
#define QT 4
#define QTT 16
#define MM_Q8_BIASED 1
#define MM_I16ACC 0
#define MM_ZMM 1
#define MM_AMX 1
#define MT 4

/* The primitives of mm_avx512.c, word for word (mm_simd.inc's contract). */
static inline __attribute__((always_inline)) __m256i dot_u8s8(__m256i u, __m256i s)
{
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

static inline __attribute__((always_inline)) __m256i dot_acc_u8s8(__m256i acc, __m256i u, __m256i s)
{
    return _mm256_dpbusd_epi32(acc, u, s);
}

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
