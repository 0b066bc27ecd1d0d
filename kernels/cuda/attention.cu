// attention.cu: attention over the paged KV pool, f16 or quantized.
//
// The KV format is a template parameter (KT, enum cu_kv_type): f16, or the
// CPU backend's Q8_0 / Q4_0 blocks of 32 along each head's row (34 and 18
// bytes, 2-aligned: 16-bit loads), read and dequantized in the tiles
// directly. Q4_0's K and V are stored rotated by a Walsh-Hadamard matrix
// (cu_rope_store), so its queries are rotated on load here and the outputs
// rotated back (H = H^-1), as kernels/cpu/attention.c does.
//
// Decode: one block per (token, KV head, key split); the G = n_head/n_head_kv
// query heads sharing a KV head are handled together so each K/V row is read
// once for the group. 4 warps stride over the split's keys with an online
// (f32) softmax each, merged through shared memory into partials; a second
// kernel merges the splits. Bound by KV bandwidth.
//
// Prefill: one block per (query tile, KV head); 32 query rows (tile tokens x
// group heads) against 32-key tiles staged in shared memory, online softmax,
// so the score matrix is never materialised. Bound by shared-memory FMAs.
#include <math_constants.h>

#include "common.cuh"

#define AT_WARPS 4
#define AT_GMAX 8
#define AT_QROWS 32
#define AT_KT 32

// Key range [lo, hi] that query position p of a window-limited layer sees.
__device__ __forceinline__ int32_t at_lo(int32_t p, int32_t window)
{
    return window > 0 ? max(0, p - window + 1) : 0;
}

// Split sp's keys [k0, k1) of a query at position p of sequence s (none for padding).
__device__ __forceinline__ void at_split_keys(int32_t s, int32_t p, int32_t window, int n_split, int sp,
                                              int32_t &k0, int32_t &k1)
{
    if (s < 0) return;
    const int32_t lo = at_lo(p, window), len = p - lo + 1;
    const int32_t chunk = (len + n_split - 1) / n_split;
    k0 = lo + sp * chunk;
    k1 = min(p + 1, k0 + chunk);
}

__device__ __forceinline__ size_t at_slot(const cu_attn_batch &b, const cu_attn_shape &sh,
                                          int32_t s, int32_t kp)
{
    const int32_t blk = b.tables[b.table_off[s] + kp / sh.block_tokens];
    return ((size_t)blk * sh.block_tokens + kp % sh.block_tokens) * sh.n_head_kv;
}

// E = HD/32 contiguous halves per lane.
template <int E>
__device__ __forceinline__ void at_load(const __half *p, float *f)
{
    if (E == 8) {
        const uint4 v = *(const uint4 *)p;
        cu_unpack8<false>(v, f);
    } else if (E == 4) {
        const uint2 v = *(const uint2 *)p;
        const uint32_t u[2] = { v.x, v.y };
#pragma unroll
        for (int i = 0; i < 2; i++) {
            f[2 * i] = cu_h2f((uint16_t)(u[i] & 0xffffu));
            f[2 * i + 1] = cu_h2f((uint16_t)(u[i] >> 16));
        }
    } else {
        const uint32_t u = *(const uint32_t *)p;
        f[0] = cu_h2f((uint16_t)(u & 0xffffu));
        f[1] = cu_h2f((uint16_t)(u >> 16));
    }
}

// Bytes of one head's K (or V) row of HD elements in format KT.
template <int HD, int KT>
__host__ __device__ constexpr int at_row_bytes()
{
    return KT == CU_KV_F16 ? HD * 2 : KT == CU_KV_Q8_0 ? HD / 32 * 34 : HD / 32 * 18;
}

// Head kh's row of key kp of sequence s in the pool `cache`.
template <int HD, int KT>
__device__ __forceinline__ const uint8_t *at_row(const uint8_t *cache, const cu_attn_batch &b,
                                                 const cu_attn_shape &sh, int32_t s, int32_t kp, int kh)
{
    return cache + (at_slot(b, sh, s, kp) + kh) * (size_t)at_row_bytes<HD, KT>();
}

