/* model: architecture hyperparameters and weight tensors of a GGUF model,
 * shared by every backend (no backend types here).
 *
 * Ownership: model_open opens the GGUF file; weight tensors are borrowed from
 * its read-only mapping and stay valid until model_close. */
#ifndef TERN_MODEL_H
#define TERN_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

struct gguf_ctx;

enum model_arch { ARCH_LLAMA, ARCH_QWEN2, ARCH_QWEN3, ARCH_GEMMA3, ARCH_QWEN3MOE,
                  ARCH_PHI3, ARCH_GEMMA2 };

/* A weight matrix or vector: rows of `cols` elements, stored in GGML type `type`. */
struct wtensor {
    const void *data;   /* in the file mapping; NULL when the tensor is absent */
    uint32_t type;      /* enum qtype */
    int64_t cols;       /* ne[0]: contiguous dimension (input features) */
    int64_t rows;       /* ne[1]: output features (1 for vectors) */
    const char *name;
    /* Expert tensors (3-D, ne[2] = n_expert): n_expert matrices of rows x
     * cols each, expert e's rows starting at e * rows; 0 for plain ones. */
    int64_t n_expert;
};

struct layer_weights {
    struct wtensor attn_norm;          /* (dim) */
    struct wtensor wq, wk, wv, wo;     /* (n_head*head_dim, dim) ... (dim, n_head*head_dim) */
    struct wtensor bq, bk, bv;         /* qwen2 / llama biases, else absent */
    struct wtensor bo;                 /* llama attn_output.bias, else absent */
    struct wtensor q_norm, k_norm;     /* qwen3 / gemma3 per-head norms (head_dim) */
    struct wtensor post_attn_norm;     /* gemma3 */
    struct wtensor ffn_norm;           /* (dim) */
    struct wtensor w_gate, w_up, w_down; /* (ff, dim), (ff, dim), (dim, ff) */
    struct wtensor post_ffn_norm;      /* gemma3 */
    struct wtensor b_gate, b_up, b_down; /* llama MLP biases, else absent */
    /* Mixture of experts (hp.n_expert > 0; w_gate/w_up/w_down absent then):
     * router (n_expert, dim) and per-expert (n_ff_exp, dim) / (dim, n_ff_exp). */
    struct wtensor gate_inp, gate_exps, up_exps, down_exps;
};

struct model_hparams {
    enum model_arch arch;
    const char *arch_name;     /* general.architecture */
    int32_t n_vocab;
    int32_t n_ctx_train;       /* <arch>.context_length */
    int32_t dim;               /* embedding_length */
    int32_t n_layer;           /* block_count */
    int32_t n_head;            /* attention.head_count */
    int32_t n_head_kv;         /* attention.head_count_kv */
    int32_t head_dim;          /* attention.key_length or dim / n_head */
    int32_t n_rot;             /* rope.dimension_count (<= head_dim, even) */
    int32_t n_ff;              /* feed_forward_length */
    float norm_eps;            /* attention.layer_norm_rms_epsilon */
    float rope_base;           /* rope.freq_base */
    float rope_base_local;     /* gemma3 sliding-window layers (10000) */
    float rope_scale;          /* linear scaling factor (1 = none) */
    bool rope_neox;            /* NeoX-style (rotate halves) vs interleaved pairs */
    int32_t sliding_window;    /* 0 = none */
    int32_t swa_period;        /* gemma3: every swa_period-th layer is global */
    float query_scale;         /* multiplies q before attention */
    float embd_scale;          /* gemma3: sqrt(dim); 1 otherwise */
    float logit_softcap;       /* 0 = none */
    float attn_softcap;        /* gemma2: attention scores capped (0 = none) */
    /* llama3 rope scaling (factor 0 = none) */
    float rope_l3_factor, rope_l3_low, rope_l3_high;
    int32_t rope_l3_orig_ctx;
    /* Mixture of experts: 0 experts = dense. Router: softmax over all
     * experts, top n_expert_used, weights renormalised to sum 1 (the
     * reference's build_moe_ffn with norm_w for llama and qwen3moe). */
    int32_t n_expert, n_expert_used;
    int32_t n_ff_exp;          /* rows of one expert's gate/up */
    /* rope.scaling.attn_factor: multiplies cos and sin (LongRoPE's
     * magnitude correction; 1 = none), and the context the LongRoPE
     * factors were trained for (rope.scaling.original_context_length) */
    float rope_attn_factor;
    /* YaRN (rope.scaling.type yarn), as the reference computes it: the
     * correction dims over which the angles ramp from extrapolated to
     * interpolated (beta_fast 32, beta_slow 1), ext_factor 1, and cos/sin
     * scaled by yarn_mscale = (1 + 0.1 ln factor) · attn_factor. */
    bool rope_yarn;
    float yarn_corr[2], yarn_ext_factor, yarn_attn;
    int32_t n_ctx_orig;
    /* <arch>.pooling_type, the reference's enum: 0 none, 1 mean, 2 cls,
     * 3 last, 4 rank; MODEL_POOLING_UNSET when the file has none. Used by
     * embeddings (engine.h) only. */
    int32_t pooling_type;
};
#define MODEL_POOLING_UNSET (-1)

