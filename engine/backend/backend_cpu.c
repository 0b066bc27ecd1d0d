/* backend_cpu: the CPU implementation of engine/backend.h. Straight-line
 * forward pass over a batch of tokens from several sequences (llama, qwen2,
 * qwen3, gemma3), paged KV pool in f16 / f32 / q8_0, weight matmuls through
 * kernels/cpu/matmul, attention and small ops through kernels/cpu/. */
#include "backend.h"
#include "backend_cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cpu/attention.h"
#include "cpu/matmul.h"
#include "cpu/ops.h"
#include "cpu/threadpool.h"
#include "cpu_kvstage.h"
#include "cpu_moe.h"
#include "gguf.h"
#include "model.h"
#include "quant.h"

/* f32 copies of a layer's small vectors (norm weights, biases). */
struct cpu_layer {
    float *attn_norm, *ffn_norm, *q_norm, *k_norm, *post_attn, *post_ffn;
    float *bq, *bk, *bv;
    float *bo, *b_gate, *b_up, *b_down;   /* llama biases, NULL when absent */
};

/* Activations for up to `cap` tokens. */
struct cpu_acts {
    int32_t cap;
    float *x, *xn, *q, *k, *v, *att, *tmp, *gate, *up;
    float *rope_g, *rope_l;   /* [cap][n_rot] cos/sin, global and local RoPE bases */
    const int32_t **tables;   /* [cap] block table of each token's sequence */
};

/* A layer's weight matrices as the kernels read them: the model's, or
 * repacked copies (mm_pack) where this ISA has a faster layout. */
struct cpu_mats {
    struct wtensor wq, wk, wv, wo, w_gate, w_up, w_down;
};

struct cpu_be {
    struct backend be;
    struct cpu_mats *lm;      /* [n_layer] */
    struct wtensor output;
    uint8_t *packed;          /* one allocation holding every repacked matrix */
    char *embd_row;           /* one plain token_embd row, unpacked from the output's copy */
    size_t packed_bytes;
    struct threadpool *tp;
    enum cpu_isa isa;
    int n_threads;
    enum kv_type kv_type;
    enum ops_kv_type okv;
    char *kv;                 /* [n_blocks][n_layer][K, V][block_tokens][row] */
    void *kv_map;             /* the mapping kv lies in (kv_alloc) */
    size_t kv_map_bytes;
    size_t kv_row;            /* bytes of one token's K (or V) row */
    size_t kv_kpart, kv_vpart;/* bytes of one layer's K and V in a block */
    size_t kv_block;          /* bytes of one block: every layer's K and V */
    struct kvs kvs;           /* q4c: the filling blocks' K in f16 (cpu_kvstage.h) */
    size_t kv_total;          /* bytes of the pool */
    float *vecs;              /* storage of every f32 vector below */
    struct cpu_layer *lv;
    float *out_norm, *rope_factors;
    float *gelu;              /* [65536] GELU by f16 input */
    struct mm_scratch mm;
    struct attn_scratch attn;
    struct moe_scratch moe;
    struct cpu_acts a;
    uint64_t act_bytes;
    char note[256];
    char device[128];
    bool attn_bf16;           /* prompt attention on AMX-BF16 tiles (asked for, and AMX in force) */
    char attn_note[96];       /* why bf16 prompt attention was asked for and not used */
    char w8a8_note[96];       /* why the W8A8 prefill was asked for and not used */
};

static const struct backend_ops cpu_ops;

/* ---- set-up ------------------------------------------------------------------ */

static size_t vec_len(const struct wtensor *w)
{
    return w->data ? (size_t)(w->cols * w->rows) : 0;
}

static float *take_vec(const struct wtensor *w, float **cursor)
{
    if (!w->data) return NULL;
    float *v = *cursor;
    dequant_row(w->type, w->data, v, w->cols * w->rows);
    *cursor += vec_len(w);
    return v;
}

static int load_vectors(struct cpu_be *c, const struct model *m, int32_t n_ctx, char *err,
                        size_t errlen)
{
    const struct wtensor none = { 0 };
    const struct wtensor *rf = model_rope_factors(m, n_ctx);
    if (!rf) rf = &none;
    size_t n = vec_len(&m->output_norm) + vec_len(rf);
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        const struct layer_weights *w = &m->layers[l];
        n += vec_len(&w->attn_norm) + vec_len(&w->ffn_norm) + vec_len(&w->q_norm) +
             vec_len(&w->k_norm) + vec_len(&w->post_attn_norm) + vec_len(&w->post_ffn_norm) +
             vec_len(&w->bq) + vec_len(&w->bk) + vec_len(&w->bv) + vec_len(&w->bo) +
             vec_len(&w->b_gate) + vec_len(&w->b_up) + vec_len(&w->b_down);
    }
    c->vecs = malloc(n * sizeof(float));
    c->lv = calloc((size_t)m->hp.n_layer, sizeof *c->lv);
    if (!c->vecs || !c->lv) {
        snprintf(err, errlen, "cpu backend: out of memory for %zu norm/bias values", n);
        return -1;
    }
    float *cur = c->vecs;
    c->out_norm = take_vec(&m->output_norm, &cur);
    c->rope_factors = take_vec(rf, &cur);
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        const struct layer_weights *w = &m->layers[l];
        struct cpu_layer *v = &c->lv[l];
        v->attn_norm = take_vec(&w->attn_norm, &cur);
        v->ffn_norm = take_vec(&w->ffn_norm, &cur);
        v->q_norm = take_vec(&w->q_norm, &cur);
        v->k_norm = take_vec(&w->k_norm, &cur);
        v->post_attn = take_vec(&w->post_attn_norm, &cur);
        v->post_ffn = take_vec(&w->post_ffn_norm, &cur);
        v->bq = take_vec(&w->bq, &cur);
        v->bk = take_vec(&w->bk, &cur);
        v->bv = take_vec(&w->bv, &cur);
        v->bo = take_vec(&w->bo, &cur);
        v->b_gate = take_vec(&w->b_gate, &cur);
        v->b_up = take_vec(&w->b_up, &cur);
        v->b_down = take_vec(&w->b_down, &cur);
    }
    return 0;
}

