// dequant.cu: weights on the device: format table, repacking GGUF rows into
// the split layout at upload, synthetic weight generation (same bytes as the
// host generator), and tile-wise dequantization to f16/f32 (the workspace
// fed to cuBLAS for prefill and large batches). All bound by memory bandwidth.
#include "common.cuh"
#include "synth_gen.h"

#define CU_DISPATCH(type, F, ...)                                   \
    switch (type) {                                                 \
    case CU_QT_F32: return F<CU_QT_F32>(__VA_ARGS__);               \
    case CU_QT_F16: return F<CU_QT_F16>(__VA_ARGS__);               \
    case CU_QT_BF16: return F<CU_QT_BF16>(__VA_ARGS__);             \
    case CU_QT_Q4_0: return F<CU_QT_Q4_0>(__VA_ARGS__);             \
    case CU_QT_Q4_1: return F<CU_QT_Q4_1>(__VA_ARGS__);             \
    case CU_QT_Q5_0: return F<CU_QT_Q5_0>(__VA_ARGS__);             \
    case CU_QT_Q5_1: return F<CU_QT_Q5_1>(__VA_ARGS__);             \
    case CU_QT_Q8_0: return F<CU_QT_Q8_0>(__VA_ARGS__);             \
    case CU_QT_Q4_K: return F<CU_QT_Q4_K>(__VA_ARGS__);             \
    case CU_QT_Q5_K: return F<CU_QT_Q5_K>(__VA_ARGS__);             \
    case CU_QT_Q6_K: return F<CU_QT_Q6_K>(__VA_ARGS__);             \
    case CU_QT_Q2_K: return F<CU_QT_Q2_K>(__VA_ARGS__);             \
    case CU_QT_Q3_K: return F<CU_QT_Q3_K>(__VA_ARGS__);             \
    case CU_QT_IQ4_NL: return F<CU_QT_IQ4_NL>(__VA_ARGS__);         \
    case CU_QT_IQ4_XS: return F<CU_QT_IQ4_XS>(__VA_ARGS__);         \
    default: return cudaErrorInvalidValue;                          \
    }

struct cu_fmt {
    uint32_t type, block, bytes;
};
static const cu_fmt cu_fmts[] = {
    { CU_QT_F32, 1, 4 },    { CU_QT_F16, 1, 2 },    { CU_QT_BF16, 1, 2 },
    { CU_QT_Q4_0, 32, 18 }, { CU_QT_Q4_1, 32, 20 }, { CU_QT_Q5_0, 32, 22 },
    { CU_QT_Q5_1, 32, 24 }, { CU_QT_Q8_0, 32, 34 },
    { CU_QT_Q4_K, 256, 144 }, { CU_QT_Q5_K, 256, 176 }, { CU_QT_Q6_K, 256, 210 },
    { CU_QT_Q2_K, 256, 84 },  { CU_QT_Q3_K, 256, 110 }, { CU_QT_IQ4_NL, 32, 18 },
    { CU_QT_IQ4_XS, 256, 136 },
};

static const cu_fmt *cu_fmt_get(uint32_t type)
{
    for (const cu_fmt &f : cu_fmts)
        if (f.type == type) return &f;
    return nullptr;
}

extern "C" bool cu_type_supported(uint32_t type)
{
    return cu_fmt_get(type) != nullptr;
}

extern "C" int cu_layout_for(uint32_t type)
{
    return (type == CU_QT_Q4_0 || type == CU_QT_Q4_1 || type == CU_QT_Q8_0) ? CU_LAYOUT_SPLIT
                                                                            : CU_LAYOUT_GGUF;
}

extern "C" size_t cu_tensor_bytes(uint32_t type, int64_t rows, int64_t cols)
{
    const cu_fmt *f = cu_fmt_get(type);
    if (!f || cols % 32 != 0 || cols % f->block != 0) return 0;
    return (size_t)rows * (size_t)(cols / f->block) * f->bytes;
}

