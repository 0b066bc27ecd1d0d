// matvec.cu: fused dequantize-and-multiply for decode, y[n][rows] = x[n][cols] . W^T
// with n <= CU_MV_MAX_N tokens. Bound by weight bandwidth: each weight byte
// is read once for the whole batch (the n activation rows are applied to the
// 32 weights a lane holds in registers). A warp owns 2 rows, lanes stride
// over 32-element units with 16-byte loads, partial sums end in a warp
// reduction; 8 warps per block, the activations in shared memory where they
// fit (k_matvec below says why).
#include "common.cuh"

#define MV_WARPS 8
#define MV_BLOCKS_PER_SM 2        /* k_matvec's launch bounds */
#define MV_SMEM_MAX (100 * 1024) /* MV_BLOCKS_PER_SM blocks' copies fit an SM on sm_80 and later */
#define MV_ROWS_PER_WARP 2

// What one launch computes. Plain: up to 3 matrices of one type and width
// (q, k, v) stacked, a warp owning 2 adjacent rows of one of them. GLU: a
// warp owns row r of gate (w[0]) and row r of up (w[1]) and writes
// act(gate.x) * (up.x), so the gate/up outputs never reach memory.
struct mv_args {
    cu_tensor w[3];
    float *y[3];
    int64_t pair_end[3];   // cumulative warp (row pair) count per matrix
    int nt;
    int glu;               // 0 plain, 1 SwiGLU, 2 GEGLU
    int pf;                // q8 kernel: prefetch each warp's next pair into L2 (persistent grid)
};

// Where warp pair p lies: matrix i (stacked q/k/v) or the GLU pair, its two
// rows, and whether the second exists (an odd last matrix leaves one alone).
struct mv_pos {
    int i;
    int64_t ra, rb;
    bool two;
};

__device__ __forceinline__ bool mv_locate(const mv_args &a, int64_t p, mv_pos &o)
{
    int i = 0;
    while (i < a.nt && p >= a.pair_end[i]) i++;
    if (i == a.nt) return false;
    const int64_t local = p - (i ? a.pair_end[i - 1] : 0);
    o.i = i;
    o.ra = a.glu ? local : 2 * local;
    o.rb = a.glu ? local : 2 * local + 1;
    o.two = o.rb < a.w[a.glu ? 1 : i].rows;
    return true;
}

// The warp's sums of its two rows to y: both rows, or act(gate) * up (GLU).
template <int NB>
__device__ __forceinline__ void mv_store(const mv_args &a, const mv_pos &o, float (&acc)[2][NB], int n,
                                         int lane)
{
    const int64_t rows = a.w[a.glu ? 0 : o.i].rows;
#pragma unroll
    for (int t = 0; t < NB; t++) {
        if (t >= n) break;
        const float s0 = warp_sum(acc[0][t]);
        const float s1 = warp_sum(acc[1][t]);
        if (lane != 0) continue;
        if (a.glu) {
            a.y[0][(size_t)t * (size_t)rows + o.ra] = cu_glu_act(s0, a.glu == 2) * s1;
        } else {
            float *y = a.y[o.i] + (size_t)t * (size_t)rows;
            y[o.ra] = s0;
            if (o.two) y[o.rb] = s1;
        }
    }
}

// One warp's row pair p of k_matvec (any format, through dq32). x holds a
// unit's 32 activations every US float4s (8: packed; 9: padded, see k_matvec).
template <int T, int NB, int US>
__device__ __forceinline__ void mv_pair(const mv_args &a, const float *x, int n, int64_t p, int lane)
{
    mv_pos o;
    if (!mv_locate(a, p, o)) return;
    const cu_tensor &wa = a.w[a.glu ? 0 : o.i], &wb = a.w[a.glu ? 1 : o.i];
    const int64_t ra = o.ra, rb = o.rb;
    const bool two = o.two;
    const int64_t n_units = wa.cols / 32;
    float acc[MV_ROWS_PER_WARP][NB];
#pragma unroll
    for (int r = 0; r < MV_ROWS_PER_WARP; r++)
#pragma unroll
        for (int t = 0; t < NB; t++) acc[r][t] = 0.0f;

    for (int64_t u = lane; u < n_units; u += 32) {
        float w0[32], w1[32];
        dq32<T>(wa, ra, u, w0);
        if (two) {
            dq32<T>(wb, rb, u, w1);
        } else {
#pragma unroll
            for (int k = 0; k < 32; k++) w1[k] = 0.0f;
        }
#pragma unroll
        for (int t = 0; t < NB; t++) {
            if (t < n) {
                const float4 *xp = (const float4 *)x + (size_t)t * (size_t)(wa.cols / 32 * US) + u * US;
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    const float4 xv = xp[e];
                    acc[0][t] += w0[4 * e] * xv.x + w0[4 * e + 1] * xv.y + w0[4 * e + 2] * xv.z +
                                 w0[4 * e + 3] * xv.w;
                    acc[1][t] += w1[4 * e] * xv.x + w1[4 * e + 1] * xv.y + w1[4 * e + 2] * xv.z +
                                 w1[4 * e + 3] * xv.w;
                }
            }
        }
    }
    mv_store<NB>(a, o, acc, n, lane);
}

// The split formats (Q4_0, Q4_1, Q8_0: quants and scales in arrays of their
// own, 16-byte aligned): the first GPU trip measured k_matvec at 677 GB/s on
// a 14336 x 4096 Q4_0 matrix (16 % of the bandwidth), a lane holding one
// 16-byte load in flight per row and dequantizing 64 floats into registers
// before using any. Here a lane first loads SU units of both rows (SU x 16 or
// 32 bytes each), then sums nibble x activation products per unit and applies
// the scale once: acc += d * sum(q x) + m * sum(x). Same row-pair mapping,
// q/k/v stacking and GLU epilogue as k_matvec.
template <int T> struct split_fmt {
    static constexpr int QW = T == CU_QT_Q8_0 ? 2 : 1; // uint4 words of quants per unit
    static constexpr int SU = T == CU_QT_Q8_0 ? 2 : 4; // units a lane loads ahead
};

