// matvec.cu: fused dequantize-and-multiply for decode, y[n][rows] = x[n][cols] . W^T
// with n <= CU_MV_MAX_N tokens. Bound by weight bandwidth: each weight byte
// is read once for the whole batch (the n activation rows are applied to the
// 32 weights a lane holds in registers). A warp owns 2 rows, lanes stride
// over 32-element units with 16-byte loads, partial sums end in a warp
// reduction; 4 warps (8 rows) per block.
#include "common.cuh"

#define MV_WARPS 4
#define MV_ROWS_PER_WARP 2

template <int T, int NB>
__global__ void __launch_bounds__(MV_WARPS * 32, 4)
k_matvec(const cu_tensor w, const float *__restrict__ x, int n, float *__restrict__ y)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t row0 = ((int64_t)blockIdx.x * MV_WARPS + warp) * MV_ROWS_PER_WARP;
    if (row0 >= w.rows) return; // no block-level sync below
    const bool two = row0 + 1 < w.rows;
    const int64_t n_units = w.cols / 32;
    float acc[MV_ROWS_PER_WARP][NB];
#pragma unroll
    for (int r = 0; r < MV_ROWS_PER_WARP; r++)
#pragma unroll
        for (int t = 0; t < NB; t++) acc[r][t] = 0.0f;

    for (int64_t u = lane; u < n_units; u += 32) {
        float w0[32], w1[32];
        dq32<T>(w, row0, u, w0);
        if (two) {
            dq32<T>(w, row0 + 1, u, w1);
        } else {
#pragma unroll
            for (int i = 0; i < 32; i++) w1[i] = 0.0f;
        }
#pragma unroll
        for (int t = 0; t < NB; t++) {
            if (t < n) {
                const float4 *xp = (const float4 *)(x + (size_t)t * (size_t)w.cols) + u * 8;
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
        if (lane == 0) {
            y[(size_t)t * (size_t)w.rows + row0] = s0;
            if (two) y[(size_t)t * (size_t)w.rows + row0 + 1] = s1;
        }
    }
}

template <int T>
static cudaError_t mv_launch(const cu_tensor &w, const float *x, int32_t n, float *y,
                             cudaStream_t st)
{
    const int64_t rows_per_block = MV_WARPS * MV_ROWS_PER_WARP;
    const dim3 grid((unsigned)((w.rows + rows_per_block - 1) / rows_per_block));
    const dim3 block(MV_WARPS * 32);
    if (n <= 1) k_matvec<T, 1><<<grid, block, 0, st>>>(w, x, n, y);
    else if (n <= 2) k_matvec<T, 2><<<grid, block, 0, st>>>(w, x, n, y);
    else if (n <= 4) k_matvec<T, 4><<<grid, block, 0, st>>>(w, x, n, y);
    else k_matvec<T, 8><<<grid, block, 0, st>>>(w, x, n, y);
    return cudaGetLastError();
}

extern "C" cudaError_t cu_matvec(const struct cu_tensor *w, const float *x, int32_t n, float *y,
                                 cudaStream_t st)
{
    if (n < 1 || n > CU_MV_MAX_N || w->cols % 32 != 0) return cudaErrorInvalidValue;
    switch (w->type) {
    case CU_QT_F32: return mv_launch<CU_QT_F32>(*w, x, n, y, st);
    case CU_QT_F16: return mv_launch<CU_QT_F16>(*w, x, n, y, st);
    case CU_QT_BF16: return mv_launch<CU_QT_BF16>(*w, x, n, y, st);
    case CU_QT_Q4_0: return mv_launch<CU_QT_Q4_0>(*w, x, n, y, st);
    case CU_QT_Q4_1: return mv_launch<CU_QT_Q4_1>(*w, x, n, y, st);
    case CU_QT_Q5_0: return mv_launch<CU_QT_Q5_0>(*w, x, n, y, st);
    case CU_QT_Q5_1: return mv_launch<CU_QT_Q5_1>(*w, x, n, y, st);
    case CU_QT_Q8_0: return mv_launch<CU_QT_Q8_0>(*w, x, n, y, st);
    case CU_QT_Q4_K: return mv_launch<CU_QT_Q4_K>(*w, x, n, y, st);
    case CU_QT_Q6_K: return mv_launch<CU_QT_Q6_K>(*w, x, n, y, st);
    default: return cudaErrorInvalidValue;
    }
}
