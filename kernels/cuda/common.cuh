// common.cuh: device helpers shared by the CUDA kernels: half/bf16
// conversion, warp reductions, and dq32, which dequantizes 32 consecutive
// weights (one "unit") of a row into registers for every supported format.
#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include "cuda_ops.h"

#ifdef TERN_CUDA_EMU
#include <tuple>
#endif

// ---- programmatic dependent launch (sm_90 and later) ----
// A decode step is ~300-400 small kernels in a row; each one's launch and
// ramp-up (and the previous one's tail) is time the weights are not
// streaming. Launched with cu_launch (below), a kernel may start while the
// one before it is still running: it calls pdl_trigger at its top so the
// next can be scheduled, may read what no kernel writes (the weights: see the
// matvec's L2 prefetch) before pdl_wait, and must call pdl_wait before it
// reads any activation or writes anything. pdl_wait returns once the previous
// kernel has completed and its writes are visible; that grid had itself
// passed its own pdl_wait, so the ordering is transitive down the stream.
// Older GPUs and the CPU emulation run the kernels one after another and
// these are no-ops.
__device__ __forceinline__ void pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
// Starts fetching [p, p + bytes) into L2 without waiting for it.
__device__ __forceinline__ void prefetch_l2(const void *p, size_t bytes, int lane)
{
#if defined(__CUDA_ARCH__)
    for (size_t off = (size_t)lane * 128; off < bytes; off += 32 * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"((const char *)p + off));
#else
    (void)p, (void)bytes, (void)lane;
#endif
}

// Whether cu_launch asks for programmatic serialization (cu_set_pdl; on by
// default; TERN_CUDA_NO_PDL turns it off for the trip's ablation).
bool cu_pdl_enabled(void);

// k<<<grid, block, smem, st>>>(args...), with programmatic dependent launch
// when enabled. Every kernel launched this way calls pdl_wait (above). The
// kernel goes in parentheses when its template arguments have commas.
#ifdef TERN_CUDA_EMU
#define CU_LAUNCH(k, grid, block, smem, st, ...)                                                  \
    do {                                                                                         \
        (void)(st);                                                                              \
        auto emu_args = std::make_tuple(__VA_ARGS__);                                            \
        emu_launch(dim3(grid), dim3(block), (size_t)(smem), [=]() { std::apply(k, emu_args); }); \
    } while (0)
#else
template <typename... KArgs, typename... Args>
static inline void cu_launch_ex(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                                Args... args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = cu_pdl_enabled() ? 1 : 0;
    if (cudaLaunchKernelEx(&cfg, k, args...) == cudaSuccess || cfg.numAttrs == 0) return;
    // a stream or driver that refuses the attribute: plain launches from now on
    (void)cudaGetLastError();
    cu_set_pdl(false);
    cfg.numAttrs = 0;
    (void)cudaLaunchKernelEx(&cfg, k, args...); // an error is left for cudaGetLastError
}
#define CU_LAUNCH(k, grid, block, smem, st, ...) cu_launch_ex(k, dim3(grid), dim3(block), (size_t)(smem), st, __VA_ARGS__)
#endif

#define CU_QT_F32 0
#define CU_QT_F16 1
#define CU_QT_Q4_0 2
#define CU_QT_Q4_1 3
#define CU_QT_Q5_0 6
#define CU_QT_Q5_1 7
#define CU_QT_Q8_0 8
#define CU_QT_Q2_K 10
#define CU_QT_Q3_K 11
#define CU_QT_Q4_K 12
#define CU_QT_Q5_K 13
#define CU_QT_Q6_K 14
#define CU_QT_IQ4_NL 20
#define CU_QT_IQ4_XS 23
#define CU_QT_BF16 30

__device__ __forceinline__ float cu_h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float cu_bf2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

// Butterfly reductions: every lane ends with the result. (The CPU emulation
// of tests/kernels/cuda/emu does them in one exchange instead of five.)
__device__ __forceinline__ float warp_sum(float v)
{
#ifdef TERN_CUDA_EMU
    return emu_warp_reduce(v, false);
#else
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
#endif
}
__device__ __forceinline__ float warp_max(float v)
{
#ifdef TERN_CUDA_EMU
    return emu_warp_reduce(v, true);
#else
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
#endif
}

// ---- quantized KV cache (Q4_0): the Walsh-Hadamard rotation ----
// As kernels/cpu/attention.c (attn_kv_rot, attn_hadamard): K rows (and the
// queries) in pieces of the largest power of two >= 64 dividing head_dim, V
// rows (and the outputs) in pieces of 64.
#define CU_KV_ROT_V 64
__host__ __device__ constexpr int cu_kv_rot_k(int hd)
{
    return hd % 512 == 0 ? 512 : hd % 256 == 0 ? 256 : hd % 128 == 0 ? 128 : 64;
}
// x = H.x in place over n floats of shared memory, pieces of r (a power of
// two dividing n): the CPU's butterflies in its order, then 1/sqrt(r), so
// the same inputs give the same bits. Every thread of the (1-D) block calls
// it; it synchronises before and after.
__device__ __forceinline__ void blk_hadamard(float *x, int n, int r)
{
    for (int h = 1; h < r; h *= 2) {
        __syncthreads();
        for (int p = threadIdx.x; p < n / 2; p += blockDim.x) {
            const int j = (p / h) * 2 * h + p % h;
            const float a = x[j], c = x[j + h];
            x[j] = a + c;
            x[j + h] = a - c;
        }
    }
    __syncthreads();
    const float sc = 1.0f / sqrtf((float)r);
    for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] *= sc;
    __syncthreads();
}

