/* mm_impl: what the matmul dispatcher (matmul.c) shares with the per-ISA
 * kernel files (mm_scalar.c, mm_avx2.c, mm_avx512.c). Internal to kernels/cpu. */
#ifndef TERN_MM_IMPL_H
#define TERN_MM_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"

/* Activations quantized once per call: blocks of 32 with an f32 scale and
 * the integer sum of the block (for the min / offset terms of the weight
 * formats). Token j's data starts at qs + j*cols, d + j*nb, sum + j*nb. */
struct mm_xq {
    int8_t *qs;     /* n × cols, q = round(x / d), |q| ≤ 127 */
    float *d;       /* n × nb, d = max|x| / 127 over the block */
    int32_t *sum;   /* n × nb, Σ q over the block */
    float *ds;      /* n × nb, d · (float)sum (the min terms' factor, rounded once) */
    int64_t nb;     /* blocks per token = cols / 32 */
    /* The same, group-major, for the prefill tiles (NULL below MM_XG_MIN_N
     * tokens): tokens in groups of MM_XG (the last one gs = n − g·MM_XG
     * long); group g, block b, token i of the group at
     *   gq + g·MM_XG·cols + 32·(b·gs + i),  gd/gsum/gds + g·MM_XG·nb + b·gs + i,
     * so a tile's inner loop over the group's tokens reads one contiguous
     * run (token rows cols bytes apart all fall in one or two L1 sets). */
    int8_t *gq;
    float *gd, *gds;
    int32_t *gsum;
    int32_t *gh;    /* (int16) Σ q of elements 0-15 | Σ of 16-31 << 16 (Q6_K's half blocks) */
    int32_t *gsp;   /* even b only: (int16) sum of block b | sum of b + 1 << 16 (Q4_K's mins, K4_MSUM) */
};

#define MM_XG 32        /* tokens per group (= the SIMD kernels' MM_TB) */
#define MM_XG_MIN_N 8   /* from this many tokens on the group-major copy is made */

/* Flag on a weight type: the rows were repacked by mm_pack (8-row tiles,
 * see mm_simd.inc); only the SIMD kernels read that layout. */
#define MM_PACKED 0x100u

/* Packed K-quant super-blocks (8 rows × 256 columns; layouts in matmul.c,
 * pack_k4 and pack_q6k), shared by the packer and the kernels. */
#define MM_PK_Q4K_SUPER 1184                  /* the plain 8 × 144, scales widened */
#define MM_PK_Q5K_SUPER 1440                  /* Q4_K's plus 8 × 32 fifth-bit bytes */
#define MM_PK_Q6K_SUPER 1680                  /* the plain 8 × 210, reordered */
#define MM_PK_K4_Q 160                        /* Q4_K quants */
#define MM_PK_Q5K_H 160                       /* Q5_K fifth bits (256 bytes) */
#define MM_PK_Q5K_Q (MM_PK_Q5K_H + 256)       /* Q5_K quants */
#define MM_PK_Q6K_BLOCK 208                   /* Q6_K bytes per 32 columns after d[8] */

static inline size_t mm_pk_super_bytes(uint32_t wtype)
{
    return wtype == QT_Q4_K ? MM_PK_Q4K_SUPER : wtype == QT_Q5_K ? MM_PK_Q5K_SUPER : MM_PK_Q6K_SUPER;
}

/* One matmul call as the kernels see it. */
struct mm_task {
    uint32_t wtype;
    const uint8_t *w;   /* rows × row_bytes */
    size_t row_bytes;
    int64_t rows, cols, n;
    const float *x;     /* n × cols f32 (used by F32/F16/BF16 weights) */
    struct mm_xq xq;    /* quantized x (used by the block-quantized types) */
    float *y;           /* n × rows */
    /* x as bf16 VNNI tiles for the AMX-BF16 kernels of F16 / BF16 weights
     * (mm_bf16_amx.inc), or as bf16 pairs for the AVX-512 kernels'
     * vdpbf16ps (mm_bf16_avx512.inc); NULL where they are not used (then
     * the f32 path) */
    const uint16_t *xb;
    /* x as int8 B tiles with one scale per token (mm_w8a8_x), for the W8A8
     * kernel (mm_w8a8_run); NULL where it is not used */
    const int8_t *x8;
    const float *sx;
};