template <int T>
__device__ __forceinline__ void split_scale(const cu_tensor &w, size_t bi, float &d, float &m)
{
    if (T == CU_QT_Q4_1) {
        const uint32_t dm = __ldg((const unsigned int *)w.s + bi);
        d = cu_h2f((uint16_t)(dm & 0xffffu));
        m = cu_h2f((uint16_t)(dm >> 16));
    } else {
        d = cu_h2f(__ldg((const unsigned short *)w.s + bi));
        m = T == CU_QT_Q4_0 ? -8.0f * d : 0.0f;
    }
}

// sum over the 4 elements of float4 e of one unit: quant value x activation
template <int T>
__device__ __forceinline__ float split_dot4(const uint4 *q, int e, float4 xv)
{
    uint32_t word;
    if (T == CU_QT_Q8_0) {
        const uint4 h = q[e >> 2];
        word = (e & 3) == 0 ? h.x : (e & 3) == 1 ? h.y : (e & 3) == 2 ? h.z : h.w;
        return (float)(int8_t)(word & 0xffu) * xv.x + (float)(int8_t)((word >> 8) & 0xffu) * xv.y +
               (float)(int8_t)((word >> 16) & 0xffu) * xv.z + (float)(int8_t)(word >> 24) * xv.w;
    }
    const uint4 h = q[0];
    word = (e & 3) == 0 ? h.x : (e & 3) == 1 ? h.y : (e & 3) == 2 ? h.z : h.w;
    if (e >= 4) word >>= 4; // elements 16..31 are the high nibbles
    return (float)(word & 15u) * xv.x + (float)((word >> 8) & 15u) * xv.y +
           (float)((word >> 16) & 15u) * xv.z + (float)((word >> 24) & 15u) * xv.w;
}

// A lane's loads of one round: SU units of both rows (quants and scales), all
// issued before any is used; a missing second row reads as zero weights.
template <int T, int SU = split_fmt<T>::SU>
__device__ __forceinline__ void split_load(const cu_tensor &wa, const cu_tensor &wb, size_t ba, size_t bb,
                                           bool two, int64_t u0, int64_t upr,
                                           uint4 (&qa)[SU][split_fmt<T>::QW], uint4 (&qb)[SU][split_fmt<T>::QW],
                                           float (&da)[SU], float (&ma)[SU], float (&db)[SU], float (&mb)[SU])
{
    constexpr int QW = split_fmt<T>::QW;
#pragma unroll
    for (int k = 0; k < SU; k++) {
        const int64_t u = u0 + 32 * k;
        const bool in = u < upr;
#pragma unroll
        for (int h = 0; h < QW; h++) {
            qa[k][h] = in ? __ldg((const uint4 *)wa.q + (ba + u) * QW + h) : make_uint4(0, 0, 0, 0);
            qb[k][h] = in ? __ldg((const uint4 *)wb.q + (bb + u) * QW + h) : make_uint4(0, 0, 0, 0);
        }
        da[k] = ma[k] = db[k] = mb[k] = 0.0f;
        if (in) {
            split_scale<T>(wa, ba + u, da[k], ma[k]);
            split_scale<T>(wb, bb + u, db[k], mb[k]);
        }
    }
    if (!two) {
#pragma unroll
        for (int k = 0; k < SU; k++) db[k] = mb[k] = 0.0f;
    }
}

// One warp's row pair p for the split formats (x as in mv_pair).
template <int T, int NB, int US>
__device__ __forceinline__ void mv_pair_split(const mv_args &a, const float *x, int n, int64_t p, int lane)
{
    constexpr int QW = split_fmt<T>::QW, SU = split_fmt<T>::SU;
    mv_pos o;
    if (!mv_locate(a, p, o)) return;
    const cu_tensor &wa = a.w[a.glu ? 0 : o.i], &wb = a.w[a.glu ? 1 : o.i];
    const int64_t ra = o.ra, rb = o.rb;
    const bool two = o.two;
    const int64_t upr = wa.cols / 32;
    const size_t ba = (size_t)ra * (size_t)upr, bb = (size_t)(two ? rb : ra) * (size_t)upr;
    float acc[2][NB];
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int t = 0; t < NB; t++) acc[r][t] = 0.0f;

    for (int64_t u0 = lane; u0 < upr; u0 += 32 * SU) {
        uint4 qa[SU][QW], qb[SU][QW];
        float da[SU], ma[SU], db[SU], mb[SU];
        split_load<T>(wa, wb, ba, bb, two, u0, upr, qa, qb, da, ma, db, mb);
#pragma unroll
        for (int k = 0; k < SU; k++) {
            const int64_t u = u0 + 32 * k;
            if (u >= upr) break;
#pragma unroll
            for (int t = 0; t < NB; t++) {
                if (t < n) {
                    const float4 *xp = (const float4 *)x + (size_t)t * (size_t)(wa.cols / 32 * US) + u * US;
                    float sa = 0.0f, sb = 0.0f, sx = 0.0f;
#pragma unroll
                    for (int e = 0; e < 8; e++) {
                        const float4 xv = xp[e];
                        sa += split_dot4<T>(qa[k], e, xv);
                        sb += split_dot4<T>(qb[k], e, xv);
                        sx += (xv.x + xv.y) + (xv.z + xv.w);
                    }
                    acc[0][t] += da[k] * sa + ma[k] * sx;
                    acc[1][t] += db[k] * sb + mb[k] * sx;
                }
            }
        }
    }
    mv_store<NB>(a, o, acc, n, lane);
}


