/* backend_cuda: the CUDA backend (host side). Plans device memory, uploads
 * the weights once in their GGUF formats (or generates synthetic ones on the
 * device), owns the paged KV pool (f16, q8_0 or q4_0), and runs the layer loop by launching
 * the kernels of kernels/cuda; decode steps are captured as CUDA graphs per
 * batch-size bucket. The planning and batch logic at the top is plain C and
 * compiled in every build; the rest only when TERN_HAVE_CUDA. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cuda.h"
#include "model.h"
#include "tern_config.h"


/* ---------------------------------------------------------------------------
 * Planning and batch logic (no CUDA types)
 * ------------------------------------------------------------------------- */

/* Bytes per block and elements per block of the formats the kernels read. */
bool cuda_fmt(uint32_t type, uint32_t *block, uint32_t *bytes)
{
    static const uint32_t t[][3] = { { 0, 1, 4 },     { 1, 1, 2 },      { 30, 1, 2 },
                                     { 2, 32, 18 },   { 3, 32, 20 },    { 6, 32, 22 },
                                     { 7, 32, 24 },   { 8, 32, 34 },    { 12, 256, 144 },
                                     { 13, 256, 176 }, { 14, 256, 210 }, { 10, 256, 84 },
                                     { 11, 256, 110 }, { 20, 32, 18 },   { 23, 256, 136 } };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i][0] == type) {
            *block = t[i][1];
            *bytes = t[i][2];
            return true;
        }
    return false;
}

bool cuda_present(const struct wtensor *t)
{
    /* synthetic models without host data have names but no data */
    return t->rows > 0 && t->cols > 0 && (t->data != NULL || t->name != NULL);
}

/* Device bytes of a weight matrix; 0 with err when the kernels cannot read it. */
static uint64_t cuda_matrix_bytes(const struct wtensor *t, char *err, size_t errlen)
{
    uint32_t block, bytes;
    if (!cuda_fmt(t->type, &block, &bytes)) {
        snprintf(err, errlen, "tensor %s: type %u not supported by the CUDA kernels "
                 "(F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS)", t->name ? t->name : "?", t->type);
        return 0;
    }
    if (t->cols % 32 != 0 || t->cols % block != 0) {
        snprintf(err, errlen, "tensor %s: %lld columns is not a multiple of 32/%u",
                 t->name ? t->name : "?", (long long)t->cols, block);
        return 0;
    }
    return (uint64_t)t->rows * (uint64_t)(t->cols / block) * bytes;
}

bool cuda_tied(const struct model *m)
{
    if (m->output.data) return m->output.data == m->tok_embd.data;
    return m->output.name == m->tok_embd.name; /* synthetic, no host data */
}

/* Weights on the device: matrices in their format, vectors as f32. */
static int cuda_weight_bytes(const struct model *m, uint64_t *out, char *err, size_t errlen)
{
    uint64_t sum = 0, b;
    const struct wtensor *mats[] = { &m->tok_embd, &m->output };
    for (int i = 0; i < 2; i++) {
        if (i == 1 && cuda_tied(m)) break;
        if (!(b = cuda_matrix_bytes(mats[i], err, errlen))) return -1;
        sum += (b + 255) & ~255ull;
    }
    sum += (uint64_t)m->hp.dim * 4 + 256; /* output_norm */
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        const struct layer_weights *L = &m->layers[l];
        const struct wtensor *lm[] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down };
        const struct wtensor *lv[] = { &L->attn_norm, &L->ffn_norm, &L->bq, &L->bk, &L->bv, &L->q_norm,
                                       &L->k_norm, &L->post_attn_norm, &L->post_ffn_norm };
        for (size_t i = 0; i < sizeof lm / sizeof lm[0]; i++) {
            if (!(b = cuda_matrix_bytes(lm[i], err, errlen))) return -1;
            sum += (b + 255) & ~255ull;
        }
        for (size_t i = 0; i < sizeof lv / sizeof lv[0]; i++)
            if (cuda_present(lv[i]))
                sum += ((uint64_t)lv[i]->rows * (uint64_t)lv[i]->cols * 4 + 255) & ~255ull;
    }
    *out = sum;
    return 0;
}


