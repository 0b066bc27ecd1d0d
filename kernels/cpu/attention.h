/* attention: causal (optionally sliding-window) multi-head attention with
 * grouped KV heads over a paged KV cache, softmax in f32.
 *
 * KV layout, one layer: K and V pools of n_blocks blocks of block_tokens
 * slots, block_tokens · row_bytes bytes each, block_stride bytes apart (the
 * CPU backend interleaves the layers' blocks). attn_kv_store writes a token
 * and owns the layout inside a block: for f16 and f32, K is [head][dim][slot]
 * (a block of one head converts in one contiguous pass and is already
 * transposed for the QK products, which run across keys) and V is
 * [head][slot][dim]; q8_0 and q4_0 (blocks of 32 along the row) keep token
 * rows, dequantized per block and KV head as a tile reads them. A
 * token at position p of a sequence attends to positions
 * [max(0, p - window + 1), p] of its block table.
 *
 * Arithmetic follows the reference engine's (non-flash) attention: Q is
 * rounded to f16 before the QK products, softmax is normalised in f32 and
 * the probabilities are rounded to f16 before the product with V. The
 * products with V are summed per part of ATTN_PART keys at fixed positions,
 * the parts added in order.
 *
 * Results are independent of how tokens are batched or split over threads:
 * each query is computed alone, over its keys in position order, with
 * block and part boundaries fixed by position. */
#ifndef TERN_ATTENTION_H
#define TERN_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_isa.h"
#include "ops.h"

struct threadpool;

struct attn_layer {
    void *k, *v;                /* layer's pools */
    enum ops_kv_type type;
    int32_t block_tokens;
    size_t row_bytes;           /* bytes of one token's K (or V) row */
    size_t block_stride;        /* bytes from a block to the next in k and v;
                                 * 0: block_tokens · row_bytes (packed pools) */
    /* q4c (OPS_KV_Q4C): the blocks a forward writes keep their K in f16
     * staging entries, planar as f16's ([head][dim][slot]), quantized per
     * channel into the pool (attn_kc_*) when full. A query reads its own
     * block from staging and the blocks before it from the pool, so each
     * key is read the same however the tokens are batched (decoding one by
     * one, a prefill, a speculative verification). */
    const int32_t *kc_entry;    /* per block id: its staging entry (blocks written now) */
    uint16_t *kc_stage;         /* this layer's part of entry 0 */
    size_t kc_stride;           /* halves from an entry's part to the next's */
};

/* Block `block` of pool k or v of L. */
static inline char *attn_block(const struct attn_layer *L, const void *pool, int32_t block)
{
    size_t s = L->block_stride;
    if (!s)   /* packed: q4c's K block is kv_dim · (4 + bt / 2) bytes (row_bytes: q5_0's V row) */
        s = L->type == OPS_KV_Q4C && pool == L->k
                ? L->row_bytes / 22 * 32 * (4 + (size_t)L->block_tokens / 2)
                : (size_t)L->block_tokens * L->row_bytes;
    return (char *)pool + (size_t)block * s;
}

struct attn_batch {
    int32_t n_tokens;
    int32_t n_head, n_head_kv, head_dim;
    int32_t window;             /* 0 = full causal */
    const float *q;             /* [n_tokens][n_head · head_dim], scaled and rotated */
    float *out;                 /* [n_tokens][n_head · head_dim] */
    const int32_t *pos;         /* [n_tokens] */
    const int32_t *const *table;/* [n_tokens] block table of the token's sequence */
    float scale;                /* multiplies the QK scores */
    float softcap;              /* > 0: scores become softcap · tanh(score / softcap)
                                 * before the softmax (gemma2); 0 = none */
    int32_t split_keys;         /* 1: queries too few to balance over the threads
                                 * (decode) split their keys over them (the same
                                 * result); 0: never */
    int32_t bf16_tiles;         /* 1: with isa amx, prompt tiles (2+ tokens) on
                                 * AMX-BF16 tiles (kernels/cpu/attn_amx.c): long
                                 * prompts 3x faster, within bf16's bound of exact,
                                 * the same bits on any thread count, but not the
                                 * bits of decoding the tokens one by one (batch
                                 * invariance, speculative decoding's identity with
                                 * plain decoding); 0: the f32 path on every ISA */
};