// The activations: where n x cols floats fit in shared memory (MV_SMEM_MAX),
// the block copies them there once and its warps walk row pairs with a grid
// stride, so x is read from L2 once per resident block instead of once per
// warp. The second trip measured why: at batch 1 every format moved about
// 2.6 TB/s of x against 0.7 (Q4_0) to 1.8 (F16) TB/s of weights, and batch 8
// (8x the x) took 5x batch 1's step.
template <int T, int NB, bool SMEM>
__global__ void __launch_bounds__(MV_WARPS * 32, MV_BLOCKS_PER_SM)
k_matvec(const mv_args a, const float *__restrict__ xg, int n)
{
    extern __shared__ float4 mv_xs[];
    pdl_trigger();
    pdl_wait();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    constexpr int US = SMEM ? 9 : 8;
    const float *x = xg;
    if (SMEM) {
        // lane l reads unit l's 128 bytes: packed, the 8 lanes of a 16-byte
        // shared load would hit the same 4 banks; a 16-byte pad per unit
        // spreads them over all 32 (from global memory the same pattern
        // costs 32 cache lines per load instruction, hence the copy)
        const int64_t n4 = (int64_t)n * (a.w[0].cols / 4);
        for (int64_t j = threadIdx.x; j < n4; j += blockDim.x) mv_xs[j / 8 * 9 + j % 8] = __ldg((const float4 *)xg + j);
        __syncthreads();
        x = (const float *)mv_xs;
    }
    const int64_t total = a.pair_end[a.nt - 1];
    for (int64_t p = (int64_t)blockIdx.x * MV_WARPS + warp; p < total; p += (int64_t)gridDim.x * MV_WARPS) {
        if constexpr (T == CU_QT_Q4_0 || T == CU_QT_Q4_1 || T == CU_QT_Q8_0)
            mv_pair_split<T, NB, US>(a, x, n, p, lane);
        else
            mv_pair<T, NB, US>(a, x, n, p, lane);
    }
}

template <int T, int NB>
static cudaError_t mv_go(const mv_args &a, const float *x, int32_t n, cudaStream_t st)
{
    const int64_t pairs = a.pair_end[a.nt - 1];
    const int64_t need = (pairs + MV_WARPS - 1) / MV_WARPS;
    const size_t smem = (size_t)n * (size_t)a.w[0].cols / 32 * 9 * 16; /* padded units */
    const dim3 block(MV_WARPS * 32);
    if (smem <= MV_SMEM_MAX) {
        int dev = 0, sms = 0;
        cudaError_t e = cudaSuccess;
        if (smem > 48 * 1024) /* above the default limit: opted in per kernel */
            e = cudaFuncSetAttribute(k_matvec<T, NB, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e == cudaSuccess) e = cudaGetDevice(&dev);
        if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (e == cudaSuccess && sms > 0) {
            /* MV_BLOCKS_PER_SM resident by construction (launch bounds, and
             * MV_SMEM_MAX leaves room for them): no occupancy query per launch */
            const int64_t resident = (int64_t)sms * MV_BLOCKS_PER_SM;
            const dim3 grid((unsigned)(need < resident ? need : resident));
            CU_LAUNCH((k_matvec<T, NB, true>), grid, block, smem, st, a, x, n);
            return cudaGetLastError();
        }
        (void)cudaGetLastError(); // no room on this device: x from global memory
    }
    CU_LAUNCH((k_matvec<T, NB, false>), dim3((unsigned)need), block, 0, st, a, x, n);
    return cudaGetLastError();
}

template <int T>
static cudaError_t mv_launch(const mv_args &a, const float *x, int32_t n, cudaStream_t st)
{
    if constexpr (T == CU_QT_Q4_0 || T == CU_QT_Q4_1 || T == CU_QT_Q8_0) {
        if (n <= 1) return mv_go<T, 1>(a, x, n, st);
        if (n <= 2) return mv_go<T, 2>(a, x, n, st);
        if (n <= 4) return mv_go<T, 4>(a, x, n, st);
        return mv_go<T, 8>(a, x, n, st);
    } else {
        if (n <= 1) return mv_go<T, 1>(a, x, n, st);
        if (n <= 2) return mv_go<T, 2>(a, x, n, st);
        if (n <= 4) return mv_go<T, 4>(a, x, n, st);
        // 8 tokens x 2 rows of 32 dequantized weights spill mv_pair's
        // registers: two passes of 4 tokens read the weights twice instead
        cudaError_t e = mv_go<T, 4>(a, x, 4, st);
        if (e != cudaSuccess) return e;
        mv_args b = a;
        for (int j = 0; j < (a.glu ? 1 : a.nt); j++) b.y[j] += (size_t)4 * (size_t)a.w[j].rows;
        return mv_go<T, 4>(b, x + (size_t)4 * (size_t)a.w[0].cols, n - 4, st);
    }
}

static cudaError_t mv_run(const mv_args &a, const float *x, int32_t n, cudaStream_t st)
{
    if (n < 1 || n > CU_MV_MAX_N) return cudaErrorInvalidValue;
    for (int i = 0; i < a.nt; i++)
        if (a.w[i].type != a.w[0].type || a.w[i].cols != a.w[0].cols || a.w[i].cols % 32 != 0)
            return cudaErrorInvalidValue;
    switch (a.w[0].type) {
    case CU_QT_F32: return mv_launch<CU_QT_F32>(a, x, n, st);
    case CU_QT_F16: return mv_launch<CU_QT_F16>(a, x, n, st);
    case CU_QT_BF16: return mv_launch<CU_QT_BF16>(a, x, n, st);
    case CU_QT_Q4_0: return mv_launch<CU_QT_Q4_0>(a, x, n, st);
    case CU_QT_Q4_1: return mv_launch<CU_QT_Q4_1>(a, x, n, st);
    case CU_QT_Q5_0: return mv_launch<CU_QT_Q5_0>(a, x, n, st);
    case CU_QT_Q5_1: return mv_launch<CU_QT_Q5_1>(a, x, n, st);
    case CU_QT_Q8_0: return mv_launch<CU_QT_Q8_0>(a, x, n, st);
    case CU_QT_Q4_K: return mv_launch<CU_QT_Q4_K>(a, x, n, st);
    case CU_QT_Q5_K: return mv_launch<CU_QT_Q5_K>(a, x, n, st);
    case CU_QT_Q6_K: return mv_launch<CU_QT_Q6_K>(a, x, n, st);
    case CU_QT_Q2_K: return mv_launch<CU_QT_Q2_K>(a, x, n, st);
    case CU_QT_Q3_K: return mv_launch<CU_QT_Q3_K>(a, x, n, st);
    case CU_QT_IQ4_NL: return mv_launch<CU_QT_IQ4_NL>(a, x, n, st);
    case CU_QT_IQ4_XS: return mv_launch<CU_QT_IQ4_XS>(a, x, n, st);
    default: return cudaErrorInvalidValue;
    }
}