void cuda_ws_size(const struct model_hparams *hp, int32_t T, int32_t S, int32_t max_bps,
                  struct cuda_ws *w)
{
    const uint64_t t = (uint64_t)T, qd = (uint64_t)hp->n_head * hp->head_dim,
                   kvd = (uint64_t)hp->n_head_kv * hp->head_dim;
    const int32_t G = hp->n_head_kv > 0 ? hp->n_head / hp->n_head_kv : 1;
    uint64_t widest = (uint64_t)hp->dim;
    if ((uint64_t)hp->n_ff > widest) widest = (uint64_t)hp->n_ff;
    if (qd > widest) widest = qd;
    memset(w, 0, sizeof *w);
    w->x = al256(t * hp->dim * 4);
    w->h = w->x;
    w->o = w->x;
    w->q = al256(t * qd * 4);
    w->att = w->q;
    w->k = al256(t * kvd * 4);
    w->v = w->k;
    w->g = al256(t * hp->n_ff * 4);
    w->u = w->g;
    /* n * splits * n_head_kv <= max(256, n * n_head_kv), see cuda_attn_splits */
    uint64_t rows = 256u * (uint64_t)G;
    if (t * hp->n_head > rows) rows = t * hp->n_head;
    w->attn = al256(rows * (uint64_t)(hp->head_dim + 2) * 4);
    /* the logits chunk goes through the GEMM path too */
    w->xh = al256((t > CUDA_LOGIT_CHUNK ? t : CUDA_LOGIT_CHUNK) * widest * 2);
    w->wtile = al256((uint64_t)CUDA_TILE_ELEMS * 2 > widest * 2 ? (uint64_t)CUDA_TILE_ELEMS * 2 : widest * 2);
    w->logit_rows = al256((uint64_t)CUDA_LOGIT_CHUNK * hp->dim * 4);
    w->logits = al256((uint64_t)CUDA_LOGIT_CHUNK * hp->n_vocab * 4);
    w->meta = al256((6 * t + 2 * (uint64_t)S + (uint64_t)S * max_bps) * 4);
    w->cublas = 32u << 20;
    /* cu_q8_bytes(CU_MV_MAX_N, widest): int8 blocks, then {d, d * sum} per block */
    const uint64_t q8_blocks = 8 * widest / 32;
    w->xq = al256(q8_blocks * 32 + al256(q8_blocks * 8) + 256);
    w->total = w->xq + w->x + w->h + w->o + w->q + w->att + w->k + w->v + w->g + w->u + w->attn + w->xh +
               w->wtile + w->logit_rows + w->logits + w->meta + w->cublas + 2 * al256((uint64_t)hp->head_dim * 2);
}