// Elements [u * E, u * E + E) of a row (E = 2, 4 or 8: never across a
// quantization block, nor across Q4_0's low/high nibble halves).
template <int KT, int E>
__device__ __forceinline__ void at_ld(const uint8_t *row, int u, float *f)
{
    const int o = u * E;
    if (KT == CU_KV_F16) {
        at_load<E>((const __half *)row + o, f);
    } else if (KT == CU_KV_Q8_0) {
        const uint8_t *blk = row + (o / 32) * 34;
        const float d = cu_h2f(*(const unsigned short *)blk);
        const unsigned short *qp = (const unsigned short *)(blk + 2 + o % 32);
#pragma unroll
        for (int i = 0; i < E / 2; i++) {
            const uint32_t w = qp[i];
            f[2 * i] = (float)(int8_t)(w & 0xffu) * d;
            f[2 * i + 1] = (float)(int8_t)(w >> 8) * d;
        }
    } else {
        const uint8_t *blk = row + (o / 32) * 18;
        const float d = cu_h2f(*(const unsigned short *)blk);
        const int j = o % 32, sh = j >= 16 ? 4 : 0; // elements 16..31: high nibbles
        const unsigned short *qp = (const unsigned short *)(blk + 2 + j % 16);
#pragma unroll
        for (int i = 0; i < E / 2; i++) {
            const uint32_t w = qp[i];
            f[2 * i] = (float)((int)((w >> sh) & 15u) - 8) * d;
            f[2 * i + 1] = (float)((int)((w >> (8 + sh)) & 15u) - 8) * d;
        }
    }
}

// Element i of a row.
template <int KT>
__device__ __forceinline__ float at_elem(const uint8_t *row, int i)
{
    if (KT == CU_KV_F16) return __half2float(((const __half *)row)[i]);
    if (KT == CU_KV_Q8_0) {
        const uint8_t *blk = row + (i / 32) * 34;
        return cu_h2f(*(const unsigned short *)blk) * (float)(int8_t)blk[2 + i % 32];
    }
    const uint8_t *blk = row + (i / 32) * 18;
    const int j = i % 32, qb = blk[2 + j % 16];
    return cu_h2f(*(const unsigned short *)blk) * (float)((j < 16 ? qb & 15 : qb >> 4) - 8);
}

extern "C" size_t cu_attn_decode_ws(int32_t n_tokens, int32_t n_head, int32_t head_dim,
                                    int32_t n_split)
{
    return (size_t)n_tokens * n_head * n_split * (head_dim + 2) * sizeof(float);
}

// The block's warps' online-softmax states merged into one partial per query
// head of the split: out + g * stride = {M, L, acc[HD]} for head g of the
// group (the merge kernel combines the splits). Every thread of the block calls it.
template <int HD>
__device__ __forceinline__ void at_merge_warps(const float (&m)[AT_GMAX], const float (&l)[AT_GMAX],
                                               const float (&acc)[AT_GMAX][HD / 32], int G, float *out,
                                               size_t stride)
{
    constexpr int E = HD / 32;
    __shared__ float s_m[AT_WARPS][AT_GMAX], s_l[AT_WARPS][AT_GMAX];
    __shared__ float s_acc[AT_WARPS][AT_GMAX][HD];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int g = 0; g < AT_GMAX; g++) {
        if (g >= G) break;
        if (lane == 0) {
            s_m[warp][g] = m[g];
            s_l[warp][g] = l[g];
        }
#pragma unroll
        for (int e = 0; e < E; e++) s_acc[warp][g][lane * E + e] = acc[g][e];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * HD; i += blockDim.x) {
        const int g = i / HD, d = i % HD;
        float M = -CUDART_INF_F;
        for (int w = 0; w < AT_WARPS; w++) M = fmaxf(M, s_m[w][g]);
        float L = 0.0f, A = 0.0f;
        if (M != -CUDART_INF_F) {
            for (int w = 0; w < AT_WARPS; w++) {
                if (s_m[w][g] == -CUDART_INF_F) continue; // this warp saw no keys
                const float c = __expf(s_m[w][g] - M);
                L += s_l[w][g] * c;
                A += s_acc[w][g][d] * c;
            }
        }
        float *o = out + (size_t)g * stride;
        if (d == 0) {
            o[0] = M;
            o[1] = L;
        }
        o[2 + d] = A;
    }
}