extern "C" cudaError_t cu_matvec_multi(const struct cu_tensor *const *w, float *const *y,
                                       int32_t count, const float *x, int32_t n, cudaStream_t st)
{
    if (count < 1 || count > 3) return cudaErrorInvalidValue;
    mv_args a = {};
    a.nt = count;
    for (int i = 0; i < count; i++) {
        // a warp's two rows must lie in one matrix: all but the last need even rows
        if (i + 1 < count && w[i]->rows % 2 != 0) return cudaErrorInvalidValue;
        a.w[i] = *w[i];
        a.y[i] = y[i];
        a.pair_end[i] = (i ? a.pair_end[i - 1] : 0) + (w[i]->rows + 1) / 2;
    }
    return mv_run(a, x, n, st);
}

extern "C" cudaError_t cu_matvec(const struct cu_tensor *w, const float *x, int32_t n, float *y,
                                 cudaStream_t st)
{
    return cu_matvec_multi(&w, &y, 1, x, n, st);
}

extern "C" cudaError_t cu_matvec_glu(const struct cu_tensor *gate, const struct cu_tensor *up,
                                     const float *x, int32_t n, bool gelu, float *out,
                                     cudaStream_t st)
{
    if (gate->rows != up->rows) return cudaErrorInvalidValue;
    mv_args a = {};
    a.nt = 1;
    a.glu = gelu ? 2 : 1;
    a.w[0] = *gate;
    a.w[1] = *up;
    a.y[0] = out;
    a.pair_end[0] = gate->rows;
    // mv_run checks w[0..nt) only; up must match gate's format too
    if (up->type != gate->type || up->cols != gate->cols) return cudaErrorInvalidValue;
    return mv_run(a, x, n, st);
}

// ---- int8 activations (the default for Q4_0, Q4_1 and Q8_0; TERN_CUDA_MV_Q8=0
// turns it off): the activations quantized once per matvec to int8 blocks of
// 32 (d = max|x| / 127, as the CPU backend's Q8_0), then __dp4a on the packed
// weights: four products an instruction and no conversion of each weight to a
// float. The f32 matvec was issue-bound (111 registers, 25 % occupancy); on
// the H200 this path took Q4_0 decode at batch 1 from 205 to 291 tok/s and at
// batch 8 from 226 to 1,022 (docs/GPU.md). ----

__global__ void k_quant_q8(const float *__restrict__ x, int64_t n_blocks, int8_t *__restrict__ qs,
                           float2 *__restrict__ ds)
{
    pdl_trigger();
    pdl_wait();
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (b >= n_blocks) return; // whole warps leave together: blocks are warp-sized
    q8_block(x[b * 32 + threadIdx.x % 32], threadIdx.x % 32, qs, ds, b);
}

extern "C" size_t cu_q8_bytes(int32_t n, int64_t cols)
{
    const size_t blocks = (size_t)n * (size_t)(cols / 32);
    return blocks * 32 + ((blocks * sizeof(float2) + 255) & ~(size_t)255) + 256;
}

extern "C" cudaError_t cu_quant_q8(const float *x, int32_t n, int64_t cols, void *xq, cudaStream_t st)
{
    if (cols % 32 != 0 || n < 1) return cudaErrorInvalidValue;
    const int64_t nb = (int64_t)n * (cols / 32);
    CU_LAUNCH(k_quant_q8, (unsigned)((nb + 7) / 8), 256, 0, st, x, nb, (int8_t *)xq, q8_scales(xq, nb));
    return cudaGetLastError();
}

extern "C" bool cu_matvec_q8_supported(uint32_t type)
{
    return type == CU_QT_Q4_0 || type == CU_QT_Q4_1 || type == CU_QT_Q8_0 || type == CU_QT_Q4_K ||
           type == CU_QT_Q5_K || type == CU_QT_Q6_K || type == CU_QT_Q2_K || type == CU_QT_Q3_K ||
           type == CU_QT_IQ4_NL || type == CU_QT_IQ4_XS;
}

// Token t's int8 activations of unit u (xb = t * units per row + u): its 8
// words into xw, and {d, d * sum(q)}.
__device__ __forceinline__ float2 q8_x_unit(const int8_t *__restrict__ qs, const float2 *__restrict__ ds,
                                            size_t xb, int (&xw)[8])
{
    const uint4 x0 = __ldg((const uint4 *)(qs + xb * 32)), x1 = __ldg((const uint4 *)(qs + xb * 32) + 1);
    xw[0] = (int)x0.x, xw[1] = (int)x0.y, xw[2] = (int)x0.z, xw[3] = (int)x0.w;
    xw[4] = (int)x1.x, xw[5] = (int)x1.y, xw[6] = (int)x1.z, xw[7] = (int)x1.w;
    return __ldg(ds + xb);
}

// dot of one unit: the weights' 32 values (nibbles or int8) with 32 int8 activations
template <int T>
__device__ __forceinline__ int q8_dot(const uint4 *q, const int *xw)
{
    int s = 0;
    if (T == CU_QT_Q8_0) {
        const int w[8] = { (int)q[0].x, (int)q[0].y, (int)q[0].z, (int)q[0].w,
                           (int)q[1].x, (int)q[1].y, (int)q[1].z, (int)q[1].w };
#pragma unroll
        for (int i = 0; i < 8; i++) s = __dp4a(w[i], xw[i], s);
    } else {
        // byte j of word i: element 4i + j (low nibble) and 16 + 4i + j (high)
        const unsigned w[4] = { q[0].x, q[0].y, q[0].z, q[0].w };
#pragma unroll
        for (int i = 0; i < 4; i++) {
            s = __dp4a((int)(w[i] & 0x0f0f0f0fu), xw[i], s);
            s = __dp4a((int)((w[i] >> 4) & 0x0f0f0f0fu), xw[4 + i], s);
        }
    }
    return s;
}

