/* cuda_ops: C interface of the CUDA kernels (the .cu files here) used by the
 * host side in engine/backend_cuda.c. Every launcher enqueues on `st` and
 * returns the launch status (cudaGetLastError), never synchronises, so a
 * whole decode step can be captured into a CUDA graph.
 *
 * Layouts: activations are row-major f32, one row per token. Weights live in
 * device memory in their GGUF format; Q4_0, Q4_1 and Q8_0 are repacked at
 * upload into split quant/scale arrays (CU_LAYOUT_SPLIT) so a warp reads the
 * quants with 16-byte loads (GGUF blocks of 18 and 34 bytes are not 16-byte
 * aligned). The KV pool is f16, Q8_0 or Q4_0 (enum cu_kv_type): per layer,
 * K then V, each [n_blocks][block_tokens][n_head_kv][head_dim] elements. */
#ifndef TERN_CUDA_OPS_H
#define TERN_CUDA_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Programmatic dependent launch for the decode kernels (sm_90 and later; see
 * common.cuh): on unless turned off (the trip's TERN_CUDA_NO_PDL ablation).
 * Process-wide, as the device is; set before the first launch. */
void cu_set_pdl(bool on);
/* The int8-activation matvec on a persistent grid, each warp prefetching its
 * next row pair into L2 (off by default; the trip's A/B, TERN_CUDA_MV_PERSIST). */
void cu_set_mv_persist(bool on);
/* The split formats' int8-activation matvec software-pipelined: each warp
 * walks several row pairs, the next round's weight loads issued before this
 * round's dot products (off by default; the trip's A/B, TERN_CUDA_MV_PIPE). */
void cu_set_mv_pipe(bool on);
/* Decode attention with a lane per key (off by default; the trip's A/B at
 * long contexts, TERN_CUDA_ATTN_LANES). */
void cu_set_attn_lanes(bool on);

enum cu_layout { CU_LAYOUT_GGUF = 0, CU_LAYOUT_SPLIT = 1 };

/* A weight tensor in device memory. SPLIT: q = rows*cols/32 blocks of quants
 * (16 bytes per Q4 block, 32 per Q8_0 block), s = the matching scales (half d,
 * or half2 {d, m} for Q4_1). GGUF: q = the rows as in the file, s unused. */
struct cu_tensor {
    const void *q;
    const void *s;
    uint32_t type;       /* enum qtype */
    int32_t layout;      /* enum cu_layout */
    int64_t rows, cols;
    size_t row_bytes;    /* GGUF layout: bytes per row */
    const void *h16;     /* the same weights in f16 (rows x cols) for the GEMM path, or NULL */
};

/* Whether the kernels handle `type` (F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K
 * Q6_K IQ4_NL IQ4_XS). */
bool cu_type_supported(uint32_t type);
/* Layout the upload should use for `type`. */
int cu_layout_for(uint32_t type);
/* Device bytes of a rows x cols tensor of `type` (both layouts use the same). */
size_t cu_tensor_bytes(uint32_t type, int64_t rows, int64_t cols);

/* ---- weights: upload helpers (dequant.cu) ---- */
/* Converts `rows` GGUF-layout rows in `src` (device) into tensor t starting at
 * row r0 (SPLIT repack or plain copy). */
cudaError_t cu_repack(const struct cu_tensor *t, const void *src, int64_t r0, int64_t rows,
                      cudaStream_t st);
/* Generates GGUF-layout blocks [b0, b0 + n_blk) of synthetic tensor `tid`
 * into dst (device), identical to synth_gen_block on the host. */
cudaError_t cu_synth_gen(void *dst, uint64_t seed, uint32_t tid, uint32_t type, bool is_norm,
                         uint64_t b0, uint64_t n_blk, cudaStream_t st);
/* Dequantizes rows [r0, r0 + rows) of t into dst (f16, row-major, cols wide). */
cudaError_t cu_dequant_f16(const struct cu_tensor *t, int64_t r0, int64_t rows, void *dst,
                           cudaStream_t st);
/* Dequantizes rows to f32 (tests, embeddings). */
cudaError_t cu_dequant_f32(const struct cu_tensor *t, int64_t r0, int64_t rows, float *dst,
                           cudaStream_t st);

/* ---- matrix-vector (matvec.cu): y[n][rows] = x[n][cols] . W^T, n <= CU_MV_MAX_N ---- */
#define CU_MV_MAX_N 8
cudaError_t cu_matvec(const struct cu_tensor *w, const float *x, int32_t n, float *y,
                      cudaStream_t st);
/* Several matrices of one type and width on the same x in one launch (q, k, v):
 * y[i] = x . w[i]^T; count <= 3, all but the last with an even row count. */
cudaError_t cu_matvec_multi(const struct cu_tensor *const *w, float *const *y, int32_t count,
                            const float *x, int32_t n, cudaStream_t st);
/* out = act(x . gate^T) * (x . up^T) in one pass (gate and up of one type and shape). */
cudaError_t cu_matvec_glu(const struct cu_tensor *gate, const struct cu_tensor *up,
                          const float *x, int32_t n, bool gelu, float *out, cudaStream_t st);

/* The same over int8 activations (TERN_CUDA_MV_Q8): cu_quant_q8 writes x as
 * int8 blocks of 32 (d = max|x| / 127, the CPU backend's activation format)
 * into xq (cu_q8_bytes), then cu_matvec_q8 multiplies with __dp4a. Q4_0,
 * Q4_1, Q8_0, the K-quants and IQ4_NL/IQ4_XS weights; glu = 0 (count matrices stacked as in
 * cu_matvec_multi), 1 SwiGLU or 2 GEGLU (count = 2: gate, up; y[0] out). */
size_t cu_q8_bytes(int32_t n, int64_t cols);
cudaError_t cu_quant_q8(const float *x, int32_t n, int64_t cols, void *xq, cudaStream_t st);
bool cu_matvec_q8_supported(uint32_t type);
cudaError_t cu_matvec_q8(const struct cu_tensor *const *w, float *const *y, int32_t count, int glu,
                         const void *xq, int32_t n, cudaStream_t st);

/* ---- elementwise (ops.cu) ---- */
/* out[t] = embd[token[t]] * scale; tokens < 0 (padding) give zeros. */
cudaError_t cu_embed(const struct cu_tensor *embd, const int32_t *token, int32_t n, float scale,
                     float *out, cudaStream_t st);
/* out[r] = x[r] / rms(x[r]) * w, r < n rows of `dim`; w f32 [dim]; in place allowed. */
cudaError_t cu_rmsnorm(const float *x, const float *w, float *out, int32_t n, int32_t dim,
                       float eps, cudaStream_t st);
/* x[r] += d[r]; out[r] = rmsnorm(x[r]) * w. w may be NULL (add only). */
cudaError_t cu_add_rmsnorm(float *x, const float *d, const float *w, float *out, int32_t n,
                           int32_t dim, float eps, cudaStream_t st);
/* The same, also writing out as int8 blocks into xq (cu_quant_q8's layout
 * for n rows of dim; dim % 32 == 0): the q8 matvec reading them next skips
 * its own quantize launch. xq NULL: cu_add_rmsnorm. */
cudaError_t cu_add_rmsnorm_q8(float *x, const float *d, const float *w, float *out, void *xq,
                              int32_t n, int32_t dim, float eps, cudaStream_t st);
/* y[r][i] += b[i] */
cudaError_t cu_add_bias(float *y, const float *b, int32_t n, int32_t dim, cudaStream_t st);
/* out[r][i] = act(g[r][i]) * u[r][i]; act SiLU (gelu = false) or tanh-GELU
 * (GELU's input and output rounded to f16 as the reference engine's table does). */
cudaError_t cu_glu(const float *g, const float *u, float *out, int32_t n, int32_t dim, bool gelu,
                   cudaStream_t st);
/* Scales then converts n x dim f32 to f16 (bf16 = false) or bf16. */
cudaError_t cu_to_half(const float *x, void *out, int64_t count, bool bf16, cudaStream_t st);
/* y = c * tanh(y / c) */
cudaError_t cu_softcap(float *y, int64_t count, float c, cudaStream_t st);
/* out[i] = x[idx[i]] rows of dim */
cudaError_t cu_gather_rows(const float *x, const int32_t *idx, int32_t n, int32_t dim, float *out,
                           cudaStream_t st);

/* ---- attention (attention.cu) ---- */
/* KV pool formats. Q8_0 and Q4_0: the CPU backend's blocks (kernels/quant.h,
 * 34 and 18 bytes per 32 values) along each head's row, quantized as its
 * quant_row_q8_0 / quant_row_q4_0 do; Q4_0's K rows rotated by the
 * Walsh-Hadamard matrix of kernels/cpu/attention.c (pieces of head_dim up to
 * 512), its V rows in pieces of 64. The attention kernels read the blocks
 * directly (Q4_0: rotating the queries, and the outputs back). */
enum cu_kv_type { CU_KV_F16 = 0, CU_KV_Q8_0 = 1, CU_KV_Q4_0 = 2 };

struct cu_attn_batch {
    int32_t n_tokens;
    const int32_t *pos;        /* [n_tokens]; */
    const int32_t *seq;        /* [n_tokens]; < 0: padding token (skipped) */
    const int32_t *table_off;  /* [n_seqs] offset of each sequence's table in tables */
    const int32_t *table_len;  /* [n_seqs] */
    const int32_t *tables;     /* concatenated block tables */
};
struct cu_attn_shape {
    int32_t n_head, n_head_kv, head_dim;
    int32_t n_rot;             /* rotated dims per head (<= head_dim), the rest pass through */
    int32_t block_tokens;
    int32_t window;            /* 0: full causal; else attends (pos - window, pos] */
    float scale;               /* applied to q.k */
    int32_t kv_type;           /* enum cu_kv_type of the pool (0: f16) */
};
/* Rotates q [n][n_head*hd] in place and k, then stores k and v of each token
 * into its KV slot (sh->kv_type: f16, or quantized blocks). inv_freq [n_rot/2]. */
cudaError_t cu_rope_store(float *q, const float *k, const float *v, const struct cu_attn_batch *b,
                          const struct cu_attn_shape *sh, const float *inv_freq, float pos_scale,
                          bool neox, void *k_cache, void *v_cache, cudaStream_t st);
/* Rotary only (tests): x [n][heads*hd] in place, first n_rot dims of each head. */
cudaError_t cu_rope(float *x, const int32_t *pos, int32_t n, int32_t heads, int32_t hd,
                    int32_t n_rot, const float *inv_freq, float pos_scale, bool neox,
                    cudaStream_t st);

/* Decode attention: each token on its own, keys split into n_split ranges
 * (partials in ws: n_tokens * n_head * n_split * (hd + 2) floats). */
size_t cu_attn_decode_ws(int32_t n_tokens, int32_t n_head, int32_t head_dim, int32_t n_split);
cudaError_t cu_attn_decode(const float *q, const void *k_cache, const void *v_cache,
                           const struct cu_attn_batch *b, const struct cu_attn_shape *sh,
                           int32_t n_split, float *ws, float *out, cudaStream_t st);
/* The same, the output also as int8 blocks into xq (cu_quant_q8's layout for
 * n_tokens rows of n_head * head_dim) for the q8 matvec of the output projection. */
cudaError_t cu_attn_decode_q8(const float *q, const void *k_cache, const void *v_cache,
                              const struct cu_attn_batch *b, const struct cu_attn_shape *sh,
                              int32_t n_split, float *ws, float *out, void *xq, cudaStream_t st);

/* Prefill attention over query tiles (runs of batch tokens of one sequence),
 * flash style: K/V tiles in shared memory, online softmax, no score matrix.
 * tiles: n_tiles pairs {first token, count}, count <= cu_attn_tile_tokens(). */
int32_t cu_attn_tile_tokens(int32_t n_head, int32_t n_head_kv);
cudaError_t cu_attn_prefill_init(int32_t head_dim);   /* raises the smem limit once */
cudaError_t cu_attn_prefill(const float *q, const void *k_cache, const void *v_cache,
                            const struct cu_attn_batch *b, const struct cu_attn_shape *sh,
                            const int32_t *tiles, int32_t n_tiles, float *out, cudaStream_t st);

/* ---- probes (bandwidth.cu, GPU builds only): the rooflines figures are put against ---- */
/* Device-to-device copy GB/s (bytes read + written). */
cudaError_t cu_copy_bandwidth(size_t bytes, int reps, double *gbps);
/* Streaming read GB/s (16-byte loads, bytes read once): decode's access pattern. */
cudaError_t cu_read_bandwidth(size_t bytes, int reps, double *gbps);

#ifdef __cplusplus
}
#endif

#endif