template <int HD, int KT>
__global__ void __launch_bounds__(AT_WARPS * 32)
k_attn_decode(const float *__restrict__ q, const uint8_t *__restrict__ kc,
              const uint8_t *__restrict__ vc, const cu_attn_batch b, const cu_attn_shape sh,
              int n_split, float *__restrict__ ws)
{
    pdl_trigger();
    pdl_wait();
    constexpr int E = HD / 32;
    const int t = blockIdx.x, kh = blockIdx.y, sp = blockIdx.z;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int G = sh.n_head / sh.n_head_kv;
    const int32_t s = b.seq[t], p = b.pos[t];

    int32_t k0 = 0, k1 = 0; // this split's keys [k0, k1)
    at_split_keys(s, p, sh.window, n_split, sp, k0, k1);
    float qf[AT_GMAX][E], acc[AT_GMAX][E], m[AT_GMAX], l[AT_GMAX];
    if (KT == CU_KV_Q4_0) { // the group's queries rotated as K was stored
        __shared__ float s_qr[AT_GMAX * HD];
        for (int i = threadIdx.x; i < G * HD; i += blockDim.x)
            s_qr[i] = q[((size_t)t * sh.n_head + kh * G) * HD + i] * sh.scale;
        blk_hadamard(s_qr, G * HD, cu_kv_rot_k(HD));
#pragma unroll
        for (int g = 0; g < AT_GMAX; g++)
#pragma unroll
            for (int e = 0; e < E; e++) qf[g][e] = g < G ? s_qr[g * HD + lane * E + e] : 0.0f;
    }
#pragma unroll
    for (int g = 0; g < AT_GMAX; g++) {
        m[g] = -CUDART_INF_F;
        l[g] = 0.0f;
#pragma unroll
        for (int e = 0; e < E; e++) {
            acc[g][e] = 0.0f;
            if (KT != CU_KV_Q4_0)
                qf[g][e] = g < G ? q[((size_t)t * sh.n_head + kh * G + g) * HD + lane * E + e] * sh.scale
                                 : 0.0f;
        }
    }
    for (int32_t kp = k0 + warp; kp < k1; kp += AT_WARPS) {
        float kf[E], vf[E];
        at_ld<KT, E>(at_row<HD, KT>(kc, b, sh, s, kp, kh), lane, kf);
        at_ld<KT, E>(at_row<HD, KT>(vc, b, sh, s, kp, kh), lane, vf);
#pragma unroll
        for (int g = 0; g < AT_GMAX; g++) {
            if (g >= G) break;
            float d = 0.0f;
#pragma unroll
            for (int e = 0; e < E; e++) d += qf[g][e] * kf[e];
            d = warp_sum(d);
            const float mn = fmaxf(m[g], d);
            const float corr = __expf(m[g] - mn), pe = __expf(d - mn);
            l[g] = l[g] * corr + pe;
#pragma unroll
            for (int e = 0; e < E; e++) acc[g][e] = acc[g][e] * corr + pe * vf[e];
            m[g] = mn;
        }
    }
    at_merge_warps<HD>(m, l, acc, G, ws + (((size_t)t * sh.n_head + kh * G) * n_split + sp) * (HD + 2),
                       (size_t)n_split * (HD + 2));
}

