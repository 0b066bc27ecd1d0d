/* model: reads the hyperparameters of a GGUF model for each supported
 * architecture (llama with or without experts, qwen2, qwen3, qwen3moe,
 * gemma3) and binds its weight tensors, checking every shape, so the
 * backends can run without further checks. Every tensor of the file is
 * accounted for: bound and used, or the load fails naming the feature the
 * unused tensor implies (a bias silently ignored gives fluent wrong text). */
#include "model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"

static const char *const arch_names[] = {
    [ARCH_LLAMA] = "llama", [ARCH_QWEN2] = "qwen2", [ARCH_QWEN3] = "qwen3",
    [ARCH_GEMMA3] = "gemma3", [ARCH_QWEN3MOE] = "qwen3moe", [ARCH_PHI3] = "phi3",
    [ARCH_GEMMA2] = "gemma2",
};
#define SUPPORTED_ARCHS "llama (dense or with experts), qwen2, qwen3, qwen3moe, gemma2, gemma3, phi3"

const char *model_arch_name(enum model_arch a)
{
    if ((unsigned)a < sizeof arch_names / sizeof arch_names[0]) return arch_names[a];
    return "unknown";
}

/* Loader state: the file, the key prefix and where errors go. */
struct loader {
    struct gguf_ctx *g;
    struct model *m;
    const char *path;
    char *err;
    size_t errlen;
    bool *used;          /* [gguf_n_tensors]: bound by some wtensor */
    char missing[192];   /* first required tensor that is absent */
};

static int fail(struct loader *L, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(L->err, L->errlen, "%s: %s", L->path, msg);
    return -1;
}

static void arch_key(const struct loader *L, const char *suffix, char *buf, size_t n)
{
    snprintf(buf, n, "%s.%s", L->m->hp.arch_name, suffix);
}

/* Integer hyperparameter <arch>.<suffix>; absent → *out keeps its default
 * unless required. A present key of the wrong type is always an error. */
static int get_int(struct loader *L, const char *suffix, int32_t *out, bool required)
{
    char key[128];
    arch_key(L, suffix, key, sizeof key);
    const struct gguf_kv *kv = gguf_find_kv(L->g, key);
    if (!kv) return required ? fail(L, "missing hyperparameter '%s'", key) : 0;
    if (!gguf_get_i32(L->g, key, out))
        return fail(L, "hyperparameter '%s' has type %s, expected a 32-bit integer", key,
                    gguf_vtype_name(kv->type));
    return 0;
}

static int get_float(struct loader *L, const char *suffix, float *out, bool required)
{
    char key[128];
    arch_key(L, suffix, key, sizeof key);
    const struct gguf_kv *kv = gguf_find_kv(L->g, key);
    if (!kv) return required ? fail(L, "missing hyperparameter '%s'", key) : 0;
    if (!gguf_get_f32(L->g, key, out))
        return fail(L, "hyperparameter '%s' has type %s, expected a float", key,
                    gguf_vtype_name(kv->type));
    return 0;
}

static int positive(struct loader *L, const char *suffix, int64_t v)
{
    if (v > 0) return 0;
    return fail(L, "hyperparameter '%s.%s' is %lld, expected > 0", L->m->hp.arch_name, suffix,
                (long long)v);
}

static int read_arch(struct loader *L)
{
    struct model_hparams *hp = &L->m->hp;
    hp->arch_name = gguf_get_str(L->g, "general.architecture");
    if (!hp->arch_name) return fail(L, "missing key 'general.architecture'");
    for (size_t i = 0; i < sizeof arch_names / sizeof arch_names[0]; i++) {
        if (strcmp(hp->arch_name, arch_names[i]) == 0) {
            hp->arch = (enum model_arch)i;
            return 0;
        }
    }
    return fail(L, "unsupported architecture '%s' (supported: " SUPPORTED_ARCHS ")",
                hp->arch_name);
}