static int check_matrix(const struct wtensor *w, char *err, size_t errlen)
{
    if (!w->data) {
        snprintf(err, errlen, "cpu backend: tensor '%s' has no host data (a device-only "
                 "synthetic model cannot run on the CPU)", w->name ? w->name : "?");
        return -1;
    }
    if (!mm_supported(w->type)) {
        snprintf(err, errlen, "cpu backend: tensor '%s' has weight type %s, which has no "
                 "CPU matmul kernel", w->name ? w->name : "?", qtype_name(w->type));
        return -1;
    }
    return 0;
}

static int check_weights(const struct model *m, char *err, size_t errlen)
{
    if (check_matrix(&m->output, err, errlen) || !m->tok_embd.data) {
        if (!m->tok_embd.data)
            snprintf(err, errlen, "cpu backend: token_embd has no host data");
        return -1;
    }
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        const struct layer_weights *w = &m->layers[l];
        const bool moe = m->hp.n_expert > 0;
        const struct wtensor *mats[] = { &w->wq, &w->wk, &w->wv, &w->wo,
                                         moe ? &w->gate_inp : &w->w_gate,
                                         moe ? &w->gate_exps : &w->w_up,
                                         moe ? &w->up_exps : &w->w_down,
                                         moe ? &w->down_exps : &w->wo };
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
            if (check_matrix(mats[i], err, errlen)) return -1;
    }
    return 0;
}

/* Matrices of layer l (and the output) in a fixed order, for packing; the
 * absent dense FFN of a mixture-of-experts layer is skipped (its experts
 * stay in the file's layout, read a slice at a time). */
static int layer_mats(struct cpu_mats *lm, struct wtensor *out[7])
{
    struct wtensor *v[7] = { &lm->wq, &lm->wk, &lm->wv, &lm->wo, &lm->w_gate, &lm->w_up,
                             &lm->w_down };
    int n = 0;
    for (int i = 0; i < 7; i++)
        if (v[i]->data) out[n++] = v[i];
    return n;
}

#define PACK_SLICE_BYTES (4u << 20)
#define HUGE_PAGE ((size_t)2 << 20)

/* Bytes of matrix v in c->packed: its packed layout where the ISA has one,
 * else, when it lies in the file mapping, its own bytes (F16, BF16, F32 and
 * the types mm_pack keeps plain), copied as they are: decode streams them
 * from huge pages too, not from the file's 4 KiB pages (a TLB miss and a
 * restarted hardware prefetch every 4 KiB). Weights the model owns
 * (synthetic ones) stay where they are: their copy could not give memory
 * back. */
static size_t home_bytes(const struct cpu_be *c, const struct model *m, const struct wtensor *v)
{
    const size_t b = mm_pack_size(c->isa, v->type, v->rows, v->cols);
    if (b) return b;
    const size_t plain = (size_t)v->rows * qtype_row_bytes(v->type, (uint64_t)v->cols);
    return gguf_in_mapping(m->gguf, v->data, plain) ? plain : 0;
}

/* Repacks every matrix that has a faster layout for c->isa into one
 * allocation (the same bytes reordered: results are bit-identical) and
 * copies the others there unchanged (home_bytes), then
 * drops the originals' file pages from memory so the resident size does
 * not double. Decode reads each weight once per token, so the layout that
 * streams best sets its speed (kernels/cpu/mm_simd.inc). */
