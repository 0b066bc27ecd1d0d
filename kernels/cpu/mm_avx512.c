/* mm_avx512: the SIMD kernels (mm_simd.inc) for AVX-512 F/BW/VL/DQ + VNNI
 * CPUs (Zen 4, Ice Lake and later), chosen at run time by cpu_isa_detect;
 * F16 / BF16 prefill on vdpbf16ps where AVX512_BF16 is there (mm_bf16_avx512.inc). */
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

#include "cpu/mm_prims_vnni512.h"
#include "cpu/tr16_avx512.h"   /* mm_bf16_avx512.inc's transposes */
#include "cpu/mm_simd.inc"