// Starts the L2 fetch of warp pair p's weights (quants and scales of its one
// or two rows): no kernel writes them, so this runs before pdl_wait and
// overlaps the kernel before (common.cuh). For the 4096-wide matrices a
// warp's pair is its whole share of the launch, so all of it is in flight
// while the previous kernel finishes.
template <int T>
__device__ __forceinline__ void q8_prefetch(const mv_args &a, int64_t p, int lane)
{
    mv_pos o;
    if (!mv_locate(a, p, o)) return;
    constexpr size_t QB = split_fmt<T>::QW * 16, SB = T == CU_QT_Q4_1 ? 4 : 2;
    const cu_tensor &wa = a.w[a.glu ? 0 : o.i], &wb = a.w[a.glu ? 1 : o.i];
    const size_t upr = (size_t)(wa.cols / 32), rows = a.glu || !o.two ? 1 : 2; // adjacent rows
    prefetch_l2((const uint8_t *)wa.q + (size_t)o.ra * upr * QB, rows * upr * QB, lane);
    prefetch_l2((const uint8_t *)wa.s + (size_t)o.ra * upr * SB, rows * upr * SB, lane);
    if (a.glu) {
        prefetch_l2((const uint8_t *)wb.q + (size_t)o.rb * upr * QB, upr * QB, lane);
        prefetch_l2((const uint8_t *)wb.s + (size_t)o.rb * upr * SB, upr * SB, lane);
    }
}

template <int T, int NB>
__global__ void __launch_bounds__(MV_WARPS * 32, MV_BLOCKS_PER_SM)
k_matvec_q8(const mv_args a, const int8_t *__restrict__ qs, const float2 *__restrict__ ds, int n)
{
    constexpr int QW = split_fmt<T>::QW, SU = split_fmt<T>::SU;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t total = a.pair_end[a.nt - 1];
    pdl_trigger();
    q8_prefetch<T>(a, (int64_t)blockIdx.x * MV_WARPS + warp, lane);
    pdl_wait();
    const int64_t stride = (int64_t)gridDim.x * MV_WARPS;
    for (int64_t p = (int64_t)blockIdx.x * MV_WARPS + warp; p < total; p += stride) {
        mv_pos o;
        if (!mv_locate(a, p, o)) break;
        // the next pair's bytes start on their way while this one is computed
        if (a.pf) q8_prefetch<T>(a, p + stride, lane);
        const cu_tensor &wa = a.w[a.glu ? 0 : o.i], &wb = a.w[a.glu ? 1 : o.i];
        const bool two = o.two;
        const int64_t upr = wa.cols / 32;
        const size_t ba = (size_t)o.ra * (size_t)upr, bb = (size_t)(two ? o.rb : o.ra) * (size_t)upr;
        float acc[2][NB];
#pragma unroll
        for (int t = 0; t < NB; t++) acc[0][t] = acc[1][t] = 0.0f;
        for (int64_t u0 = lane; u0 < upr; u0 += 32 * SU) {
            uint4 qa[SU][QW], qb[SU][QW];
            float da[SU], ma[SU], db[SU], mb[SU];
            split_load<T>(wa, wb, ba, bb, two, u0, upr, qa, qb, da, ma, db, mb);
#pragma unroll
            for (int k = 0; k < SU; k++) {
                const int64_t u = u0 + 32 * k;
                if (u >= upr) break;
#pragma unroll
                for (int t = 0; t < NB; t++) {
                    if (t < n) {
                        int xw[8];
                        const float2 xd = q8_x_unit(qs, ds, (size_t)t * (size_t)upr + (size_t)u, xw);
                        acc[0][t] += da[k] * (xd.x * (float)q8_dot<T>(qa[k], xw)) + ma[k] * xd.y;
                        acc[1][t] += db[k] * (xd.x * (float)q8_dot<T>(qb[k], xw)) + mb[k] * xd.y;
                    }
                }
            }
        }
        mv_store<NB>(a, o, acc, n, lane);
    }
}

// The pipelined variant (TERN_CUDA_MV_PIPE=1, the trip's A/B): the kernel
// above issues a round's loads, then waits on them, then reduces and stores,
// with no weight byte in flight during its dot products and its tail; on the
// 4096-wide q/k/v and wo matrices a pair is a single round, so every warp was
// one load latency plus one reduction (trip 10: 1.4 TB/s). Here a warp walks
// several pairs (the grid is at most the resident blocks) as one stream of
// rounds, and the next round's loads (its own pair's next units, or the next
// pair's first) are issued before this round's dot products, reduction and
// store. Rounds are warp-uniform (base r0, lane's unit r0 + lane) so every
// lane reaches mv_store's shuffles together. The same sums in the same order
// per lane as k_matvec_q8: the same bits.
// Two rounds live at once: 2 units a round (4 for Q4_0/Q4_1 spill, ptxas sm_90).
template <int T> struct pipe_round {
    static constexpr int SU = 2;
    uint4 qa[SU][split_fmt<T>::QW], qb[SU][split_fmt<T>::QW];
    float da[SU], ma[SU], db[SU], mb[SU];
};

template <int T>
__device__ __forceinline__ void pipe_load(const mv_args &a, const mv_pos &o, int64_t u0, pipe_round<T> &b)
{
    const cu_tensor &wa = a.w[a.glu ? 0 : o.i], &wb = a.w[a.glu ? 1 : o.i];
    const int64_t upr = wa.cols / 32;
    const size_t ba = (size_t)o.ra * (size_t)upr, bb = (size_t)(o.two ? o.rb : o.ra) * (size_t)upr;
    split_load<T, pipe_round<T>::SU>(wa, wb, ba, bb, o.two, u0, upr, b.qa, b.qb, b.da, b.ma, b.db, b.mb);
}