static int pack_weights(struct cpu_be *c, const struct model *m, char *err, size_t errlen)
{
    const int32_t nl = m->hp.n_layer;
    c->lm = calloc((size_t)nl, sizeof *c->lm);
    if (!c->lm) {
        snprintf(err, errlen, "cpu backend: out of memory");
        return -1;
    }
    c->output = m->output;
    size_t total = (home_bytes(c, m, &m->output) + 63) & ~(size_t)63;
    for (int32_t l = 0; l < nl; l++) {
        const struct layer_weights *w = &m->layers[l];
        c->lm[l] = (struct cpu_mats){ w->wq, w->wk, w->wv, w->wo, w->w_gate, w->w_up, w->w_down };
        struct wtensor *v[7];
        const int nk = layer_mats(&c->lm[l], v);
        for (int k = 0; k < nk; k++)
            total += (home_bytes(c, m, v[k]) + 63) & ~(size_t)63;
    }
    if (total == 0) return 0;
    c->embd_row = malloc(qtype_row_bytes(m->tok_embd.type, (uint64_t)m->tok_embd.cols) + 64);
    if (!c->embd_row) {
        snprintf(err, errlen, "cpu backend: out of memory");
        return -1;
    }
    total += 64;
    /* 2 MiB-aligned and advised for huge pages: decode streams every
     * weight once per token, and with 4 KiB pages that is a TLB miss every
     * 4 KiB (the machine's THP setting is usually "madvise"). */
    total = (total + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
    c->packed = aligned_alloc(HUGE_PAGE, total);
#ifdef MADV_HUGEPAGE
    if (c->packed) madvise(c->packed, total, MADV_HUGEPAGE);
#endif
    if (!c->packed) {
        snprintf(err, errlen, "cpu backend: out of memory for %zu bytes of repacked weights", total);
        return -1;
    }
    c->packed_bytes = total;
    uint8_t *cur = c->packed;
    for (int32_t l = -1; l < nl; l++) {
        struct wtensor *v[7] = { &c->output };
        int nk = l < 0 ? 1 : layer_mats(&c->lm[l], v);
        for (int k = 0; k < nk; k++) {
            const size_t bytes = home_bytes(c, m, v[k]);
            if (!bytes) continue;
            const bool pack = mm_pack_size(c->isa, v[k]->type, v[k]->rows, v[k]->cols) != 0;
            /* In slices of whole 8-row tiles (tile t's packed bytes start at
             * 8t rows of packed size), releasing each slice's file pages at once:
             * the peak stays one slice above the final size, even for a
             * 178 MB output matrix. */
            /* plain and packed bytes per row (Q4_K's packed rows are larger) */
            const size_t rb = qtype_row_bytes(v[k]->type, (uint64_t)v[k]->cols);
            const size_t pb = bytes / (size_t)v[k]->rows;
            const int64_t slice = ((int64_t)(PACK_SLICE_BYTES / rb) + 7) / 8 * 8;
            const uint8_t *src = v[k]->data;
            uint32_t ptype = v[k]->type;
            for (int64_t r0 = 0; r0 < v[k]->rows; r0 += slice) {
                const int64_t nr = v[k]->rows - r0 < slice ? v[k]->rows - r0 : slice;
                if (pack)
                    ptype = mm_pack(c->isa, v[k]->type, src + (size_t)r0 * rb, nr, v[k]->cols,
                                    cur + (size_t)r0 * pb);
                else
                    memcpy(cur + (size_t)r0 * rb, src + (size_t)r0 * rb, (size_t)nr * rb);
                gguf_release_pages(m->gguf, src + (size_t)r0 * rb, (size_t)nr * rb);
            }
            v[k]->type = ptype;
            v[k]->data = cur;
            cur += (bytes + 63) & ~(size_t)63;
        }
    }
    return 0;
}

/* The KV cache: an anonymous mapping, so untouched pages cost no memory
 * and unused slots read as 0, 2 MiB-aligned and advised for huge pages:
 * decode at depth reads each KV head's part of every block (2 KiB at head
 * dim 64) scattered over the cache, and with 4 KiB pages most of those
 * reads began with a TLB miss (docs/PERFORMANCE.md, decode at depth). A
 * block holds every layer's K and V, so the memory touched grows with the
 * blocks in use, 2 MiB at a time (per-layer pools would each hold a huge
 * page from their first token). */
static char *kv_alloc(size_t bytes, void **map, size_t *map_bytes)
{
    const size_t n = bytes + HUGE_PAGE;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    char *a = (char *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
#ifdef MADV_HUGEPAGE
    madvise(a, bytes, MADV_HUGEPAGE);
#endif
    *map = p;
    *map_bytes = n;
    return a;
}

/* Layer l's view of the cache: its K and V parts of every block. */
static struct attn_layer layer_kv(const struct cpu_be *c, int32_t l)
{
    char *k = c->kv + (size_t)l * (c->kv_kpart + c->kv_vpart);
    struct attn_layer L = { k, k + c->kv_kpart, c->okv, c->be.kv_block_tokens, c->kv_row,
                            c->kv_block, NULL, NULL, 0 };
    if (c->okv == OPS_KV_Q4C) kvs_attach(&c->kvs, &L, l);
    return L;
}

static struct attn_layer layer_kv_fn(const void *ctx, int32_t l)
{
    return layer_kv(ctx, l);
}

static int alloc_kv(struct cpu_be *c, const struct model *m, const struct backend_config *cfg,
                    char *err, size_t errlen)
{
    const struct model_hparams *hp = &m->hp;
    const int64_t kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    static const enum ops_kv_type map[] = { [KV_F16] = OPS_KV_F16, [KV_F32] = OPS_KV_F32,
                                            [KV_Q8_0] = OPS_KV_Q8_0, [KV_Q4_0] = OPS_KV_Q4_0,
                                            [KV_Q4C] = OPS_KV_Q4C };
    static const char *const names[] = { [KV_F16] = "f16", [KV_F32] = "f32", [KV_Q8_0] = "q8_0",
                                         [KV_Q4_0] = "q4_0", [KV_Q4C] = "q4c" };
    if ((unsigned)cfg->kv_type > KV_Q4C) {
        snprintf(err, errlen, "cpu backend: unknown KV type %d", (int)cfg->kv_type);
        return -1;
    }
    const int32_t bt = cfg->kv_block_tokens > 0 ? cfg->kv_block_tokens : 16;
    /* q4c's K: 4 + bt / 2 bytes per dimension and block, a whole number of
     * bytes per token (the disk cache's buffers are per token) */
    if (cfg->kv_type == KV_Q4C && (bt % 2 || bt > 256 || (4 * kv_dim) % bt)) {
        snprintf(err, errlen, "cpu backend: KV type q4c needs blocks of an even number of "
                 "tokens up to 256 dividing 4 x %lld (asked for %d)", (long long)kv_dim, bt);
        return -1;
    }
    /* a head's row starts on a quantization block (QK8_0 == QK4_0 == 32) */
    if ((cfg->kv_type == KV_Q8_0 || cfg->kv_type == KV_Q4_0 || cfg->kv_type == KV_Q4C) &&
        hp->head_dim % QK8_0) {
        snprintf(err, errlen, "cpu backend: KV type %s needs a head dimension that is a "
                 "multiple of 32 (model has %d)", names[cfg->kv_type], hp->head_dim);
        return -1;
    }
    c->kv_type = cfg->kv_type;
    c->okv = map[cfg->kv_type];
    c->kv_row = ops_kv_row_bytes(c->okv, kv_dim);
    c->kv_vpart = (size_t)bt * c->kv_row;
    c->kv_kpart = cfg->kv_type == KV_Q4C
                      ? (size_t)hp->n_head_kv * attn_kc_head_bytes(hp->head_dim, bt)
                      : c->kv_vpart;
    const uint64_t per_token = backend_kv_token_bytes(cfg->kv_type, hp->n_layer, kv_dim, bt);
    uint64_t budget = cfg->kv_bytes;
    if (!budget) {
        /* Default plan: one full training context, at most 16384 tokens. */
        uint64_t tokens = hp->n_ctx_train < 16384 ? (uint64_t)hp->n_ctx_train : 16384;
        budget = tokens * per_token;
    }
    const uint64_t n_blocks = budget / (per_token * (uint64_t)bt);
    if (n_blocks < 1 || n_blocks > INT32_MAX) {
        snprintf(err, errlen, "cpu backend: KV budget of %llu bytes holds %llu blocks of %d "
                 "tokens (%llu bytes per token, %s)", (unsigned long long)budget,
                 (unsigned long long)n_blocks, bt, (unsigned long long)per_token,
                 names[cfg->kv_type]);
        return -1;
    }
    c->kv_block = (size_t)hp->n_layer * (c->kv_kpart + c->kv_vpart);
    const size_t total = (size_t)n_blocks * c->kv_block;
    c->kv_total = total;
    c->kv = kv_alloc(total, &c->kv_map, &c->kv_map_bytes);
    if (!c->kv) {
        snprintf(err, errlen, "cpu backend: out of memory allocating the KV cache: %zu bytes "
                 "(%llu blocks x %d tokens x %llu bytes per token, %s)", total,
                 (unsigned long long)n_blocks, bt, (unsigned long long)per_token,
                 names[cfg->kv_type]);
        return -1;
    }
    c->be.kv_block_tokens = bt;
    c->be.kv_n_blocks = (int32_t)n_blocks;
    c->be.kv_bytes_per_token = per_token;
    if (cfg->kv_type == KV_Q4C)
        return kvs_init(&c->kvs, hp->n_layer, hp->n_head_kv, hp->head_dim, bt, (int32_t)n_blocks,
                        2 * (cfg->max_seqs > 0 ? cfg->max_seqs : 8) + 4, err, errlen);
    return 0;
}

static void free_acts(struct cpu_acts *a)
{
    float **bufs[] = { &a->x, &a->xn, &a->q, &a->k, &a->v, &a->att, &a->tmp, &a->gate, &a->up,
                       &a->rope_g, &a->rope_l };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
    free(a->tables);
    a->tables = NULL;
    a->cap = 0;
}

/* Grows the activation buffers to hold n tokens. */
static int reserve_acts(struct cpu_be *c, int32_t n, char *err, size_t errlen)
{
    struct cpu_acts *a = &c->a;
    if (n <= a->cap) return 0;
    const struct model_hparams *hp = &c->be.model->hp;
    const size_t qd = (size_t)hp->n_head * hp->head_dim, kd = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t wide = qd > (size_t)hp->dim ? qd : (size_t)hp->dim;
    free_acts(a);
    struct { float **p; size_t w; } b[] = {
        { &a->x, (size_t)hp->dim }, { &a->xn, (size_t)hp->dim }, { &a->q, qd }, { &a->k, kd },
        { &a->v, kd }, { &a->att, qd }, { &a->tmp, wide }, { &a->gate, (size_t)hp->n_ff },
        { &a->up, (size_t)hp->n_ff }, { &a->rope_g, (size_t)hp->n_rot },
        { &a->rope_l, (size_t)hp->n_rot },
    };
    size_t bytes = 0;
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        *b[i].p = malloc(b[i].w * (size_t)n * sizeof(float));
        bytes += b[i].w * (size_t)n * sizeof(float);
        if (!*b[i].p) goto oom;
    }
    a->tables = malloc((size_t)n * sizeof *a->tables);
    if (!a->tables) goto oom;
    a->cap = n;
    c->act_bytes = bytes;
    return 0;
oom:
    free_acts(a);
    snprintf(err, errlen, "cpu backend: out of memory for activations of %d tokens (%zu bytes)",
             n, bytes);
    return -1;
}

static void describe_cpu(struct cpu_be *c)
{
    char model[96] = "CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            char *colon = strchr(line, ':');
            if (strncmp(line, "model name", 10) == 0 && colon) {
                snprintf(model, sizeof model, "%s", colon + 2);
                model[strcspn(model, "\n")] = 0;
                break;
            }
        }
        fclose(f);
    }
    snprintf(c->device, sizeof c->device, "%s (%d thread%s, %s)", model, c->n_threads,
             c->n_threads == 1 ? "" : "s", cpu_isa_name(c->isa));
}

