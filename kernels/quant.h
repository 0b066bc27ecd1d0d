/* quant: GGML tensor formats (block layouts), reference dequantization to f32,
 * and quantization of f32 rows to Q8_0 / Q8_K for activations.
 * Type numbers follow GGML so they can be read straight from GGUF files. */
#ifndef TERN_QUANT_H
#define TERN_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

enum qtype {
    QT_F32 = 0, QT_F16 = 1, QT_Q4_0 = 2, QT_Q4_1 = 3,
    QT_Q5_0 = 6, QT_Q5_1 = 7, QT_Q8_0 = 8, QT_Q8_1 = 9,
    QT_Q2_K = 10, QT_Q3_K = 11, QT_Q4_K = 12, QT_Q5_K = 13, QT_Q6_K = 14, QT_Q8_K = 15,
    QT_IQ4_NL = 20, QT_IQ4_XS = 23,
    QT_BF16 = 30,
    QT_COUNT = 40
};

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK_K 256
#define K_SCALE_SIZE 12

typedef uint16_t qt_f16;  /* IEEE half, stored bits */
typedef uint16_t qt_bf16; /* bfloat16, stored bits */

/* Block layouts exactly as in GGUF files (little endian, no padding). */
typedef struct { qt_f16 d; uint8_t qs[QK4_0 / 2]; } block_q4_0;
typedef struct { qt_f16 d, m; uint8_t qs[QK4_1 / 2]; } block_q4_1;
typedef struct { qt_f16 d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; } block_q5_0;
typedef struct { qt_f16 d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } block_q5_1;
typedef struct { qt_f16 d; int8_t qs[QK8_0]; } block_q8_0;
typedef struct { qt_f16 d, s; int8_t qs[32]; } block_q8_1; /* s = d * sum(qs) */
typedef struct { qt_f16 d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; } block_q4_K;
typedef struct { qt_f16 d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; } block_q5_K;
typedef struct { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; qt_f16 d; } block_q6_K;
typedef struct { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; } block_q8_K;
typedef struct { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; qt_f16 d, dmin; } block_q2_K;
typedef struct { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; qt_f16 d; } block_q3_K;
#define QK4_NL 32
typedef struct { qt_f16 d; uint8_t qs[QK4_NL / 2]; } block_iq4_nl;
typedef struct { qt_f16 d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; } block_iq4_xs;
/* The 16 non-linear levels of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl). */
extern const int8_t qt_iq4nl_values[16];

struct qtype_info {
    const char *name;      /* "Q4_K", ... */
    uint32_t block_size;   /* elements per block */
    uint32_t type_size;    /* bytes per block */
    bool supported;        /* dequantization implemented */
};

/* Info for a type number; NULL for unknown numbers. */
const struct qtype_info *qtype_get(uint32_t type);
const char *qtype_name(uint32_t type);  /* "unknown" for unknown numbers (callers print N) */
/* Bytes for a row of n elements; 0 if n is not a multiple of the block size or type unknown. */
size_t qtype_row_bytes(uint32_t type, uint64_t n);

/* Reference dequantization of n elements (n a multiple of the block size). */
bool dequant_row(uint32_t type, const void *src, float *dst, int64_t n);
/* Activation quantization (n a multiple of 32 / 256). Returns false on bad n. */
bool quant_row_q8_0(const float *src, block_q8_0 *dst, int64_t n);
bool quant_row_q8_K(const float *src, block_q8_K *dst, int64_t n);
/* Reference quantizers for the weight types the tests round-trip. */
bool quant_row_q4_0(const float *src, block_q4_0 *dst, int64_t n);
bool quant_row_q4_1(const float *src, block_q4_1 *dst, int64_t n);
/* The reference's quantize_row_q5_0_ref (q4c's V rows, kernels/cpu/ops.c). */
bool quant_row_q5_0(const float *src, block_q5_0 *dst, int64_t n);

float fp16_to_f32(qt_f16 h);
qt_f16 f32_to_fp16(float f);
float bf16_to_f32(qt_bf16 h);
qt_bf16 f32_to_bf16(float f);

#endif
