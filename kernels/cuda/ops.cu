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
    case CU_QT_Q2_K: return embed_launch<CU_QT_Q2_K>(*embd, token, n, scale, out, st);
    case CU_QT_Q3_K: return embed_launch<CU_QT_Q3_K>(*embd, token, n, scale, out, st);
    case CU_QT_IQ4_NL: return embed_launch<CU_QT_IQ4_NL>(*embd, token, n, scale, out, st);
    case CU_QT_IQ4_XS: return embed_launch<CU_QT_IQ4_XS>(*embd, token, n, scale, out, st);
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
    // every warp sums the per-warp partials in one shuffle tree (a serial
    // loop over 32 of them was ~1000 cycles of a batch-1 norm)
    return warp_sum(lane < (int)(blockDim.x / 32) ? red[lane] : 0.0f);
}

// x and out may be the same rows (in-place norm): no __restrict__ on them.
// xq (optional, dim % 32 == 0): the normed rows also as int8 blocks for the
// q8 matvec that reads them next, saving that matvec's own quantize launch.
// At batch 1 this is one block, so its time is its chain of memory round
// trips: rows up to NORM_NPT elements a thread are held in registers, every
// load (x, d, w) issued before the first use (a decode step runs 64 of these;
// the trip's per-kernel profile had them at 6.9 us each with a load per loop
// turn).
#define NORM_NPT 8
__global__ void k_add_rmsnorm(float *x, const float *__restrict__ d,
                              const float *__restrict__ w, float *out, void *xq, int dim,
                              float eps)
{
    __shared__ float red[OPS_MAX_WARPS];
    pdl_trigger();
    pdl_wait();
    float *xr = x + (size_t)blockIdx.x * dim;
    const float *dr = d ? d + (size_t)blockIdx.x * dim : nullptr;
    float *o = out ? out + (size_t)blockIdx.x * dim : nullptr;
    int8_t *qs = (int8_t *)xq;
    float2 *ds = xq ? q8_scales(xq, (int64_t)gridDim.x * (dim / 32)) : nullptr;
    const int lane = threadIdx.x % 32;
    float ss = 0.0f;
    if (dim <= NORM_NPT * (int)blockDim.x) {
        float v[NORM_NPT], wv[NORM_NPT];
#pragma unroll
        for (int k = 0; k < NORM_NPT; k++) {
            const int i = threadIdx.x + k * blockDim.x;
            v[k] = i < dim ? xr[i] + (dr ? dr[i] : 0.0f) : 0.0f;
            wv[k] = i < dim && w ? w[i] : 1.0f;
        }
#pragma unroll
        for (int k = 0; k < NORM_NPT; k++) {
            const int i = threadIdx.x + k * blockDim.x;
            if (i < dim && dr) xr[i] = v[k];
            ss += v[k] * v[k];
        }
        if (!o) return;
        const float inv = rsqrtf(block_sum(ss, red) / (float)dim + eps);
#pragma unroll
        for (int k = 0; k < NORM_NPT; k++) {
            const int i = threadIdx.x + k * blockDim.x;
            if (i >= dim) break; // whole warps leave together (dim and blockDim are multiples of 32 with xq)
            const float r = v[k] * inv * wv[k];
            o[i] = r;
            if (xq) q8_block(r, lane, qs, ds, ((int64_t)blockIdx.x * dim + i) / 32);
        }
        return;
    }
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = xr[i];
        if (dr) {
            v += dr[i];
            xr[i] = v;
        }
        ss += v * v;
    }
    if (!o) return;
    const float inv = rsqrtf(block_sum(ss, red) / (float)dim + eps);
    // each thread rereads only the elements it wrote itself: no race with in-place out == x
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        const float r = xr[i] * inv * (w ? w[i] : 1.0f);
        o[i] = r;
        if (xq) q8_block(r, lane, qs, ds, ((int64_t)blockIdx.x * dim + i) / 32);
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
// token's KV slot (dims past n_rot unrotated). The work of a token (q pairs,
// k pairs, k's unrotated tail, v) is one index space spread over gridDim.y
// blocks, a thread an item or two: as one 128-thread block per token it was
// a chain of ~20 dependent round trips (12.6 us a layer on the H200 at batch 1).
__global__ void k_rope_store(float *q, const float *__restrict__ k, const float *__restrict__ v,
                             cu_attn_batch b, cu_attn_shape sh, const float *__restrict__ inv_freq,
                             float pos_scale, bool neox, __half *kc, __half *vc)
{
    pdl_trigger();
    pdl_wait();
    const int t = blockIdx.x, hd = sh.head_dim, half = sh.n_rot / 2, tail = hd - sh.n_rot;
    const int32_t s = b.seq[t], pos = b.pos[t];
    const float p = (float)pos * pos_scale;
    const int nq = sh.n_head * half, nk = sh.n_head_kv * half, nt = sh.n_head_kv * tail;
    const int total = nq + (s < 0 ? 0 : nk + nt + sh.n_head_kv * hd); // padding: rotate q, store nothing
    size_t slot = 0;
    if (s >= 0) {
        const int32_t blk = b.tables[b.table_off[s] + pos / sh.block_tokens];
        slot = ((size_t)blk * sh.block_tokens + pos % sh.block_tokens) * sh.n_head_kv;
    }
    for (int j = blockIdx.y * blockDim.x + threadIdx.x; j < total; j += gridDim.y * blockDim.x) {
        if (j < nq) {
            const int h = j / half, i = j % half;
            float sn, cs;
            sincosf(p * inv_freq[i], &sn, &cs);
            rope_pair(q + ((size_t)t * sh.n_head + h) * hd, i, sh.n_rot, cs, sn, neox);
        } else if (j < nq + nk) {
            const int h = (j - nq) / half, i = (j - nq) % half;
            float sn, cs;
            sincosf(p * inv_freq[i], &sn, &cs);
            const float *kr = k + ((size_t)t * sh.n_head_kv + h) * hd;
            const int a = neox ? i : 2 * i, c = neox ? i + half : 2 * i + 1;
            const float x0 = kr[a], x1 = kr[c];
            __half *ko = kc + (slot + h) * hd;
            ko[a] = __float2half_rn(x0 * cs - x1 * sn);
            ko[c] = __float2half_rn(x0 * sn + x1 * cs);
        } else if (j < nq + nk + nt) { // unrotated tail of each K head
            const int h = (j - nq - nk) / tail, dd = sh.n_rot + (j - nq - nk) % tail;
            kc[(slot + h) * hd + dd] = __float2half_rn(k[((size_t)t * sh.n_head_kv + h) * hd + dd]);
        } else {
            const int e = j - nq - nk - nt;
            vc[slot * hd + e] = __float2half_rn(v[(size_t)t * sh.n_head_kv * hd + e]);
        }
    }
}

