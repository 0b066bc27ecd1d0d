/* mm_lowbit_avx2: mm_lowbit_simd.inc for AVX2 + FMA + F16C CPUs, built with
 * those flags only and chosen at run time (matmul.c's kernel_for). */
#define LB_PREFIX(name) mm_lowbit_avx2_##name
#include "cpu/mm_lowbit_simd.inc"
