/* backend_cuda: the CUDA backend's memory plan and the host-side decisions
 * of a forward call (batch checks, query tiles, graph buckets, attention
 * splits). These are plain C, compiled in every build and unit-tested on
 * machines without a GPU (tests/engine/backend); backend_cuda_open itself is
 * declared in backend.h. */
#ifndef TERN_BACKEND_CUDA_H
#define TERN_BACKEND_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

struct model;

/* Device memory plan: weights + KV pool + workspace must fit in free memory
 * less a reserve for the CUDA context and cuBLAS. */
struct cuda_plan {
    uint64_t free_bytes, total_bytes;   /* device, at planning time */
    uint64_t weight_bytes;              /* resident weights, in their GGUF formats */
    uint64_t workspace_bytes;           /* activations, dequant tile, logits, cuBLAS */
    uint64_t reserve_bytes;             /* left free */
    uint64_t kv_bytes;                  /* KV pool */
    uint64_t kv_bytes_per_token;        /* all layers, K and V, in kv_type */
    int32_t kv_type;                    /* enum kv_type: f16, q8_0 or q4_0 */
    int32_t kv_block_tokens, kv_n_blocks;
    int32_t max_batch_tokens, max_seqs;
    int32_t max_blocks_per_seq;         /* block-table capacity per sequence */
};

/* Largest dequantized weight tile fed to cuBLAS (f16 elements): 16 MiB, so
 * the tile is written and read back mostly within L2. */
#define CUDA_TILE_ELEMS (8 * 1024 * 1024)
/* Logit rows computed per output-projection chunk. */
#define CUDA_LOGIT_CHUNK 64
/* Decode steps of up to this many tokens run as captured CUDA graphs. */
#define CUDA_GRAPH_MAX 64

/* Fills p from the model shape, cfg and the device's free/total bytes.
 * Returns 0, or -1 with err giving the plan's numbers when it does not fit
 * or the model has a shape the kernels do not handle. */
int cuda_plan_compute(const struct model *m, const struct backend_config *cfg,
                      uint64_t free_bytes, uint64_t total_bytes, struct cuda_plan *p,
                      char *err, size_t errlen);
/* Bytes of one head's K (or V) row of head_dim values in KV format t (enum
 * kv_type): f16 2 per value, q8_0 and q4_0 34 and 18 per block of 32 (the
 * CPU backend's blocks); 0 for a format the CUDA pool does not hold (f32). */
uint64_t cuda_kv_head_bytes(int32_t t, int32_t head_dim);
/* One line: "weights 4.34 GiB + KV 60.00 GiB (491520 tokens) + workspace ... of free ...". */
void cuda_plan_format(const struct cuda_plan *p, char *out, size_t outlen);

/* For `tern info --gpu`: plans on device cfg->gpu and writes the plan line
 * (with the device name) to out. Returns 0, or -1 with "no usable GPU:
 * <reason>" in out. */
int backend_cuda_plan(const struct model *m, const struct backend_config *cfg, char *out,
                      size_t outlen);

/* Smallest graph bucket (1, 2, 4, 8, 16, 32, 64) holding n tokens; 0 when n
 * is larger than CUDA_GRAPH_MAX or not positive. */
int32_t cuda_graph_bucket(int32_t n_tokens);
/* Key splits for decode attention: enough blocks to fill the GPU at small
 * batches (n_tokens * n_head_kv * splits ~ 256), 1..cap (cap < 1: the
 * default CUDA_ATTN_SPLIT_CAP; TERN_CUDA_ATTN_SPLITS sets it up to 32, for
 * the trip's A/B at long contexts). */
#define CUDA_ATTN_SPLIT_CAP 16
int32_t cuda_attn_splits(int32_t n_tokens, int32_t n_head_kv, int32_t cap);

/* Checks a batch against the model and the pool before anything is sent to
 * the device: token ids, sequence indices, positions covered by the block
 * table, block ids inside the pool, capacities. Returns 0 or -1 with err. */
int cuda_batch_check(const struct fwd_batch *b, int32_t n_vocab, int32_t block_tokens,
                     int32_t kv_n_blocks, int32_t max_tokens, int32_t max_seqs,
                     int32_t max_blocks_per_seq, char *err, size_t errlen);
/* Splits the batch into query tiles: runs of consecutive tokens of the same
 * sequence, at most max_tile long. Writes {first, count} pairs to tiles
 * (room for 2 * n_tokens) and returns how many. */
int32_t cuda_batch_tiles(const struct fwd_batch *b, int32_t max_tile, int32_t *tiles);

/* RoPE inverse frequencies of the n_rot/2 rotated pairs:
 * base^(-2i/n_rot) / factors[i] (factors: the llama3 rope_freqs tensor, or NULL). */
void cuda_rope_freqs(int32_t n_rot, float base, const float *factors, float *inv_freq);

/* ---- shared by backend_cuda.c and backend_cuda_rt.c (not a public API) ---- */

#define CUDA_GIB (1024.0 * 1024.0 * 1024.0)

struct model_hparams;
struct wtensor;

/* Workspace of a forward call of up to T tokens and S sequences. */
struct cuda_ws {
    uint64_t x, h, q, k, v, att, o, g, u;  /* f32 activations, bytes each */
    uint64_t attn;                          /* decode partials */
    uint64_t xh, wtile;                     /* f16 GEMM operands */
    uint64_t logit_rows, logits;            /* gathered rows, one chunk of logits */
    uint64_t meta;                          /* int32 batch description */
    uint64_t xq;                            /* int8 activations of a matvec (cu_q8_bytes) */
    uint64_t cublas;
    uint64_t total;
};

static inline uint64_t al256(uint64_t v) { return (v + 255) & ~255ull; }
void cuda_ws_size(const struct model_hparams *hp, int32_t T, int32_t S, int32_t max_bps,
                  struct cuda_ws *w);
/* Bytes per block and elements per block of the formats the kernels read. */
bool cuda_fmt(uint32_t type, uint32_t *block, uint32_t *bytes);
bool cuda_present(const struct wtensor *t);
/* Output projection shares the token embedding. */
bool cuda_tied(const struct model *m);

#endif
