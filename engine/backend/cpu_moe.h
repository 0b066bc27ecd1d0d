/* cpu_moe: the mixture-of-experts feed-forward block on the CPU (llama with
 * experts / Mixtral, qwen3moe), as the reference's build_moe_ffn computes
 * it: router logits, softmax over all experts, the top n_expert_used, their
 * weights renormalised to sum 1, SwiGLU experts, and the weighted expert
 * outputs summed in the order of selection.
 *
 * Tokens are grouped by expert, so a prefill batch runs each selected
 * expert's matrices once over all its tokens, and a decode step reads only
 * the rows of the experts it selected. */
#ifndef TERN_CPU_MOE_H
#define TERN_CPU_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/matmul.h"
#include "model.h"

struct threadpool;
struct model;

/* Buffers for one batch; grows as needed, owned by the caller. */
struct moe_scratch {
    int64_t cap_tok;          /* tokens the buffers hold */
    float *logits;            /* [n][n_expert] router logits, then probabilities */
    int32_t *sel;             /* [n][k] selected experts, best first */
    float *wsel;              /* [n][k] their weights */
    int32_t *order;           /* [n·k] (token, slot) pairs grouped by expert */
    float *xg, *gate, *up;    /* [n][dim], [n][n_ff_exp] x2: one expert's tokens */
    float *y;                 /* [n][k][dim] each slot's expert output */
    uint64_t bytes;
    uint64_t expert_bytes_read; /* expert weight bytes of the last call */
    /* Expert tensors repacked for the ISA (moe_pack_experts), per layer
     * gate, up, down; each expert's matrix `stride` bytes after the last.
     * NULL: the file's layout. */
    struct moe_packed {
        struct wtensor t[3];
        size_t stride[3];
    } *pk;
    void *pk_buf;
    size_t pk_bytes;
};

/* Frees the buffers and the packed experts. */
void moe_scratch_free(struct moe_scratch *s);
/* Repacks every expert matrix that has a faster layout for isa (mm_pack:
 * the same bytes reordered, results bit-identical) into one allocation,
 * expert by expert, releasing each one's file pages at once so resident
 * memory does not double. Decode reads 8 of 128 experts' matrices per
 * layer, each once: the packed kernels stream them faster. Returns 0, or
 * -1 with err (out of memory). */
int moe_pack_experts(struct moe_scratch *s, enum cpu_isa isa, const struct model *m, char *err,
                     size_t errlen);

/* out (n × dim) = MoE FFN of layer l on xn (n × dim, normalised input).
 * Returns 0, or -1 with err on out of memory. */
int cpu_moe_ffn(struct threadpool *tp, enum cpu_isa isa, struct mm_scratch *mm,
                struct moe_scratch *s, const struct model *m, int32_t l, const float *xn,
                int64_t n, float *out, char *err, size_t errlen);

#endif
