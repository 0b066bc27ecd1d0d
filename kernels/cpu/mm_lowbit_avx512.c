/* mm_lowbit_avx512: mm_lowbit_simd.inc for AVX-512 (VNNI dot products on
 * 256-bit vectors), built with those flags only and chosen at run time. */
#define LB_PREFIX(name) mm_lowbit_avx512_##name
#include "cpu/mm_lowbit_simd.inc"
