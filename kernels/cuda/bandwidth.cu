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
