// bandwidth.cu: measured device memory bandwidth (device-to-device copy), the
// roofline that decode throughput is reported against. A copy reads and
// writes every byte, so GB/s counts 2 x bytes per copy.
#include <cuda_runtime.h>

#include "cuda_ops.h"

extern "C" cudaError_t cu_copy_bandwidth(size_t bytes, int reps, double *gbps)
{
    void *a = nullptr, *b = nullptr;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    float ms = 0.0f;
    cudaError_t e;
    *gbps = 0.0;
    if ((e = cudaMalloc(&a, bytes)) != cudaSuccess) goto done;
    if ((e = cudaMalloc(&b, bytes)) != cudaSuccess) goto done;
    if ((e = cudaMemset(a, 1, bytes)) != cudaSuccess) goto done;
    if ((e = cudaEventCreate(&e0)) != cudaSuccess) goto done;
    if ((e = cudaEventCreate(&e1)) != cudaSuccess) goto done;
    if ((e = cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice)) != cudaSuccess) goto done; // warm-up
    if ((e = cudaEventRecord(e0)) != cudaSuccess) goto done;
    for (int i = 0; i < reps; i++)
        if ((e = cudaMemcpyAsync(i & 1 ? a : b, i & 1 ? b : a, bytes, cudaMemcpyDeviceToDevice)) != cudaSuccess)
            goto done;
    if ((e = cudaEventRecord(e1)) != cudaSuccess) goto done;
    if ((e = cudaEventSynchronize(e1)) != cudaSuccess) goto done;
    if ((e = cudaEventElapsedTime(&ms, e0, e1)) != cudaSuccess) goto done;
    *gbps = 2.0 * (double)bytes * reps / (ms * 1e-3) / 1e9;
done:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return e;
}

// Read-only streaming: every thread sums 16-byte loads over a grid-stride
// loop, the access pattern decode's weight reads should reach. GB/s counts
// the bytes read once.
__global__ void k_read(const uint4 *__restrict__ p, size_t n, unsigned *sink)
{
    unsigned acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) *sink = acc; // keeps the loads; practically never taken
}

extern "C" cudaError_t cu_read_bandwidth(size_t bytes, int reps, double *gbps)
{
    void *a = nullptr;
    unsigned *sink = nullptr;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    float ms = 0.0f;
    int sms = 0, dev = 0;
    cudaError_t e;
    *gbps = 0.0;
    const size_t n = bytes / 16;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess) goto done;
    if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess) goto done;
    if ((e = cudaMalloc(&a, bytes)) != cudaSuccess) goto done;
    if ((e = cudaMalloc(&sink, sizeof *sink)) != cudaSuccess) goto done;
    if ((e = cudaMemset(a, 1, bytes)) != cudaSuccess) goto done;
    if ((e = cudaEventCreate(&e0)) != cudaSuccess) goto done;
    if ((e = cudaEventCreate(&e1)) != cudaSuccess) goto done;
    k_read<<<sms * 8, 512>>>((const uint4 *)a, n, sink); // warm-up
    if ((e = cudaEventRecord(e0)) != cudaSuccess) goto done;
    for (int i = 0; i < reps; i++) k_read<<<sms * 8, 512>>>((const uint4 *)a, n, sink);
    if ((e = cudaEventRecord(e1)) != cudaSuccess) goto done;
    if ((e = cudaEventSynchronize(e1)) != cudaSuccess) goto done;
    if ((e = cudaEventElapsedTime(&ms, e0, e1)) != cudaSuccess) goto done;
    *gbps = (double)bytes * reps / (ms * 1e-3) / 1e9;
done:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(sink);
    return e == cudaSuccess ? cudaGetLastError() : e;
}