template <int T, int NB>
__global__ void __launch_bounds__(MV_WARPS * 32, MV_BLOCKS_PER_SM)
k_matvec_q8p(const mv_args a, const int8_t *__restrict__ qs, const float2 *__restrict__ ds, int n)
{
    constexpr int SU = pipe_round<T>::SU;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t stride = (int64_t)gridDim.x * MV_WARPS;
    int64_t p = (int64_t)blockIdx.x * MV_WARPS + warp;
    pdl_trigger();
    q8_prefetch<T>(a, p, lane);
    pdl_wait();
    mv_pos o;
    if (!mv_locate(a, p, o)) return; // the warp's pairs are p, p + stride, ...: none
    const int64_t upr = a.w[0].cols / 32; // one width per launch (cu_matvec_q8 checks)
    int64_t r0 = 0;
    pipe_round<T> cur;
    pipe_load<T>(a, o, r0 + lane, cur);
    float acc[2][NB];
#pragma unroll
    for (int t = 0; t < NB; t++) acc[0][t] = acc[1][t] = 0.0f;
    for (;;) {
        // the round after this one: this pair's next units, or the next pair's first
        const bool last = r0 + 32 * SU >= upr;
        mv_pos on = o;
        const int64_t rn = last ? 0 : r0 + 32 * SU;
        const bool more = !last || mv_locate(a, p + stride, on);
        pipe_round<T> nxt;
        if (more) pipe_load<T>(a, on, rn + lane, nxt);
#pragma unroll
        for (int k = 0; k < SU; k++) {
            const int64_t u = r0 + lane + 32 * k;
            if (u >= upr) break;
#pragma unroll
            for (int t = 0; t < NB; t++) {
                if (t < n) {
                    int xw[8];
                    const float2 xd = q8_x_unit(qs, ds, (size_t)t * (size_t)upr + (size_t)u, xw);
                    acc[0][t] += cur.da[k] * (xd.x * (float)q8_dot<T>(cur.qa[k], xw)) + cur.ma[k] * xd.y;
                    acc[1][t] += cur.db[k] * (xd.x * (float)q8_dot<T>(cur.qb[k], xw)) + cur.mb[k] * xd.y;
                }
            }
        }
        if (last) {
            mv_store<NB>(a, o, acc, n, lane);
#pragma unroll
            for (int t = 0; t < NB; t++) acc[0][t] = acc[1][t] = 0.0f;
            p += stride;
        }
        if (!more) break;
        o = on;
        r0 = rn;
        cur = nxt;
    }
}

// ---- the K-quants and IQ4 on int8 activations (GGUF layout) ----
// A lane owns unit u (32 elements: sub-block u % 8 of super-block u / 8) of
// both rows, as the split kernel does. Per unit the weights are integers
// times a sub-block scale (Q4_K/Q5_K: d * sc - dmin * mn; Q6_K: d * sc per 16,
// values offset by 32), so the products stay in integers (__dp4a on the
// nibbles, the fifth or the two high bits merged in) and one float step
// applies the scales, as in dq32's formulas. SU units per round. The same
// for Q2_K and Q3_K (2-bit quants, two scales per unit: Q2_K's mins and
// Q3_K's offset of 4 through sums of x per 16), IQ4_XS (one scale per unit)
// and IQ4_NL (a block per unit): their levels are looked up into int8 words.
template <int T> struct kq_fmt {
    static constexpr int B = T == CU_QT_Q4_K ? 144 : T == CU_QT_Q5_K ? 176 : T == CU_QT_Q6_K ? 210
                           : T == CU_QT_Q2_K ? 84 : T == CU_QT_Q3_K ? 110 : 136; // bytes per 256
    static constexpr int SU = 2;
};

// One unit of a K-quant row: its 8 words of 4 unsigned 6-bit-or-less values
// (element 4i + k in byte k of word i), and how to scale their dot product:
// sum = ds * dot + ms * sum(x) for Q4_K/Q5_K; Q6_K: two scales for 16 + 16
// elements (s0, s1, d folded in) and the offset of 32 taken off.
struct kq_unit {
    int w[8];
    float s0, s1, m, m1; // m1: Q2_K's second min (m the first)
};

template <int T>
__device__ __forceinline__ void kq_load(const cu_tensor &t, int64_t row, int64_t u, kq_unit &o)
{
    const uint8_t *blk = cu_row(t, row) + (size_t)(u / 8) * kq_fmt<T>::B;
    const int j = (int)(u % 8);
    if (T == CU_QT_Q4_K || T == CU_QT_Q5_K) {
        float dd, mm;
        cu_k_head(blk, j, dd, mm);
        const int shift = (j & 1) * 4;
        const uint4 *qp = (const uint4 *)(blk + (T == CU_QT_Q4_K ? 16 : 48) + 32 * (j / 2));
        const uint4 q0 = __ldg(qp), q1 = __ldg(qp + 1);
        const uint32_t q[8] = { q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w };
        uint32_t h[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };
        if (T == CU_QT_Q5_K) {
            const uint4 h0 = __ldg((const uint4 *)(blk + 16)), h1 = __ldg((const uint4 *)(blk + 32));
            const uint32_t hv[8] = { h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w };
#pragma unroll
            for (int i = 0; i < 8; i++) h[i] = ((hv[i] >> j) & 0x01010101u) << 4;
        }
#pragma unroll
        for (int i = 0; i < 8; i++) o.w[i] = (int)(((q[i] >> shift) & 0x0f0f0f0fu) | h[i]);
        o.s0 = o.s1 = dd;
        o.m = -mm;
    } else if (T == CU_QT_IQ4_NL || T == CU_QT_IQ4_XS) {
        uint32_t q[4];
        o.s0 = cu_iq4_load<T == CU_QT_IQ4_XS>(t, row, u, q);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            o.w[i] = (int)cu_iq4_lookup4(q[i] & 0x0f0f0f0fu);
            o.w[4 + i] = (int)cu_iq4_lookup4((q[i] >> 4) & 0x0f0f0f0fu);
        }
        o.s1 = o.s0;
        o.m = o.m1 = 0.0f;
    } else if (T == CU_QT_Q2_K || T == CU_QT_Q3_K) {
        // 2-bit quants at shift 2 (j % 4) of qs[32 (j / 4) + l]; Q3_K adds
        // bit j of hmask[l] as 4 (unsigned 0..7 here, the offset of 4 in kq_dot)
        const uint8_t *blk = cu_row(t, row) + (size_t)(u / 8) * kq_fmt<T>::B;
        const int j = (int)(u % 8), shift = 2 * (j % 4);
        const unsigned short *qp = (const unsigned short *)(blk + (T == CU_QT_Q2_K ? 16 : 32) + 32 * (j / 4));
        if (T == CU_QT_Q2_K) {
            const uint32_t dm = __ldg((const unsigned int *)(blk + 80));
            const float d = cu_h2f((uint16_t)(dm & 0xffffu)), dmin = cu_h2f((uint16_t)(dm >> 16));
            const uint32_t sc0 = __ldg(blk + 2 * j), sc1 = __ldg(blk + 2 * j + 1);
            o.s0 = d * (float)(sc0 & 15u);
            o.s1 = d * (float)(sc1 & 15u);
            o.m = dmin * (float)(sc0 >> 4);
            o.m1 = dmin * (float)(sc1 >> 4);
        } else {
            const float d = cu_h2f(__ldg((const unsigned short *)(blk + 108)));
            o.s0 = d * (float)cu_q3k_scale(blk + 96, 2 * j);
            o.s1 = d * (float)cu_q3k_scale(blk + 96, 2 * j + 1);
            o.m = o.m1 = 0.0f;
        }
#pragma unroll
        for (int i = 0; i < 8; i++) {
            // Q2_K's blocks are 4-aligned (84 bytes): one 32-bit load per word
            const uint32_t q4 = T == CU_QT_Q2_K ? __ldg((const unsigned int *)qp + i)
                                                : (uint32_t)__ldg(qp + 2 * i) | (uint32_t)__ldg(qp + 2 * i + 1) << 16;
            uint32_t v = (q4 >> shift) & 0x03030303u;
            if (T == CU_QT_Q3_K) {
                const unsigned short *hp = (const unsigned short *)blk;
                const uint32_t h4 = (uint32_t)__ldg(hp + 2 * i) | (uint32_t)__ldg(hp + 2 * i + 1) << 16;
                v |= ((h4 >> j) & 0x01010101u) << 2;
            }
            o.w[i] = (int)v;
        }
    } else { // Q6_K: ql[128], qh[64], scales[16], d; only 2-aligned: 16-bit loads
        const int hh = j / 4, k = j % 4;
        const unsigned short *ql = (const unsigned short *)(blk + 64 * hh + 32 * (k & 1));
        const unsigned short *qh = (const unsigned short *)(blk + 128 + 32 * hh);
        const float d = cu_h2f(__ldg((const unsigned short *)(blk + 208)));
        o.s0 = d * (float)(int8_t)__ldg(blk + 192 + 8 * hh + 2 * k);
        o.s1 = d * (float)(int8_t)__ldg(blk + 192 + 8 * hh + 2 * k + 1);
        o.m = 0.0f;
        const int lshift = k >= 2 ? 4 : 0, hshift = 2 * k;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t l4 = (uint32_t)__ldg(ql + 2 * i) | (uint32_t)__ldg(ql + 2 * i + 1) << 16;
            const uint32_t h4 = (uint32_t)__ldg(qh + 2 * i) | (uint32_t)__ldg(qh + 2 * i + 1) << 16;
            o.w[i] = (int)(((l4 >> lshift) & 0x0f0f0f0fu) | (((h4 >> hshift) & 0x03030303u) << 4));
        }
    }
}