int cuda_plan_compute(const struct model *m, const struct backend_config *cfg,
                      uint64_t free_bytes, uint64_t total_bytes, struct cuda_plan *p,
                      char *err, size_t errlen)
{
    const struct model_hparams *hp = &m->hp;
    memset(p, 0, sizeof *p);
    p->free_bytes = free_bytes;
    p->total_bytes = total_bytes;
    if (hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv != 0 || hp->n_head / hp->n_head_kv > 8 ||
        (hp->head_dim != 64 && hp->head_dim != 128 && hp->head_dim != 256)) {
        snprintf(err, errlen, "CUDA attention kernels need head_dim 64/128/256 and at most 8 "
                 "query heads per KV head (model: head_dim %d, %d heads, %d KV heads)",
                 hp->head_dim, hp->n_head, hp->n_head_kv);
        return -1;
    }
    if (cuda_kv_head_bytes(cfg->kv_type, hp->head_dim) == 0) {
        static const char *const names[] = { [KV_F16] = "f16", [KV_F32] = "f32",
                                             [KV_Q8_0] = "q8_0", [KV_Q4_0] = "q4_0",
                                             [KV_Q4C] = "q4c" };
        const unsigned t = (unsigned)cfg->kv_type;
        snprintf(err, errlen, "CUDA backend stores the KV cache as f16, q8_0 or q4_0: it has no %s KV "
                 "store or attention kernel (use --backend cpu for --kv-type %s)",
                 t <= KV_Q4C ? names[t] : "?", t <= KV_Q4C ? names[t] : "?");
        return -1;
    }
    p->kv_type = cfg->kv_type;
    if (cuda_weight_bytes(m, &p->weight_bytes, err, errlen) != 0) return -1;
    p->kv_block_tokens = cfg->kv_block_tokens > 0 ? cfg->kv_block_tokens : 16;
    p->max_batch_tokens = cfg->max_batch_tokens > 0 ? cfg->max_batch_tokens : 512;
    p->max_seqs = cfg->max_seqs > 0 ? cfg->max_seqs : 64;
    int32_t ctx = hp->n_ctx_train > 0 ? hp->n_ctx_train : 4096;
    p->max_blocks_per_seq = (ctx + p->kv_block_tokens - 1) / p->kv_block_tokens;
    struct cuda_ws ws;
    cuda_ws_size(hp, p->max_batch_tokens, p->max_seqs, p->max_blocks_per_seq, &ws);
    p->workspace_bytes = ws.total;
    p->reserve_bytes = 512ull << 20;
    p->kv_bytes_per_token = 2ull * hp->n_layer * hp->n_head_kv * cuda_kv_head_bytes(cfg->kv_type, hp->head_dim);
    const uint64_t block_bytes = p->kv_bytes_per_token * (uint64_t)p->kv_block_tokens;
    const uint64_t fixed = p->weight_bytes + p->workspace_bytes + p->reserve_bytes;
    uint64_t kv = cfg->kv_bytes;
    if (kv == 0) {
        /* default: 90 % of what is left, but no more than every sequence at full context */
        uint64_t room = free_bytes > fixed ? (free_bytes - fixed) / 10 * 9 : 0;
        uint64_t need = (uint64_t)p->max_seqs * (uint64_t)p->max_blocks_per_seq * block_bytes;
        kv = room < need ? room : need;
    }
    uint64_t n_blocks = kv / block_bytes;
    if (n_blocks > 0x7fffffffull) n_blocks = 0x7fffffffull;
    p->kv_n_blocks = (int32_t)n_blocks;
    p->kv_bytes = n_blocks * block_bytes;
    if (n_blocks < 1 || fixed + p->kv_bytes > free_bytes) {
        char line[256];
        cuda_plan_format(p, line, sizeof line);
        snprintf(err, errlen, "out of device memory: %s", line);
        return -1;
    }
    return 0;
}

uint64_t cuda_kv_head_bytes(int32_t t, int32_t head_dim)
{
    if (head_dim <= 0) return 0;
    if (t == KV_F16) return (uint64_t)head_dim * 2;
    if (head_dim % 32) return 0;
    if (t == KV_Q8_0) return (uint64_t)head_dim / 32 * 34;
    if (t == KV_Q4_0) return (uint64_t)head_dim / 32 * 18;
    return 0;
}

void cuda_plan_format(const struct cuda_plan *p, char *out, size_t outlen)
{
    snprintf(out, outlen,
             "weights %.2f GiB + KV %.2f GiB (%d blocks x %d tokens = %lld tokens, %s) + workspace "
             "%.2f GiB + reserve %.2f GiB of %.2f GiB free (%.2f GiB total)",
             p->weight_bytes / CUDA_GIB, p->kv_bytes / CUDA_GIB, p->kv_n_blocks, p->kv_block_tokens,
             (long long)p->kv_n_blocks * p->kv_block_tokens,
             p->kv_type == KV_Q8_0 ? "q8_0" : p->kv_type == KV_Q4_0 ? "q4_0" : "f16", p->workspace_bytes / CUDA_GIB,
             p->reserve_bytes / CUDA_GIB, p->free_bytes / CUDA_GIB, p->total_bytes / CUDA_GIB);
}

int32_t cuda_graph_bucket(int32_t n_tokens)
{
    if (n_tokens < 1 || n_tokens > CUDA_GRAPH_MAX) return 0;
    int32_t b = 1;
    while (b < n_tokens) b *= 2;
    return b;
}

