// ops.cu: the small per-token kernels of a layer: embedding lookup, RMSNorm
// (fused with the residual add), bias, SwiGLU/GEGLU, RoPE fused with the KV
// store, conversions, logit soft-capping, row gathers. All bound by memory
// bandwidth over activations (a few MB per step), so they stay simple: one
// block per row or one thread per element.
#include "common.cuh"

#define OPS_THREADS 256

// cu_launch's switch (common.cuh): one per process, as the device is; set
// when a backend opens, read at each launch.
static bool g_pdl = true;
bool cu_pdl_enabled(void) { return g_pdl; }
extern "C" void cu_set_pdl(bool on) { g_pdl = on; }

// ---- embedding ----
template <int T>
__global__ void k_embed(const cu_tensor e, const int32_t *__restrict__ token, float scale,
                        float *__restrict__ out)
{
    pdl_trigger();
    pdl_wait();
    const int t = blockIdx.x;
    const int32_t id = token[t];
    float *o = out + (size_t)t * (size_t)e.cols;
    for (int64_t u = threadIdx.x; u < e.cols / 32; u += blockDim.x) {
        float w[32];
        if (id >= 0 && id < e.rows) {
            dq32<T>(e, id, u, w);
        } else {
#pragma unroll
            for (int i = 0; i < 32; i++) w[i] = 0.0f;
        }
#pragma unroll
        for (int i = 0; i < 32; i++) o[u * 32 + i] = w[i] * scale;
    }
}

template <int T>
static cudaError_t embed_launch(const cu_tensor &e, const int32_t *token, int32_t n, float scale,
                                float *out, cudaStream_t st)
{
    CU_LAUNCH(k_embed<T>, n, 128, 0, st, e, token, scale, out);
    return cudaGetLastError();
}

extern "C" cudaError_t cu_embed(const struct cu_tensor *embd, const int32_t *token, int32_t n,
                                float scale, float *out, cudaStream_t st)
{
    if (n <= 0) return cudaSuccess;
    switch (embd->type) {
    case CU_QT_F32: return embed_launch<CU_QT_F32>(*embd, token, n, scale, out, st);
    case CU_QT_F16: return embed_launch<CU_QT_F16>(*embd, token, n, scale, out, st);
    case CU_QT_BF16: return embed_launch<CU_QT_BF16>(*embd, token, n, scale, out, st);
    case CU_QT_Q4_0: return embed_launch<CU_QT_Q4_0>(*embd, token, n, scale, out, st);
    case CU_QT_Q4_1: return embed_launch<CU_QT_Q4_1>(*embd, token, n, scale, out, st);
    case CU_QT_Q5_0: return embed_launch<CU_QT_Q5_0>(*embd, token, n, scale, out, st);
    case CU_QT_Q5_1: return embed_launch<CU_QT_Q5_1>(*embd, token, n, scale, out, st);
    case CU_QT_Q8_0: return embed_launch<CU_QT_Q8_0>(*embd, token, n, scale, out, st);
    case CU_QT_Q4_K: return embed_launch<CU_QT_Q4_K>(*embd, token, n, scale, out, st);
    case CU_QT_Q5_K: return embed_launch<CU_QT_Q5_K>(*embd, token, n, scale, out, st);
    case CU_QT_Q6_K: return embed_launch<CU_QT_Q6_K>(*embd, token, n, scale, out, st);
    default: return cudaErrorInvalidValue;
    }
}

// ---- RMSNorm ----
// block_sum's scratch: one float per warp of the largest block
#define OPS_MAX_WARPS 32

__device__ __forceinline__ float block_sum(float v, float *red)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum(v);
    __syncthreads(); // red may still be read by a previous call
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float s = 0.0f;
    for (int i = 0; i < (int)(blockDim.x / 32); i++) s += red[i];
    return s;
}

// x and out may be the same rows (in-place norm): no __restrict__ on them.
// xq (optional, dim % 32 == 0): the normed rows also as int8 blocks for the
// q8 matvec that reads them next, saving that matvec's own quantize launch.
__global__ void k_add_rmsnorm(float *x, const float *__restrict__ d,
                              const float *__restrict__ w, float *out, void *xq, int dim,
                              float eps)
{
    __shared__ float red[OPS_MAX_WARPS];
    pdl_trigger();
    pdl_wait();
    float *xr = x + (size_t)blockIdx.x * dim;
    const float *dr = d ? d + (size_t)blockIdx.x * dim : nullptr;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = xr[i];
        if (dr) {
            v += dr[i];
            xr[i] = v;
        }
        ss += v * v;
    }
    if (!out) return;
    const float inv = rsqrtf(block_sum(ss, red) / (float)dim + eps);
    float *o = out + (size_t)blockIdx.x * dim;
    int8_t *qs = (int8_t *)xq;
    float2 *ds = xq ? q8_scales(xq, (int64_t)gridDim.x * (dim / 32)) : nullptr;
    // each thread rereads only the elements it wrote itself: no race with in-place out == x
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        const float v = xr[i] * inv * (w ? w[i] : 1.0f);
        o[i] = v;
        // a warp's 32 lanes hold one whole block (dim and blockDim are multiples of 32)
        if (xq) q8_block(v, threadIdx.x % 32, qs, ds, ((int64_t)blockIdx.x * dim + i) / 32);
    }
}

