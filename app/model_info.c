/* model_info: gathering a model file's description (see model_info.h). */
#include "model_info.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quant.h"
#include "template.h"
#include "tok.h"

/* llama.cpp's llama_ftype numbering of general.file_type. */
static const char *file_type_name(uint32_t ft)
{
    static const char *const names[] = {
        [0] = "F32",     [1] = "F16",     [2] = "Q4_0",    [3] = "Q4_1",    [7] = "Q8_0",
        [8] = "Q5_0",    [9] = "Q5_1",    [10] = "Q2_K",   [11] = "Q3_K_S", [12] = "Q3_K_M",
        [13] = "Q3_K_L", [14] = "Q4_K_S", [15] = "Q4_K_M", [16] = "Q5_K_S", [17] = "Q5_K_M",
        [18] = "Q6_K",   [32] = "BF16"};
    return ft < sizeof names / sizeof names[0] ? names[ft] : NULL;
}

/* ---- gathering ----------------------------------------------------------- */

static uint32_t arch_u32(const struct gguf_ctx *g, const char *arch, const char *suffix)
{
    char key[256];
    uint32_t v = 0;
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    gguf_get_u32(g, key, &v);
    return v;
}

static int cmp_use(const void *a, const void *b)
{
    const struct type_use *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

static void gather_tensors(const struct gguf_ctx *g, struct model_info *mi)
{
    uint64_t expert_params = 0, expert_bytes = 0;
    for (uint64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        uint64_t k = 0;
        while (k < mi->n_types && mi->types[k].type != t->type) k++;
        if (k == mi->n_types) {
            if (k == sizeof mi->types / sizeof mi->types[0]) continue; /* cannot happen: < 64 type numbers */
            mi->types[mi->n_types++].type = t->type;
        }
        mi->types[k].count++;
        mi->types[k].bytes += t->nbytes;
        mi->params += t->n_elements;
        mi->weight_bytes += t->nbytes;
        if (strstr(t->name, "_exps")) { /* MoE expert stacks */
            expert_params += t->n_elements;
            expert_bytes += t->nbytes;
        }
    }
    mi->active_params = mi->params;
    mi->active_weight_bytes = mi->weight_bytes;
    const struct gguf_tensor *te = gguf_find_tensor(g, "token_embd.weight");
    const struct gguf_tensor *to = gguf_find_tensor(g, "output.weight");
    mi->vocab_params = (te ? te->n_elements : 0) + (to ? to->n_elements : 0);
    if (te && to && te->ne[1] > 0)   /* untied: one row read */
        mi->active_weight_bytes -= te->nbytes - te->nbytes / te->ne[1];
    if (mi->n_expert > 0 && mi->n_expert_used > 0 && mi->n_expert_used < mi->n_expert) {
        const uint32_t unused = mi->n_expert - mi->n_expert_used;
        mi->active_params -= expert_params / mi->n_expert * unused;
        mi->active_weight_bytes -= expert_bytes / mi->n_expert * unused;
    }
    qsort(mi->types, mi->n_types, sizeof mi->types[0], cmp_use);
}

/* BOS/EOS from the keys; EOT and the chat template as the engine resolves
 * them (tokenizer: eot key or marker text; template: markers, or for files
 * without one the vocabulary's marker tokens). Without a usable tokenizer
 * the template family comes from the template text alone. */
static void gather_vocab(const struct gguf_ctx *g, struct model_info *mi)
{
    const struct gguf_kv *tokens = gguf_get_arr(g, "tokenizer.ggml.tokens");
    const char *jinja = gguf_get_str(g, "tokenizer.chat_template");
    mi->vocab = tokens ? tokens->v.arr.n : 0;
    mi->tok_model = gguf_get_str(g, "tokenizer.ggml.model");
    mi->tok_pre = gguf_get_str(g, "tokenizer.ggml.pre");
    uint32_t id;
    mi->bos = gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &id) ? (int64_t)id : -1;
    mi->eos = gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &id) ? (int64_t)id : -1;
    mi->eot = gguf_get_u32(g, "tokenizer.ggml.eot_token_id", &id) ? (int64_t)id : -1;
    struct tok *tk = tok_open(g, mi->tok_err, sizeof mi->tok_err);
    struct tmpl t;
    char err[256];
    if (tk && tmpl_init_model(&t, g, tk, NULL, err, sizeof err) == 0) {
        mi->eot = tok_eot(tk);
        mi->tmpl_family = tmpl_family_name(t.family);
        mi->tmpl_fallback = t.fallback;
        mi->tmpl_from_vocab = t.from_vocab;
        tmpl_free(&t);
    } else {
        enum tmpl_family f = tmpl_detect(jinja);
        mi->tmpl_family = tmpl_family_name(f == TMPL_UNKNOWN ? TMPL_CHATML : f);
        mi->tmpl_fallback = f == TMPL_UNKNOWN;
        if (tk) snprintf(mi->tok_err, sizeof mi->tok_err, "%s", err);
    }
    tok_close(tk);
}