struct model {
    struct gguf_ctx *gguf;
    struct model_hparams hp;
    struct wtensor tok_embd;           /* (n_vocab, dim) */
    struct wtensor output_norm;        /* (dim) */
    struct wtensor output;             /* (n_vocab, dim); == tok_embd when tied */
    struct wtensor rope_freqs;         /* (n_rot/2) f32 frequency divisors (llama3 scaling), or absent */
    struct wtensor rope_long, rope_short; /* phi3 LongRoPE divisors (n_rot/2), or absent */
    struct layer_weights *layers;      /* [n_layer] */
    uint64_t n_params;
    uint64_t weight_bytes;
    /* What one token reads: every tensor but the unselected experts
     * (== n_params for dense models); the bytes count one row of an untied
     * embedding table (what decode reads), the parameters all of it. Memory
     * holds weight_bytes: every expert stays resident. */
    uint64_t n_params_active;
    uint64_t weight_bytes_active;
    /* Synthetic models (no file): model_close calls owned_free(owned) and
     * frees `layers`. NULL for models read from a file. */
    void *owned;
    void (*owned_free)(void *owned);
};

/* Loads hyperparameters and binds weights. On failure returns NULL with a
 * message naming the file and the missing/inconsistent key or tensor. */
struct model *model_open(const char *path, char *err, size_t errlen);
void model_close(struct model *m);

/* Whether layer l uses the sliding window (gemma3 local layers). */
bool model_layer_is_swa(const struct model *m, int32_t l);
/* RoPE base of layer l (gemma3 local layers have their own). */
float model_layer_rope_base(const struct model *m, int32_t l);
/* Checks the hyperparameters of an already filled model (shapes of all
 * tensors against hp); used by model_open and by synthetic models. */
int model_validate(const struct model *m, char *err, size_t errlen);
const char *model_arch_name(enum model_arch a);
/* NULL when every layer is a plain dense transformer block; else a short
 * name of the first feature beyond it ("mixture of experts", "attention
 * output bias", ...), for backends that implement only the plain block. */
const char *model_extra_feature(const struct model *m);
/* The RoPE frequency divisors a context of n_ctx tokens uses (0 = the
 * training context), as the reference picks them: rope_freqs if present,
 * else LongRoPE's long factors beyond the original context, the short ones
 * within it; NULL when the model has none. */
const struct wtensor *model_rope_factors(const struct model *m, int32_t n_ctx);
/* Whether Q is scaled before attention (and scores then by 1), as the
 * reference's graph does for gemma3 and phi3, instead of the scores. */
bool model_scales_q(const struct model *m);

#endif