static void cpu_close(struct backend *be)
{
    if (!be) return;
    struct cpu_be *c = (struct cpu_be *)be;
    if (c->tp) tp_close(c->tp);
    free_acts(&c->a);
    mm_scratch_free(&c->mm);
    attn_scratch_free(&c->attn);
    kvs_free(&c->kvs);
    moe_scratch_free(&c->moe);
    if (c->kv_map) munmap(c->kv_map, c->kv_map_bytes);
    free(c->vecs);
    free(c->lv);
    free(c->lm);
    free(c->packed);
    free(c->embd_row);
    free(c->gelu);
    free(c);
}

struct backend *backend_cpu_open(const struct model *m, const struct backend_config *cfg,
                                 char *err, size_t errlen)
{
    struct cpu_be *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "cpu backend: out of memory");
        return NULL;
    }
    c->be.ops = &cpu_ops;
    c->be.model = m;
    c->be.embd_rows = m->hp.dim <= m->hp.n_vocab; /* a hidden state fits a logits slot */
    c->be.impl = c;
    if (model_validate(m, err, errlen) || check_weights(m, err, errlen)) goto fail;
    if (load_vectors(c, m, cfg->n_ctx, err, errlen) || alloc_kv(c, m, cfg, err, errlen)) goto fail;
    c->gelu = malloc(65536 * sizeof(float));
    if (!c->gelu) {
        snprintf(err, errlen, "cpu backend: out of memory");
        goto fail;
    }
    ops_gelu_table_init(c->gelu);
    c->n_threads = cfg->threads > 0 ? cfg->threads : tp_physical_cores();
    c->tp = tp_open(c->n_threads);
    if (!c->tp) {
        snprintf(err, errlen, "cpu backend: cannot start %d threads", c->n_threads);
        goto fail;
    }
    /* TERN_ISA caps the kernels' ISA (reproducing another CPU's path). */
    const char *isa_cap = getenv("TERN_ISA");
    if (!cpu_isa_capped(isa_cap, &c->isa)) {
        snprintf(err, errlen, "cpu backend: TERN_ISA=%s: expected scalar, avx2, avxvnni, avx512 or amx", isa_cap);
        goto fail;
    }
    if (cfg->force_scalar) c->isa = CPU_ISA_SCALAR;
    c->attn_bf16 = cfg->prompt_attn_bf16 && c->isa == CPU_ISA_AMX;
    if (cfg->prompt_attn_bf16 && !c->attn_bf16)
        snprintf(c->attn_note, sizeof c->attn_note, "bf16 prompt attention needs AMX tiles (ISA %s): f32 used",
                 cpu_isa_name(c->isa));
    c->mm.w8a8 = cfg->prefill_w8a8 && c->isa == CPU_ISA_AMX;
    if (cfg->prefill_w8a8 && !c->mm.w8a8)
        snprintf(c->w8a8_note, sizeof c->w8a8_note, "w8a8 prefill needs AMX tiles (ISA %s): exact used",
                 cpu_isa_name(c->isa));
    if (pack_weights(c, m, err, errlen)) goto fail;
    if (moe_pack_experts(&c->moe, c->isa, m, err, errlen)) goto fail;   /* cpu_moe.c */
    int32_t cap = cfg->max_batch_tokens > 0 ? cfg->max_batch_tokens : 512;
    if (reserve_acts(c, cap, err, errlen)) goto fail;
    describe_cpu(c);
    return &c->be;
