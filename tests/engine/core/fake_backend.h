/* fake_backend: a deterministic backend for scheduler tests. It keeps, in
 * its own KV pool, the token written at every (block, slot), and the "model"
 * predicts the next token as a hash of the whole history it reads back
 * through the block table. So a wrong block table, a reused block with the
 * wrong contents, or a lost position after preemption changes the output,
 * while the output of a correct engine depends only on the token history
 * (alone or batched, cached or recomputed). Optional delay per token makes
 * steps take time like a real model's. */
#ifndef TERN_FAKE_BACKEND_H
#define TERN_FAKE_BACKEND_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "model.h"

#define FAKE_VOCAB 64

struct fake {
    struct backend be;
    struct model model;
    int32_t *kv;                 /* [n_blocks * block_tokens] token ids, -1 = unwritten */
    long delay_ns_per_token;
    long delay_ns_per_step;
    int32_t max_tokens_seen, max_seqs_seen;
    int32_t steps;
};

static uint32_t fake_hash(uint32_t h, int32_t t)
{
    h ^= (uint32_t)t + 0x9e3779b9u + (h << 6) + (h >> 2);
    return h * 2654435761u;
}

static void fake_sleep(long ns)
{
    if (ns <= 0) return;
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
}

static int fake_forward(struct backend *be, const struct fwd_batch *b, float *logits, char *err,
                        size_t errlen)
{
    struct fake *f = be->impl;
    int32_t bt = be->kv_block_tokens, row = 0;
    f->steps++;
    if (b->n_tokens > f->max_tokens_seen) f->max_tokens_seen = b->n_tokens;
    if (b->n_seqs > f->max_seqs_seen) f->max_seqs_seen = b->n_seqs;
    /* Write all K/V first (a real backend writes each layer's K/V before
     * attention reads it), then compute outputs. */
    for (int32_t i = 0; i < b->n_tokens; i++) {
        const struct fwd_seq *s = &b->seqs[b->seq[i]];
        int32_t p = b->pos[i];
        if (p / bt >= s->n_blocks) {
            snprintf(err, errlen, "fake: position %d beyond %d blocks", p, s->n_blocks);
            return -1;
        }
        int32_t blk = s->block_table[p / bt];
        if (blk < 0 || blk >= be->kv_n_blocks) {
            snprintf(err, errlen, "fake: block %d out of pool", blk);
            return -1;
        }
        f->kv[(size_t)blk * (size_t)bt + (size_t)(p % bt)] = b->token[i];
    }
    for (int32_t i = 0; i < b->n_tokens; i++) {
        if (!b->want_logits[i]) continue;
        const struct fwd_seq *s = &b->seqs[b->seq[i]];
        uint32_t h = 2166136261u;
        for (int32_t p = 0; p <= b->pos[i]; p++) {
            int32_t t = f->kv[(size_t)s->block_table[p / bt] * (size_t)bt + (size_t)(p % bt)];
            if (t < 0) {
                snprintf(err, errlen, "fake: read unwritten slot at position %d", p);
                return -1;
            }
            h = fake_hash(h, t);
        }
        float *out = logits + (size_t)row++ * FAKE_VOCAB;
        for (int32_t v = 0; v < FAKE_VOCAB; v++) out[v] = 0;
        out[1 + h % (FAKE_VOCAB - 1)] = 4.0f; /* never token 0 */
    }
    fake_sleep(f->delay_ns_per_step + f->delay_ns_per_token * b->n_tokens);
    return 0;
}

static void fake_info(struct backend *be, struct backend_info *out)
{
    memset(out, 0, sizeof *out);
    out->name = "fake";
    snprintf(out->device, sizeof out->device, "fake (%d blocks)", be->kv_n_blocks);
}

static void fake_close(struct backend *be)
{
    (void)be;
}

static const struct backend_ops fake_ops = {
    .name = "fake", .forward = fake_forward, .get_info = fake_info, .close = fake_close};

static struct fake *fake_open(int32_t n_blocks, int32_t block_tokens)
{
    struct fake *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->kv = malloc((size_t)n_blocks * (size_t)block_tokens * sizeof *f->kv);
    if (!f->kv) {
        free(f);
        return NULL;
    }
    for (int32_t i = 0; i < n_blocks * block_tokens; i++) f->kv[i] = -1;
    f->model.hp.n_vocab = FAKE_VOCAB;
    f->model.hp.n_ctx_train = 8192;
    f->model.hp.arch_name = "fake";
    f->be.ops = &fake_ops;
    f->be.model = &f->model;
    f->be.kv_block_tokens = block_tokens;
    f->be.kv_n_blocks = n_blocks;
    f->be.impl = f;
    return f;
}

static void fake_free(struct fake *f)
{
    if (!f) return;
    free(f->kv);
    free(f);
}

#endif