// The same partials, a lane per key (cu_set_attn_lanes; the trip's A/B at
// long contexts): the warp takes its keys 32 at a time, each lane the whole
// dot products of its own key with the G query heads (q in shared memory,
// read as broadcasts), so the online softmax costs two shuffle reductions
// per head per 32 keys instead of one per key; then every lane accumulates
// its E dims of the 32 V rows with the weights passed through shared memory.
// The row-per-warp kernel above spends ~600 cycles of shuffles a key at 4k
// context (278 GB/s of KV on the H200).
template <int HD, int KT>
__global__ void __launch_bounds__(AT_WARPS * 32)
k_attn_decode_lk(const float *__restrict__ q, const uint8_t *__restrict__ kc,
                 const uint8_t *__restrict__ vc, const cu_attn_batch b, const cu_attn_shape sh,
                 int n_split, float *__restrict__ ws)
{
    pdl_trigger();
    pdl_wait();
    constexpr int E = HD / 32;
    __shared__ __align__(16) float s_q[AT_GMAX][HD];
    __shared__ float s_p[AT_WARPS][AT_GMAX][32];
    const int t = blockIdx.x, kh = blockIdx.y, sp = blockIdx.z;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int G = sh.n_head / sh.n_head_kv;
    const int32_t s = b.seq[t], p = b.pos[t];
    int32_t k0 = 0, k1 = 0; // this split's keys [k0, k1)
    at_split_keys(s, p, sh.window, n_split, sp, k0, k1);
    for (int i = threadIdx.x; i < G * HD; i += blockDim.x)
        s_q[i / HD][i % HD] = q[((size_t)t * sh.n_head + kh * G + i / HD) * HD + i % HD] * sh.scale;
    if (KT == CU_KV_Q4_0) blk_hadamard(&s_q[0][0], G * HD, cu_kv_rot_k(HD)); // as K was stored
    __syncthreads();
    float acc[AT_GMAX][E], m[AT_GMAX], l[AT_GMAX];
#pragma unroll
    for (int g = 0; g < AT_GMAX; g++) {
        m[g] = -CUDART_INF_F;
        l[g] = 0.0f;
#pragma unroll
        for (int e = 0; e < E; e++) acc[g][e] = 0.0f;
    }
    // warp w takes keys [k0 + 32w, +32), then [k0 + 32(w + AT_WARPS), +32), ...
    for (int32_t base = k0 + 32 * warp; base < k1; base += 32 * AT_WARPS) {
        const int32_t kp = base + lane;
        const bool live = kp < k1;
        float sc[AT_GMAX];
#pragma unroll
        for (int g = 0; g < AT_GMAX; g++) sc[g] = 0.0f;
        if (live) {
            const uint8_t *kr = at_row<HD, KT>(kc, b, sh, s, kp, kh);
#pragma unroll 4
            for (int c = 0; c < HD / 8; c++) {
                float kf[8];
                at_ld<KT, 8>(kr, c, kf);
#pragma unroll
                for (int g = 0; g < AT_GMAX; g++) {
                    if (g >= G) break;
                    const float4 qa = *(const float4 *)&s_q[g][8 * c], qb = *(const float4 *)&s_q[g][8 * c + 4];
                    sc[g] += qa.x * kf[0] + qa.y * kf[1] + qa.z * kf[2] + qa.w * kf[3] + qb.x * kf[4] +
                             qb.y * kf[5] + qb.z * kf[6] + qb.w * kf[7];
                }
            }
        }
        const int nk = min(32, k1 - base); // keys of this chunk (the lanes past it hold none)
#pragma unroll
        for (int g = 0; g < AT_GMAX; g++) {
            if (g >= G) break;
            const float mx = warp_max(live ? sc[g] : -CUDART_INF_F);
            const float mn = fmaxf(m[g], mx);
            const float corr = __expf(m[g] - mn); // m = -inf at the start: 0, and l, acc are 0
            const float pe = live ? __expf(sc[g] - mn) : 0.0f;
            l[g] = l[g] * corr + warp_sum(pe);
            m[g] = mn;
            s_p[warp][g][lane] = pe;
#pragma unroll
            for (int e = 0; e < E; e++) acc[g][e] *= corr;
        }
        __syncwarp();
        for (int j = 0; j < nk; j++) {
            float vf[E];
            at_ld<KT, E>(at_row<HD, KT>(vc, b, sh, s, base + j, kh), lane, vf);
#pragma unroll
            for (int g = 0; g < AT_GMAX; g++) {
                if (g >= G) break;
                const float pj = s_p[warp][g][j];
#pragma unroll
                for (int e = 0; e < E; e++) acc[g][e] += pj * vf[e];
            }
        }
        __syncwarp(); // s_p is rewritten by the next chunk
    }
    at_merge_warps<HD>(m, l, acc, G, ws + (((size_t)t * sh.n_head + kh * G) * n_split + sp) * (HD + 2),
                       (size_t)n_split * (HD + 2));
}

