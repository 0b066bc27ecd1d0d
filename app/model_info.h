/* model_info: what a GGUF file holds, read straight from its keys and
 * tensor table (architecture, parameters, tensor types, context, vocabulary,
 * the chat template the engine would use) and the memory plan (weights + KV
 * bytes per token, KV tokens a budget holds). Shared by `tern info` and
 * `tern models`. */
#ifndef TERN_MODEL_INFO_H
#define TERN_MODEL_INFO_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "gguf.h"

struct type_use {
    uint32_t type;
    uint64_t count, bytes;
};

struct model_info {
    /* strings borrowed from the gguf context (valid until gguf_close) */
    const char *arch, *name, *tok_model, *tok_pre, *tmpl_family;
    bool tmpl_fallback, tmpl_from_vocab;
    char tok_err[256]; /* why the tokenizer could not be opened, or "" */
    uint64_t params, weight_bytes, n_types, vocab;
    struct type_use types[64];
    uint32_t ctx, layers, embd, heads, kv_heads, key_len, val_len; /* 0 = absent */
    uint32_t swa;           /* attention.sliding_window, 0 = none */
    int32_t pooling;        /* pooling_type (embeddings: 0 none, 1 mean, 2 cls, 3 last,
                               4 rank), -1 = absent */
    int64_t bos, eos, eot;  /* -1 = none */
    uint64_t kv_per_token, budget, kv_tokens;
    uint64_t active_params;       /* per token: all but the unused experts (= params, dense) */
    uint64_t vocab_params;        /* the embedding table's and, untied, the output matrix's */
    uint64_t active_weight_bytes; /* what decode reads per token: all but the unused experts'
                                     bytes (memory holds weight_bytes: every expert resident) */
    uint32_t n_expert, n_expert_used;
    const char *quant;            /* the file's quantization: general.file_type's name
                                     ("Q4_K_M"), else the type holding the most bytes */
};


/* Tokens per KV block the plan counts q4c's K with (the engine's default). */
#define MODEL_INFO_KV_BLOCK_TOKENS 16

/* Fills mi from g; the plan uses KV cache type kv (its real bytes per token)
 * and a budget of mem bytes (0 = physical memory). */
void model_info_gather(const struct gguf_ctx *g, enum kv_type kv, uint64_t mem,
                       struct model_info *mi);
/* The KV type's name in the plan's output: "F16", "F32", "Q8_0", "Q4_0", "Q4C". */
const char *model_info_kv_name(enum kv_type kv);
uint64_t model_info_physical_memory(void);

#endif