// ---- int8 activations (the q8 matvec's input) ----
// Layout of n rows x cols as int8 blocks of 32 (cu_q8_bytes): all quants,
// then at a 256-byte boundary one {d, d * sum(q)} per block.
__host__ __device__ __forceinline__ float2 *q8_scales(void *xq, int64_t n_blocks)
{
    return (float2 *)((uint8_t *)xq + ((n_blocks * 32 + 255) & ~(int64_t)255));
}
// One warp quantizes the 32 values of block b (lane = element), d = max|v| /
// 127 as the CPU backend's Q8_0 activations, so both sides see the same ints.
// Every lane of the warp must call it.
__device__ __forceinline__ void q8_block(float v, int lane, int8_t *__restrict__ qs, float2 *__restrict__ ds,
                                         int64_t b)
{
    const float amax = warp_max(fabsf(v));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const int q = __float2int_rn(v * id);
    qs[b * 32 + lane] = (int8_t)q;
    const float s = warp_sum((float)q); // |sum| <= 4064: exact in f32
    if (lane == 0) ds[b] = make_float2(d, d * s);
}

// GLU activation: SiLU, or tanh-GELU as the reference engine computes it: a
// table over f16 inputs holding f16 results, identity above 10, 0 below -10.
__device__ __forceinline__ float cu_glu_act(float a, bool gelu)
{
    if (!gelu) return a / (1.0f + expf(-a));
    if (a <= -10.0f) return 0.0f;
    if (a >= 10.0f) return a;
    const float c = 0.79788456080286535588f, x = __half2float(__float2half_rn(a)); // sqrt(2/pi)
    return __half2float(__float2half_rn(0.5f * x * (1.0f + tanhf(c * x * (1.0f + 0.044715f * x * x)))));
}

__device__ __forceinline__ const uint8_t *cu_row(const cu_tensor &t, int64_t row)
{
    return (const uint8_t *)t.q + (size_t)row * t.row_bytes;
}

// 8 halves (or bf16) in a 16-byte word -> floats
template <bool BF>
__device__ __forceinline__ void cu_unpack8(uint4 v, float *w)
{
    const uint32_t u[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if (BF) {
            w[2 * i] = cu_bf2f((uint16_t)(u[i] & 0xffffu));
            w[2 * i + 1] = cu_bf2f((uint16_t)(u[i] >> 16));
        } else {
            w[2 * i] = cu_h2f((uint16_t)(u[i] & 0xffffu));
            w[2 * i + 1] = cu_h2f((uint16_t)(u[i] >> 16));
        }
    }
}

