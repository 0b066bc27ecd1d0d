/* attention: paged, grouped-query attention on the CPU. Queries of one
 * sequence at consecutive positions form tiles of up to TILE tokens, so a
 * KV block is converted to f32 once per tile and KV head, not once per
 * query; each (tile, KV head) is one work item. Scores are kept for the
 * whole span of the tile (two passes: QK, then softmax-weighted V). Cost is
 * bounded by reading the KV rows (decode) or by the QK and PV products
 * (prefill). */
#include "attention.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "threadpool.h"

#include "attn_impl.h"

void attn_scratch_free(struct attn_scratch *s)
{
    free(s->buf);
    free(s->tiles);
    memset(s, 0, sizeof *s);
}

void attn_kv_store(const struct attn_layer *L, int32_t n_head_kv, int32_t head_dim,
                   int32_t block, int32_t slot, const float *k, const float *v)
{
    const int32_t bt = L->block_tokens, hd = head_dim;
    char *kb = (char *)L->k + (size_t)block * bt * L->row_bytes;
    char *vb = (char *)L->v + (size_t)block * bt * L->row_bytes;
    if (!attn_kv_planar(L->type)) {
        ops_kv_store(L->type, kb + (size_t)slot * L->row_bytes, k, (int64_t)n_head_kv * hd);
        ops_kv_store(L->type, vb + (size_t)slot * L->row_bytes, v, (int64_t)n_head_kv * hd);
        return;
    }
    const size_t es = attn_kv_elem_bytes(L->type);
    for (int32_t g = 0; g < n_head_kv; g++)
        ops_kv_store(L->type, vb + ((size_t)g * bt + slot) * hd * es, v + (size_t)g * hd, hd);
    /* K element (g, d) of this token sits at ((g·hd + d)·bt + slot): convert
     * in short runs, then scatter with stride bt. */
    enum { RUN = 64 };
    unsigned char conv[RUN * 4];
    const int64_t kd = (int64_t)n_head_kv * hd;
    for (int64_t i0 = 0; i0 < kd; i0 += RUN) {
        const int64_t n = kd - i0 < RUN ? kd - i0 : RUN;
        ops_kv_store(L->type, conv, k + i0, n);
        for (int64_t i = 0; i < n; i++)
            memcpy(kb + ((size_t)(i0 + i) * bt + slot) * es, conv + (size_t)i * es, es);
    }
}

/* The worker for isa (TERN_ISA caps it like the matmuls). */
static void (*attn_worker_for(enum cpu_isa isa))(void *, int, int)
{
#if defined(__x86_64__)
    if (isa >= CPU_ISA_AVX512) return attn_avx512_worker;
    if (isa >= CPU_ISA_AVX2) return attn_avx2_worker;
#endif
    (void)isa;
    return attn_scalar_worker;
}

static int32_t make_tiles(const struct attn_batch *b, int32_t *tiles)
{
    int32_t n = 0;
    for (int32_t i = 0; i < b->n_tokens;) {
        int32_t k = 1;
        while (k < ATTN_TILE && i + k < b->n_tokens && b->table[i + k] == b->table[i] &&
               b->pos[i + k] == b->pos[i + k - 1] + 1)
            k++;
        tiles[2 * n] = i;
        tiles[2 * n + 1] = k;
        n++;
        i += k;
    }
    return n;
}

int attn_forward(struct threadpool *tp, enum cpu_isa isa, const struct attn_layer *L,
                 const struct attn_batch *b, struct attn_scratch *s)
{
    const int nth = tp ? tp_n_threads(tp) : 1;
    const size_t G = (size_t)(b->n_head / b->n_head_kv), hd = (size_t)b->head_dim;
    const size_t bt = (size_t)L->block_tokens;
    int32_t span = 1;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        const int32_t w = b->window > 0 && b->pos[i] + 1 > b->window ? b->window : b->pos[i] + 1;
        span = w + ATTN_TILE > span ? w + ATTN_TILE : span;
    }
    const size_t per = bt * hd + hd + ATTN_ROWS_MAX * bt + ATTN_TILE * G * hd + ATTN_TILE * G * (size_t)span + 16;
    if (s->cap < per * (size_t)nth) {
        float *nb = realloc(s->buf, per * (size_t)nth * sizeof(float));
        if (!nb) return -1;
        s->buf = nb;
        s->cap = per * (size_t)nth;
    }
    if (s->tiles_cap < (size_t)b->n_tokens) {
        int32_t *nt = realloc(s->tiles, (size_t)b->n_tokens * 2 * sizeof(int32_t));
        if (!nt) return -1;
        s->tiles = nt;
        s->tiles_cap = (size_t)b->n_tokens;
    }
    struct attn_job J = { L, b, s->tiles, make_tiles(b, s->tiles), s->buf, per };
    void (*worker)(void *, int, int) = attn_worker_for(isa);
    if (tp && nth > 1 && (int64_t)J.n_tiles * b->n_head_kv > 1)
        tp_run(tp, worker, &J);
    else
        worker(&J, 0, 1);
    return 0;
}
