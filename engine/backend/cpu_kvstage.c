/* cpu_kvstage: see cpu_kvstage.h. */
#include "cpu_kvstage.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kvs_init(struct kvs *s, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t bt,
             int32_t n_blocks, int32_t keep, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->n_layer = n_layer;
    s->n_head_kv = n_head_kv;
    s->head_dim = head_dim;
    s->bt = bt;
    s->n_blocks = n_blocks;
    s->keep = keep > 0 ? keep : 16;
    s->layer_halves = (size_t)n_head_kv * (size_t)head_dim * (size_t)bt;
    s->entry = malloc((size_t)n_blocks * sizeof *s->entry);
    if (!s->entry) {
        kvs_free(s);
        snprintf(err, errlen, "cpu backend: out of memory for the q4c staging map (%d blocks)",
                 n_blocks);
        return -1;
    }
    for (int32_t b = 0; b < n_blocks; b++) s->entry[b] = -1;
    return 0;
}

void kvs_free(struct kvs *s)
{
    free(s->k);
    free(s->entry);
    free(s->owner);
    free(s->fill);
    free(s->used);
    free(s->closing);
    memset(s, 0, sizeof *s);
}

size_t kvs_bytes(const struct kvs *s)
{
    return (size_t)s->cap * (size_t)s->n_layer * s->layer_halves * 2;
}

static uint16_t *stage_of(const struct kvs *s, int32_t e, int32_t l)
{
    return s->k + ((size_t)e * (size_t)s->n_layer + (size_t)l) * s->layer_halves;
}

static int grow(struct kvs *s, int32_t want)
{
    int32_t cap = s->cap ? s->cap : 8;
    while (cap < want) cap *= 2;
    if (cap == s->cap) return 0;
    const size_t eh = (size_t)s->n_layer * s->layer_halves;
    uint16_t *k = realloc(s->k, (size_t)cap * eh * sizeof *k);
    if (!k) return -1;
    s->k = k;
    int32_t *owner = realloc(s->owner, (size_t)cap * sizeof *owner);
    if (owner) s->owner = owner;
    int32_t *fill = realloc(s->fill, (size_t)cap * sizeof *fill);
    if (fill) s->fill = fill;
    uint64_t *used = realloc(s->used, (size_t)cap * sizeof *used);
    if (used) s->used = used;
    int32_t *closing = realloc(s->closing, (size_t)cap * sizeof *closing);
    if (closing) s->closing = closing;
    if (!owner || !fill || !used || !closing) return -1;
    for (int32_t e = s->cap; e < cap; e++) {
        s->owner[e] = -1;
        s->fill[e] = 0;
        s->used[e] = 0;
    }
    s->cap = cap;
    return 0;
}

/* Entry e leaves its block: an open one is quantized into the pool first
 * (its filled keys), so the block still reads what was written. */
static void release(struct kvs *s, int32_t e, kvs_layer_fn layer, const void *ctx)
{
    const int32_t ob = s->owner[e];
    if (ob < 0) return;
    if (s->fill[e] > 0 && s->fill[e] < s->bt)   /* keys not yet quantized */
        for (int32_t l = 0; l < s->n_layer; l++) {
            const struct attn_layer L = layer(ctx, l);
            attn_kc_close(&L, s->n_head_kv, s->head_dim, ob, stage_of(s, e, l), s->fill[e]);
        }
    s->entry[ob] = -1;
    s->owner[e] = -1;
}

/* An entry for block blk, first written at slot `slot` this forward:
 * a free one, else (up to `limit` entries) a new one, else the least
 * recently written one not written this forward. */
static int32_t take(struct kvs *s, int32_t blk, int32_t slot, int32_t limit, kvs_layer_fn layer,
                    const void *ctx)
{
    int32_t e = -1;
    for (int32_t i = 0; i < s->cap && e < 0; i++)
        if (s->owner[i] < 0) e = i;
    if (e < 0 && s->cap < limit) {
        const int32_t old = s->cap;
        if (grow(s, old + 1) == 0) e = old;
    }
    if (e < 0) {
        for (int32_t i = 0; i < s->cap; i++)
            if (s->used[i] != s->tick && (e < 0 || s->used[i] < s->used[e])) e = i;
        if (e >= 0) {
            release(s, e, layer, ctx);
        } else {   /* every entry written this forward: one more */
            const int32_t old = s->cap;
            if (grow(s, old + 1)) return -1;
            e = old;
        }
    }
    s->owner[e] = blk;
    s->entry[blk] = e;
    s->fill[e] = slot;
    if (slot > 0)   /* written before and its entry reclaimed since: from the pool */
        for (int32_t l = 0; l < s->n_layer; l++) {
            const struct attn_layer L = layer(ctx, l);
            attn_kc_reopen(&L, s->n_head_kv, s->head_dim, blk, stage_of(s, e, l), slot);
        }
    return e;
}

int kvs_begin(struct kvs *s, const struct fwd_batch *b, kvs_layer_fn layer, const void *ctx,
              char *err, size_t errlen)
{
    s->tick++;
    s->n_closing = 0;
    /* entries one forward may need: its blocks, and those kept for others */
    const int32_t limit = s->keep + b->n_tokens / s->bt + 2 * b->n_seqs + 2;
    /* the entries this forward writes first, so that none of them is
     * reclaimed for another of its blocks; a write before an entry's fill
     * is a fresh block (slot 0) or tokens taken back */
    for (int32_t i = 0; i < b->n_tokens; i++) {
        const int32_t p = b->pos[i], slot = p % s->bt;
        const int32_t e = s->entry[b->seqs[b->seq[i]].block_table[p / s->bt]];
        if (e < 0) continue;
        if (s->used[e] != s->tick && slot < s->fill[e]) s->fill[e] = slot;
        s->used[e] = s->tick;
    }
    for (int32_t i = 0; i < b->n_tokens; i++) {
        const int32_t p = b->pos[i], slot = p % s->bt;
        const int32_t blk = b->seqs[b->seq[i]].block_table[p / s->bt];
        int32_t e = s->entry[blk];
        if (e < 0) {
            e = take(s, blk, slot, limit, layer, ctx);
            if (e < 0) {
                snprintf(err, errlen, "forward: out of memory for the q4c staging (%d entries "
                         "of %zu bytes)", s->cap + 1,
                         (size_t)s->n_layer * s->layer_halves * 2);
                return -1;
            }
        }
        s->used[e] = s->tick;
        if (slot + 1 > s->fill[e]) s->fill[e] = slot + 1;
    }
    for (int32_t e = 0; e < s->cap; e++)
        if (s->owner[e] >= 0 && s->used[e] == s->tick && s->fill[e] >= s->bt)
            s->closing[s->n_closing++] = e;
    return 0;
}

void kvs_close_layer(const struct kvs *s, const struct attn_layer *L, int32_t l)
{
    for (int32_t i = 0; i < s->n_closing; i++) {
        const int32_t e = s->closing[i];
        attn_kc_close(L, s->n_head_kv, s->head_dim, s->owner[e], stage_of(s, e, l), s->bt);
    }
}

void kvs_attach(const struct kvs *s, struct attn_layer *L, int32_t l)
{
    L->kc_entry = s->entry;
    L->kc_stage = s->k ? stage_of(s, 0, l) : NULL;
    L->kc_stride = (size_t)s->n_layer * s->layer_halves;
}

void kvs_forget(struct kvs *s, int32_t block)
{
    if (block < 0 || block >= s->n_blocks) return;
    const int32_t e = s->entry[block];
    if (e >= 0) s->owner[e] = -1;
    s->entry[block] = -1;
}