// the unit's contribution for one token: xw its 8 words of int8 activations, xd {d, d * sum}
template <int T>
__device__ __forceinline__ float kq_dot(const kq_unit &q, const int *xw, float2 xd)
{
    if (T == CU_QT_Q2_K || T == CU_QT_Q3_K) {
        int a = 0, b = 0, xa = 0, xb = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            a = __dp4a(q.w[i], xw[i], a);
            b = __dp4a(q.w[4 + i], xw[4 + i], b);
            xa = __dp4a(0x01010101, xw[i], xa);
            xb = __dp4a(0x01010101, xw[4 + i], xb);
        }
        if (T == CU_QT_Q3_K) return xd.x * (q.s0 * (float)(a - 4 * xa) + q.s1 * (float)(b - 4 * xb));
        return xd.x * ((q.s0 * (float)a + q.s1 * (float)b) - (q.m * (float)xa + q.m1 * (float)xb));
    }
    if (T == CU_QT_Q6_K) {
        int a = 0, b = 0, xa = 0, xb = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            a = __dp4a(q.w[i], xw[i], a);
            b = __dp4a(q.w[4 + i], xw[4 + i], b);
            xa = __dp4a(0x01010101, xw[i], xa);
            xb = __dp4a(0x01010101, xw[4 + i], xb);
        }
        return xd.x * (q.s0 * (float)(a - 32 * xa) + q.s1 * (float)(b - 32 * xb));
    }
    int a = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) a = __dp4a(q.w[i], xw[i], a);
    return q.s0 * (xd.x * (float)a) + q.m * xd.y;
}

template <int T, int NB>
__global__ void __launch_bounds__(MV_WARPS * 32, MV_BLOCKS_PER_SM)
k_matvec_q8k(const mv_args a, const int8_t *__restrict__ qs, const float2 *__restrict__ ds, int n)
{
    constexpr int SU = kq_fmt<T>::SU;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t total = a.pair_end[a.nt - 1];
    pdl_trigger();
    {   // the first pair's rows on their way into L2 before the wait (see q8_prefetch)
        mv_pos o;
        if (mv_locate(a, (int64_t)blockIdx.x * MV_WARPS + warp, o)) {
            const cu_tensor &wa = a.w[a.glu ? 0 : o.i], &wb = a.w[a.glu ? 1 : o.i];
            prefetch_l2(cu_row(wa, o.ra), wa.row_bytes * (a.glu || !o.two ? 1 : 2), lane);
            if (a.glu) prefetch_l2(cu_row(wb, o.rb), wb.row_bytes, lane);
        }
    }
    pdl_wait();
    for (int64_t p = (int64_t)blockIdx.x * MV_WARPS + warp; p < total; p += (int64_t)gridDim.x * MV_WARPS) {
        mv_pos o;
        if (!mv_locate(a, p, o)) break;
        const cu_tensor &wa = a.w[a.glu ? 0 : o.i], &wb = a.w[a.glu ? 1 : o.i];
        const int64_t upr = wa.cols / 32;
        float acc[2][NB];
#pragma unroll
        for (int t = 0; t < NB; t++) acc[0][t] = acc[1][t] = 0.0f;
        for (int64_t u0 = lane; u0 < upr; u0 += 32 * SU) {
            kq_unit qa[SU], qb[SU];
#pragma unroll
            for (int k = 0; k < SU; k++) {
                const int64_t u = u0 + 32 * k;
                if (u < upr) {
                    kq_load<T>(wa, o.ra, u, qa[k]);
                    if (o.two) kq_load<T>(wb, o.rb, u, qb[k]);
                }
            }
#pragma unroll
            for (int k = 0; k < SU; k++) {
                const int64_t u = u0 + 32 * k;
                if (u >= upr) break;
#pragma unroll
                for (int t = 0; t < NB; t++) {
                    if (t < n) {
                        int xw[8];
                        const float2 xd = q8_x_unit(qs, ds, (size_t)t * (size_t)upr + (size_t)u, xw);
                        acc[0][t] += kq_dot<T>(qa[k], xw, xd);
                        if (o.two) acc[1][t] += kq_dot<T>(qb[k], xw, xd);
                    }
                }
            }
        }
        mv_store<NB>(a, o, acc, n, lane);
    }
}