uint64_t model_info_physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

const char *model_info_kv_name(enum kv_type kv)
{
    switch (kv) {
    case KV_F32: return "F32";
    case KV_Q8_0: return "Q8_0";
    case KV_Q4_0: return "Q4_0";
    case KV_Q4C: return "Q4C";
    case KV_F16: break;
    }
    return "F16";
}

/* KV bytes per token: K and V rows of kv_heads x head_dim per layer in the
 * GGUF type of the same name; q4c (K per channel over each block, V as q5_0)
 * as the pool counts it, which takes one width for K and V (the engine's
 * head_dim) and whole q5_0 blocks of 32 for V: 0 (unknown) otherwise. */
static void plan_memory(struct model_info *mi, enum kv_type kv, uint64_t mem)
{
    const uint64_t kd = (uint64_t)mi->kv_heads * mi->key_len;
    const uint64_t vd = (uint64_t)mi->kv_heads * mi->val_len;
    if (kv == KV_Q4C) {
        mi->kv_per_token = kd == vd && kd % 32 == 0
                               ? backend_kv_token_bytes(KV_Q4C, (int32_t)mi->layers, (int64_t)kd,
                                                        MODEL_INFO_KV_BLOCK_TOKENS)
                               : 0;
    } else {
        const uint32_t qt = kv == KV_F32    ? QT_F32
                            : kv == KV_Q8_0 ? QT_Q8_0
                            : kv == KV_Q4_0 ? QT_Q4_0
                                            : QT_F16;
        mi->kv_per_token =
            (uint64_t)mi->layers * (qtype_row_bytes(qt, kd) + qtype_row_bytes(qt, vd));
    }
    mi->budget = mem ? mem : model_info_physical_memory();
    mi->kv_tokens = mi->kv_per_token && mi->budget > mi->weight_bytes
                        ? (mi->budget - mi->weight_bytes) / mi->kv_per_token
                        : 0;
}

void model_info_gather(const struct gguf_ctx *g, enum kv_type kv_type, uint64_t mem,
                       struct model_info *mi)
{
    memset(mi, 0, sizeof *mi);
    mi->arch = gguf_get_str(g, "general.architecture"); /* the reader requires it */
    mi->name = gguf_get_str(g, "general.name");
    mi->n_expert = arch_u32(g, mi->arch, "expert_count");
    mi->n_expert_used = arch_u32(g, mi->arch, "expert_used_count");
    gather_tensors(g, mi);
    uint32_t ft;
    mi->quant = gguf_get_u32(g, "general.file_type", &ft) ? file_type_name(ft) : NULL;
    if (!mi->quant && mi->n_types) mi->quant = qtype_name(mi->types[0].type);
    mi->ctx = arch_u32(g, mi->arch, "context_length");
    mi->layers = arch_u32(g, mi->arch, "block_count");
    mi->embd = arch_u32(g, mi->arch, "embedding_length");
    mi->heads = arch_u32(g, mi->arch, "attention.head_count");
    mi->kv_heads = arch_u32(g, mi->arch, "attention.head_count_kv");
    if (!mi->kv_heads) mi->kv_heads = mi->heads; /* no key: no grouped-query attention */
    mi->key_len = arch_u32(g, mi->arch, "attention.key_length");
    mi->val_len = arch_u32(g, mi->arch, "attention.value_length");
    if (!mi->key_len && mi->heads) mi->key_len = mi->embd / mi->heads;
    if (!mi->val_len) mi->val_len = mi->key_len;
    mi->swa = arch_u32(g, mi->arch, "attention.sliding_window");
    char pkey[256];
    snprintf(pkey, sizeof pkey, "%s.pooling_type", mi->arch);
    uint32_t pool = 0;
    mi->pooling = gguf_get_u32(g, pkey, &pool) && pool <= 4 ? (int32_t)pool : -1;
    gather_vocab(g, mi);
    plan_memory(mi, kv_type, mem);
}

