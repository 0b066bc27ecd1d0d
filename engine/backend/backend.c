/* backend: opens the compute backend a configuration asks for. AUTO tries
 * CUDA first and falls back to the CPU, keeping the reason in info.note so
 * the app can say why it runs on the CPU. */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"

struct backend *backend_open(const struct model *m, const struct backend_config *cfg,
                             char *err, size_t errlen)
{
    if (cfg->kind == BACKEND_CPU) return backend_cpu_open(m, cfg, err, errlen);
    char why[256] = "";
    struct backend *be = backend_cuda_open(m, cfg, why, sizeof why);
    if (be) return be;
    if (cfg->kind == BACKEND_CUDA) {
        snprintf(err, errlen, "cuda backend: %s", why[0] ? why : "not available");
        return NULL;
    }
    be = backend_cpu_open(m, cfg, err, errlen);
    if (!be) return NULL;
    char note[256];
    snprintf(note, sizeof note, "no usable GPU: %s; running on CPU",
             why[0] ? why : "CUDA backend unavailable");
    backend_cpu_set_note(be, note);
    return be;
}

void backend_close(struct backend *be)
{
    if (be) be->ops->close(be);
}

int fwd_single_alloc(struct fwd_single *s, int32_t cap, int32_t n_blocks, int32_t logit_rows,
                     int32_t n_vocab)
{
    memset(s, 0, sizeof *s);
    const size_t k = (size_t)(cap > 0 ? cap : 1);
    s->tok = malloc(k * sizeof *s->tok);
    s->pos = malloc(k * sizeof *s->pos);
    s->seq = calloc(k, sizeof *s->seq);   /* every token is sequence 0 */
    s->want = calloc(k, 1);
    s->table = malloc((size_t)(n_blocks > 0 ? n_blocks : 1) * sizeof *s->table);
    s->logits = malloc((size_t)(logit_rows > 0 ? logit_rows : 1) * (size_t)n_vocab * sizeof(float));
    if (!s->tok || !s->pos || !s->seq || !s->want || !s->table || !s->logits) return -1;
    for (int32_t i = 0; i < n_blocks; i++) s->table[i] = i;
    s->cap = (int32_t)k;
    s->n_blocks = n_blocks;
    return 0;
}

void fwd_single_free(struct fwd_single *s)
{
    free(s->tok);
    free(s->pos);
    free(s->seq);
    free(s->want);
    free(s->table);
    free(s->logits);
    memset(s, 0, sizeof *s);
}

int fwd_single_forward(struct backend *be, struct fwd_single *s, int32_t n, int32_t p0,
                       char *err, size_t errlen)
{
    for (int32_t i = 0; i < n; i++) s->pos[i] = p0 + i;
    const struct fwd_seq q = { s->table, s->n_blocks };
    const struct fwd_batch b = { n, s->tok, s->pos, s->seq, s->want, 1, &q };
    return backend_forward(be, &b, s->logits, err, errlen);
}

uint64_t backend_kv_token_bytes(enum kv_type t, int32_t n_layer, int64_t kv_dim, int32_t bt)
{
    uint64_t k, v;
    switch (t) {
    case KV_F32: k = v = (uint64_t)kv_dim * 4; break;
    case KV_Q8_0: k = v = (uint64_t)kv_dim / 32 * 34; break;
    case KV_Q4_0: k = v = (uint64_t)kv_dim / 32 * 18; break;
    case KV_Q4C:
        /* per dimension and block: f16 min and step, bt 4-bit codes */
        k = (uint64_t)kv_dim * (4 + (uint64_t)bt / 2) / (uint64_t)(bt > 0 ? bt : 16);
        v = (uint64_t)kv_dim / 32 * 22;   /* q5_0 rows */
        break;
    default: k = v = (uint64_t)kv_dim * 2; break;
    }
    return (uint64_t)n_layer * (k + v);
}
