/* attn_impl: what attention.c shares with the per-ISA tile kernels
 * (attn_tile.inc, built as attn_scalar.c / attn_avx2.c / attn_avx512.c).
 * Internal to kernels/cpu. */
#ifndef TERN_ATTN_IMPL_H
#define TERN_ATTN_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attention.h"

/* Queries of one sequence per tile (a prompt's K and V blocks converted
 * once per call and KV head, attn_kv_run); query rows per QK pass at most
 * (QKN); keys per part (rounded up to whole blocks): a query's keys fall into parts at
 * fixed positions [k·P, (k+1)·P), its products with V are summed per part
 * and the parts added in order, so a decode query can be split over
 * threads along its keys with the same result as computed whole. */
enum { ATTN_TILE = 16, ATTN_ROWS_MAX = 8, ATTN_PART = 256 };

/* Floats per vector at most (AVX-512): the per-row max lanes' stride. */
enum { ATTN_VW_MAX = 16 };

/* A run of prompt tiles: consecutive tiles of one sequence at consecutive
 * positions, whose keys [lo, hi] are converted once per call instead of
 * once per tile, in chunks c_lo, c_lo + 1, ... per KV head: head g's chunk
 * c is slot off + g · n_ch + c - c_lo. On AMX (bf16 tiles) a chunk is
 * ATTN_AMX_CK keys as bf16 tiles (attn_amx_slot_bytes); otherwise one KV
 * block as f32 (attn_kvf_slot_floats): K transposed as load_block_t gives
 * it, then V as load_block does. */
struct attn_kv_run {
    int32_t tok;                /* the run's first token (its table) */
    int32_t lo, hi;             /* keys */
    int32_t c_lo, n_ch;         /* chunks */
    size_t off;                 /* first slot */
};

/* Tiles of more queries than this read K and V converted to f32 (blocks
 * of one run converted once per call, attn_kv_run); up to it, in place
 * where the ISA and the layout allow (attn_tile.inc's tile_mode). */
#ifndef ATTN_INPLACE_T
#define ATTN_INPLACE_T 8
#endif

/* Floats of one f32 slot: a block's K (transposed) and its V. */
static inline size_t attn_kvf_slot_floats(int32_t bt, int32_t hd)
{
    return (size_t)2 * (size_t)bt * (size_t)hd;
}

struct attn_job {
    const struct attn_layer *L;
    const struct attn_batch *b;
    const int32_t *tiles;       /* (first token, count) pairs */
    int32_t n_tiles;
    const int32_t *items;       /* (tile, part) pairs; part -1 = all of the tile's parts */
    int32_t n_items;
    int32_t part_keys;          /* P: attn_part_keys(block_tokens) */
    int32_t phase;              /* 0: whole tiles; 1-4: the split phases (attn_tile.inc) */
    float *parts;               /* split tiles' scores and per-part products with V */
    double *stats;              /* split tiles' per-part max and sum of each row */
    const size_t *part_base;    /* [n_tiles][3]: the tile's scores and products in parts,
                                 * its stats in stats */
    float *scratch;
    size_t per_thread;          /* floats */
    /* prompt tiles' K and V converted once per call (attn_kv_run) */
    const struct attn_kv_run *runs;
    int32_t n_runs;
    const int32_t *tile_run;    /* per tile: its run, or -1 */
    uint16_t *kvbf;             /* AMX: the runs' bf16 chunks (64-byte aligned); NULL: per item */
    float *kvf;                 /* otherwise: the runs' f32 blocks; NULL: per tile */
};

/* The run holding conversion slot u (a conversion pass's unit). */
static inline const struct attn_kv_run *attn_run_of_slot(const struct attn_job *J, int64_t u)
{
    int32_t r = 0;
    while (r + 1 < J->n_runs && (int64_t)J->runs[r + 1].off <= u) r++;
    return &J->runs[r];
}

/* Where the run's f32 K (v = 0) or V (v = 1) of block blk sits for KV head
 * g: the head's n_ch K blocks, then its n_ch V blocks. */
static inline float *attn_kvf_at(const struct attn_job *J, const struct attn_kv_run *run,
                                 int32_t g, int32_t blk, int v)
{
    const int32_t bt = J->L->block_tokens, hd = J->b->head_dim;
    return J->kvf + (run->off + (size_t)g * run->n_ch) * attn_kvf_slot_floats(bt, hd) +
           ((size_t)(blk - run->c_lo) + (size_t)v * run->n_ch) * (size_t)bt * (size_t)hd;
}