/* Computes y[j][r] for r in [r0, r1) and every token j. */
typedef void (*mm_kernel_fn)(const struct mm_task *t, int64_t r0, int64_t r1);
/* Quantizes one token of cols floats (cols a multiple of 32). */
typedef void (*mm_quant_fn)(const float *x, int64_t cols, int8_t *qs, float *d, int32_t *sum);

/* True for the types whose kernels read struct mm_xq instead of x. */
static inline bool mm_wants_xq(uint32_t wtype)
{
    return wtype != QT_F32 && wtype != QT_F16 && wtype != QT_BF16;
}

/* Per-ISA tables: NULL means "not specialised, use the scalar kernel". */
mm_kernel_fn mm_scalar_kernel(uint32_t wtype);
/* Q2_K, Q3_K, IQ4_NL, IQ4_XS (mm_lowbit.c, portable on every ISA). */
mm_kernel_fn mm_lowbit_kernel(uint32_t wtype);
/* Their SIMD forms (mm_lowbit_simd.inc); NULL for the other types. */
mm_kernel_fn mm_lowbit_avx2_kernel(uint32_t wtype);
mm_kernel_fn mm_lowbit_avx512_kernel(uint32_t wtype);
/* The reference's Q8_K activations for the types it dots with Q8_K (cols a
 * multiple of 256; mm_lowbit.c). */
static inline bool mm_wants_q8k(uint32_t wtype)
{
    switch (wtype & ~MM_PACKED) {
    case QT_Q2_K: case QT_Q3_K: case QT_Q4_K: case QT_Q5_K: case QT_Q6_K: case QT_IQ4_XS:
        return true;
    default: return false;
    }
}
void mm_q8k_quant(const float *x, int64_t cols, int8_t *qs, float *d, int32_t *sum);
/* Its SIMD forms (mm_simd.inc), bit-identical to it. */
void mm_avx2_q8k_quant(const float *x, int64_t cols, int8_t *qs, float *d, int32_t *sum);
void mm_avxvnni_q8k_quant(const float *x, int64_t cols, int8_t *qs, float *d, int32_t *sum);
void mm_avx512_q8k_quant(const float *x, int64_t cols, int8_t *qs, float *d, int32_t *sum);
/* Q4_1 and Q5_1: the reference dots them with Q8_1 (f16 d and an f16
 * d·Σq), which the kernels' exact Σq cannot reproduce; they keep per-32
 * activations with an f32 d = max/127, x·(1/d) (mm_scalar.c, portable). */
static inline bool mm_wants_q8_f32d(uint32_t wtype)
{
    return (wtype & ~MM_PACKED) == QT_Q4_1 || (wtype & ~MM_PACKED) == QT_Q5_1;
}
void mm_q8_f32d_quant(const float *x, int64_t cols, int8_t *qs, float *d, int32_t *sum);
void mm_scalar_quant(const float *x, int64_t cols, int8_t *qs, float *d, int32_t *sum);
mm_kernel_fn mm_avx2_kernel(uint32_t wtype);
void mm_avx2_quant(const float *x, int64_t cols, int8_t *qs, float *d, int32_t *sum);
mm_kernel_fn mm_avxvnni_kernel(uint32_t wtype);
void mm_avxvnni_quant(const float *x, int64_t cols, int8_t *qs, float *d, int32_t *sum);
mm_kernel_fn mm_avx512_kernel(uint32_t wtype);
/* AVX-512 with the packed prefill products on AMX int8 tiles (mm_amx.c) */
mm_kernel_fn mm_amx_kernel(uint32_t wtype);
/* AMX-BF16 prefill of F16 / BF16 weights (mm_bf16_amx.inc): from this many
 * tokens on, with cols a multiple of 32, the dispatcher converts x into
 * bf16 tiles (mm_amx_bf16_x, token tiles T0 .. T1 of 16, zero past n, the
 * tile count rounded up to even: mm_bf16_x_bytes) and the F16 / BF16
 * kernels multiply on tiles. */
