/* mm_ymm: helpers shared by the 256-bit kernel files (mm_avx2.c,
 * mm_avxvnni.c), each built with at least -mavx2. Internal to kernels/cpu. */
#ifndef TERN_MM_YMM_H
#define TERN_MM_YMM_H

#include <immintrin.h>
#include <stdint.h>

/* 32 bits → 32 bytes of 0xff (bit set) or 0x00, bit i to byte i. */
static inline __attribute__((always_inline)) __m256i bits_to_bytes(uint32_t bits)
{
    const __m256i shuf = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                            0x0202020202020202, 0x0303030303030303);
    const __m256i mask = _mm256_set1_epi64x((long long)0x7fbfdfeff7fbfdfeULL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
    v = _mm256_or_si256(v, mask);
    return _mm256_cmpeq_epi8(v, _mm256_set1_epi64x(-1));
}

#endif