// One block per row, about 4 elements a thread: at batch 1 a norm is one
// block, so its latency is the loop over the row, not the bandwidth.
static int norm_threads(int32_t dim)
{
    int th = (dim / 4 + 31) / 32 * 32;
    return th < 32 ? 32 : th > OPS_MAX_WARPS * 32 ? OPS_MAX_WARPS * 32 : th;
}

extern "C" cudaError_t cu_rmsnorm(const float *x, const float *w, float *out, int32_t n,
                                  int32_t dim, float eps, cudaStream_t st)
{
    if (n <= 0) return cudaSuccess;
    CU_LAUNCH(k_add_rmsnorm, n, norm_threads(dim), 0, st, (float *)x, (const float *)nullptr, w, out,
              (void *)nullptr, dim, eps);
    return cudaGetLastError();
}

extern "C" cudaError_t cu_add_rmsnorm(float *x, const float *d, const float *w, float *out,
                                      int32_t n, int32_t dim, float eps, cudaStream_t st)
{
    return cu_add_rmsnorm_q8(x, d, w, out, NULL, n, dim, eps, st);
}

extern "C" cudaError_t cu_add_rmsnorm_q8(float *x, const float *d, const float *w, float *out,
                                         void *xq, int32_t n, int32_t dim, float eps, cudaStream_t st)
{
    if (n <= 0) return cudaSuccess;
    if (xq && (dim % 32 != 0 || !out)) return cudaErrorInvalidValue;
    CU_LAUNCH(k_add_rmsnorm, n, norm_threads(dim), 0, st, x, d, w, out, xq, dim, eps);
    return cudaGetLastError();
}

// ---- elementwise ----
__global__ void k_add_bias(float *y, const float *__restrict__ b, size_t count, int dim)
{
    pdl_trigger();
    pdl_wait();
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) y[i] += b[i % (size_t)dim];
}

extern "C" cudaError_t cu_add_bias(float *y, const float *b, int32_t n, int32_t dim,
                                   cudaStream_t st)
{
    const size_t count = (size_t)n * (size_t)dim;
    if (count == 0) return cudaSuccess;
    CU_LAUNCH(k_add_bias, (unsigned)((count + OPS_THREADS - 1) / OPS_THREADS), OPS_THREADS, 0, st, y, b, count, dim);
    return cudaGetLastError();
}

// out may be g (in place)
__global__ void k_glu(const float *g, const float *__restrict__ u, float *out, size_t count,
                      bool gelu)
{
    pdl_trigger();
    pdl_wait();
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    out[i] = cu_glu_act(g[i], gelu) * u[i];
}

extern "C" cudaError_t cu_glu(const float *g, const float *u, float *out, int32_t n, int32_t dim,
                              bool gelu, cudaStream_t st)
{
    const size_t count = (size_t)n * (size_t)dim;
    if (count == 0) return cudaSuccess;
    CU_LAUNCH(k_glu, (unsigned)((count + OPS_THREADS - 1) / OPS_THREADS), OPS_THREADS, 0, st, g, u, out, count, gelu);
    return cudaGetLastError();
}

__global__ void k_to_half(const float *__restrict__ x, void *out, size_t count, bool bf16)
{
    pdl_trigger();
    pdl_wait();
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    if (bf16) ((__nv_bfloat16 *)out)[i] = __float2bfloat16_rn(x[i]);
    else ((__half *)out)[i] = __float2half_rn(x[i]);
}

extern "C" cudaError_t cu_to_half(const float *x, void *out, int64_t count, bool bf16,
                                  cudaStream_t st)
{
    if (count <= 0) return cudaSuccess;
    CU_LAUNCH(k_to_half, (unsigned)((count + OPS_THREADS - 1) / OPS_THREADS), OPS_THREADS, 0, st, x, out, (size_t)count, bf16);
    return cudaGetLastError();
}

__global__ void k_softcap(float *y, size_t count, float c)
{
    pdl_trigger();
    pdl_wait();
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) y[i] = c * tanhf(y[i] / c);
}

extern "C" cudaError_t cu_softcap(float *y, int64_t count, float c, cudaStream_t st)
{
    if (count <= 0) return cudaSuccess;
    CU_LAUNCH(k_softcap, (unsigned)((count + OPS_THREADS - 1) / OPS_THREADS), OPS_THREADS, 0, st, y, (size_t)count, c);
    return cudaGetLastError();
}

__global__ void k_gather(const float *__restrict__ x, const int32_t *__restrict__ idx, int dim,
                         float *__restrict__ out)
{
    pdl_trigger();
    pdl_wait();
    const float *src = x + (size_t)idx[blockIdx.x] * dim;
    float *dst = out + (size_t)blockIdx.x * dim;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = src[i];
}

extern "C" cudaError_t cu_gather_rows(const float *x, const int32_t *idx, int32_t n, int32_t dim,
                                      float *out, cudaStream_t st)
{
    if (n <= 0) return cudaSuccess;
    CU_LAUNCH(k_gather, n, OPS_THREADS, 0, st, x, idx, dim, out);
    return cudaGetLastError();
}