/* Per-thread work buffers; grown by attn_forward, freed by attn_scratch_free. */
struct attn_scratch {
    float *buf;
    size_t cap;                 /* floats */
    int32_t *tiles;             /* (first token, count) pairs */
    size_t tiles_cap;           /* pairs */
    int32_t *items;             /* (tile, part) pairs */
    size_t items_cap;           /* pairs */
    float *parts;               /* scores and part sums of split tiles */
    size_t parts_cap;           /* floats */
    double *stats;              /* split tiles' per-part max and sum per row */
    size_t stats_cap;           /* doubles */
    size_t *part_base;          /* per tile: its state's places in parts and stats */
    size_t part_base_cap;       /* triples */
    float *qrot;                /* rotated queries (attn_kv_rot) */
    size_t qrot_cap;            /* floats */
    void *kvbf;                 /* prompt tiles: the call's K and V, converted once
                                 * (bf16 tiles on AMX, f32 blocks otherwise) */
    size_t kvbf_cap;            /* bytes */
    void *runs;                 /* prompt tiles: runs of tiles (attn_impl.h) */
    size_t runs_cap;            /* runs */
    int32_t *tile_run;          /* prompt tiles: each tile's run, or -1 */
    size_t tile_run_cap;        /* tiles */
};
void attn_scratch_free(struct attn_scratch *s);

/* q4_0 rotates K and V as the reference does for a quantized cache (its
 * attn_rot_k / attn_rot_v): each head's K row (and each query) by the
 * orthonormal Walsh-Hadamard matrix of the largest power of two >= 64 that
 * divides head_dim, V rows in pieces of 64 (and the output back by the
 * same), so outlier dimensions spread over the block before quantization
 * and the scores and outputs are unchanged in exact arithmetic. Returns
 * that size for K (v = 0) or V (v = 1), 0 for no rotation (f16, f32, q8_0,
 * head_dim not a multiple of 64 or over ATTN_ROT_MAX). */
enum { ATTN_ROT_MAX = 512 };
int32_t attn_kv_rot(enum ops_kv_type t, int32_t head_dim, int v);
/* x = H·x for the n × n orthonormal Sylvester-Hadamard H (n a power of
 * two, H·H = I): the rotation above. */
void attn_hadamard(float *x, int32_t n);

/* q4c's K, per block and KV head: head_dim (min, step) pairs of f16, then
 * head_dim runs of block_tokens / 2 bytes, dimension d's codes of its
 * keys (key j in byte j / 2, the low nibble for even j); key j's value is
 * min + step · code (one fused multiply-add: the same bits on every ISA).
 * Per channel, not per token: K's large values sit in a few dimensions that
 * move slowly with the position, which a per-token scale spends its 16
 * levels on (docs/PERFORMANCE.md, "Where 4 bits can reach the 1 %"). */
static inline size_t attn_kc_head_bytes(int32_t head_dim, int32_t block_tokens)
{
    return (size_t)head_dim * (4 + (size_t)block_tokens / 2);
}
/* Quantizes keys [0, n) of block `block` of L from the f16 staging st
 * ([n_head_kv][head_dim][block_tokens]); codes of keys n.. are 0. */
void attn_kc_close(const struct attn_layer *L, int32_t n_head_kv, int32_t head_dim,
                   int32_t block, const uint16_t *st, int32_t n);
/* Dequantizes keys [0, n) of block `block` of L into f16 staging st (a
 * block written again after its staging was reclaimed). */
void attn_kc_reopen(const struct attn_layer *L, int32_t n_head_kv, int32_t head_dim,
                    int32_t block, uint16_t *st, int32_t n);
/* Keys [0, bt) of KV head g's part of a q4c block as f32, buf[d · bt + j]. */
void attn_kc_load(const void *head, int32_t head_dim, int32_t bt, float *buf);

/* Writes one token's K and V rows (n_head_kv · head_dim floats each) into
 * slot `slot` of block `block` (q4c: K into the block's staging entry,
 * which the caller has made). */
void attn_kv_store(const struct attn_layer *L, int32_t n_head_kv, int32_t head_dim,
                   int32_t block, int32_t slot, const float *k, const float *v);

/* Returns 0, or -1 when the scratch cannot be allocated. isa (at most
 * cpu_isa_detect()) picks the code path; the results are the same on each. */
int attn_forward(struct threadpool *tp, enum cpu_isa isa, const struct attn_layer *L,
                 const struct attn_batch *b, struct attn_scratch *s);

#endif