// The quantized pools (cu_kv_type): a block per (token, head). Blocks y <
// n_head rotate q head y; the next n_head_kv rotate and store K head y -
// n_head, the last n_head_kv store V. A K or V head is staged in shared
// memory, rotated by the Walsh-Hadamard matrix for Q4_0 (common.cuh), then
// each thread quantizes 32-value blocks as the CPU's quant_row_q8_0 /
// quant_row_q4_0 do (same scale, same rounding), so a row matches the CPU
// backend's bytes for the same inputs. The products are rounded apart
// (__fmul_rn): a fused multiply-add would round differently from the CPU.
template <int KT>
__global__ void k_rope_store_q(float *q, const float *__restrict__ k, const float *__restrict__ v,
                               cu_attn_batch b, cu_attn_shape sh, const float *__restrict__ inv_freq,
                               float pos_scale, bool neox, uint8_t *kc, uint8_t *vc)
{
    pdl_trigger();
    pdl_wait();
    __shared__ float x[256];
    const int t = blockIdx.x, y = blockIdx.y, hd = sh.head_dim, half = sh.n_rot / 2;
    const int32_t s = b.seq[t], pos = b.pos[t];
    const float p = (float)pos * pos_scale;
    if (y < sh.n_head) {
        for (int i = threadIdx.x; i < half; i += blockDim.x) {
            float sn, cs;
            sincosf(p * inv_freq[i], &sn, &cs);
            rope_pair(q + ((size_t)t * sh.n_head + y) * hd, i, sh.n_rot, cs, sn, neox);
        }
        return;
    }
    if (s < 0) return; // padding: nothing stored (the whole block)
    const bool is_v = y >= sh.n_head + sh.n_head_kv;
    const int h = (y - sh.n_head) % sh.n_head_kv;
    const float *src = (is_v ? v : k) + ((size_t)t * sh.n_head_kv + h) * hd;
    for (int i = threadIdx.x; i < hd; i += blockDim.x) x[i] = src[i];
    __syncthreads();
    if (!is_v)
        for (int i = threadIdx.x; i < half; i += blockDim.x) {
            float sn, cs;
            sincosf(p * inv_freq[i], &sn, &cs);
            rope_pair(x, i, sh.n_rot, cs, sn, neox);
        }
    if (KT == CU_KV_Q4_0) blk_hadamard(x, hd, is_v ? CU_KV_ROT_V : cu_kv_rot_k(hd));
    else __syncthreads();
    const int32_t blk = b.tables[b.table_off[s] + pos / sh.block_tokens];
    const size_t slot = (size_t)blk * sh.block_tokens + pos % sh.block_tokens;
    constexpr int BB = KT == CU_KV_Q8_0 ? 34 : 18;
    uint8_t *row = (is_v ? vc : kc) + (slot * sh.n_head_kv + h) * (size_t)(hd / 32 * BB);
    for (int qb = threadIdx.x; qb < hd / 32; qb += blockDim.x) {
        const float *xs = x + 32 * qb;
        uint8_t *o = row + qb * BB;
        float d;
        if (KT == CU_KV_Q8_0) {
            float amax = 0.0f;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(xs[j]));
            d = amax / 127.0f;
            const float id = d != 0.0f ? 1.0f / d : 0.0f;
            for (int j = 0; j < 32; j++) o[2 + j] = (uint8_t)(int8_t)roundf(__fmul_rn(xs[j], id));
        } else {
            float amax = 0.0f, mx = 0.0f; // the signed value of largest magnitude, the first one
            for (int j = 0; j < 32; j++)
                if (amax < fabsf(xs[j])) {
                    amax = fabsf(xs[j]);
                    mx = xs[j];
                }
            d = mx / -8.0f;
            const float id = d != 0.0f ? 1.0f / d : 0.0f;
            for (int j = 0; j < 16; j++) {
                const int x0 = min(15, (int)(int8_t)(__fmul_rn(xs[j], id) + 8.5f));
                const int x1 = min(15, (int)(int8_t)(__fmul_rn(xs[j + 16], id) + 8.5f));
                o[2 + j] = (uint8_t)(x0 | (x1 << 4));
            }
        }
        const unsigned short dh = __half_as_ushort(__float2half_rn(d));
        o[0] = (uint8_t)(dh & 0xffu);
        o[1] = (uint8_t)(dh >> 8);
    }
}