int32_t cuda_attn_splits(int32_t n_tokens, int32_t n_head_kv, int32_t cap)
{
    int32_t work = n_tokens * (n_head_kv > 0 ? n_head_kv : 1);
    int32_t s = work > 0 ? 256 / work : 1;
    if (cap < 1) cap = CUDA_ATTN_SPLIT_CAP;
    return s < 1 ? 1 : s > cap ? cap : s;
}

int cuda_batch_check(const struct fwd_batch *b, int32_t n_vocab, int32_t block_tokens,
                     int32_t kv_n_blocks, int32_t max_tokens, int32_t max_seqs,
                     int32_t max_blocks_per_seq, char *err, size_t errlen)
{
    if (b->n_tokens < 1 || b->n_tokens > max_tokens) {
        snprintf(err, errlen, "batch of %d tokens (the CUDA backend was sized for 1..%d)",
                 b->n_tokens, max_tokens);
        return -1;
    }
    if (b->n_seqs < 1 || b->n_seqs > max_seqs) {
        snprintf(err, errlen, "batch of %d sequences (the CUDA backend was sized for 1..%d)",
                 b->n_seqs, max_seqs);
        return -1;
    }
    for (int32_t s = 0; s < b->n_seqs; s++) {
        const struct fwd_seq *q = &b->seqs[s];
        if (q->n_blocks < 0 || q->n_blocks > max_blocks_per_seq) {
            snprintf(err, errlen, "sequence %d: block table of %d blocks (at most %d)", s,
                     q->n_blocks, max_blocks_per_seq);
            return -1;
        }
        for (int32_t i = 0; i < q->n_blocks; i++)
            if (q->block_table[i] < 0 || q->block_table[i] >= kv_n_blocks) {
                snprintf(err, errlen, "sequence %d: block_table[%d] = %d outside the pool of %d blocks",
                         s, i, q->block_table[i], kv_n_blocks);
                return -1;
            }
    }
    for (int32_t i = 0; i < b->n_tokens; i++) {
        int32_t s = b->seq[i], p = b->pos[i];
        if (b->token[i] < 0 || b->token[i] >= n_vocab) {
            snprintf(err, errlen, "token %d of the batch: id %d outside the vocabulary of %d", i,
                     b->token[i], n_vocab);
            return -1;
        }
        if (s < 0 || s >= b->n_seqs) {
            snprintf(err, errlen, "token %d of the batch: sequence %d of %d", i, s, b->n_seqs);
            return -1;
        }
        if (p < 0 || p / block_tokens >= b->seqs[s].n_blocks) {
            snprintf(err, errlen, "token %d of the batch: position %d not covered by the %d blocks "
                     "of sequence %d", i, p, b->seqs[s].n_blocks, s);
            return -1;
        }
    }
    return 0;
}

int32_t cuda_batch_tiles(const struct fwd_batch *b, int32_t max_tile, int32_t *tiles)
{
    int32_t n = 0;
    if (max_tile < 1) max_tile = 1;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        if (n > 0 && b->seq[i] == b->seq[tiles[2 * (n - 1)]] && tiles[2 * (n - 1) + 1] < max_tile &&
            tiles[2 * (n - 1)] + tiles[2 * (n - 1) + 1] == i) {
            tiles[2 * (n - 1) + 1]++;
        } else {
            tiles[2 * n] = i;
            tiles[2 * n + 1] = 1;
            n++;
        }
    }
    return n;
}

void cuda_rope_freqs(int32_t n_rot, float base, const float *factors, float *inv_freq)
{
    for (int32_t i = 0; i < n_rot / 2; i++) {
        double f = pow((double)base, -2.0 * i / (double)n_rot);
        inv_freq[i] = (float)(factors ? f / factors[i] : f);
    }
}

/* TERN_CUDA_HOST_ONLY: just the plain-C part above (the CPU emulation test of
 * tests/kernels/cuda/emu links it without the CUDA runtime). */
/* The runtime half lives in backend_cuda_rt.c. In a CUDA build it is a
 * separate module (libtern_cuda.so, linked to cudart and cuBLAS) that is
 * loaded only when the CUDA driver is present: the CUDA libraries cost about
 * 200 MiB of resident memory and a slow start-up once mapped, which a
 * machine without a GPU should not pay. TERN_CUDA_HOST_ONLY / TERN_CUDA_EMU:
 * the tests of tests/kernels/cuda and tests/engine/backend link
 * backend_cuda_rt.c (or nothing) directly. */