#define MM_BF16_MIN_N 32
static inline size_t mm_bf16_x_bytes(int64_t n, int64_t cols)
{
    return (size_t)((n + 31) / 32) * 32 * (size_t)cols * 2;
}
void mm_amx_bf16_x(const float *x, int64_t cols, int64_t n, int64_t T0, int64_t T1, uint16_t *xb);
/* The same numbers on AVX512_BF16's vdpbf16ps for the AVX-512 kernels
 * (mm_bf16_avx512.inc), on a CPU with it (cpu_avx512bf16) and isa avx512:
 * x as bf16 pairs in groups of 8 tokens (mm_avx512_bf16dp_x, groups g0 ..
 * g1, zero past n; fits in mm_bf16_x_bytes). */
#define MM_BF16DP_GROUP 8
void mm_avx512_bf16dp_x(const float *x, int64_t cols, int64_t n, int64_t g0, int64_t g1,
                        uint16_t *xb);
/* W8A8 prefill on AMX int8 tiles (mm_w8a8_amx.c, with scratch->w8a8 and
 * isa amx): from MM_W8A8_MIN_N tokens on, cols a multiple of 64, the types
 * mm_w8a8_supported accepts (plain or packed). mm_w8a8_x quantizes token
 * tiles T0 .. T1 of x (16 tokens each; zero past n) into int8 B tiles
 * (mm_w8a8_x_bytes for all of them, the tile count rounded up to even) and
 * their scales sx[j]; mm_w8a8_run is the kernel (rows r0 .. r1). */
#define MM_W8A8_MIN_N 32
/* Columns per scale group: one int8 scale per (row, group) and per (token,
 * group), the int32 sums of a group turned to f32 once (a multiple of 64;
 * SmolLM2's perplexity, 8 chunks: 1024 columns +2.35 %, 256 +1.67 %,
 * 128 +1.05 % and slower; one scale per whole row +3.7 % over 2 chunks). */
#ifndef MM_W8A8_G
#define MM_W8A8_G 256
#endif
static inline size_t mm_w8a8_x_bytes(int64_t n, int64_t cols)
{
    return (size_t)((n + 31) / 32) * 32 * (size_t)cols;
}
/* the scales after the tiles: token tile T, group g, token i at 16 (T·ng + g) + i */
static inline size_t mm_w8a8_sx_count(int64_t n, int64_t cols)
{
    return (size_t)((n + 31) / 32) * 32 * (size_t)((cols + MM_W8A8_G - 1) / MM_W8A8_G);
}
bool mm_w8a8_supported(uint32_t wtype);
/* Row `row` of a supported type's weights (t->wtype, w, row_bytes, cols)
 * as f32 into out (cols values): the values dequant_row gives, bit for bit
 * (the conversion mm_w8a8_run quantizes from; exported for the tests). */
void mm_w8a8_row_f32(const struct mm_task *t, int64_t row, float *out);
/* mm_w8a8_run's buffers for one thread (a multiple of 64 bytes): the
 * dispatcher keeps one area per pool thread in mm_scratch.w8, grown only. */
size_t mm_w8a8_work_bytes(int64_t cols);
void mm_w8a8_x(const float *x, int64_t cols, int64_t n, int64_t T0, int64_t T1, int8_t *xb,
               float *sx);
/* work: this thread's mm_w8a8_work_bytes(cols) bytes, 64-byte aligned */
void mm_w8a8_run(const struct mm_task *t, int64_t r0, int64_t r1, void *work);
/* mm_amx.c's copies of the AVX-512 quantizers (matmul.c uses mm_avx512's) */
void mm_amx_quant(const float *x, int64_t cols, int8_t *qs, float *d, int32_t *sum);
void mm_amx_q8k_quant(const float *x, int64_t cols, int8_t *qs, float *d, int32_t *sum);
void mm_avx512_quant(const float *x, int64_t cols, int8_t *qs, float *d, int32_t *sum);

/* IEEE half → f32, exact for every input (normals, subnormals, inf, NaN). */
static inline float mm_fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else {   /* subnormal: normalise */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline float mm_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t mm_rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

/* Q4_K / Q5_K 6-bit sub-block scale and min j (0..7) from the 12 packed bytes. */
static inline void mm_k4_scale_min(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

#endif
