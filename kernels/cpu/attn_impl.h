/* attn_impl: what attention.c shares with the per-ISA tile kernels
 * (attn_tile.inc, built as attn_scalar.c / attn_avx2.c / attn_avx512.c).
 * Internal to kernels/cpu. */
#ifndef TERN_ATTN_IMPL_H
#define TERN_ATTN_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attention.h"

/* queries of one sequence per tile; query rows per QK pass at most (QKN) */
enum { ATTN_TILE = 8, ATTN_ROWS_MAX = 8 };

struct attn_job {
    const struct attn_layer *L;
    const struct attn_batch *b;
    const int32_t *tiles;       /* (first token, count) pairs */
    int32_t n_tiles;
    float *scratch;
    size_t per_thread;          /* floats */
};

static inline int32_t attn_window_lo(int32_t p, int32_t window)
{
    return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
}

/* f16 and f32 blocks are stored head-major (see attention.h); q8_0 keeps
 * token rows, its quantization blocks run along the row. */
static inline bool attn_kv_planar(enum ops_kv_type t)
{
    return t != OPS_KV_Q8_0;
}

static inline size_t attn_kv_elem_bytes(enum ops_kv_type t)
{
    return t == OPS_KV_F16 ? 2 : 4;
}

/* tp_run workers: the (tile, KV head) items of thread ith of nth. Every
 * ISA's version does the same float operations in the same order. */
void attn_scalar_worker(void *job, int ith, int nth);
void attn_avx2_worker(void *job, int ith, int nth);
void attn_avx512_worker(void *job, int ith, int nth);

#endif
