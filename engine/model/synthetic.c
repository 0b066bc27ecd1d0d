/* synthetic: builds a struct model of a known shape with generated weights
 * (see synthetic.h). The weights live in one allocation owned by the model
 * (m->owned, freed by model_close through m->owned_free), tensor after
 * tensor, each 64-byte aligned; its header tells synthetic_info how the
 * model was made. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "quant.h"
#include "synthetic.h"

struct synth_shape {
    const char *name;
    int32_t n_vocab, dim, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx;
    float rope_base, norm_eps;
    bool tied;           /* output shares token_embd */
};

static const struct synth_shape synth_shapes[] = {
    { "llama3-8b", 128256, 4096, 32, 32, 8, 128, 14336, 8192, 500000.0f, 1e-5f, false },
    { "llama3.2-1b", 128256, 2048, 16, 32, 8, 64, 8192, 131072, 500000.0f, 1e-5f, true },
    { "smollm2-135m", 49152, 576, 30, 9, 3, 64, 1536, 8192, 100000.0f, 1e-5f, true },
};

const char *synthetic_names(void)
{
    return "llama3-8b,llama3.2-1b,smollm2-135m";
}

static bool synth_type_ok(uint32_t t)
{
    return synth_block_bytes(t) != 0;
}

/* Fills one tensor's shape and name; data is bound later. */
static void synth_tensor(struct wtensor *t, const char *name, uint32_t type, int64_t cols,
                         int64_t rows)
{
    t->name = name;
    t->type = type;
    t->cols = cols;
    t->rows = rows;
    t->data = NULL;
}

static uint64_t synth_bytes(const struct wtensor *t)
{
    return (uint64_t)t->rows * qtype_row_bytes(t->type, (uint64_t)t->cols);
}

/* Visits every present tensor with its generator id (output skipped when tied). */
typedef void (*synth_visit_fn)(struct wtensor *t, uint32_t tid, bool is_norm, void *ud);
static void synth_visit(struct model *m, bool tied, synth_visit_fn fn, void *ud)
{
    fn(&m->tok_embd, synth_tensor_id(-1, SYNTH_T_TOK_EMBD), false, ud);
    fn(&m->output_norm, synth_tensor_id(-1, SYNTH_T_OUTPUT_NORM), true, ud);
    if (!tied) fn(&m->output, synth_tensor_id(-1, SYNTH_T_OUTPUT), false, ud);
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        struct layer_weights *L = &m->layers[l];
        fn(&L->attn_norm, synth_tensor_id(l, SYNTH_L_ATTN_NORM), true, ud);
        fn(&L->wq, synth_tensor_id(l, SYNTH_L_WQ), false, ud);
        fn(&L->wk, synth_tensor_id(l, SYNTH_L_WK), false, ud);
        fn(&L->wv, synth_tensor_id(l, SYNTH_L_WV), false, ud);
        fn(&L->wo, synth_tensor_id(l, SYNTH_L_WO), false, ud);
        fn(&L->ffn_norm, synth_tensor_id(l, SYNTH_L_FFN_NORM), true, ud);
        fn(&L->w_gate, synth_tensor_id(l, SYNTH_L_GATE), false, ud);
        fn(&L->w_up, synth_tensor_id(l, SYNTH_L_UP), false, ud);
        fn(&L->w_down, synth_tensor_id(l, SYNTH_L_DOWN), false, ud);
    }
}

static void synth_count(struct wtensor *t, uint32_t tid, bool is_norm, void *ud)
{
    (void)tid;
    (void)is_norm;
    *(uint64_t *)ud += (synth_bytes(t) + 63) & ~(uint64_t)63;
}

struct synth_fill {
    uint8_t *next;
    uint64_t seed;
    bool host_data;
};

static void synth_fill_one(struct wtensor *t, uint32_t tid, bool is_norm, void *ud)
{
    struct synth_fill *f = ud;
    uint64_t bytes = synth_bytes(t);
    if (f->host_data) {
        uint32_t bb = synth_block_bytes(t->type);
        uint64_t n_blk = bytes / bb;
        /* bounded by memory bandwidth of the fill: one pass over the tensor */
        for (uint64_t b = 0; b < n_blk; b++)
            synth_gen_block(f->seed, tid, b, t->type, is_norm, f->next + b * bb);
        t->data = f->next;
    }
    f->next += (bytes + 63) & ~(uint64_t)63;
}

static void synth_hparams(struct model *m, const struct synth_shape *s)
{
    struct model_hparams *hp = &m->hp;
    hp->arch = ARCH_LLAMA;
    hp->arch_name = "llama";
    hp->n_vocab = s->n_vocab;
    hp->n_ctx_train = s->n_ctx;
    hp->pooling_type = MODEL_POOLING_UNSET;
    hp->dim = s->dim;
    hp->n_layer = s->n_layer;
    hp->n_head = s->n_head;
    hp->n_head_kv = s->n_head_kv;
    hp->head_dim = s->head_dim;
    hp->n_ff = s->n_ff;
    hp->norm_eps = s->norm_eps;
    hp->rope_base = s->rope_base;
    hp->rope_base_local = s->rope_base;
    hp->rope_scale = 1.0f;
    hp->rope_neox = false;
    hp->query_scale = 1.0f / sqrtf((float)s->head_dim);
    hp->embd_scale = 1.0f;
    hp->n_rot = s->head_dim;
}

