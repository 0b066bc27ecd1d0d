// matvec.cu: fused dequantize-and-multiply for decode, y[n][rows] = x[n][cols] . W^T
// with n <= CU_MV_MAX_N tokens. Bound by weight bandwidth: each weight byte
// is read once for the whole batch (the n activation rows are applied to the
// 32 weights a lane holds in registers). A warp owns 2 rows, lanes stride
// over 32-element units with 16-byte loads, partial sums end in a warp
// reduction; 4 warps (8 rows) per block.
#include "common.cuh"

#define MV_WARPS 4
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
};

template <int T, int NB>
__global__ void __launch_bounds__(MV_WARPS * 32, 4)
k_matvec(const mv_args a, const float *__restrict__ x, int n)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t p = (int64_t)blockIdx.x * MV_WARPS + warp;
    int i = 0;
    while (i < a.nt && p >= a.pair_end[i]) i++;
    if (i == a.nt) return; // past the last row; no block-level sync below
    const cu_tensor &wa = a.w[a.glu ? 0 : i], &wb = a.w[a.glu ? 1 : i];
    const int64_t local = p - (i ? a.pair_end[i - 1] : 0);
    const int64_t ra = a.glu ? local : 2 * local, rb = a.glu ? local : 2 * local + 1;
    const bool two = rb < wb.rows;
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
                const float4 *xp = (const float4 *)(x + (size_t)t * (size_t)wa.cols) + u * 8;
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    const float4 xv = __ldg(xp + e);
                    acc[0][t] += w0[4 * e] * xv.x + w0[4 * e + 1] * xv.y + w0[4 * e + 2] * xv.z +
                                 w0[4 * e + 3] * xv.w;
                    acc[1][t] += w1[4 * e] * xv.x + w1[4 * e + 1] * xv.y + w1[4 * e + 2] * xv.z +
                                 w1[4 * e + 3] * xv.w;
                }
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NB; t++) {
        if (t >= n) break;
        const float s0 = warp_sum(acc[0][t]);
        const float s1 = warp_sum(acc[1][t]);
        if (lane != 0) continue;
        if (a.glu) {
            a.y[0][(size_t)t * (size_t)wa.rows + ra] = cu_glu_act(s0, a.glu == 2) * s1;
        } else {
            float *y = a.y[i] + (size_t)t * (size_t)wa.rows;
            y[ra] = s0;
            if (two) y[rb] = s1;
        }
    }
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

template <int T, int NB>
__global__ void __launch_bounds__(MV_WARPS * 32, 4)
k_matvec_split(const mv_args a, const float *__restrict__ x, int n)
{
    constexpr int QW = split_fmt<T>::QW, SU = split_fmt<T>::SU;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t p = (int64_t)blockIdx.x * MV_WARPS + warp;
    int i = 0;
    while (i < a.nt && p >= a.pair_end[i]) i++;
    if (i == a.nt) return;
    const cu_tensor &wa = a.w[a.glu ? 0 : i], &wb = a.w[a.glu ? 1 : i];
    const int64_t local = p - (i ? a.pair_end[i - 1] : 0);
    const int64_t ra = a.glu ? local : 2 * local, rb = a.glu ? local : 2 * local + 1;
    const bool two = rb < wb.rows;
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
        // every load of this round first: SU x 2 rows in flight per lane
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
#pragma unroll
        for (int k = 0; k < SU; k++) {
            const int64_t u = u0 + 32 * k;
            if (u >= upr) break;
#pragma unroll
            for (int t = 0; t < NB; t++) {
                if (t < n) {
                    const float4 *xp = (const float4 *)(x + (size_t)t * (size_t)wa.cols) + u * 8;
                    float sa = 0.0f, sb = 0.0f, sx = 0.0f;
#pragma unroll
                    for (int e = 0; e < 8; e++) {
                        const float4 xv = __ldg(xp + e);
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
#pragma unroll
    for (int t = 0; t < NB; t++) {
        if (t >= n) break;
        const float s0 = warp_sum(acc[0][t]);
        const float s1 = warp_sum(acc[1][t]);
        if (lane != 0) continue;
        if (a.glu) {
            a.y[0][(size_t)t * (size_t)wa.rows + ra] = cu_glu_act(s0, a.glu == 2) * s1;
        } else {
            float *y = a.y[i] + (size_t)t * (size_t)wa.rows;
            y[ra] = s0;
            if (two) y[rb] = s1;
        }
    }
}

template <int T>
static cudaError_t mv_launch(const mv_args &a, const float *x, int32_t n, cudaStream_t st)
{
    const int64_t pairs = a.pair_end[a.nt - 1];
    const dim3 grid((unsigned)((pairs + MV_WARPS - 1) / MV_WARPS));
    const dim3 block(MV_WARPS * 32);
    if constexpr (T == CU_QT_Q4_0 || T == CU_QT_Q4_1 || T == CU_QT_Q8_0) {
        if (n <= 1) k_matvec_split<T, 1><<<grid, block, 0, st>>>(a, x, n);
        else if (n <= 2) k_matvec_split<T, 2><<<grid, block, 0, st>>>(a, x, n);
        else if (n <= 4) k_matvec_split<T, 4><<<grid, block, 0, st>>>(a, x, n);
        else k_matvec_split<T, 8><<<grid, block, 0, st>>>(a, x, n);
        return cudaGetLastError();
    } else {
    if (n <= 1) k_matvec<T, 1><<<grid, block, 0, st>>>(a, x, n);
    else if (n <= 2) k_matvec<T, 2><<<grid, block, 0, st>>>(a, x, n);
    else if (n <= 4) k_matvec<T, 4><<<grid, block, 0, st>>>(a, x, n);
    else {
        // 8 tokens x 2 rows of 32 dequantized weights spill k_matvec's
        // registers (the first trip: batch 8 took 5x batch 1's step): two
        // passes of 4 tokens read the weights twice instead
        k_matvec<T, 4><<<grid, block, 0, st>>>(a, x, 4);
        mv_args b = a;
        for (int j = 0; j < (a.glu ? 1 : a.nt); j++) b.y[j] += (size_t)4 * (size_t)a.w[j].rows;
        k_matvec<T, 4><<<grid, block, 0, st>>>(b, x + (size_t)4 * (size_t)a.w[0].cols, n - 4);
    }
    return cudaGetLastError();
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
    case CU_QT_Q6_K: return mv_launch<CU_QT_Q6_K>(a, x, n, st);
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
