/* emu/cuda_fp16.h: device types and intrinsics of the CPU stand-in (see
 * emu/cuda_runtime_api.h); C++ only. */
#ifndef TERN_EMU_CUDA_FP16_H
#define TERN_EMU_CUDA_FP16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <functional>

#include "cuda_runtime_api.h"

#define TERN_CUDA_EMU 1
#define __global__
#define __device__
#define __host__
#define __align__(n) __attribute__((aligned(n)))
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

using std::max;
using std::min;

struct __half { uint16_t x; };
struct __nv_bfloat16 { uint16_t x; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{ a, b, c, d }; }
inline float4 make_float4(float a, float b, float c, float d) { return float4{ a, b, c, d }; }
struct alignas(8) float2 { float x, y; };
inline float2 make_float2(float a, float b) { return float2{ a, b }; }
/* four signed byte products added to c, as the instruction does */
inline int __dp4a(int a, int b, int c)
{
    for (int i = 0; i < 4; i++) c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
}
/* bytes of {y, x} picked by the low 3 bits of each of s's 4 low nibbles */
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s)
{
    const uint64_t v = (uint64_t)y << 32 | x;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
    return r;
}
inline int __float2int_rn(float v) { return (int)nearbyintf(v); } /* ties to even (default mode) */

inline float __half2float(__half h) { _Float16 f; memcpy(&f, &h.x, 2); return (float)f; }
inline __half __float2half_rn(float v) { _Float16 f = (_Float16)v; __half h; memcpy(&h.x, &f, 2); return h; }
inline __half __ushort_as_half(unsigned short u) { return __half{ u }; }
inline unsigned short __half_as_ushort(__half h) { return h.x; }
inline float __uint_as_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
inline __nv_bfloat16 __float2bfloat16_rn(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return __nv_bfloat16{ (uint16_t)(u >> 16) };
}
inline float __expf(float x) { return expf(x); }
inline float __fmul_rn(float a, float b) { return a * b; } /* (C++17 ISO mode: never contracted) */
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
template <class T> inline T __ldg(const T *p) { return *p; }

/* thread coordinates of the running fiber */
extern dim3 threadIdx, blockIdx, blockDim, gridDim;
extern void *emu_dyn_smem;
void __syncthreads();
void __syncwarp(unsigned mask = 0xffffffffu); /* a barrier of the warp's fibers */
float emu_shfl(float v, int lane_from_xor, bool is_xor);
float emu_warp_reduce(float v, bool is_max);
inline float __shfl_xor_sync(unsigned, float v, int o) { return emu_shfl(v, o, true); }
inline float __shfl_sync(unsigned, float v, int src) { return emu_shfl(v, src, false); }
cudaError_t emu_launch(dim3 grid, dim3 block, size_t smem, std::function<void()> body);
template <class F> inline cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) { return cudaSuccess; }


#endif