static inline int32_t attn_part_keys(int32_t bt)
{
    return (ATTN_PART + bt - 1) / bt * bt;
}

static inline int32_t attn_window_lo(int32_t p, int32_t window)
{
    return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
}

/* f16 and f32 blocks are stored head-major (see attention.h); q8_0 and
 * q4_0 keep token rows, their quantization blocks run along the row. */
static inline bool attn_kv_planar(enum ops_kv_type t)
{
    return t == OPS_KV_F16 || t == OPS_KV_F32;
}

static inline size_t attn_kv_elem_bytes(enum ops_kv_type t)
{
    return t == OPS_KV_F16 ? 2 : 4;
}

/* First part and number of parts of tile (t0, T)'s keys. */
static inline void attn_tile_parts(const struct attn_batch *b, int32_t t0, int32_t T, int32_t P,
                                   int32_t *k0, int32_t *n)
{
    const int32_t lo = attn_window_lo(b->pos[t0], b->window);
    *k0 = lo / P;
    *n = b->pos[t0 + T - 1] / P - lo / P + 1;
}

/* Floats of a split tile's scores, per KV head. */
static inline size_t attn_split_floats(const struct attn_batch *b, int32_t t0, int32_t T)
{
    const int32_t G = b->n_head / b->n_head_kv, lo = attn_window_lo(b->pos[t0], b->window);
    return (size_t)T * G * (size_t)(b->pos[t0 + T - 1] - lo + 1);
}

/* tp_run workers of the split phases 1-3: the (item, KV head) pairs of
 * thread ith of nth (phase 4: the (tile, KV head) pairs, on one thread);
 * tp_run_claimed units of phase 0: (item, KV head) pairs, the last first.
 * Every ISA's version does the same float operations in the same order. */
void attn_scalar_worker(void *job, int ith, int nth);
void attn_avx2_worker(void *job, int ith, int nth);
void attn_avx512_worker(void *job, int ith, int nth);
void attn_scalar_unit(void *job, int64_t unit, int ith);
void attn_avx2_unit(void *job, int64_t unit, int ith);
void attn_avx512_unit(void *job, int64_t unit, int ith);
/* The conversion pass before the units when J->kvf is set: unit u fills
 * f32 slot u (a run's KV head's block) as the tiles would convert it. */
void attn_scalar_convert(void *job, int64_t unit, int ith);
void attn_avx2_convert(void *job, int64_t unit, int ith);
void attn_avx512_convert(void *job, int64_t unit, int ith);

/* TERN_ISA=amx (attn_amx.c): prompt tiles of at least ATTN_AMX_MIN_ROWS
 * query rows on AMX-BF16 tiles, keys in chunks of ATTN_AMX_CK at fixed
 * positions; head dims a multiple of 64 up to ATTN_AMX_MAX_HD, blocks a
 * multiple of 16 keys. Other items run attn_avx512_unit. */
enum { ATTN_AMX_TILE = 64, ATTN_AMX_CK = 64, ATTN_AMX_MIN_ROWS = 16, ATTN_AMX_MAX_HD = 512 };
bool attn_amx_fits(const struct attn_job *J, int32_t tile);
void attn_amx_unit(void *job, int64_t unit, int ith);
/* The conversion pass before attn_amx_unit: unit u fills slot u of
 * J->kvbf (a run's KV head's chunk). */
void attn_amx_convert_unit(void *job, int64_t unit, int ith);

/* Bytes of one converted chunk: K's hi and lo B tiles, then V's. */
static inline size_t attn_amx_slot_bytes(int32_t hd)
{
    return (size_t)3 * ATTN_AMX_CK * (size_t)hd * 2;
}

/* Floats of attn_amx.c's per-thread buffers for G query heads per KV head. */
static inline size_t attn_amx_floats(int32_t G, int32_t hd)
{
    const size_t rp = ((size_t)ATTN_AMX_TILE * G + 15) / 16 * 16, h = (size_t)hd;
    return rp * h + ATTN_AMX_CK * h * 3 / 2 + 16 * h + 8 * ATTN_AMX_CK + 32 * ATTN_AMX_CK + rp * h +
           2 * rp + 2 * h + 16 * 12;
}

#endif