static void synth_shapes_bind(struct model *m, uint32_t wtype, bool tied)
{
    const struct model_hparams *hp = &m->hp;
    int64_t q_dim = (int64_t)hp->n_head * hp->head_dim, kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    synth_tensor(&m->tok_embd, m->tok_embd.name, wtype, hp->dim, hp->n_vocab);
    synth_tensor(&m->output_norm, "output_norm.weight", QT_F32, hp->dim, 1);
    synth_tensor(&m->output, tied ? m->tok_embd.name : "output.weight", wtype, hp->dim,
                 hp->n_vocab);
    for (int32_t l = 0; l < hp->n_layer; l++) {
        struct layer_weights *L = &m->layers[l];
        synth_tensor(&L->attn_norm, "attn_norm.weight", QT_F32, hp->dim, 1);
        synth_tensor(&L->wq, "attn_q.weight", wtype, hp->dim, q_dim);
        synth_tensor(&L->wk, "attn_k.weight", wtype, hp->dim, kv_dim);
        synth_tensor(&L->wv, "attn_v.weight", wtype, hp->dim, kv_dim);
        synth_tensor(&L->wo, "attn_output.weight", wtype, q_dim, hp->dim);
        synth_tensor(&L->ffn_norm, "ffn_norm.weight", QT_F32, hp->dim, 1);
        synth_tensor(&L->w_gate, "ffn_gate.weight", wtype, hp->dim, hp->n_ff);
        synth_tensor(&L->w_up, "ffn_up.weight", wtype, hp->dim, hp->n_ff);
        synth_tensor(&L->w_down, "ffn_down.weight", wtype, hp->n_ff, hp->dim);
    }
}

static void synth_params(struct wtensor *t, uint32_t tid, bool is_norm, void *ud)
{
    (void)tid;
    (void)is_norm;
    *(uint64_t *)ud += (uint64_t)t->rows * (uint64_t)t->cols;
}

/* The owned blob: generator parameters, then the weights (64-aligned). The
 * magic, not synth_free's address, says a model is synthetic: the CUDA module
 * has its own copy of this file, so its synth_free is another function. */
#define SYNTH_MAGIC 0x746e7973736e7265ull /* "ernssynt" */
struct synth_blob {
    struct synth_info info;
    uint64_t magic;
    uint64_t pad[6];
};

static void synth_free(void *owned)
{
    free(owned);
}

struct model *model_open_synthetic_ex(const char *name, uint32_t wtype, uint64_t seed,
                                      unsigned flags, char *err, size_t errlen)
{
    const struct synth_shape *s = NULL;
    for (size_t i = 0; i < sizeof synth_shapes / sizeof synth_shapes[0]; i++)
        if (name && strcmp(name, synth_shapes[i].name) == 0) s = &synth_shapes[i];
    if (!s) {
        snprintf(err, errlen, "synthetic model '%s': unknown (known: %s)", name ? name : "(null)",
                 synthetic_names());
        return NULL;
    }
    if (!synth_type_ok(wtype)) {
        snprintf(err, errlen, "synthetic model '%s': weight type %s not supported "
                 "(f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs)", name, qtype_name(wtype));
        return NULL;
    }
    if (s->dim % synth_block_elems(wtype) || s->n_ff % synth_block_elems(wtype)) {
        snprintf(err, errlen, "synthetic model '%s': dim %d / ff %d not a multiple of the %s "
                 "block of %u", name, s->dim, s->n_ff, qtype_name(wtype), synth_block_elems(wtype));
        return NULL;
    }
    bool host = !(flags & SYNTH_NO_HOST_DATA);
    struct model *m = calloc(1, sizeof *m);
    if (!m || !(m->layers = calloc((size_t)s->n_layer, sizeof *m->layers))) {
        snprintf(err, errlen, "synthetic model '%s': out of host memory", name);
        free(m);
        return NULL;
    }
    synth_hparams(m, s);
    m->tok_embd.name = "token_embd.weight";
    synth_shapes_bind(m, wtype, s->tied);
    uint64_t data_bytes = 0;
    synth_visit(m, s->tied, synth_count, &data_bytes);
    size_t total = sizeof(struct synth_blob) + (host ? (size_t)data_bytes : 0);
    struct synth_blob *blob = aligned_alloc(64, (total + 63) & ~(size_t)63);
    if (!blob) {
        snprintf(err, errlen, "synthetic model '%s' %s: out of host memory for %.2f GiB of weights",
                 name, qtype_name(wtype), (double)total / 1073741824.0);
        model_close(m);
        return NULL;
    }
    memset(blob, 0, sizeof *blob);
    blob->info = (struct synth_info){ seed, host, s->tied };
    blob->magic = SYNTH_MAGIC;
    m->owned = blob;
    m->owned_free = synth_free;
    struct synth_fill fill = { (uint8_t *)(blob + 1), seed, host };
    synth_visit(m, s->tied, synth_fill_one, &fill);
    if (s->tied) m->output = m->tok_embd;
    m->weight_bytes = data_bytes;
    synth_visit(m, s->tied, synth_params, &m->n_params);
    m->n_params_active = m->n_params;   /* dense */
    m->weight_bytes_active = m->weight_bytes;
    if (host && model_validate(m, err, errlen)) {
        model_close(m);
        return NULL;
    }
    return m;
}

struct model *model_open_synthetic(const char *name, uint32_t wtype, uint64_t seed, char *err,
                                   size_t errlen)
{
    return model_open_synthetic_ex(name, wtype, seed, 0, err, errlen);
}

bool synthetic_info(const struct model *m, struct synth_info *out)
{
    /* only synthetic models own a blob (model.h), and every blob starts so */
    if (!m || m->gguf || !m->owned || ((const struct synth_blob *)m->owned)->magic != SYNTH_MAGIC)
        return false;
    if (out) *out = ((const struct synth_blob *)m->owned)->info;
    return true;
}