static bool g_attn_lanes = false;
extern "C" void cu_set_attn_lanes(bool on) { g_attn_lanes = on; }

// xq (optional): the output also as int8 blocks for the q8 matvec of wo
// (a warp's 32 lanes are one block: HD is a multiple of 32).
// ROT (Q4_0): the output rotated back by the V rotation (pieces of 64).
template <int HD, bool ROT>
__global__ void k_attn_merge(const float *__restrict__ ws, const cu_attn_batch b, int n_head,
                             int n_split, float *__restrict__ out, void *xq)
{
    pdl_trigger();
    pdl_wait();
    const int t = blockIdx.x, h = blockIdx.y, d = threadIdx.x;
    const size_t e = ((size_t)t * n_head + h) * HD + d; // element of the n x (n_head * HD) output
    float r = 0.0f;
    if (b.seq[t] >= 0) { // else a padding token: zeros
        const float *p = ws + ((size_t)t * n_head + h) * n_split * (HD + 2);
        float M = -CUDART_INF_F;
        for (int s = 0; s < n_split; s++) M = fmaxf(M, p[s * (HD + 2)]);
        float L = 0.0f, A = 0.0f;
        for (int s = 0; s < n_split; s++) {
            const float ms = p[s * (HD + 2)];
            if (ms == -CUDART_INF_F) continue; // empty split
            const float c = __expf(ms - M);
            L += p[s * (HD + 2) + 1] * c;
            A += p[s * (HD + 2) + 2 + d] * c;
        }
        r = L > 0.0f ? A / L : 0.0f;
    }
    if (ROT) {
        __shared__ float s_o[HD];
        s_o[d] = r;
        blk_hadamard(s_o, HD, CU_KV_ROT_V);
        r = s_o[d];
    }
    out[e] = r;
    if (xq)
        q8_block(r, d % 32, (int8_t *)xq, q8_scales(xq, (int64_t)gridDim.x * n_head * HD / 32),
                 (int64_t)(e / 32));
}

template <int HD, int KT>
static cudaError_t decode_launch(const float *q, const void *kc, const void *vc,
                                 const cu_attn_batch &b, const cu_attn_shape &sh, int n_split,
                                 float *ws, float *out, void *xq, cudaStream_t st)
{
    const dim3 g1(b.n_tokens, sh.n_head_kv, n_split);
    if (g_attn_lanes)
        CU_LAUNCH((k_attn_decode_lk<HD, KT>), g1, AT_WARPS * 32, 0, st, q, (const uint8_t *)kc,
                  (const uint8_t *)vc, b, sh, n_split, ws);
    else
        CU_LAUNCH((k_attn_decode<HD, KT>), g1, AT_WARPS * 32, 0, st, q, (const uint8_t *)kc,
                  (const uint8_t *)vc, b, sh, n_split, ws);
    const dim3 g2(b.n_tokens, sh.n_head);
    CU_LAUNCH((k_attn_merge<HD, KT == CU_KV_Q4_0>), g2, HD, 0, st, ws, b, sh.n_head, n_split, out, xq);
    return cudaGetLastError();
}

