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

template <int T>
static cudaError_t mv_launch(const mv_args &a, const float *x, int32_t n, cudaStream_t st)
{
    const int64_t pairs = a.pair_end[a.nt - 1];
    const dim3 grid((unsigned)((pairs + MV_WARPS - 1) / MV_WARPS));
    const dim3 block(MV_WARPS * 32);
    if (n <= 1) k_matvec<T, 1><<<grid, block, 0, st>>>(a, x, n);
    else if (n <= 2) k_matvec<T, 2><<<grid, block, 0, st>>>(a, x, n);
    else if (n <= 4) k_matvec<T, 4><<<grid, block, 0, st>>>(a, x, n);
    else k_matvec<T, 8><<<grid, block, 0, st>>>(a, x, n);
    return cudaGetLastError();
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
