/* cpu_moe: mixture-of-experts FFN (see cpu_moe.h). */
#include "cpu_moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "gguf.h"

#include "cpu/ops.h"
#include "model.h"
#include "quant.h"

static void buffers_free(struct moe_scratch *s)
{
    free(s->logits);
    free(s->sel);
    free(s->wsel);
    free(s->order);
    free(s->xg);
    free(s->gate);
    free(s->up);
    free(s->y);
    s->logits = s->wsel = s->xg = s->gate = s->up = s->y = NULL;
    s->sel = s->order = NULL;
    s->cap_tok = 0;
    s->bytes = 0;
}

void moe_scratch_free(struct moe_scratch *s)
{
    buffers_free(s);
    free(s->pk);
    free(s->pk_buf);
    memset(s, 0, sizeof *s);
}

#define MOE_HUGE_PAGE ((size_t)2 << 20)

int moe_pack_experts(struct moe_scratch *s, enum cpu_isa isa, const struct model *m, char *err,
                     size_t errlen)
{
    const int32_t nl = m->hp.n_layer;
    if (m->hp.n_expert <= 0) return 0;
    s->pk = calloc((size_t)nl, sizeof *s->pk);
    if (!s->pk) goto oom;
    size_t total = 0;
    for (int32_t l = 0; l < nl; l++) {
        const struct layer_weights *w = &m->layers[l];
        const struct wtensor *src[3] = { &w->gate_exps, &w->up_exps, &w->down_exps };
        for (int k = 0; k < 3; k++) {
            s->pk[l].t[k] = *src[k];
            const size_t ps = mm_pack_size(isa, src[k]->type, src[k]->rows, src[k]->cols);
            s->pk[l].stride[k] = ps ? (ps + 63) & ~(size_t)63
                                    : qtype_row_bytes(src[k]->type, (uint64_t)src[k]->cols) *
                                          (size_t)src[k]->rows;
            if (ps) total += s->pk[l].stride[k] * (size_t)src[k]->n_expert;
        }
    }
    if (total == 0) return 0;   /* no packed form on this ISA: the file's layout */
    total = (total + MOE_HUGE_PAGE - 1) & ~(MOE_HUGE_PAGE - 1);
    s->pk_buf = aligned_alloc(MOE_HUGE_PAGE, total);
    if (!s->pk_buf) goto oom;
#ifdef MADV_HUGEPAGE
    madvise(s->pk_buf, total, MADV_HUGEPAGE);   /* decode streams them: fewer TLB misses */
#endif
    s->pk_bytes = total;
    uint8_t *cur = s->pk_buf;
    for (int32_t l = 0; l < nl; l++)
        for (int k = 0; k < 3; k++) {
            struct wtensor *t = &s->pk[l].t[k];
            if (!mm_pack_size(isa, t->type, t->rows, t->cols)) continue;
            const size_t plain = qtype_row_bytes(t->type, (uint64_t)t->cols) * (size_t)t->rows;
            const uint8_t *src = t->data;
            uint32_t ptype = 0;
            for (int64_t e = 0; e < t->n_expert; e++) {
                ptype = mm_pack(isa, t->type, src + (size_t)e * plain, t->rows, t->cols,
                                cur + (size_t)e * s->pk[l].stride[k]);
                gguf_release_pages(m->gguf, src + (size_t)e * plain, plain);
            }
            t->data = cur;
            t->type = ptype;
            cur += s->pk[l].stride[k] * (size_t)t->n_expert;
        }
    return 0;
oom:
    snprintf(err, errlen, "cpu backend: out of memory for the repacked experts");
    return -1;
}

static int reserve(struct moe_scratch *s, const struct model_hparams *hp, int64_t n)
{
    if (n <= s->cap_tok) return 0;
    buffers_free(s);
    const size_t t = (size_t)n, k = (size_t)hp->n_expert_used, d = (size_t)hp->dim;
    const size_t fe = (size_t)hp->n_ff_exp, ne = (size_t)hp->n_expert;
    s->logits = malloc(t * ne * sizeof(float));
    s->sel = malloc(t * k * sizeof(int32_t));
    s->wsel = malloc(t * k * sizeof(float));
    s->order = malloc(t * k * sizeof(int32_t));
    s->xg = malloc(t * d * sizeof(float));
    s->gate = malloc(t * fe * sizeof(float));
    s->up = malloc(t * fe * sizeof(float));
    s->y = malloc(t * k * d * sizeof(float));
    if (!s->logits || !s->sel || !s->wsel || !s->order || !s->xg || !s->gate || !s->up ||
        !s->y) {
        buffers_free(s);
        return -1;
    }
    s->cap_tok = n;
    s->bytes = (t * ne + t * k * 2 + t * d + 2 * t * fe + t * k * d) * 4;
    return 0;
}

/* Softmax of the router row, as ggml_soft_max: max, exp(x - max) summed in
 * double, scaled by 1/sum. Then the top k by probability (ties to the lower
 * index) and their weights over their sum (clamped at f16's smallest
 * normal, 6.1e-5, as the reference does). */