fail:
    cpu_close(&c->be);
    return NULL;
}

void backend_cpu_set_note(struct backend *be, const char *note)
{
    struct cpu_be *c = (struct cpu_be *)be;
    snprintf(c->note, sizeof c->note, "%s", note ? note : "");
}

static void cpu_info(struct backend *be, struct backend_info *out)
{
    struct cpu_be *c = (struct cpu_be *)be;
    memset(out, 0, sizeof *out);
    out->name = "cpu";
    snprintf(out->device, sizeof out->device, "%s", c->device);
    out->weight_bytes = be->model->weight_bytes;
    out->kv_bytes = c->kv_total;
    out->workspace_bytes = c->act_bytes + c->mm.cap + c->attn.cap * sizeof(float) + c->moe.bytes +
                           kvs_bytes(&c->kvs);
    int k = snprintf(out->note, sizeof out->note, "%s", c->note);
    if (c->attn_note[0] && k >= 0 && (size_t)k + 2 < sizeof out->note)
        snprintf(out->note + k, sizeof out->note - (size_t)k, "%s%s", k ? "; " : "", c->attn_note);
    k = (int)strlen(out->note);
    if (c->w8a8_note[0] && (size_t)k + 2 < sizeof out->note)
        snprintf(out->note + k, sizeof out->note - (size_t)k, "%s%s", k ? "; " : "", c->w8a8_note);
    out->prompt_attn_bf16 = c->attn_bf16;
    out->prefill_w8a8 = c->mm.w8a8;
}

/* ---- forward ---------------------------------------------------------------- */

static int check_batch(const struct cpu_be *c, const struct fwd_batch *b, char *err, size_t errlen)
{
    const int32_t bt = c->be.kv_block_tokens, nv = c->be.model->hp.n_vocab;
    if (b->n_tokens <= 0 || !b->token || !b->pos || !b->seq || b->n_seqs <= 0 || !b->seqs) {
        snprintf(err, errlen, "forward: empty or incomplete batch (%d tokens, %d sequences)",
                 b->n_tokens, b->n_seqs);
        return -1;
    }
    for (int32_t s = 0; s < b->n_seqs; s++) {
        for (int32_t i = 0; i < b->seqs[s].n_blocks; i++) {
            const int32_t id = b->seqs[s].block_table[i];
            if (id < 0 || id >= c->be.kv_n_blocks) {
                snprintf(err, errlen, "forward: sequence %d block table entry %d is %d, "
                         "outside the pool of %d blocks", s, i, id, c->be.kv_n_blocks);
                return -1;
            }
        }
    }
    for (int32_t i = 0; i < b->n_tokens; i++) {
        const int32_t s = b->seq[i], p = b->pos[i];
        if (b->token[i] < 0 || b->token[i] >= nv) {
            snprintf(err, errlen, "forward: token %d of the batch has id %d, outside the "
                     "vocabulary of %d", i, b->token[i], nv);
            return -1;
        }
        if (s < 0 || s >= b->n_seqs) {
            snprintf(err, errlen, "forward: token %d names sequence %d of %d", i, s, b->n_seqs);
            return -1;
        }
        if (p < 0 || p / bt >= b->seqs[s].n_blocks) {
            snprintf(err, errlen, "forward: token %d has position %d, beyond the %d blocks "
                     "(%d tokens each) of sequence %d", i, p, b->seqs[s].n_blocks, bt, s);
            return -1;
        }
    }
    return 0;
}