template <int HD>
static cudaError_t decode_kv(const float *q, const void *kc, const void *vc, const cu_attn_batch &b,
                             const cu_attn_shape &sh, int n_split, float *ws, float *out, void *xq,
                             cudaStream_t st)
{
    switch (sh.kv_type) {
    case CU_KV_Q8_0: return decode_launch<HD, CU_KV_Q8_0>(q, kc, vc, b, sh, n_split, ws, out, xq, st);
    case CU_KV_Q4_0: return decode_launch<HD, CU_KV_Q4_0>(q, kc, vc, b, sh, n_split, ws, out, xq, st);
    default: return decode_launch<HD, CU_KV_F16>(q, kc, vc, b, sh, n_split, ws, out, xq, st);
    }
}

static bool at_shape_ok(const cu_attn_shape &sh)
{
    return sh.n_head_kv > 0 && sh.n_head % sh.n_head_kv == 0 &&
           sh.n_head / sh.n_head_kv <= AT_GMAX &&
           (sh.head_dim == 64 || sh.head_dim == 128 || sh.head_dim == 256) &&
           (sh.kv_type == CU_KV_F16 || sh.kv_type == CU_KV_Q8_0 || sh.kv_type == CU_KV_Q4_0);
}

extern "C" cudaError_t cu_attn_decode(const float *q, const void *k_cache, const void *v_cache,
                                      const struct cu_attn_batch *b, const struct cu_attn_shape *sh,
                                      int32_t n_split, float *ws, float *out, cudaStream_t st)
{
    return cu_attn_decode_q8(q, k_cache, v_cache, b, sh, n_split, ws, out, NULL, st);
}

extern "C" cudaError_t cu_attn_decode_q8(const float *q, const void *k_cache, const void *v_cache,
                                         const struct cu_attn_batch *b, const struct cu_attn_shape *sh,
                                         int32_t n_split, float *ws, float *out, void *xq, cudaStream_t st)
{
    if (!at_shape_ok(*sh) || n_split < 1) return cudaErrorInvalidValue;
    if (b->n_tokens <= 0) return cudaSuccess;
    switch (sh->head_dim) {
    case 64: return decode_kv<64>(q, k_cache, v_cache, *b, *sh, n_split, ws, out, xq, st);
    case 128: return decode_kv<128>(q, k_cache, v_cache, *b, *sh, n_split, ws, out, xq, st);
    default: return decode_kv<256>(q, k_cache, v_cache, *b, *sh, n_split, ws, out, xq, st);
    }
}

// ---- prefill (flash style) ----
extern "C" int32_t cu_attn_tile_tokens(int32_t n_head, int32_t n_head_kv)
{
    const int32_t g = n_head_kv > 0 ? n_head / n_head_kv : 1;
    return g >= 1 && g <= AT_QROWS ? AT_QROWS / g : 1;
}

static size_t prefill_smem(int hd)
{
    // Q rows, K tile (rows padded by one float against bank conflicts), V tile
    return sizeof(float) * ((size_t)AT_QROWS * hd + (size_t)AT_KT * (hd + 1) + (size_t)AT_KT * hd);
}