static void route(float *p, int32_t ne, int32_t k, int32_t *sel, float *w)
{
    float mx = -INFINITY;
    for (int32_t e = 0; e < ne; e++) mx = p[e] > mx ? p[e] : mx;
    double sum = 0.0;
    for (int32_t e = 0; e < ne; e++) {
        p[e] = expf(p[e] - mx);
        sum += (double)p[e];
    }
    const float inv = (float)(1.0 / sum);
    for (int32_t e = 0; e < ne; e++) p[e] *= inv;
    /* k <= ne, small (8 of 128 at most in practice): selection, O(k·ne) */
    for (int32_t j = 0; j < k; j++) {
        int32_t best = -1;
        for (int32_t e = 0; e < ne; e++) {
            bool taken = false;
            for (int32_t i = 0; i < j; i++) taken |= sel[i] == e;
            if (!taken && (best < 0 || p[e] > p[best])) best = e;
        }
        sel[j] = best;
        w[j] = p[best];
    }
    float ws = 0.0f;
    for (int32_t j = 0; j < k; j++) ws += w[j];
    if (ws < 6.103515625e-5f) ws = 6.103515625e-5f;
    for (int32_t j = 0; j < k; j++) w[j] /= ws;
}

/* Expert e's matrix of a 3-D expert tensor, stride bytes apart. */
static const void *expert(const struct wtensor *t, size_t stride, int32_t e)
{
    return (const char *)t->data + (size_t)e * stride;
}

int cpu_moe_ffn(struct threadpool *tp, enum cpu_isa isa, struct mm_scratch *mm,
                struct moe_scratch *s, const struct model *m, int32_t l, const float *xn,
                int64_t n, float *out, char *err, size_t errlen)
{
    const struct model_hparams *hp = &m->hp;
    const struct layer_weights *w = &m->layers[l];
    const int32_t ne = hp->n_expert, k = hp->n_expert_used;
    const int64_t d = hp->dim, fe = hp->n_ff_exp;
    if (reserve(s, hp, n)) {
        snprintf(err, errlen, "forward: out of memory for the experts of %lld tokens (layer %d)",
                 (long long)n, l);
        return -1;
    }
    cpu_matmul(tp, isa, mm, w->gate_inp.type, w->gate_inp.data, ne, d, xn, n, s->logits);
    for (int64_t i = 0; i < n; i++)
        route(s->logits + i * ne, ne, k, s->sel + i * k, s->wsel + i * k);

    /* Group (token, slot) pairs by expert: counting sort, stable in token order. */
    int32_t *count = calloc((size_t)ne + 1, sizeof *count);
    if (!count) {
        snprintf(err, errlen, "forward: out of memory (layer %d experts)", l);
        return -1;
    }
    for (int64_t i = 0; i < n * k; i++) count[s->sel[i] + 1]++;
    for (int32_t e = 0; e < ne; e++) count[e + 1] += count[e];
    for (int64_t i = 0; i < n * k; i++) s->order[count[s->sel[i]]++] = (int32_t)i;
    /* count[e] is now the end of expert e's run; runs start at count[e - 1]. */
    const size_t gb = qtype_row_bytes(w->gate_exps.type, (uint64_t)d) * (size_t)fe;
    const size_t ub = qtype_row_bytes(w->up_exps.type, (uint64_t)d) * (size_t)fe;
    const size_t db = qtype_row_bytes(w->down_exps.type, (uint64_t)fe) * (size_t)d;
    /* the packed copies when moe_pack_experts made them, else the file's */
    const struct wtensor *tg = s->pk ? &s->pk[l].t[0] : &w->gate_exps;
    const struct wtensor *tu = s->pk ? &s->pk[l].t[1] : &w->up_exps;
    const struct wtensor *td = s->pk ? &s->pk[l].t[2] : &w->down_exps;
    const size_t sg = s->pk ? s->pk[l].stride[0] : gb, su = s->pk ? s->pk[l].stride[1] : ub;
    const size_t sd = s->pk ? s->pk[l].stride[2] : db;
    s->expert_bytes_read = 0;
    for (int32_t e = 0, start = 0; e < ne; start = count[e], e++) {
        const int32_t cnt = count[e] - start;
        if (!cnt) continue;   /* an expert no token chose: its rows are never read */
        for (int32_t j = 0; j < cnt; j++)
            memcpy(s->xg + (size_t)j * d, xn + (size_t)(s->order[start + j] / k) * d,
                   (size_t)d * sizeof(float));
        const struct mm_op gu[2] = {
            { tg->type, expert(tg, sg, e), fe, s->gate },
            { tu->type, expert(tu, su, e), fe, s->up },
        };
        cpu_matmul_multi(tp, isa, mm, 2, gu, d, s->xg, cnt);
        ops_swiglu(s->gate, s->up, (int64_t)cnt * fe);
        /* down into xg (free now), then scatter to each pair's slot */
        cpu_matmul(tp, isa, mm, td->type, expert(td, sd, e), d, fe, s->gate,
                   cnt, s->xg);
        for (int32_t j = 0; j < cnt; j++)
            memcpy(s->y + (size_t)s->order[start + j] * d, s->xg + (size_t)j * d,
                   (size_t)d * sizeof(float));
        s->expert_bytes_read += gb + ub + db;
    }
    free(count);
    /* Weighted sum in slot order: (w0·y0) + (w1·y1) + ..., as the reference
     * multiplies each expert's output and adds the views left to right. */
    for (int64_t i = 0; i < n; i++) {
        float *o = out + i * d;
        const float *y = s->y + (size_t)i * k * d;
        const float *wt = s->wsel + i * k;
        for (int64_t c = 0; c < d; c++) o[c] = wt[0] * y[c];
        for (int32_t j = 1; j < k; j++)
            for (int64_t c = 0; c < d; c++) o[c] += wt[j] * y[(size_t)j * d + c];
    }
    return 0;
}