/* YaRN's constants as llama.cpp derives them (llama-context.cpp, ggml's
 * ggml_rope_yarn_corr_dims): the rope.scaling.yarn_* keys are not read
 * there, so beta_fast 32, beta_slow 1, ext_factor 1. The attention factor is
 * get_mscale(factor) / (1 + 0.1 ln factor) · attn_factor, to which the rope
 * kernel multiplies (1 + 0.1 ln(1 / freq_scale)) back: the same float steps. */
static float yarn_corr_dim(int32_t n_rot, int32_t n_ctx_orig, float n_rot_beta, float base)
{
    return (float)n_rot * logf((float)n_ctx_orig / (n_rot_beta * 2 * (float)3.14159265358979323846)) / (2 * logf(base));
}

static void yarn_params(struct model_hparams *hp)
{
    const float beta_fast = 32.0f, beta_slow = 1.0f, factor = 1.0f / (1.0f / hp->rope_scale);
    const float start = floorf(yarn_corr_dim(hp->n_rot, hp->n_ctx_orig, beta_fast, hp->rope_base));
    const float end = ceilf(yarn_corr_dim(hp->n_rot, hp->n_ctx_orig, beta_slow, hp->rope_base));
    hp->yarn_corr[0] = fmaxf(0.0f, start);
    hp->yarn_corr[1] = fminf((float)(hp->n_rot - 1), end);
    hp->yarn_ext_factor = 1.0f;   /* as llama.cpp sets it for yarn (context param unset) */
    hp->yarn_attn = factor <= 1.0f ? 1.0f : 0.1f * logf(factor) + 1.0f;
    hp->yarn_attn *= 1.0f / (1.0f + 0.1f * logf(factor));
    hp->yarn_attn *= hp->rope_attn_factor;
}