template <int HD, int KT>
__global__ void __launch_bounds__(AT_WARPS * 32)
k_attn_prefill(const float *__restrict__ q, const uint8_t *__restrict__ kc,
               const uint8_t *__restrict__ vc, const cu_attn_batch b, const cu_attn_shape sh,
               const int32_t *__restrict__ tiles, float *__restrict__ out)
{
    constexpr int E = HD / 32, RPW = AT_QROWS / AT_WARPS; // rows per warp
    extern __shared__ float smem[];
    float *Qs = smem;                          // [AT_QROWS][HD]
    float *Ks = Qs + AT_QROWS * HD;            // [AT_KT][HD + 1]
    float *Vs = Ks + AT_KT * (HD + 1);         // [AT_KT][HD]
    __shared__ int32_t r_pos[AT_QROWS], r_lo[AT_QROWS];
    __shared__ int32_t r_tok[AT_QROWS];

    const int tile = blockIdx.x, kh = blockIdx.y;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int G = sh.n_head / sh.n_head_kv;
    const int32_t first = tiles[2 * tile], cnt = tiles[2 * tile + 1];
    const int32_t s = b.seq[first];
    if (s < 0) return; // padding tiles do not occur; uniform for the block anyway

    if (threadIdx.x < AT_QROWS) {
        const int r = threadIdx.x, tq = r / G;
        const bool valid = tq < cnt && tq < AT_QROWS / G;
        r_tok[r] = valid ? first + tq : -1;
        r_pos[r] = valid ? b.pos[first + tq] : -1;
        r_lo[r] = valid ? at_lo(b.pos[first + tq], sh.window) : 0x7fffffff;
    }
    __syncthreads();
    int32_t kmin = 0x7fffffff, kmax = -1;
    for (int r = 0; r < AT_QROWS; r++) {
        kmin = min(kmin, r_lo[r]);
        kmax = max(kmax, r_pos[r]);
    }
    for (int i = threadIdx.x; i < AT_QROWS * HD; i += blockDim.x) {
        const int r = i / HD, d = i % HD;
        const int32_t tok = r_tok[r];
        Qs[i] = tok >= 0 ? q[((size_t)tok * sh.n_head + kh * G + r % G) * HD + d] * sh.scale : 0.0f;
    }
    if (KT == CU_KV_Q4_0) blk_hadamard(Qs, AT_QROWS * HD, cu_kv_rot_k(HD)); // as K was stored

    float acc[RPW][E], m[RPW], l[RPW];
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        m[i] = -CUDART_INF_F;
        l[i] = 0.0f;
#pragma unroll
        for (int e = 0; e < E; e++) acc[i][e] = 0.0f;
    }
    for (int32_t kb = kmin; kb <= kmax; kb += AT_KT) {
        __syncthreads(); // previous tile fully consumed (and Qs written, first time)
        for (int i = threadIdx.x; i < AT_KT * HD; i += blockDim.x) {
            const int j = i / HD, d = i % HD;
            const int32_t kp = kb + j;
            float kv = 0.0f, vv = 0.0f;
            if (kp <= kmax) {
                kv = at_elem<KT>(at_row<HD, KT>(kc, b, sh, s, kp, kh), d);
                vv = at_elem<KT>(at_row<HD, KT>(vc, b, sh, s, kp, kh), d);
            }
            Ks[j * (HD + 1) + d] = kv;
            Vs[j * HD + d] = vv;
        }
        __syncthreads();
        const int32_t kp = kb + lane; // this lane's key
#pragma unroll
        for (int i = 0; i < RPW; i++) {
            const int r = warp * RPW + i;
            const int32_t qp = r_pos[r];
            if (qp < 0) continue; // row unused (uniform over the warp)
            const float *qr = Qs + r * HD;
            const float *kr = Ks + lane * (HD + 1);
            float sc = 0.0f;
#pragma unroll 8
            for (int d = 0; d < HD; d++) sc += qr[d] * kr[d];
            const bool ok = kp <= qp && kp >= r_lo[r];
            sc = ok ? sc : -CUDART_INF_F;
            const float mn = fmaxf(m[i], warp_max(sc));
            if (mn == -CUDART_INF_F) continue; // no visible key yet (uniform)
            const float pe = ok ? __expf(sc - mn) : 0.0f;
            const float corr = __expf(m[i] - mn);
            l[i] = l[i] * corr + warp_sum(pe);
#pragma unroll
            for (int e = 0; e < E; e++) acc[i][e] *= corr;
            for (int j = 0; j < AT_KT; j++) {
                const float pj = __shfl_sync(0xffffffffu, pe, j);
#pragma unroll
                for (int e = 0; e < E; e++) acc[i][e] += pj * Vs[j * HD + lane + 32 * e];
            }
            m[i] = mn;
        }
    }
    if (KT == CU_KV_Q4_0) {
        // rotated back as V was stored: the rows through Qs (no longer read)
        __syncthreads();
#pragma unroll
        for (int i = 0; i < RPW; i++)
#pragma unroll
            for (int e = 0; e < E; e++)
                Qs[(warp * RPW + i) * HD + lane + 32 * e] = l[i] > 0.0f ? acc[i][e] / l[i] : 0.0f;
        blk_hadamard(Qs, AT_QROWS * HD, CU_KV_ROT_V);
    }
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        const int r = warp * RPW + i;
        const int32_t tok = r_tok[r];
        if (tok < 0) continue;
        float *o = out + ((size_t)tok * sh.n_head + kh * G + r % G) * HD;