static void matmul(struct cpu_be *c, const struct wtensor *w, const float *x, int64_t n,
                   float *y)
{
    cpu_matmul(c->tp, c->isa, &c->mm, w->type, w->data, w->rows, w->cols, x, n, y);
}

static void add_bias(float *y, const float *bias, int64_t n, int64_t width)
{
    if (!bias) return;
    for (int64_t i = 0; i < n; i++) ops_add(y + i * width, bias, width);
}

static void norm_rows(float *y, const float *x, const float *w, int64_t n, int64_t width,
                      float eps)
{
    for (int64_t i = 0; i < n; i++) ops_rmsnorm(y + i * width, x + i * width, w, width, eps);
}

/* With a tied output matrix, rows come from its copy in c->packed (packed
 * or plain, pack_weights): the file pages it replaced stay released (each
 * lookup there would fault in 64 KiB around the row: 33 MiB for one
 * 512-token Gemma prompt). */
static void embed(struct cpu_be *c, const struct fwd_batch *b)
{
    const struct model *m = c->be.model;
    const int64_t d = m->hp.dim;
    const size_t rb = qtype_row_bytes(m->tok_embd.type, (uint64_t)d);
    const bool copied = m->tok_embd.data == m->output.data && c->output.data != m->output.data;
    const bool packed = copied && c->output.type != m->output.type;
    const char *rows = copied && !packed ? c->output.data : m->tok_embd.data;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        float *x = c->a.x + (size_t)i * d;
        const char *row = rows + (size_t)b->token[i] * rb;
        if (packed) {
            mm_unpack_row(c->output.type, c->output.data, d, b->token[i], c->embd_row);
            row = c->embd_row;
        }
        dequant_row(m->tok_embd.type, row, x, d);
        if (m->hp.embd_scale != 1.0f) ops_scale(x, m->hp.embd_scale, d);
    }
}

static void rope_tables(struct cpu_be *c, const struct fwd_batch *b)
{
    const struct model_hparams *hp = &c->be.model->hp;
    const float fs = 1.0f / hp->rope_scale;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        float *g = c->a.rope_g + (size_t)i * hp->n_rot, *lc = c->a.rope_l + (size_t)i * hp->n_rot;
        if (hp->rope_yarn)   /* its attention factor is in the table (model.h) */
            ops_rope_cache_yarn(g, hp->n_rot, b->pos[i], hp->rope_base, fs, c->rope_factors,
                                hp->yarn_corr, hp->yarn_ext_factor, hp->yarn_attn);
        else
            ops_rope_cache(g, hp->n_rot, b->pos[i], hp->rope_base, fs, c->rope_factors);
        if (hp->sliding_window > 0)
            ops_rope_cache(lc, hp->n_rot, b->pos[i], hp->rope_base_local, 1.0f, NULL);
        /* cos and sin times the factor, as ggml (0: a synthetic model, none) */
        if (!hp->rope_yarn && hp->rope_attn_factor > 0.0f && hp->rope_attn_factor != 1.0f) {
            ops_scale(g, hp->rope_attn_factor, hp->n_rot);
            if (hp->sliding_window > 0) ops_scale(lc, hp->rope_attn_factor, hp->n_rot);
        }
    }
}

/* Q/K norms, RoPE, query scale; then K and V rows go into the KV pool.
 * Tokens [i0, i1) of the batch. */
static void qk_prepare(struct cpu_be *c, const struct fwd_batch *b, int32_t l, int32_t i0,
                       int32_t i1)
{
    const struct model *m = c->be.model;
    const struct model_hparams *hp = &m->hp;
    const struct cpu_layer *v = &c->lv[l];
    const int32_t hd = hp->head_dim, bt = c->be.kv_block_tokens;
    const int64_t qd = (int64_t)hp->n_head * hd, kd = (int64_t)hp->n_head_kv * hd;
    const bool swa = model_layer_is_swa(m, l);
    const struct attn_layer L = layer_kv(c, l);
    for (int32_t i = i0; i < i1; i++) {
        float *q = c->a.q + (size_t)i * qd, *k = c->a.k + (size_t)i * kd;
        const float *cs = (swa ? c->a.rope_l : c->a.rope_g) + (size_t)i * hp->n_rot;
        if (v->q_norm) norm_rows(q, q, v->q_norm, hp->n_head, hd, hp->norm_eps);
        if (v->k_norm) norm_rows(k, k, v->k_norm, hp->n_head_kv, hd, hp->norm_eps);
        ops_rope_apply(q, hp->n_head, hd, hp->n_rot, cs, hp->rope_neox);
        ops_rope_apply(k, hp->n_head_kv, hd, hp->n_rot, cs, hp->rope_neox);
        /* Gemma scales Q before attention; the others scale the scores. */
        if (model_scales_q(m)) ops_scale(q, hp->query_scale, qd);
        const struct fwd_seq *s = &b->seqs[b->seq[i]];
        const int32_t p = b->pos[i];
        attn_kv_store(&L, hp->n_head_kv, hd, s->block_table[p / bt], p % bt, k,
                      c->a.v + (size_t)i * kd);
    }
}