static int read_rope(struct loader *L)
{
    struct model_hparams *hp = &L->m->hp;
    hp->rope_base = 10000.0f;
    hp->rope_scale = 1.0f;
    hp->n_rot = hp->head_dim;
    if (get_float(L, "rope.freq_base", &hp->rope_base, false) ||
        get_int(L, "rope.dimension_count", &hp->n_rot, false))
        return -1;
    if (hp->n_rot <= 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return fail(L, "hyperparameter '%s.rope.dimension_count' is %d, expected an even "
                    "number in [2, %d]", hp->arch_name, hp->n_rot, hp->head_dim);
    if (!(hp->rope_base > 0.0f))
        return fail(L, "hyperparameter '%s.rope.freq_base' is %g, expected > 0",
                    hp->arch_name, (double)hp->rope_base);

    char key[128];
    arch_key(L, "rope.scaling.type", key, sizeof key);
    const char *type = gguf_get_str(L->g, key);
    float factor = 1.0f;
    if (get_float(L, "rope.scaling.factor", &factor, false)) return -1;
    if (!type || strcmp(type, "none") == 0) {
        float lin = 1.0f;
        if (get_float(L, "rope.scale_linear", &lin, false)) return -1;
        if (lin > 0.0f) hp->rope_scale = lin;
    } else if (strcmp(type, "linear") == 0) {
        if (!(factor > 0.0f))
            return fail(L, "hyperparameter '%s.rope.scaling.factor' is %g, expected > 0",
                        hp->arch_name, (double)factor);
        hp->rope_scale = factor;
    } else if (strcmp(type, "yarn") == 0) {
        if (!(factor > 0.0f))
            return fail(L, "hyperparameter '%s.rope.scaling.factor' is %g, expected > 0",
                        hp->arch_name, (double)factor);
        hp->rope_scale = factor;
        hp->rope_yarn = true;   /* the rest once the original context is known */
    } else if (strcmp(type, "llama3") != 0 && strcmp(type, "longrope") != 0) {
        /* llama3 scaling arrives as the rope_freqs tensor, LongRoPE as
         * rope_factors_long/short, bound below. */
        return fail(L, "unsupported rope scaling '%s' in '%s'", type, key);
    }
    return 0;
}

/* gemma2 and gemma3: sliding-window layers, embeddings scaled by sqrt(dim),
 * the query scale; gemma2 also caps attention scores and final logits
 * (by default at 50 and 30, as the reference), and its local layers keep
 * the global RoPE base. */
static int read_gemma3(struct loader *L)
{
    struct model_hparams *hp = &L->m->hp;
    const bool g2 = hp->arch == ARCH_GEMMA2;
    hp->rope_base_local = g2 ? hp->rope_base : 10000.0f;
    hp->swa_period = g2 ? 2 : 6;
    if (g2) {
        hp->sliding_window = 4096;
        hp->attn_softcap = 50.0f;
        hp->logit_softcap = 30.0f;
        if (get_float(L, "attn_logit_softcapping", &hp->attn_softcap, false)) return -1;
    }
    if (get_int(L, "attention.sliding_window", &hp->sliding_window, false) ||
        get_int(L, "attention.sliding_window_pattern", &hp->swa_period, false) ||
        get_float(L, "rope.freq_base_swa", &hp->rope_base_local, false) ||
        get_float(L, "final_logit_softcapping", &hp->logit_softcap, false))
        return -1;
    if (hp->sliding_window < 0) return positive(L, "attention.sliding_window", 0);
    if (hp->sliding_window > 0 && hp->swa_period <= 0)
        return positive(L, "attention.sliding_window_pattern", hp->swa_period);
    hp->embd_scale = sqrtf((float)hp->dim);
    /* The reference follows gemma_pytorch: 27B (62 layers) scales by
     * dim/n_head, every other size by the head dimension. */
    const int32_t big = g2 ? 46 : 62;   /* the 27B models */
    hp->query_scale = hp->n_layer == big ? 1.0f / sqrtf((float)(hp->dim / hp->n_head))
                                        : 1.0f / sqrtf((float)hp->head_dim);
    return 0;
}

/* Expert counts (llama with experts, qwen3moe). */
static int read_moe(struct loader *L)
{
    struct model_hparams *hp = &L->m->hp;
    if (get_int(L, "expert_count", &hp->n_expert, false) ||
        get_int(L, "expert_used_count", &hp->n_expert_used, false))
        return -1;
    if (hp->arch == ARCH_QWEN3MOE && hp->n_expert <= 0)
        return fail(L, "hyperparameter 'qwen3moe.expert_count' is %d, expected > 0",
                    hp->n_expert);
    if (hp->n_expert < 0) return positive(L, "expert_count", hp->n_expert);
    if (hp->n_expert == 0) {
        hp->n_expert_used = 0;
        return 0;
    }
    if (hp->arch != ARCH_LLAMA && hp->arch != ARCH_QWEN3MOE)
        return fail(L, "'%s.expert_count' is %d: experts are not supported for architecture "
                    "'%s' (only llama and qwen3moe)", hp->arch_name, hp->n_expert, hp->arch_name);
    if (hp->n_expert_used <= 0 || hp->n_expert_used > hp->n_expert)
        return fail(L, "hyperparameter '%s.expert_used_count' is %d, expected in [1, %d] "
                    "(expert_count)", hp->arch_name, hp->n_expert_used, hp->n_expert);
    hp->n_ff_exp = hp->arch == ARCH_QWEN3MOE ? hp->n_ff / hp->n_expert_used : hp->n_ff;
    if (hp->arch == ARCH_QWEN3MOE &&
        get_int(L, "expert_feed_forward_length", &hp->n_ff_exp, false))
        return -1;
    return positive(L, "expert_feed_forward_length", hp->n_ff_exp);
}

static int read_hparams(struct loader *L)
{
    struct model_hparams *hp = &L->m->hp;
    if (get_int(L, "context_length", &hp->n_ctx_train, true) ||
        get_int(L, "embedding_length", &hp->dim, true) ||
        get_int(L, "block_count", &hp->n_layer, true) ||
        get_int(L, "attention.head_count", &hp->n_head, true) ||
        get_int(L, "feed_forward_length", &hp->n_ff, true) ||
        get_float(L, "attention.layer_norm_rms_epsilon", &hp->norm_eps, true))
        return -1;
    if (positive(L, "context_length", hp->n_ctx_train) ||
        positive(L, "embedding_length", hp->dim) || positive(L, "block_count", hp->n_layer) ||
        positive(L, "attention.head_count", hp->n_head) ||
        positive(L, "feed_forward_length", hp->n_ff))
        return -1;
    if (!(hp->norm_eps > 0.0f && hp->norm_eps < 1.0f))
        return fail(L, "hyperparameter '%s.attention.layer_norm_rms_epsilon' is %g, expected "
                    "in (0, 1)", hp->arch_name, (double)hp->norm_eps);
    hp->n_head_kv = hp->n_head;
    if (get_int(L, "attention.head_count_kv", &hp->n_head_kv, false)) return -1;
    if (hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv)
        return fail(L, "hyperparameter '%s.attention.head_count_kv' is %d, expected a divisor "
                    "of head_count %d", hp->arch_name, hp->n_head_kv, hp->n_head);
    hp->head_dim = hp->dim % hp->n_head == 0 ? hp->dim / hp->n_head : 0;
    int32_t vlen = -1;
    if (get_int(L, "attention.key_length", &hp->head_dim, false) ||
        get_int(L, "attention.value_length", &vlen, false))
        return -1;
    if (hp->head_dim <= 0 || hp->head_dim % 2)
        return fail(L, "hyperparameter '%s.attention.key_length' is %d (or embedding_length "
                    "%d is not a multiple of head_count %d)", hp->arch_name, hp->head_dim,
                    hp->dim, hp->n_head);
    if (vlen != -1 && vlen != hp->head_dim)
        return fail(L, "hyperparameter '%s.attention.value_length' %d differs from key_length "
                    "%d (unsupported)", hp->arch_name, vlen, hp->head_dim);
    hp->query_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->embd_scale = 1.0f;
    hp->rope_neox = hp->arch != ARCH_LLAMA;
    if (read_rope(L)) return -1;
    if ((hp->arch == ARCH_GEMMA3 || hp->arch == ARCH_GEMMA2) && read_gemma3(L)) return -1;
    if (read_moe(L)) return -1;
    hp->pooling_type = MODEL_POOLING_UNSET;
    if (get_int(L, "pooling_type", &hp->pooling_type, false)) return -1;
    if (hp->pooling_type < MODEL_POOLING_UNSET || hp->pooling_type > 4)
        return fail(L, "hyperparameter '%s.pooling_type' is %d, expected 0..4 (none, mean, cls, "
                    "last, rank)", hp->arch_name, hp->pooling_type);
    hp->rope_attn_factor = 1.0f;
    hp->n_ctx_orig = hp->n_ctx_train;
    if (get_float(L, "rope.scaling.attn_factor", &hp->rope_attn_factor, false) ||
        get_int(L, "rope.scaling.original_context_length", &hp->n_ctx_orig, false))
        return -1;
    if (!(hp->rope_attn_factor > 0.0f))
        return fail(L, "hyperparameter '%s.rope.scaling.attn_factor' is %g, expected > 0",
                    hp->arch_name, (double)hp->rope_attn_factor);
    if (hp->arch == ARCH_PHI3) hp->query_scale = 1.0f / sqrtf((float)hp->head_dim);
    if (!hp->rope_base_local) hp->rope_base_local = hp->rope_base;
    if (hp->rope_yarn) yarn_params(hp);
    return 0;
}

/* Binds tensor `name` (absent allowed unless required) and checks its shape:
 * [cols, rows] or, with n_exp > 0, [cols, rows, n_exp]. A required tensor
 * that is absent is noted, not failed at once: an unused tensor elsewhere
 * in the file usually names the real cause better (a Mixtral-style file
 * read as dense llama lacks ffn_gate but has ffn_gate_exps). */
static int bind3(struct loader *L, struct wtensor *w, const char *name, int64_t cols,
                 int64_t rows, int64_t n_exp, bool required)
{
    const struct gguf_tensor *t = gguf_find_tensor(L->g, name);
    memset(w, 0, sizeof *w);
    if (!t) {
        if (required && !L->missing[0])
            snprintf(L->missing, sizeof L->missing, "missing tensor '%s'", name);
        return 0;
    }
    const struct qtype_info *qi = qtype_get(t->type);
    if (!qi || !qi->supported)
        return fail(L, "unsupported type %s in tensor '%s' (tern has no kernels for it)",
                    qi ? qi->name : "unknown", name);
    const int64_t ne2 = n_exp > 0 ? n_exp : 1;
    if ((int64_t)t->ne[0] != cols || (int64_t)t->ne[1] != rows || (int64_t)t->ne[2] != ne2 ||
        t->ne[3] != 1)
        return fail(L, "tensor '%s' has shape [%llu, %llu, %llu], expected [%lld, %lld, %lld]",
                    name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                    (unsigned long long)t->ne[2], (long long)cols, (long long)rows,
                    (long long)ne2);
    w->data = t->data;
    w->type = t->type;
    w->cols = cols;
    w->rows = rows;
    w->name = t->name;
    w->n_expert = n_exp;
    L->used[t - gguf_tensor_at(L->g, 0)] = true;
    L->m->weight_bytes += t->nbytes;
    L->m->n_params += t->n_elements;
    if (n_exp > 0) {
        /* only n_expert_used of the experts are read per token */
        const uint64_t k = (uint64_t)L->m->hp.n_expert_used, e = (uint64_t)n_exp;
        L->m->weight_bytes_active += t->nbytes / e * k;
        L->m->n_params_active += t->n_elements / e * k;
    } else {
        L->m->weight_bytes_active += t->nbytes;
        L->m->n_params_active += t->n_elements;
    }
    return 0;
}

static int bind(struct loader *L, struct wtensor *w, const char *name, int64_t cols,
                int64_t rows, bool required)
{
    return bind3(L, w, name, cols, rows, 0, required);
}

/* Rows [r0, r0 + n) of a bound matrix (a fused tensor's part). */
static struct wtensor row_slice(const struct wtensor *w, int64_t r0, int64_t n)
{
    struct wtensor s = *w;
    s.data = (const char *)w->data + (size_t)r0 * qtype_row_bytes(w->type, (uint64_t)w->cols);
    s.rows = n;
    return s;
}

/* A fused attn_qkv (rows q, then k, then v) bound as three matrices, and
 * its bias (f32) as three vectors, as the reference's build_qkv views them. */
static int bind_fused_qkv(struct loader *L, struct layer_weights *w, int32_t l, int64_t d,
                          int64_t q, int64_t kv)
{
    char name[96];
    struct wtensor f, fb;
    snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", l);
    if (bind(L, &f, name, d, q + 2 * kv, true)) return -1;
    w->wq = row_slice(&f, 0, q);
    w->wk = row_slice(&f, q, kv);
    w->wv = row_slice(&f, q + kv, kv);
    snprintf(name, sizeof name, "blk.%d.attn_qkv.bias", l);
    if (bind(L, &fb, name, q + 2 * kv, 1, false)) return -1;
    if (!fb.data) return 0;
    if (fb.type != QT_F32) return fail(L, "tensor '%s' has type %s, expected F32", name,
                                       qtype_name(fb.type));
    struct wtensor *b[3] = { &w->bq, &w->bk, &w->bv };
    const int64_t off[3] = { 0, q, q + kv }, len[3] = { q, kv, kv };
    for (int i = 0; i < 3; i++) {
        *b[i] = fb;
        b[i]->data = (const float *)fb.data + off[i];
        b[i]->cols = len[i];
    }
    return 0;
}

static int bind_layer(struct loader *L, int32_t l)
{
    const struct model_hparams *hp = &L->m->hp;
    struct layer_weights *w = &L->m->layers[l];
    const int64_t d = hp->dim, q = (int64_t)hp->n_head * hp->head_dim;
    const int64_t kv = (int64_t)hp->n_head_kv * hp->head_dim, ff = hp->n_ff;
    const bool qk_norm = hp->arch == ARCH_QWEN3 || hp->arch == ARCH_GEMMA3 ||
                         hp->arch == ARCH_QWEN3MOE;
    const bool llama = hp->arch == ARCH_LLAMA;
    const bool post = hp->arch == ARCH_GEMMA3 || hp->arch == ARCH_GEMMA2;
    const bool moe = hp->n_expert > 0;
    const bool phi3 = hp->arch == ARCH_PHI3;   /* gate and up fused in ffn_up */
    char qkv_name[96];
    snprintf(qkv_name, sizeof qkv_name, "blk.%d.attn_qkv.weight", l);
    const bool fused = gguf_find_tensor(L->g, qkv_name) != NULL;
    const int64_t ne = hp->n_expert, fe = hp->n_ff_exp;
    /* req: 1 required, 0 optional (used when present), -1 not bound (an
     * unused tensor of that name is then refused by the accounting). */
    struct { struct wtensor *w; const char *s; int64_t c, r, e; int req; } t[] = {
        { &w->attn_norm, "attn_norm", d, 1, 0, 1 },
        { &w->wq, "attn_q", d, q, 0, fused ? -1 : 1 },
        { &w->wk, "attn_k", d, kv, 0, fused ? -1 : 1 },
        { &w->wv, "attn_v", d, kv, 0, fused ? -1 : 1 },
        { &w->wo, "attn_output", q, d, 0, 1 },
        { &w->bq, "attn_q.bias", q, 1, 0, fused ? -1 : hp->arch == ARCH_QWEN2 },
        { &w->bk, "attn_k.bias", kv, 1, 0, fused ? -1 : hp->arch == ARCH_QWEN2 },
        { &w->bv, "attn_v.bias", kv, 1, 0, fused ? -1 : hp->arch == ARCH_QWEN2 },
        { &w->bo, "attn_output.bias", d, 1, 0, llama ? 0 : -1 },
        { &w->q_norm, "attn_q_norm", hp->head_dim, 1, 0, qk_norm ? 1 : -1 },
        { &w->k_norm, "attn_k_norm", hp->head_dim, 1, 0, qk_norm ? 1 : -1 },
        { &w->post_attn_norm, "post_attention_norm", d, 1, 0, post ? 1 : -1 },
        { &w->ffn_norm, "ffn_norm", d, 1, 0, 1 },
        { &w->w_gate, "ffn_gate", d, ff, 0, moe || phi3 ? -1 : 1 },
        { &w->w_up, "ffn_up", d, phi3 ? 2 * ff : ff, 0, moe ? -1 : 1 },
        { &w->w_down, "ffn_down", ff, d, 0, moe ? -1 : 1 },
        { &w->b_gate, "ffn_gate.bias", ff, 1, 0, llama && !moe ? 0 : -1 },
        { &w->b_up, "ffn_up.bias", ff, 1, 0, llama && !moe ? 0 : -1 },
        { &w->b_down, "ffn_down.bias", d, 1, 0, llama && !moe ? 0 : -1 },
        { &w->post_ffn_norm, "post_ffw_norm", d, 1, 0, post ? 1 : -1 },
        { &w->gate_inp, "ffn_gate_inp", d, ne, 0, moe ? 1 : -1 },
        { &w->gate_exps, "ffn_gate_exps", d, fe, ne, moe ? 1 : -1 },
        { &w->up_exps, "ffn_up_exps", d, fe, ne, moe ? 1 : -1 },
        { &w->down_exps, "ffn_down_exps", fe, d, ne, moe ? 1 : -1 },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (t[i].req < 0) continue;
        char name[96];
        const char *dot = strchr(t[i].s, '.');
        snprintf(name, sizeof name, "blk.%d.%s%s", l, t[i].s, dot ? "" : ".weight");
        if (bind3(L, t[i].w, name, t[i].c, t[i].r, t[i].e, t[i].req == 1)) return -1;
    }
    if (fused && bind_fused_qkv(L, w, l, d, q, kv)) return -1;
    if (phi3 && w->w_up.data) {   /* rows [0, ff) gate, [ff, 2 ff) up, as ggml_swiglu splits */
        const struct wtensor up = w->w_up;
        w->w_gate = row_slice(&up, 0, ff);
        w->w_up = row_slice(&up, ff, ff);
    }
    /* The reference adds Q/K/V biases only when all three are there. */
    const int nb = (w->bq.data != NULL) + (w->bk.data != NULL) + (w->bv.data != NULL);
    if (nb != 0 && nb != 3)
        return fail(L, "layer %d has only %d of the attn_q/k/v biases (expected all or none)",
                    l, nb);
    return 0;
}

/* What an unused tensor implies, for the error naming it. */
static int refuse_unused(struct loader *L, const char *name)
{
    const char *arch = L->m->hp.arch_name;
    if (strstr(name, "_exps") || strstr(name, "ffn_gate_inp") || strstr(name, "_shexp"))
        return fail(L, "tensor '%s' belongs to a mixture of experts, which '%s' files with "
                    "%s.expert_count = %d do not have (unsupported expert layout)", name, arch,
                    arch, L->m->hp.n_expert);
    if (strstr(name, "rope_factors"))
        return fail(L, "tensor '%s': LongRoPE factors are not supported for architecture "
                    "'%s'", name, arch);
    if (strstr(name, ".bias"))
        return fail(L, "tensor '%s': this bias is not part of architecture '%s' in the "
                    "reference (unsupported)", name, arch);
    return fail(L, "tensor '%s' is not used by architecture '%s' (unsupported feature); "
                "refusing rather than computing without it", name, arch);
}

static int bind_tensors(struct loader *L)
{
    struct model *m = L->m;
    struct model_hparams *hp = &m->hp;
    const struct gguf_tensor *te = gguf_find_tensor(L->g, "token_embd.weight");
    if (!te) return fail(L, "missing tensor 'token_embd.weight'");
    hp->n_vocab = (int32_t)te->ne[1];
    int32_t vocab_key = hp->n_vocab;
    if (get_int(L, "vocab_size", &vocab_key, false)) return -1;
    if (vocab_key != hp->n_vocab || hp->n_vocab <= 0)
        return fail(L, "hyperparameter '%s.vocab_size' is %d but token_embd.weight has %d rows",
                    hp->arch_name, vocab_key, hp->n_vocab);
    if (bind(L, &m->tok_embd, "token_embd.weight", hp->dim, hp->n_vocab, true) ||
        bind(L, &m->output_norm, "output_norm.weight", hp->dim, 1, true) ||
        bind(L, &m->output, "output.weight", hp->dim, hp->n_vocab, false) ||
        bind(L, &m->rope_freqs, "rope_freqs.weight", hp->n_rot / 2, 1, false))
        return -1;
    if (hp->arch == ARCH_PHI3 &&
        (bind(L, &m->rope_long, "rope_factors_long.weight", hp->n_rot / 2, 1, false) ||
         bind(L, &m->rope_short, "rope_factors_short.weight", hp->n_rot / 2, 1, false)))
        return -1;
    if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */
    else if (te->n_elements > 0) {   /* untied: a token reads one row of the embedding table */
        const uint64_t row = te->nbytes / (uint64_t)hp->n_vocab;
        m->weight_bytes_active -= te->nbytes - row;
    }
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return fail(L, "out of memory for %d layers", hp->n_layer);
    for (int32_t l = 0; l < hp->n_layer; l++)
        if (bind_layer(L, l)) return -1;
    for (uint64_t i = 0; i < gguf_n_tensors(L->g); i++)
        if (!L->used[i]) return refuse_unused(L, gguf_tensor_at(L->g, i)->name);
    if (L->missing[0]) return fail(L, "%s", L->missing);
    return 0;
}

int model_validate(const struct model *m, char *err, size_t errlen)
{
    const struct model_hparams *hp = &m->hp;
    if (hp->dim <= 0 || hp->n_layer <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0 ||
        hp->head_dim <= 0 || hp->n_ff <= 0 || hp->n_vocab <= 0 || hp->n_head % hp->n_head_kv) {
        snprintf(err, errlen, "model '%s': inconsistent dimensions (dim %d, layers %d, heads "
                 "%d/%d, head_dim %d, ff %d, vocab %d)", hp->arch_name ? hp->arch_name : "?",
                 hp->dim, hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_ff,
                 hp->n_vocab);
        return -1;
    }
    if (!m->tok_embd.data || !m->output.data || !m->output_norm.data || !m->layers) {
        snprintf(err, errlen, "model '%s': embeddings, output or layers missing",
                 hp->arch_name ? hp->arch_name : "?");
        return -1;
    }
    return 0;
}

struct model *model_open(const char *path, char *err, size_t errlen)
{
    struct model *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    struct loader L = { NULL, m, path, err, errlen, NULL, "" };
    m->gguf = gguf_open(path, err, errlen);
    if (!m->gguf) goto fail;
    L.g = m->gguf;
    L.used = calloc(gguf_n_tensors(m->gguf) + 1, sizeof *L.used);
    if (!L.used) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    if (read_arch(&L) || read_hparams(&L) || bind_tensors(&L)) goto fail;
    if (model_validate(m, err, errlen)) goto fail;
    free(L.used);
    return m;
fail:
    free(L.used);
    model_close(m);
    return NULL;
}

void model_close(struct model *m)
{
    if (!m) return;
    if (m->owned_free) m->owned_free(m->owned);
    free(m->layers);
    if (m->gguf) gguf_close(m->gguf);
    free(m);
}

const char *model_extra_feature(const struct model *m)
{
    if (m->hp.n_expert > 0) return "mixture of experts";
    if (m->hp.arch == ARCH_PHI3) return "phi3 (fused layers, LongRoPE)";
    if (m->hp.attn_softcap > 0.0f) return "attention logit soft-capping (gemma2)";
    if (m->hp.rope_attn_factor != 1.0f && m->hp.rope_attn_factor != 0.0f)
        return "rope attention factor";
    if (m->hp.rope_yarn) return "YaRN rope scaling";
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        const struct layer_weights *w = &m->layers[l];
        if (w->bo.data) return "attention output bias";
        if (w->b_gate.data || w->b_up.data || w->b_down.data) return "feed-forward biases";
    }
    return NULL;
}

const struct wtensor *model_rope_factors(const struct model *m, int32_t n_ctx)
{
    if (m->rope_freqs.data) return &m->rope_freqs;
    if (n_ctx <= 0) n_ctx = m->hp.n_ctx_train;
    const struct wtensor *t = n_ctx > m->hp.n_ctx_orig ? &m->rope_long : &m->rope_short;
    return t->data ? t : NULL;
}

bool model_scales_q(const struct model *m)
{
    return m->hp.arch == ARCH_GEMMA3 || m->hp.arch == ARCH_GEMMA2 || m->hp.arch == ARCH_PHI3;
}

bool model_layer_is_swa(const struct model *m, int32_t l)
{
    const struct model_hparams *hp = &m->hp;
    if (hp->sliding_window <= 0) return false;
    if (hp->swa_period <= 0) return true;
    return l % hp->swa_period < hp->swa_period - 1;
}

float model_layer_rope_base(const struct model *m, int32_t l)
{
    return model_layer_is_swa(m, l) ? m->hp.rope_base_local : m->hp.rope_base;
}
