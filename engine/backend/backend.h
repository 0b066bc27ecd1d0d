/* backend: the interface every compute backend (CPU, CUDA) implements.
 *
 * One forward call takes a batch of tokens from several sequences: prefill
 * chunks of one sequence and single decode tokens of others go through the
 * same call (continuous batching). The backend owns the paged KV pool: a
 * fixed number of blocks of `kv_block_tokens` positions each. Which blocks a
 * sequence uses is decided by the scheduler (engine/kv.h) and passed in as a
 * block table per sequence; token at position p of sequence s stores its K/V
 * in block block_table[p / kv_block_tokens], slot p % kv_block_tokens, and
 * attends to positions [0, p] of the same sequence (or the sliding window). */
#ifndef TERN_BACKEND_H
#define TERN_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

struct model;

enum backend_kind { BACKEND_AUTO, BACKEND_CPU, BACKEND_CUDA };
/* KV_Q4C: 4-bit codes, K per channel over each block (an f16 min and step
 * per dimension and block, the block still filling kept in f16 until it is
 * full), V per token as q5_0 (rotated as q4_0's V): CPU only. */
enum kv_type { KV_F16, KV_F32, KV_Q8_0, KV_Q4_0, KV_Q4C };

struct backend_config {
    enum backend_kind kind;
    int threads;               /* CPU worker threads; 0 = physical cores */
    int gpu;                   /* CUDA device index */
    enum kv_type kv_type;
    int32_t kv_block_tokens;   /* tokens per KV block (16) */
    uint64_t kv_bytes;         /* KV pool budget; 0 = default plan */
    int32_t max_batch_tokens;  /* largest n_tokens a forward call may get */
    int32_t max_seqs;          /* largest n_seqs a forward call may get */
    bool force_scalar;         /* CPU: portable scalar kernels (tests) */
    int32_t n_ctx;             /* context of a sequence (LongRoPE picks its
                                * factors by it); 0 = the training context */
    bool prompt_attn_bf16;     /* CPU with AMX: prompt attention on bf16 tiles
                                * (long prompts about 3x faster; within bf16's
                                * bound, not the bits of decoding one by one, so
                                * batching and speculation may change a reply) */
    bool prefill_w8a8;         /* CPU with AMX: prefill matmuls of Q4_0/Q4_1/Q8_0/Q4_K
                                * on int8 tiles, weights per row and activations
                                * per token to int8 (not the exact path's numbers) */
};

struct fwd_seq {
    const int32_t *block_table; /* KV block ids, in position order */
    int32_t n_blocks;
};

struct fwd_batch {
    int32_t n_tokens;
    const int32_t *token;      /* [n_tokens] token ids */
    const int32_t *pos;        /* [n_tokens] positions within their sequence */
    const int32_t *seq;        /* [n_tokens] index into seqs */
    const uint8_t *want_logits;/* [n_tokens] nonzero: return logits for this token;
                                  FWD_WANT_EMBD: its hidden state instead (below) */
    int32_t n_seqs;
    const struct fwd_seq *seqs;/* [n_seqs] */
};

/* Embeddings: a want_logits value asking for the row's final hidden state
 * (after the output norm, before the LM head: dim floats at the start of
 * the row's slot of n_vocab) instead of its logits. Only a backend with
 * embd_rows set honours it; the others refuse the batch. */
#define FWD_WANT_EMBD 2

struct backend_info {
    const char *name;          /* "cpu" or "cuda" */
    char device[128];          /* "AMD EPYC (2 threads, AVX-512)" / "NVIDIA H200" */
    uint64_t weight_bytes;     /* resident weights */
    uint64_t kv_bytes;         /* KV pool */
    uint64_t workspace_bytes;
    uint64_t mem_total, mem_used; /* device memory (GPU); 0 on CPU */
    char note[256];            /* e.g. "no usable GPU: ...; running on CPU" */
    char runtime[64];          /* CUDA: "runtime 13.0, driver 13.0" (the baseline record); "" on CPU */
    int32_t graph_nodes;       /* CUDA: nodes (launches, copies) in the last decode graph captured */
    uint64_t f16_copy_bytes;   /* CUDA: f16 copies of quantized weights for the GEMM path (in workspace_bytes) */
    bool prompt_attn_bf16;     /* CPU: prompt attention runs on AMX-BF16 tiles */
    bool prefill_w8a8;         /* CPU: prefill matmuls run W8A8 on AMX int8 tiles */
};

struct backend;

struct backend_ops {
    const char *name;
    /* Runs the batch; writes n_out * n_vocab floats to logits, one row per
     * token with want_logits set, in batch order. Returns 0 or -1 with err. */
    int (*forward)(struct backend *be, const struct fwd_batch *b, float *logits,
                   char *err, size_t errlen);
    void (*get_info)(struct backend *be, struct backend_info *out);
    void (*close)(struct backend *be);
    /* Copies KV block `block` (every layer's K then V rows, kv_bytes_per_token
     * * kv_block_tokens bytes) out to buf, or in from it when write is set:
     * the disk prefix cache (engine/core/kvdisk.h). NULL: not supported. */
    int (*kv_block_io)(struct backend *be, int32_t block, void *buf, bool write);
};

struct backend {
    const struct backend_ops *ops;
    const struct model *model;
    int32_t kv_block_tokens;
    int32_t kv_n_blocks;       /* pool size in blocks */
    uint64_t kv_bytes_per_token;
    bool embd_rows;            /* forward honours FWD_WANT_EMBD (embeddings) */
    void *impl;
};

/* Opens the backend cfg->kind asks for; BACKEND_AUTO tries CUDA then falls
 * back to CPU, saying why in info.note. Returns NULL with err on failure. */
struct backend *backend_open(const struct model *m, const struct backend_config *cfg,
                             char *err, size_t errlen);
static inline int backend_forward(struct backend *be, const struct fwd_batch *b,
                                  float *logits, char *err, size_t errlen)
{
    return be->ops->forward(be, b, logits, err, errlen);
}
void backend_close(struct backend *be);

/* Bytes one token's K and V take in every layer's pool of type t: kv_dim
 * (n_head_kv * head_dim) values each per layer, head_dim values per head,
 * blocks of bt tokens (q4c's K is stored per block). */
uint64_t backend_kv_token_bytes(enum kv_type t, int32_t n_layer, int64_t kv_dim, int32_t bt);

/* One sequence driven straight through backend_forward, outside the
 * scheduler (perplexity, raw benchmarks): it owns KV blocks 0..n_blocks-1
 * and each call takes up to cap tokens and returns up to logit_rows rows. */
struct fwd_single {
    int32_t *tok, *pos, *seq, *table;
    uint8_t *want;
    float *logits;
    int32_t cap, n_blocks;
};
/* Returns 0, or -1 when out of memory (s is then safe to free). */
int fwd_single_alloc(struct fwd_single *s, int32_t cap, int32_t n_blocks, int32_t logit_rows,
                     int32_t n_vocab);
void fwd_single_free(struct fwd_single *s);
/* Forwards s->tok[0..n) at positions p0.. with the caller's s->want[0..n);
 * logits of the wanted tokens land in s->logits, in order. */
int fwd_single_forward(struct backend *be, struct fwd_single *s, int32_t n, int32_t p0,
                       char *err, size_t errlen);

/* Per-backend constructors (backend_open dispatches to these). */
struct backend *backend_cpu_open(const struct model *m, const struct backend_config *cfg,
                                 char *err, size_t errlen);
struct backend *backend_cuda_open(const struct model *m, const struct backend_config *cfg,
                                  char *err, size_t errlen);

#endif