extern "C" cudaError_t cu_rope_store(float *q, const float *k, const float *v,
                                     const struct cu_attn_batch *b, const struct cu_attn_shape *sh,
                                     const float *inv_freq, float pos_scale, bool neox,
                                     void *k_cache, void *v_cache, cudaStream_t st)
{
    if (b->n_tokens <= 0) return cudaSuccess;
    if (sh->n_rot < 2 || sh->n_rot > sh->head_dim) return cudaErrorInvalidValue;
    if (sh->kv_type == CU_KV_Q8_0 || sh->kv_type == CU_KV_Q4_0) {
        if (sh->head_dim % 32 || sh->head_dim > 256) return cudaErrorInvalidValue;
        const dim3 grid((unsigned)b->n_tokens, (unsigned)(sh->n_head + 2 * sh->n_head_kv));
        if (sh->kv_type == CU_KV_Q8_0)
            CU_LAUNCH(k_rope_store_q<CU_KV_Q8_0>, grid, 64, 0, st, q, k, v, *b, *sh, inv_freq, pos_scale,
                      neox, (uint8_t *)k_cache, (uint8_t *)v_cache);
        else
            CU_LAUNCH(k_rope_store_q<CU_KV_Q4_0>, grid, 64, 0, st, q, k, v, *b, *sh, inv_freq, pos_scale,
                      neox, (uint8_t *)k_cache, (uint8_t *)v_cache);
        return cudaGetLastError();
    }
    if (sh->kv_type != CU_KV_F16) return cudaErrorInvalidValue;
    const int32_t items = sh->n_head * (sh->n_rot / 2) + sh->n_head_kv * (sh->n_rot / 2) +
                          sh->n_head_kv * (sh->head_dim - sh->n_rot) + sh->n_head_kv * sh->head_dim;
    const dim3 grid((unsigned)b->n_tokens, (unsigned)((items + 255) / 256));
    CU_LAUNCH(k_rope_store, grid, 256, 0, st, q, k, v, *b, *sh, inv_freq, pos_scale, neox,
              (__half *)k_cache, (__half *)v_cache);
    return cudaGetLastError();
}