#pragma unroll
        for (int e = 0; e < E; e++)
            o[lane + 32 * e] = KT == CU_KV_Q4_0 ? Qs[r * HD + lane + 32 * e]
                                                : l[i] > 0.0f ? acc[i][e] / l[i] : 0.0f;
    }
}

template <int HD>
static cudaError_t prefill_attr()
{
    const int bytes = (int)prefill_smem(HD);
    cudaError_t e = cudaFuncSetAttribute(k_attn_prefill<HD, CU_KV_F16>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(k_attn_prefill<HD, CU_KV_Q8_0>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(k_attn_prefill<HD, CU_KV_Q4_0>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    return e;
}

template <int HD>
static void prefill_kv(const float *q, const uint8_t *kc, const uint8_t *vc, const cu_attn_batch &b,
                       const cu_attn_shape &sh, const int32_t *tiles, dim3 grid, size_t smem, float *out,
                       cudaStream_t st)
{
    switch (sh.kv_type) {
    case CU_KV_Q8_0: k_attn_prefill<HD, CU_KV_Q8_0><<<grid, AT_WARPS * 32, smem, st>>>(q, kc, vc, b, sh, tiles, out); break;
    case CU_KV_Q4_0: k_attn_prefill<HD, CU_KV_Q4_0><<<grid, AT_WARPS * 32, smem, st>>>(q, kc, vc, b, sh, tiles, out); break;
    default: k_attn_prefill<HD, CU_KV_F16><<<grid, AT_WARPS * 32, smem, st>>>(q, kc, vc, b, sh, tiles, out); break;
    }
}

extern "C" cudaError_t cu_attn_prefill_init(int32_t head_dim)
{
    switch (head_dim) {
    case 64: return prefill_attr<64>();
    case 128: return prefill_attr<128>();
    case 256: return prefill_attr<256>();
    default: return cudaErrorInvalidValue;
    }
}

extern "C" cudaError_t cu_attn_prefill(const float *q, const void *k_cache, const void *v_cache,
                                       const struct cu_attn_batch *b, const struct cu_attn_shape *sh,
                                       const int32_t *tiles, int32_t n_tiles, float *out,
                                       cudaStream_t st)
{
    if (!at_shape_ok(*sh)) return cudaErrorInvalidValue;
    if (n_tiles <= 0) return cudaSuccess;
    const dim3 grid(n_tiles, sh->n_head_kv);
    const size_t smem = prefill_smem(sh->head_dim);
    const uint8_t *kc = (const uint8_t *)k_cache, *vc = (const uint8_t *)v_cache;
    switch (sh->head_dim) {
    case 64: prefill_kv<64>(q, kc, vc, *b, *sh, tiles, grid, smem, out, st); break;
    case 128: prefill_kv<128>(q, kc, vc, *b, *sh, tiles, grid, smem, out, st); break;
    default: prefill_kv<256>(q, kc, vc, *b, *sh, tiles, grid, smem, out, st); break;
    }
    return cudaGetLastError();
}