// ---- RoPE ----
// Pair i of a head: NeoX rotates (i, i + n_rot/2), the original layout (2i, 2i+1).
__device__ __forceinline__ void rope_pair(float *h, int i, int n_rot, float c, float s, bool neox)
{
    const int a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
    const float x0 = h[a], x1 = h[b];
    h[a] = x0 * c - x1 * s;
    h[b] = x0 * s + x1 * c;
}

__global__ void k_rope(float *x, const int32_t *__restrict__ pos, int heads, int hd, int n_rot,
                       const float *__restrict__ inv_freq, float pos_scale, bool neox)
{
    pdl_trigger();
    pdl_wait();
    const int t = blockIdx.x, half = n_rot / 2;
    const float p = (float)pos[t] * pos_scale;
    for (int j = threadIdx.x; j < heads * half; j += blockDim.x) {
        const int h = j / half, i = j % half;
        float s, c;
        sincosf(p * inv_freq[i], &s, &c);
        rope_pair(x + ((size_t)t * heads + h) * hd, i, n_rot, c, s, neox);
    }
}

extern "C" cudaError_t cu_rope(float *x, const int32_t *pos, int32_t n, int32_t heads, int32_t hd,
                               int32_t n_rot, const float *inv_freq, float pos_scale, bool neox,
                               cudaStream_t st)
{
    if (n <= 0 || n_rot < 2 || n_rot > hd) return n <= 0 ? cudaSuccess : cudaErrorInvalidValue;
    CU_LAUNCH(k_rope, n, 128, 0, st, x, pos, heads, hd, n_rot, inv_freq, pos_scale, neox);
    return cudaGetLastError();
}

// q rotated in place; k rotated on the way and stored with v as f16 in the
// token's KV slot (dims past n_rot unrotated). One block per token.
__global__ void k_rope_store(float *q, const float *__restrict__ k, const float *__restrict__ v,
                             cu_attn_batch b, cu_attn_shape sh, const float *__restrict__ inv_freq,
                             float pos_scale, bool neox, __half *kc, __half *vc)
{
    pdl_trigger();
    pdl_wait();
    const int t = blockIdx.x, hd = sh.head_dim, half = sh.n_rot / 2;
    const int32_t s = b.seq[t], pos = b.pos[t];
    const float p = (float)pos * pos_scale;
    for (int j = threadIdx.x; j < sh.n_head * half; j += blockDim.x) {
        const int h = j / half, i = j % half;
        float sn, cs;
        sincosf(p * inv_freq[i], &sn, &cs);
        rope_pair(q + ((size_t)t * sh.n_head + h) * hd, i, sh.n_rot, cs, sn, neox);
    }
    if (s < 0) return; // padding token: nothing to store
    const int32_t blk = b.tables[b.table_off[s] + pos / sh.block_tokens];
    const size_t slot = ((size_t)blk * sh.block_tokens + pos % sh.block_tokens) * sh.n_head_kv;
    for (int j = threadIdx.x; j < sh.n_head_kv * half; j += blockDim.x) {
        const int h = j / half, i = j % half;
        float sn, cs;
        sincosf(p * inv_freq[i], &sn, &cs);
        const float *kr = k + ((size_t)t * sh.n_head_kv + h) * hd;
        const int a = neox ? i : 2 * i, c = neox ? i + half : 2 * i + 1;
        const float x0 = kr[a], x1 = kr[c];
        __half *ko = kc + (slot + h) * hd;
        ko[a] = __float2half_rn(x0 * cs - x1 * sn);
        ko[c] = __float2half_rn(x0 * sn + x1 * cs);
    }
    if (sh.n_rot < hd) // unrotated tail of each K head
        for (int j = threadIdx.x; j < sh.n_head_kv * (hd - sh.n_rot); j += blockDim.x) {
            const int h = j / (hd - sh.n_rot), d = sh.n_rot + j % (hd - sh.n_rot);
            kc[(slot + h) * hd + d] = __float2half_rn(k[((size_t)t * sh.n_head_kv + h) * hd + d]);
        }
    for (int j = threadIdx.x; j < sh.n_head_kv * hd; j += blockDim.x)
        vc[slot * hd + j] = __float2half_rn(v[(size_t)t * sh.n_head_kv * hd + j]);
}

extern "C" cudaError_t cu_rope_store(float *q, const float *k, const float *v,
                                     const struct cu_attn_batch *b, const struct cu_attn_shape *sh,
                                     const float *inv_freq, float pos_scale, bool neox,
                                     void *k_cache, void *v_cache, cudaStream_t st)
{
    if (b->n_tokens <= 0) return cudaSuccess;
    if (sh->n_rot < 2 || sh->n_rot > sh->head_dim) return cudaErrorInvalidValue;
    CU_LAUNCH(k_rope_store, b->n_tokens, 128, 0, st, q, k, v, *b, *sh, inv_freq, pos_scale, neox,
                                              (__half *)k_cache, (__half *)v_cache);
    return cudaGetLastError();
}