#if defined(TERN_CUDA_HOST_ONLY) || defined(TERN_CUDA_EMU)

#elif !TERN_HAVE_CUDA

struct backend *backend_cuda_open(const struct model *m, const struct backend_config *cfg,
                                  char *err, size_t errlen)
{
    (void)m;
    (void)cfg;
    snprintf(err, errlen, "built without CUDA");
    return NULL;
}

int backend_cuda_plan(const struct model *m, const struct backend_config *cfg, char *out,
                      size_t outlen)
{
    (void)m;
    (void)cfg;
    snprintf(out, outlen, "no usable GPU: built without CUDA");
    return -1;
}

#else /* TERN_HAVE_CUDA: load the module */

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

typedef struct backend *(*cuda_open_fn)(const struct model *, const struct backend_config *,
                                        char *, size_t);
typedef int (*cuda_plan_fn)(const struct model *, const struct backend_config *, char *, size_t);

/* Opens the module: $TERN_CUDA_MODULE, next to the executable, the
 * installed location, then the build tree. The handle is never closed
 * (RTLD_NODELETE): the CUDA runtime does not support being unloaded. */
static void *cuda_module(char *err, size_t errlen)
{
    /* No driver, no GPU: say so without mapping the CUDA libraries. */
    void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!drv) {
        snprintf(err, errlen, "CUDA driver not found (%s)", dlerror());
        return NULL;
    }
    dlclose(drv);
    char exe[PATH_MAX], cand[4][PATH_MAX + 64];
    int n = 0;
    const char *env = getenv("TERN_CUDA_MODULE");
    if (env && *env) snprintf(cand[n++], sizeof cand[0], "%s", env);
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(cand[n++], sizeof cand[0], "%s/libtern_cuda.so", exe);
        }
    }
    snprintf(cand[n++], sizeof cand[0], "%s", TERN_CUDA_MODULE_INSTALLED);
    snprintf(cand[n++], sizeof cand[0], "%s", TERN_CUDA_MODULE_BUILD);
    char tried[1024] = "";
    for (int i = 0; i < n; i++) {
        if (access(cand[i], R_OK) != 0) continue;
        void *h = dlopen(cand[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (h) return h;
        snprintf(tried, sizeof tried, "%s", dlerror());
    }
    if (tried[0])
        snprintf(err, errlen, "CUDA not usable: cannot load the CUDA module: %s", tried);
    else
        snprintf(err, errlen, "CUDA not usable: libtern_cuda.so not found (next to the executable, "
                 "%s, %s or $TERN_CUDA_MODULE)", TERN_CUDA_MODULE_INSTALLED, TERN_CUDA_MODULE_BUILD);
    return NULL;
}

struct backend *backend_cuda_open(const struct model *m, const struct backend_config *cfg,
                                  char *err, size_t errlen)
{
    const char *extra = model_extra_feature(m);
    if (extra) {   /* the CUDA layers are the plain dense block */
        snprintf(err, errlen, "CUDA backend does not implement %s (the CPU backend does)", extra);
        return NULL;
    }
    void *h = cuda_module(err, errlen);
    if (!h) return NULL;
    cuda_open_fn open = (cuda_open_fn)dlsym(h, "tern_cuda_module_open");
    if (!open) {
        snprintf(err, errlen, "CUDA not usable: the CUDA module lacks tern_cuda_module_open");
        return NULL;
    }
    return open(m, cfg, err, errlen);
}

int backend_cuda_plan(const struct model *m, const struct backend_config *cfg, char *out,
                      size_t outlen)
{
    char err[512];
    void *h = cuda_module(err, sizeof err);
    cuda_plan_fn plan = h ? (cuda_plan_fn)dlsym(h, "tern_cuda_module_plan") : NULL;
    if (!plan) {
        snprintf(out, outlen, "no usable GPU: %s", h ? "the CUDA module lacks tern_cuda_module_plan" : err);
        return -1;
    }
    return plan(m, cfg, out, outlen);
}

#endif
