/* mm_amx: the AVX-512 kernels (mm_simd.inc) with the packed prefill tiles'
 * integer sums on Intel AMX int8 tiles (tile_pt16, MM_AMX), for Sapphire
 * Rapids and later once the process has the tile state (cpu_amx_usable),
 * and the F16 / BF16 weights' prefill on AMX-BF16 tiles (mm_bf16_amx.inc).
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

#include "cpu/mm_prims_vnni512.h"   /* mm_avx512.c's primitives */
#include "cpu/tr16_avx512.h"       /* mm_bf16_amx.inc's transposes */
#include "cpu/mm_simd.inc"