// Q4_K 6-bit scale/min of sub-block j from the 12 packed bytes (as in ggml).
__device__ __forceinline__ void cu_scale_min_k4(int j, const uint8_t *q, int &sc, int &mn)
{
    if (j < 4) {
        sc = q[j] & 63;
        mn = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Q4_K/Q5_K super-block head (d, dmin, 12 bytes of 6-bit scales and mins,
// 16 bytes in all): sub-block j's scale d * sc and min dmin * mn.
__device__ __forceinline__ void cu_k_head(const uint8_t *blk, int j, float &dd, float &mm)
{
    const uint4 head = __ldg((const uint4 *)blk);
    const float d = cu_h2f((uint16_t)(head.x & 0xffffu));
    const float dmin = cu_h2f((uint16_t)(head.x >> 16));
    uint8_t sc12[12];
    const uint32_t hw[3] = { head.y, head.z, head.w };
#pragma unroll
    for (int i = 0; i < 12; i++) sc12[i] = (uint8_t)(hw[i / 4] >> (8 * (i % 4)));
    int sc, mn;
    cu_scale_min_k4(j, sc12, sc, mn);
    dd = d * (float)sc;
    mm = dmin * (float)mn;
}

// IQ4_NL / IQ4_XS: the 16 levels of kernels/quant.c's qt_iq4nl_values as
// bytes, 0..7 in the first two words, 8..15 in the last two.
#define CU_IQ4_T0 0xBFAD9881u
#define CU_IQ4_T1 0xF6EADDCFu
#define CU_IQ4_T2 0x26190D01u
#define CU_IQ4_T3 0x71594535u
// Four 4-bit indices (one in the low nibble of each byte) to their four
// int8 levels, packed the same way: two byte permutations (levels 0..7 and
// 8..15) and a per-byte select on the index's top bit, no memory access.
__device__ __forceinline__ uint32_t cu_iq4_lookup4(uint32_t idx)
{
    const uint32_t lo3 = idx & 0x07070707u, y = lo3 | (lo3 >> 4);
    const uint32_t sel = (y & 0xffu) | ((y >> 8) & 0xff00u);
    const uint32_t a = __byte_perm(CU_IQ4_T0, CU_IQ4_T1, sel), b = __byte_perm(CU_IQ4_T2, CU_IQ4_T3, sel);
    const uint32_t hi = ((idx >> 3) & 0x01010101u) * 0xffu;
    return (a & ~hi) | (b & hi);
}

// IQ4_XS sub-block ib's scale (ls - 32, 6 bits: low 4 in scales_l, high 2 in scales_h).
__device__ __forceinline__ int cu_iq4xs_scale(const uint8_t *blk, int ib)
{
    const uint32_t sh = __ldg((const unsigned short *)(blk + 2));
    const uint32_t sl = __ldg(blk + 4 + ib / 2);
    return (int)(((sl >> (4 * (ib % 2))) & 0xfu) | (((sh >> (2 * ib)) & 3u) << 4)) - 32;
}

// Q3_K scale s of 16 (6 bits, offset 32): low 4 bits in bytes 0..7 of the
// 12 scale bytes (s / 8 picks the nibble), high 2 in bytes 8..11.
__device__ __forceinline__ int cu_q3k_scale(const uint8_t *sc, int s)
{
    const uint32_t lo = (__ldg(sc + s % 8) >> (4 * (s / 8))) & 0xfu;
    const uint32_t hi = (__ldg(sc + 8 + s % 4) >> (2 * (s / 4))) & 3u;
    return (int)(lo | hi << 4) - 32;
}

// IQ4_NL unit u (block u: d, qs[16]; 18 bytes, 2-aligned) or IQ4_XS unit u
// (sub-block u % 8 of block u / 8: d, scales_h, scales_l[4], qs[128]; 136
// bytes, 8-aligned): its 16 bytes of nibbles into q (byte b's low nibble is
// element b, its high nibble element b + 16, as Q4_0), returns its scale.
template <bool XS>
__device__ __forceinline__ float cu_iq4_load(const cu_tensor &t, int64_t row, int64_t u, uint32_t (&q)[4])
{
    if (!XS) {
        const unsigned short *b = (const unsigned short *)(cu_row(t, row) + (size_t)u * 18);
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = (uint32_t)__ldg(b + 1 + 2 * i) | (uint32_t)__ldg(b + 2 + 2 * i) << 16;
        return cu_h2f(__ldg(b));
    }
    const uint8_t *blk = cu_row(t, row) + (size_t)(u / 8) * 136;
    const int j = (int)(u % 8);
    const uint2 v0 = __ldg((const uint2 *)(blk + 8 + 16 * j)), v1 = __ldg((const uint2 *)(blk + 16 + 16 * j));
    q[0] = v0.x, q[1] = v0.y, q[2] = v1.x, q[3] = v1.y;
    return cu_h2f(__ldg((const unsigned short *)blk)) * (float)cu_iq4xs_scale(blk, j);
}

// Dequantizes weights [32u, 32u + 32) of `row` into w. Units never straddle a
// block: every format's block is 32 or 256 elements.
template <int T>
__device__ __forceinline__ void dq32(const cu_tensor &t, int64_t row, int64_t u, float *w)
{
    if (T == CU_QT_Q4_0 || T == CU_QT_Q4_1) {
        const size_t bi = (size_t)row * (size_t)(t.cols / 32) + (size_t)u;
        const uint4 v = __ldg((const uint4 *)t.q + bi);
        float d, m;
        if (T == CU_QT_Q4_0) {
            d = cu_h2f(__ldg((const unsigned short *)t.s + bi));
            m = -8.0f * d;
        } else {
            const uint32_t dm = __ldg((const unsigned int *)t.s + bi);
            d = cu_h2f((uint16_t)(dm & 0xffffu));
            m = cu_h2f((uint16_t)(dm >> 16));
        }
        const uint32_t q[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
        for (int i = 0; i < 4; i++) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const uint32_t b = (q[i] >> (8 * j)) & 0xffu;
                w[4 * i + j] = (float)(b & 15u) * d + m;
                w[4 * i + j + 16] = (float)(b >> 4) * d + m;
            }
        }
    } else if (T == CU_QT_Q5_0 || T == CU_QT_Q5_1) {
        // block_q5_0: d, qh[4], qs[16] (22 bytes); q5_1: d, m, qh[4], qs[16]
        // (24 bytes). GGUF layout, 2-aligned: 16-bit loads. Element j takes
        // its 5th bit from bit j of qh.
        constexpr int B = T == CU_QT_Q5_0 ? 22 : 24, H = T == CU_QT_Q5_0 ? 2 : 4;
        const unsigned short *b = (const unsigned short *)(cu_row(t, row) + (size_t)u * B);
        const float d = cu_h2f(__ldg(b));
        const float m = T == CU_QT_Q5_0 ? -16.0f * d : cu_h2f(__ldg(b + 1));
        const uint32_t qh = (uint32_t)__ldg(b + H / 2) | (uint32_t)__ldg(b + H / 2 + 1) << 16;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t two = __ldg(b + H / 2 + 2 + i);
#pragma unroll
            for (int k = 0; k < 2; k++) {
                const int j = 2 * i + k;
                const uint32_t q = (two >> (8 * k)) & 0xffu;
                const uint32_t lo = (q & 15u) | (((qh >> j) & 1u) << 4);
                const uint32_t hi = (q >> 4) | (((qh >> (j + 16)) & 1u) << 4);
                w[j] = (float)lo * d + m;
                w[j + 16] = (float)hi * d + m;
            }
        }
    } else if (T == CU_QT_Q8_0) {
        const size_t bi = (size_t)row * (size_t)(t.cols / 32) + (size_t)u;
        const float d = cu_h2f(__ldg((const unsigned short *)t.s + bi));
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint4 v = __ldg((const uint4 *)t.q + 2 * bi + h);
            const uint32_t q[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    w[16 * h + 4 * i + j] = (float)(int8_t)((q[i] >> (8 * j)) & 0xffu) * d;
        }
    } else if (T == CU_QT_F16 || T == CU_QT_BF16) {
        const uint4 *p = (const uint4 *)(cu_row(t, row) + (size_t)u * 64);
#pragma unroll
        for (int i = 0; i < 4; i++) cu_unpack8<T == CU_QT_BF16>(__ldg(p + i), w + 8 * i);
    } else if (T == CU_QT_F32) {
        const float4 *p = (const float4 *)(cu_row(t, row) + (size_t)u * 128);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const float4 v = __ldg(p + i);
            w[4 * i] = v.x;
            w[4 * i + 1] = v.y;
            w[4 * i + 2] = v.z;
            w[4 * i + 3] = v.w;
        }
    } else if (T == CU_QT_Q4_K) {
        // block_q4_K: d, dmin (half), scales[12], qs[128]; 144 bytes, 16-aligned
        const uint8_t *blk = cu_row(t, row) + (size_t)(u / 8) * 144;
        const int j = (int)(u % 8);
        float dd, mm;
        cu_k_head(blk, j, dd, mm);
        const int shift = (j & 1) * 4;
        const uint4 *qp = (const uint4 *)(blk + 16 + 32 * (j / 2));
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint4 v = __ldg(qp + h);
            const uint32_t q[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int k = 0; k < 4; k++)
                    w[16 * h + 4 * i + k] = dd * (float)((q[i] >> (8 * k + shift)) & 15u) - mm;
        }
    } else if (T == CU_QT_Q5_K) {
        // block_q5_K: d, dmin (half), scales[12], qh[32], qs[128]; 176 bytes,
        // 16-aligned. Sub-block j: its nibbles as in Q4_K (pair j/2, low or
        // high half), its fifth bit bit j of qh[l].
        const uint8_t *blk = cu_row(t, row) + (size_t)(u / 8) * 176;
        const int j = (int)(u % 8);
        float dd, mm;
        cu_k_head(blk, j, dd, mm);
        const int shift = (j & 1) * 4;
        const uint4 *hp = (const uint4 *)(blk + 16);
        const uint4 *qp = (const uint4 *)(blk + 48 + 32 * (j / 2));
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint4 v = __ldg(qp + h), hv = __ldg(hp + h);
            const uint32_t q[4] = { v.x, v.y, v.z, v.w }, qh[4] = { hv.x, hv.y, hv.z, hv.w };
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const uint32_t lo = (q[i] >> (8 * k + shift)) & 15u;
                    const uint32_t hi = (qh[i] >> (8 * k + j)) & 1u;
                    w[16 * h + 4 * i + k] = dd * (float)(lo | hi << 4) - mm;
                }
        }
    } else if (T == CU_QT_IQ4_NL || T == CU_QT_IQ4_XS) {
        // the 16-level codebook through cu_iq4_lookup4, 4 values at a time
        uint32_t q[4];
        const float dl = cu_iq4_load<T == CU_QT_IQ4_XS>(t, row, u, q);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t lo = cu_iq4_lookup4(q[i] & 0x0f0f0f0fu), hi = cu_iq4_lookup4((q[i] >> 4) & 0x0f0f0f0fu);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                w[4 * i + k] = dl * (float)(int8_t)((lo >> (8 * k)) & 0xffu);
                w[16 + 4 * i + k] = dl * (float)(int8_t)((hi >> (8 * k)) & 0xffu);
            }
        }
    } else if (T == CU_QT_Q3_K) {
        // block_q3_K: hmask[32], qs[64], scales[12], d; 110 bytes, 2-aligned.
        // Sub-block j: 2-bit quants at shift 2 (j % 4) of qs[32 (j / 4) + l],
        // bit j of hmask[l] set adds 4, then - 4; scales 2j and 2j + 1 (16 each)
        const uint8_t *blk = cu_row(t, row) + (size_t)(u / 8) * 110;
        const int j = (int)(u % 8), shift = 2 * (j % 4);
        const float d = cu_h2f(__ldg((const unsigned short *)(blk + 108)));
        const float s0 = d * (float)cu_q3k_scale(blk + 96, 2 * j), s1 = d * (float)cu_q3k_scale(blk + 96, 2 * j + 1);
        const unsigned short *qp = (const unsigned short *)(blk + 32 + 32 * (j / 4)), *hp = (const unsigned short *)blk;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const uint32_t q2 = __ldg(qp + i), h2 = __ldg(hp + i);
#pragma unroll
            for (int b = 0; b < 2; b++) {
                const int l = 2 * i + b;
                const int q = (int)((q2 >> (8 * b + shift)) & 3u) - (((h2 >> (8 * b + j)) & 1u) ? 0 : 4);
                w[l] = (l < 16 ? s0 : s1) * (float)q;
            }
        }
    } else if (T == CU_QT_Q2_K) {
        // block_q2_K: scales[16] (4-bit scale, 4-bit min), qs[64], d, dmin;
        // 84 bytes, 4-aligned. Sub-block j: quants at shift 2 (j % 4) of
        // qs[32 (j / 4) + l], scale/min bytes 2j and 2j + 1 (16 each)
        const uint8_t *blk = cu_row(t, row) + (size_t)(u / 8) * 84;
        const int j = (int)(u % 8), shift = 2 * (j % 4);
        const uint32_t dm = __ldg((const unsigned int *)(blk + 80));
        const float d = cu_h2f((uint16_t)(dm & 0xffffu)), dmin = cu_h2f((uint16_t)(dm >> 16));
        const uint32_t sc0 = __ldg(blk + 2 * j), sc1 = __ldg(blk + 2 * j + 1);
        const float dl[2] = { d * (float)(sc0 & 15u), d * (float)(sc1 & 15u) };
        const float ml[2] = { dmin * (float)(sc0 >> 4), dmin * (float)(sc1 >> 4) };
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint32_t *qw = (const uint32_t *)(blk + 16 + 32 * (j / 4) + 16 * h);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const uint32_t q4 = __ldg((const unsigned int *)qw + i);
#pragma unroll
                for (int k = 0; k < 4; k++) w[16 * h + 4 * i + k] = dl[h] * (float)((q4 >> (8 * k + shift)) & 3u) - ml[h];
            }
        }
    } else if (T == CU_QT_Q6_K) {
        // block_q6_K: ql[128], qh[64], scales[16] (int8), d (half); 210 bytes,
        // only 2-aligned, so 16-bit loads. Sub-block j: half h = j/4, k = j%4.
        const uint8_t *blk = cu_row(t, row) + (size_t)(u / 8) * 210;
        const int j = (int)(u % 8), h = j / 4, k = j % 4;
        const unsigned short *ql = (const unsigned short *)(blk + 64 * h + 32 * (k & 1));
        const unsigned short *qh = (const unsigned short *)(blk + 128 + 32 * h);
        const float d = cu_h2f(__ldg((const unsigned short *)(blk + 208)));
        const float s0 = d * (float)(int8_t)__ldg(blk + 192 + 8 * h + 2 * k);
        const float s1 = d * (float)(int8_t)__ldg(blk + 192 + 8 * h + 2 * k + 1);
        const int lshift = (k >= 2) ? 4 : 0, hshift = 2 * k;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const uint32_t l2 = __ldg(ql + i), h2 = __ldg(qh + i);
#pragma unroll
            for (int b = 0; b < 2; b++) {
                const int l = 2 * i + b;
                const int lo = (int)((l2 >> (8 * b + lshift)) & 15u);
                const int hi = (int)((h2 >> (8 * b + hshift)) & 3u);
                w[l] = (l < 16 ? s0 : s1) * (float)((lo | (hi << 4)) - 32);
            }
        }
    }
}
