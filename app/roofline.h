/* roofline: a model's speeds against this machine's limits (kernels/cpu/
 * limits.h). Decode reads the weights a token uses once per token, so its
 * bound is bytes per token over the streaming read; prefill multiplies
 * every such weight once per token (2 operations), so its bound is that
 * over the multiply-add peak (int8 for quantized weights, bf16 for float
 * ones). Shared by tern bench, info and models, and the TUI's instruments. */
#ifndef TERN_ROOFLINE_H
#define TERN_ROOFLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu/limits.h"

/* What a model costs per token. */
struct roofline_model {
    double bytes_per_token; /* weights read per decoded token (active experts only) */
    double ops_per_token;   /* 2 x the parameters each prompt token multiplies: all but
                               the vocabulary matrix, which prefill applies to the
                               last token of a batch only (and a lookup is no product) */
    bool float_weights;     /* F16/BF16/F32 weights: the bf16 peak, not int8, bounds prefill */
    double kv_bytes_per_token; /* K and V a decoded token reads at a known context depth
                                  (tern bench -d), beside its weights; 0 where unknown */
    double attn_flops_per_token; /* a prompt token's attention (QKᵀ and PV) at a known
                                    depth, on the f32 FMA peak (bf16's with attn_bf16) */
    bool attn_bf16;
};

/* One model at one thread count against l. */
struct roofline_fig {
    int threads;
    double read_gbs, peak_tops;          /* the limits at that thread count */
    double pp_pred_tok_s, tg_pred_tok_s; /* predicted (bound) tokens/s */
};

/* The limits of the ISA in force (TERN_ISA caps it; isa < 0: that one)
 * from the cache, measured (about a second, said on stderr) when missing,
 * stale or remeasure. 0, or -1 with err. */
int roofline_limits(struct limits *l, int isa, bool remeasure, char *err, size_t errlen);
/* vocab_params: the parameters of the embedding table and, untied, of the
 * output matrix (0 unknown). */
struct roofline_model roofline_model_cost(uint64_t active_weight_bytes, uint64_t active_params,
                                          uint64_t vocab_params);
struct roofline_fig roofline_predict(const struct limits *l, const struct roofline_model *m,
                                     int threads);
/* Measured figures as shares of the limits: decode GB/s = bytes per token
 * x tok/s; prefill TOP/s = ops per token x tok/s. */
double roofline_decode_gbs(const struct roofline_model *m, double tg_tok_s);
double roofline_prefill_tops(const struct roofline_model *m, double pp_tok_s);
/* "7.1k", "238", "12.5", "0.84": tokens/s in at most 4-5 characters. */
void roofline_fmt_rate(char *buf, size_t n, double v);

#endif
