/* engine_embed: embeddings on the local engine. An embedding request is a
 * prefill-only request whose rows are the final hidden state (after the
 * output norm, before the LM head; the backend writes it when the batch's
 * want_embd is set) instead of logits. The rows it needs are all prompt
 * positions for mean and CLS pooling (asked like scored rows, so the prefix
 * cache cannot skip them) and the last one for last-token pooling; this
 * file pools them, truncates and L2-normalises (as the reference's
 * llama-embedding with --embd-normalize 2). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"
#include "model.h"

void engine_embed_setup(struct engine_local *e)
{
    const struct model_hparams *hp = &e->model->hp;
    e->n_embd = 0;
    e->embd_why[0] = 0;
    switch (hp->pooling_type) {
    case 2: e->pooling = ENGINE_POOL_CLS; break;
    case 3: e->pooling = ENGINE_POOL_LAST; break;
    default: e->pooling = ENGINE_POOL_MEAN; break; /* mean, none or absent: llama-server's choice */
    }
    if (hp->pooling_type == 4)
        snprintf(e->embd_why, sizeof e->embd_why,
                 "the model's pooling type is rank (a reranker): embeddings are not supported");
    else if (!e->be->embd_rows)
        snprintf(e->embd_why, sizeof e->embd_why,
                 "the %s backend cannot return hidden states, which embeddings need (use the "
                 "cpu backend)", e->binfo.name ? e->binfo.name : "current");
    else e->n_embd = hp->dim;
}

void engine_req_embed_row(struct engine_local *e, struct engine_req *r, const float *row,
                          int32_t pos)
{
    const int32_t d = e->n_embd;
    bool take = r->pool == ENGINE_POOL_MEAN || (r->pool == ENGINE_POOL_CLS && pos == 0) ||
                (r->pool == ENGINE_POOL_LAST && pos == r->seq.n_prompt - 1);
    if (!take) return;
    /* Position 0 again means a recomputation after a preemption: start over. */
    if (pos == 0 || r->pool != ENGINE_POOL_MEAN) {
        memset(r->embd_sum, 0, (size_t)d * sizeof *r->embd_sum);
        r->embd_n = 0;
    }
    for (int32_t i = 0; i < d; i++) r->embd_sum[i] += (double)row[i];
    r->embd_n++;
}

float *engine_req_embedding(const struct engine_local *e, const struct engine_req *r)
{
    const int32_t k = r->embd_dims;
    float *v = malloc((size_t)(k > 0 ? k : 1) * sizeof *v);
    if (!v) return NULL;
    double n = r->embd_n > 0 ? (double)r->embd_n : 1.0, ss = 0;
    for (int32_t i = 0; i < k; i++) {
        double x = r->embd_sum[i] / n;
        ss += x * x;
    }
    /* The reference's L2 normalisation leaves a zero vector zero. */
    double scale = ss > 0 ? 1.0 / sqrt(ss) : 0.0;
    for (int32_t i = 0; i < k; i++) v[i] = (float)(r->embd_sum[i] / n * scale);
    (void)e;
    return v;
}
