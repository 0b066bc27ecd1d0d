/* mm_testdata: random but valid weight rows for every matmul type (random
 * quant bytes, scale fields set to finite halves), and random activations
 * with outliers. Shared by test_matmul and bench_matmul. */
#ifndef TERN_MM_TESTDATA_H
#define TERN_MM_TESTDATA_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"

static inline uint64_t td_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static inline float td_unif(uint64_t *s)
{
    return (float)((double)(td_next(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static inline void td_set_f16(uint8_t *p, float f)
{
    qt_f16 h = f32_to_fp16(f);
    memcpy(p, &h, 2);
}

/* Fills rows × cols weights of type wtype at w (qtype_row_bytes per row);
 * quant bytes all equal to fill when fill ≥ 0 (extreme codes), else random. */
static inline void td_weights_fill(uint32_t wtype, uint8_t *w, int64_t rows, int64_t cols, uint64_t *s,
                                   int fill)
{
    size_t rb = qtype_row_bytes(wtype, (uint64_t)cols);
    for (size_t i = 0; i < rb * (size_t)rows; i++) w[i] = fill >= 0 ? (uint8_t)fill : (uint8_t)td_next(s);
    if (wtype == QT_F32) {
        for (int64_t i = 0; i < rows * cols; i++) {
            float f = td_unif(s) * 0.1f;
            memcpy(w + 4 * i, &f, 4);
        }
        return;
    }
    if (wtype == QT_F16 || wtype == QT_BF16) {
        for (int64_t i = 0; i < rows * cols; i++) {
            float f = td_unif(s) * 0.1f;
            uint16_t h = wtype == QT_F16 ? f32_to_fp16(f) : f32_to_bf16(f);
            memcpy(w + 2 * i, &h, 2);
        }
        return;
    }
    const struct qtype_info *qi = qtype_get(wtype);
    size_t nblocks = (size_t)rows * (size_t)(cols / qi->block_size);
    for (size_t b = 0; b < nblocks; b++) {
        uint8_t *blk = w + b * qi->type_size;
        float d = 0.002f + 0.01f * (td_unif(s) + 1.0f), m = 0.05f * td_unif(s);
        switch (wtype) {
        case QT_Q4_1: case QT_Q5_1:
            td_set_f16(blk, d);
            td_set_f16(blk + 2, m);
            break;
        case QT_Q4_K: case QT_Q5_K:
            td_set_f16(blk, d * 0.1f);
            td_set_f16(blk + 2, d * 0.05f);
            break;
        case QT_Q2_K:   /* d, dmin last */
            td_set_f16(blk + qi->type_size - 4, d * 0.1f);
            td_set_f16(blk + qi->type_size - 2, d * 0.05f);
            break;
        case QT_Q3_K:   /* d is the last field */
            td_set_f16(blk + qi->type_size - 2, d * 0.1f);
            break;
        case QT_Q6_K:   /* d is the last field */
            td_set_f16(blk + qi->type_size - 2, d * 0.1f);
            break;
        default:        /* Q8_0, Q4_0, Q5_0: d first */
            td_set_f16(blk, d);
            break;
        }
    }
}

static inline void td_weights(uint32_t wtype, uint8_t *w, int64_t rows, int64_t cols, uint64_t *s)
{
    td_weights_fill(wtype, w, rows, cols, s, -1);
}

/* n × cols activations, mostly small, one large outlier per 64. */
static inline void td_acts(float *x, int64_t n, int64_t cols, uint64_t *s)
{
    for (int64_t i = 0; i < n * cols; i++) {
        x[i] = td_unif(s);
        if (td_next(s) % 64 == 0) x[i] *= 20.0f;
    }
}

#endif