static int attention(struct cpu_be *c, const struct fwd_batch *b, int32_t l, char *err,
                     size_t errlen)
{
    const struct model *m = c->be.model;
    const struct model_hparams *hp = &m->hp;
    const struct attn_layer L = layer_kv(c, l);
    const struct attn_batch ab = {
        .n_tokens = b->n_tokens, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv,
        .head_dim = hp->head_dim, .window = model_layer_is_swa(m, l) ? hp->sliding_window : 0,
        .q = c->a.q, .out = c->a.att, .pos = b->pos, .table = c->a.tables,
        .scale = model_scales_q(m) ? 1.0f : hp->query_scale, .softcap = hp->attn_softcap,
        .split_keys = 1,   /* decode with KV heads that do not balance over the threads */
        .bf16_tiles = c->attn_bf16,
    };
    if (attn_forward(c->tp, c->isa, &L, &ab, &c->attn)) {
        snprintf(err, errlen, "forward: out of memory for attention scratch (layer %d)", l);
        return -1;
    }
    return 0;
}

/* The per-token steps between the matmuls of a layer. Each token's rows
 * are computed alone, so a batch split into token ranges over the threads
 * gives the same bits as one pass (and as decoding the tokens one by one). */
enum tok_phase {
    PH_ATTN_NORM,   /* xn = attn_norm(x) */
    PH_QK,          /* q, k, v biases; Q/K norms, RoPE, KV store */
    PH_ATTN_OUT,    /* x += post_attn(tmp + bo); xn = ffn_norm(x) */
    PH_ACT,         /* gate, up biases; gate = act(gate) · up */
    PH_FFN_OUT,     /* x += post_ffn(tmp + b_down) */
};

static void tok_phase_run(struct cpu_be *c, const struct fwd_batch *b, int32_t l,
                          enum tok_phase ph, int32_t i0, int32_t i1)
{
    const struct model_hparams *hp = &c->be.model->hp;
    const struct cpu_layer *v = &c->lv[l];
    struct cpu_acts *a = &c->a;
    const int64_t n = i1 - i0, d = hp->dim, ff = hp->n_ff;
    const int64_t qd = (int64_t)hp->n_head * hp->head_dim, kd = (int64_t)hp->n_head_kv * hp->head_dim;
    float *x = a->x + i0 * d, *xn = a->xn + i0 * d, *tmp = a->tmp + i0 * d;
    switch (ph) {
    case PH_ATTN_NORM:
        norm_rows(xn, x, v->attn_norm, n, d, hp->norm_eps);
        break;
    case PH_QK:
        add_bias(a->q + i0 * qd, v->bq, n, qd);
        add_bias(a->k + i0 * kd, v->bk, n, kd);
        add_bias(a->v + i0 * kd, v->bv, n, kd);
        qk_prepare(c, b, l, i0, i1);
        break;
    case PH_ATTN_OUT:
        add_bias(tmp, v->bo, n, d);
        if (v->post_attn) norm_rows(tmp, tmp, v->post_attn, n, d, hp->norm_eps);
        ops_add(x, tmp, n * d);
        norm_rows(xn, x, v->ffn_norm, n, d, hp->norm_eps);
        break;
    case PH_ACT:
        add_bias(a->gate + i0 * ff, v->b_gate, n, ff);
        add_bias(a->up + i0 * ff, v->b_up, n, ff);
        if (hp->arch == ARCH_GEMMA3 || hp->arch == ARCH_GEMMA2)
            ops_geglu(a->gate + i0 * ff, a->up + i0 * ff, n * ff, c->gelu);
        else
            ops_swiglu(a->gate + i0 * ff, a->up + i0 * ff, n * ff);
        break;
    case PH_FFN_OUT:
        add_bias(tmp, v->b_down, n, d);
        if (v->post_ffn) norm_rows(tmp, tmp, v->post_ffn, n, d, hp->norm_eps);
        ops_add(x, tmp, n * d);
        break;
    }
}

struct tok_job {
    struct cpu_be *c;
    const struct fwd_batch *b;
    int32_t l;
    enum tok_phase ph;
};

/* Unit u: tokens [u·bt, (u+1)·bt) of block_tokens bt, claimed with
 * tp_run_claimed (a preempted or sleeping worker costs nothing, the caller
 * takes its units). For a prompt that starts a KV block a unit is a whole
 * block, whose K rows interleave the tokens' bytes: one writer per block
 * keeps its cache lines on one core. */
static void tok_unit(void *arg, int64_t u, int ith)
{
    const struct tok_job *j = arg;
    (void)ith;
    const int32_t n = j->b->n_tokens, bt = j->c->be.kv_block_tokens;
    const int32_t i0 = (int32_t)u * bt, i1 = n - i0 < bt ? n : i0 + bt;
    tok_phase_run(j->c, j->b, j->l, j->ph, i0, i1);
}

/* From this many tokens on (prefill) a phase is split over the threads;
 * below, one pass on this thread (decode: a few microseconds, less than
 * a pool sync). */
#define TOK_PAR_MIN 32

static void tok_phase(struct cpu_be *c, const struct fwd_batch *b, int32_t l, enum tok_phase ph)
{
    if (b->n_tokens < TOK_PAR_MIN || c->n_threads < 2) {
        tok_phase_run(c, b, l, ph, 0, b->n_tokens);
        return;
    }
    const struct tok_job j = { c, b, l, ph };
    const int32_t bt = c->be.kv_block_tokens;
    tp_run_claimed(c->tp, (b->n_tokens + bt - 1) / bt, TP_CLAIM_SHARED, tok_unit, (void *)&j);
}

