/* cpu_kvstage: the f16 staging of a q4c cache's K (kv_type KV_Q4C).
 *
 * q4c quantizes K per channel over a whole block, so a block's keys are
 * quantized only when its last slot is written; until then they sit here
 * in f16, in entries of every layer's K of one block ([layer][head][dim]
 * [slot], f16's planar layout), from which a query reads its own block
 * (attn_layer.kc_entry). A full block's entry stays until it is needed for
 * another block, so a speculative verification that takes tokens back into
 * it reopens it exactly; one reclaimed before is reopened from the pool
 * (its keys rounded twice: correct, rarely slightly less exact).
 *
 * The engine never says when a sequence ends, so a block is known fresh by
 * its slot 0 being written, and entries of blocks no forward wrote lately
 * are reclaimed first (least recently written), an open one closed into
 * the pool first. Entries grow with the blocks one batch writes. Not
 * thread-safe: kvs_begin runs before the forward's threads start. */
#ifndef TERN_CPU_KVSTAGE_H
#define TERN_CPU_KVSTAGE_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "cpu/attention.h"

struct kvs {
    int32_t n_layer, n_head_kv, head_dim, bt, n_blocks;
    size_t layer_halves;        /* one layer's K of a block: n_head_kv · head_dim · bt */
    int32_t keep;               /* entries kept beyond one batch's blocks */
    uint16_t *k;                /* [cap][n_layer][layer_halves] */
    int32_t cap;
    int32_t *entry;             /* [n_blocks] the block's entry (stores go there), or -1 */
    int32_t *owner;             /* [cap] block, or -1 */
    int32_t *fill;              /* [cap] keys held (max slot written + 1) */
    uint64_t *used;             /* [cap] the forward that last wrote it */
    int32_t *closing;           /* entries this forward fills: closed per layer */
    int32_t n_closing;
    uint64_t tick;
};

/* The pool's view of layer l (the backend's layer_kv), for closing and
 * reopening entries. */
typedef struct attn_layer (*kvs_layer_fn)(const void *ctx, int32_t l);

int kvs_init(struct kvs *s, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t bt,
             int32_t n_blocks, int32_t keep, char *err, size_t errlen);
void kvs_free(struct kvs *s);

/* Before a forward: every block b's tokens write gets an entry (fresh at
 * slot 0, else its own, else reopened from the pool; entries written by
 * this forward are not reclaimed by it), and the blocks this forward fills
 * are listed for kvs_close_layer. Returns 0 or -1 with err (out of memory). */
int kvs_begin(struct kvs *s, const struct fwd_batch *b, kvs_layer_fn layer, const void *ctx,
              char *err, size_t errlen);

/* After layer l's stores, before its attention: quantizes the layer's K of
 * the blocks this forward fills into the pool. */
void kvs_close_layer(const struct kvs *s, const struct attn_layer *L, int32_t l);

/* Fills L's staging fields for layer l. */
void kvs_attach(const struct kvs *s, struct attn_layer *L, int32_t l);

/* Block `block` was written from outside (the disk cache): its entry goes. */
void kvs_forget(struct kvs *s, int32_t block);

/* Bytes of the entries. */
size_t kvs_bytes(const struct kvs *s);

#endif