// ---- repack: one thread per 32-element block ----
template <int T>
__global__ void k_repack(cu_tensor t, const uint8_t *__restrict__ src, size_t b0, size_t n_blk)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_blk) return;
    const uint32_t bytes = T == CU_QT_Q4_0 ? 18 : T == CU_QT_Q4_1 ? 20 : 34;
    const uint8_t *b = src + i * bytes;
    const size_t bi = b0 + i;
    const int hdr = T == CU_QT_Q4_1 ? 4 : 2;
    if (T == CU_QT_Q4_1)
        ((uint32_t *)t.s)[bi] = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                                (uint32_t)b[3] << 24;
    else
        ((uint16_t *)t.s)[bi] = (uint16_t)(b[0] | b[1] << 8);
    const int nq = T == CU_QT_Q8_0 ? 2 : 1;
    for (int h = 0; h < nq; h++) {
        uint32_t w[4];
        for (int k = 0; k < 4; k++) {
            const uint8_t *p = b + hdr + 16 * h + 4 * k;
            w[k] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        }
        ((uint4 *)t.q)[bi * nq + h] = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

extern "C" cudaError_t cu_repack(const struct cu_tensor *t, const void *src, int64_t r0,
                                 int64_t rows, cudaStream_t st)
{
    if (t->layout == CU_LAYOUT_GGUF) {
        const size_t off = (size_t)r0 * t->row_bytes;
        return cudaMemcpyAsync((uint8_t *)t->q + off, src, (size_t)rows * t->row_bytes,
                               cudaMemcpyDeviceToDevice, st);
    }
    const size_t nb = (size_t)(t->cols / 32);
    const size_t n_blk = (size_t)rows * nb, b0 = (size_t)r0 * nb;
    if (n_blk == 0) return cudaSuccess;
    const unsigned grid = (unsigned)((n_blk + 255) / 256);
    const uint8_t *s = (const uint8_t *)src;
    switch (t->type) {
    case CU_QT_Q4_0: k_repack<CU_QT_Q4_0><<<grid, 256, 0, st>>>(*t, s, b0, n_blk); break;
    case CU_QT_Q4_1: k_repack<CU_QT_Q4_1><<<grid, 256, 0, st>>>(*t, s, b0, n_blk); break;
    case CU_QT_Q8_0: k_repack<CU_QT_Q8_0><<<grid, 256, 0, st>>>(*t, s, b0, n_blk); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

// ---- synthetic weights: one thread per generated block ----
__global__ void k_synth(uint8_t *dst, uint64_t seed, uint32_t tid, uint32_t type, bool is_norm,
                        uint64_t b0, uint64_t n_blk, uint32_t bb)
{
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_blk) return;
    uint8_t tmp[256];
    synth_gen_block(seed, tid, b0 + i, type, is_norm, tmp);
    for (uint32_t k = 0; k < bb; k++) dst[i * bb + k] = tmp[k];
}

extern "C" cudaError_t cu_synth_gen(void *dst, uint64_t seed, uint32_t tid, uint32_t type,
                                    bool is_norm, uint64_t b0, uint64_t n_blk, cudaStream_t st)
{
    const uint32_t bb = synth_block_bytes(type);
    if (bb == 0) return cudaErrorInvalidValue;
    if (n_blk == 0) return cudaSuccess;
    k_synth<<<(unsigned)((n_blk + 255) / 256), 256, 0, st>>>((uint8_t *)dst, seed, tid, type,
                                                               is_norm, b0, n_blk, bb);
    return cudaGetLastError();
}

// ---- dequantization: one thread per 32-element unit, 64/128-byte stores ----
template <int T, bool F16>
__global__ void k_dequant(const cu_tensor t, int64_t r0, size_t n_units, void *dst)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_units) return;
    const size_t upr = (size_t)(t.cols / 32);
    const int64_t row = r0 + (int64_t)(i / upr), u = (int64_t)(i % upr);
    float w[32];
    dq32<T>(t, row, u, w);
    if (F16) {
        uint4 *o = (uint4 *)dst + i * 4;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            uint32_t p[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const uint32_t lo = __half_as_ushort(__float2half_rn(w[8 * k + 2 * j]));
                const uint32_t hi = __half_as_ushort(__float2half_rn(w[8 * k + 2 * j + 1]));
                p[j] = lo | hi << 16;
            }
            o[k] = make_uint4(p[0], p[1], p[2], p[3]);
        }
    } else {
        float4 *o = (float4 *)dst + i * 8;
#pragma unroll
        for (int k = 0; k < 8; k++) o[k] = make_float4(w[4 * k], w[4 * k + 1], w[4 * k + 2], w[4 * k + 3]);
    }
}

template <int T>
static cudaError_t dq_launch(const cu_tensor &t, int64_t r0, int64_t rows, void *dst, bool f16,
                             cudaStream_t st)
{
    const size_t n_units = (size_t)rows * (size_t)(t.cols / 32);
    if (n_units == 0) return cudaSuccess;
    const unsigned grid = (unsigned)((n_units + 127) / 128);
    if (f16) k_dequant<T, true><<<grid, 128, 0, st>>>(t, r0, n_units, dst);
    else k_dequant<T, false><<<grid, 128, 0, st>>>(t, r0, n_units, dst);
    return cudaGetLastError();
}

extern "C" cudaError_t cu_dequant_f16(const struct cu_tensor *t, int64_t r0, int64_t rows,
                                      void *dst, cudaStream_t st)
{
    if (t->cols % 32 != 0) return cudaErrorInvalidValue;
    CU_DISPATCH(t->type, dq_launch, *t, r0, rows, dst, true, st)
}

extern "C" cudaError_t cu_dequant_f32(const struct cu_tensor *t, int64_t r0, int64_t rows,
                                      float *dst, cudaStream_t st)
{
    if (t->cols % 32 != 0) return cudaErrorInvalidValue;
    CU_DISPATCH(t->type, dq_launch, *t, r0, rows, dst, false, st)
}