static int layer(struct cpu_be *c, const struct fwd_batch *b, int32_t l, char *err, size_t errlen)
{
    const struct model *m = c->be.model;
    const struct model_hparams *hp = &m->hp;
    const struct cpu_mats *w = &c->lm[l];   /* matrices, repacked where faster */
    struct cpu_acts *a = &c->a;
    const int64_t n = b->n_tokens, d = hp->dim;

    tok_phase(c, b, l, PH_ATTN_NORM);
    /* q, k, v (and gate, up) share their input: one quantization, one pool sync */
    const struct mm_op qkv[3] = { { w->wq.type, w->wq.data, w->wq.rows, a->q },
                                  { w->wk.type, w->wk.data, w->wk.rows, a->k },
                                  { w->wv.type, w->wv.data, w->wv.rows, a->v } };
    cpu_matmul_multi(c->tp, c->isa, &c->mm, 3, qkv, d, a->xn, n);
    tok_phase(c, b, l, PH_QK);
    if (c->okv == OPS_KV_Q4C) {   /* the blocks this forward fills, quantized */
        const struct attn_layer L = layer_kv(c, l);
        kvs_close_layer(&c->kvs, &L, l);
    }
    if (attention(c, b, l, err, errlen)) return -1;
    matmul(c, &w->wo, a->att, n, a->tmp);
    tok_phase(c, b, l, PH_ATTN_OUT);   /* and the FFN's input norm */
    if (hp->n_expert > 0) {
        if (cpu_moe_ffn(c->tp, c->isa, &c->mm, &c->moe, m, l, a->xn, n, a->tmp, err, errlen))
            return -1;
        ops_add(a->x, a->tmp, n * d);
        return 0;
    }
    const struct mm_op gu[2] = { { w->w_gate.type, w->w_gate.data, w->w_gate.rows, a->gate },
                                 { w->w_up.type, w->w_up.data, w->w_up.rows, a->up } };
    cpu_matmul_multi(c->tp, c->isa, &c->mm, 2, gu, d, a->xn, n);
    tok_phase(c, b, l, PH_ACT);
    matmul(c, &w->w_down, a->gate, n, a->tmp);
    tok_phase(c, b, l, PH_FFN_OUT);
    return 0;
}

/* Wanted rows in batch order: logits rows get the LM head; embedding rows
 * (FWD_WANT_EMBD) get the normed hidden state itself, at the start of their slot
 * (stride n_vocab). The LM head runs over the logits rows only, packed at the
 * front, then they move to their slots back to front (a slot is never before
 * its packed place, so nothing is overwritten before it moved). */
static void output(struct cpu_be *c, const struct fwd_batch *b, float *logits)
{
    const struct model *m = c->be.model;
    const struct model_hparams *hp = &m->hp;
    const int64_t d = hp->dim, nv = hp->n_vocab;
    int64_t n_out = 0, n_lg = 0;
    bool any_embd = false;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        if (b->want_logits && !b->want_logits[i]) continue;
        if (b->want_logits && b->want_logits[i] == FWD_WANT_EMBD) {
            any_embd = true;
            continue;
        }
        ops_rmsnorm(c->a.xn + n_lg * d, c->a.x + (size_t)i * d, c->out_norm, d, hp->norm_eps);
        n_lg++;
    }
    if (n_lg) {
        matmul(c, &c->output, c->a.xn, n_lg, logits);
        if (hp->logit_softcap > 0.0f) {
            const float s = hp->logit_softcap;
            for (int64_t i = 0; i < n_lg * nv; i++) logits[i] = s * tanhf(logits[i] / s);
        }
    }
    if (!any_embd) return;
    for (int32_t i = 0; i < b->n_tokens; i++) n_out += !b->want_logits || b->want_logits[i];
    int64_t k = n_out, lg = n_lg;
    for (int32_t i = b->n_tokens - 1; i >= 0; i--) {
        if (b->want_logits && !b->want_logits[i]) continue;
        k--;
        if (b->want_logits[i] == FWD_WANT_EMBD) continue;
        lg--;
        if (lg != k) memmove(logits + k * nv, logits + lg * nv, (size_t)nv * sizeof *logits);
    }
    k = 0;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        if (b->want_logits && !b->want_logits[i]) continue;
        if (b->want_logits[i] == FWD_WANT_EMBD)
            ops_rmsnorm(logits + k * nv, c->a.x + (size_t)i * d, c->out_norm, d, hp->norm_eps);
        k++;
    }
}

static int cpu_forward(struct backend *be, const struct fwd_batch *b, float *logits, char *err,
                       size_t errlen)
{
    struct cpu_be *c = (struct cpu_be *)be;
    if (check_batch(c, b, err, errlen) || reserve_acts(c, b->n_tokens, err, errlen)) return -1;
    for (int32_t i = 0; i < b->n_tokens; i++) c->a.tables[i] = b->seqs[b->seq[i]].block_table;
    if (c->okv == OPS_KV_Q4C && kvs_begin(&c->kvs, b, layer_kv_fn, c, err, errlen)) return -1;
    embed(c, b);
    rope_tables(c, b);
    for (int32_t l = 0; l < be->model->hp.n_layer; l++)
        if (layer(c, b, l, err, errlen)) return -1;
    output(c, b, logits);
    return 0;
}

static int cpu_kv_block_io(struct backend *be, int32_t block, void *buf, bool write)
{
    struct cpu_be *c = be->impl;
    if (block < 0 || block >= be->kv_n_blocks) return -1;
    /* a block holds every layer's K and V in the buffer's order */
    char *src = c->kv + (size_t)block * c->kv_block;
    if (write && c->okv == OPS_KV_Q4C) kvs_forget(&c->kvs, block);   /* the pool's K now */
    if (write) memcpy(src, buf, c->kv_block);
    else memcpy(buf, src, c->kv_block);
    return 0;
}

static const struct backend_ops cpu_ops = {
    .kv_block_io = cpu_kv_block_io,
    .name = "cpu",
    .forward = cpu_forward,
    .get_info = cpu_info,
    .close = cpu_close,
};