// The q8 kernel's grid: a warp per row pair, one pass (default), or
// persistent (MV_BLOCKS_PER_SM blocks per SM, each warp walking its pairs
// and prefetching the next one's weights into L2 while it computes the
// current): the trip measures both (TERN_CUDA_MV_PERSIST).
static bool g_mv_persist = false;
extern "C" void cu_set_mv_persist(bool on) { g_mv_persist = on; }
static bool g_mv_pipe = false; // k_matvec_q8p for the split formats (TERN_CUDA_MV_PIPE)
extern "C" void cu_set_mv_pipe(bool on) { g_mv_pipe = on; }

template <int T> constexpr bool is_kquant()
{
    return T == CU_QT_Q4_K || T == CU_QT_Q5_K || T == CU_QT_Q6_K || T == CU_QT_Q2_K || T == CU_QT_Q3_K ||
           T == CU_QT_IQ4_NL || T == CU_QT_IQ4_XS;
}

// One launch of the q8 kernel for format T at NB tokens (the K-quants' own kernel).
template <int T, int NB>
static void mv_q8_go(const mv_args &a, const int8_t *qs, const float2 *ds, int32_t n, dim3 grid, dim3 block,
                     cudaStream_t st)
{
    if constexpr (is_kquant<T>()) CU_LAUNCH((k_matvec_q8k<T, NB>), grid, block, 0, st, a, qs, ds, n);
    else if (g_mv_pipe) CU_LAUNCH((k_matvec_q8p<T, NB>), grid, block, 0, st, a, qs, ds, n);
    else CU_LAUNCH((k_matvec_q8<T, NB>), grid, block, 0, st, a, qs, ds, n);
}

template <int T>
static cudaError_t mv_q8_launch(mv_args &a, const int8_t *qs, const float2 *ds, int32_t n, cudaStream_t st)
{
    static int sms = 0; // the device's SM count, asked once
    const int64_t pairs = a.pair_end[a.nt - 1];
    int64_t need = (pairs + MV_WARPS - 1) / MV_WARPS;
    const bool pipe = g_mv_pipe && !is_kquant<T>();
    if ((g_mv_persist || pipe) && sms == 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
            sms = -1;
        (void)cudaGetLastError();
    }
    a.pf = !is_kquant<T>() && g_mv_persist && sms > 0 && need > (int64_t)sms * MV_BLOCKS_PER_SM;
    if (a.pf) need = (int64_t)sms * MV_BLOCKS_PER_SM;
    // the pipelined kernel: at most the resident blocks, so a warp walks
    // several pairs and its next pair's loads overlap this one's tail
    if (pipe && sms > 0 && need > (int64_t)sms * MV_BLOCKS_PER_SM) need = (int64_t)sms * MV_BLOCKS_PER_SM;
    const dim3 grid((unsigned)need), block(MV_WARPS * 32);
    if (n <= 1) mv_q8_go<T, 1>(a, qs, ds, n, grid, block, st);
    else if (n <= 2) mv_q8_go<T, 2>(a, qs, ds, n, grid, block, st);
    else if (n <= 4) mv_q8_go<T, 4>(a, qs, ds, n, grid, block, st);
    else mv_q8_go<T, 8>(a, qs, ds, n, grid, block, st);
    return cudaGetLastError();
}

extern "C" cudaError_t cu_matvec_q8(const struct cu_tensor *const *w, float *const *y, int32_t count,
                                    int glu, const void *xq, int32_t n, cudaStream_t st)
{
    if (n < 1 || n > CU_MV_MAX_N || count < 1 || count > 3 || (glu && count != 2)) return cudaErrorInvalidValue;
    mv_args a = {};
    a.glu = glu;
    a.nt = glu ? 1 : count;
    for (int i = 0; i < count; i++) {
        if (w[i]->type != w[0]->type || w[i]->cols != w[0]->cols || w[i]->cols % 32 != 0)
            return cudaErrorInvalidValue;
        if (!glu && i + 1 < count && w[i]->rows % 2 != 0) return cudaErrorInvalidValue;
        a.w[i] = *w[i];
    }
    if (glu) {
        if (w[0]->rows != w[1]->rows) return cudaErrorInvalidValue;
        a.y[0] = y[0];
        a.pair_end[0] = w[0]->rows;
    } else {
        for (int i = 0; i < count; i++) {
            a.y[i] = y[i];
            a.pair_end[i] = (i ? a.pair_end[i - 1] : 0) + (w[i]->rows + 1) / 2;
        }
    }
    const int64_t nb = (int64_t)n * (w[0]->cols / 32);
    const int8_t *qs = (const int8_t *)xq;
    const float2 *ds = q8_scales((void *)xq, nb);
    switch (w[0]->type) {
    case CU_QT_Q4_0: return mv_q8_launch<CU_QT_Q4_0>(a, qs, ds, n, st);
    case CU_QT_Q4_1: return mv_q8_launch<CU_QT_Q4_1>(a, qs, ds, n, st);
    case CU_QT_Q8_0: return mv_q8_launch<CU_QT_Q8_0>(a, qs, ds, n, st);
    case CU_QT_Q4_K: return mv_q8_launch<CU_QT_Q4_K>(a, qs, ds, n, st);
    case CU_QT_Q5_K: return mv_q8_launch<CU_QT_Q5_K>(a, qs, ds, n, st);
    case CU_QT_Q6_K: return mv_q8_launch<CU_QT_Q6_K>(a, qs, ds, n, st);
    case CU_QT_Q2_K: return mv_q8_launch<CU_QT_Q2_K>(a, qs, ds, n, st);
    case CU_QT_Q3_K: return mv_q8_launch<CU_QT_Q3_K>(a, qs, ds, n, st);
    case CU_QT_IQ4_NL: return mv_q8_launch<CU_QT_IQ4_NL>(a, qs, ds, n, st);
    case CU_QT_IQ4_XS: return mv_q8_launch<CU_QT_IQ4_XS>(a, qs, ds, n, st);
    default: return cudaErrorInvalidValue;
    }
}
