/* emu/cuda_runtime_api.h: a CPU stand-in for the parts of the CUDA runtime
 * tern's kernels and kernel tests use, so the kernels (rewritten from .cu to
 * C++ by emu/cu2cpp.py) run on a machine without a GPU: each CUDA thread is a
 * fiber, blocks run one after another, __syncthreads and warp shuffles are
 * barriers between the fibers of a block or warp. Memory is host memory. */
#ifndef TERN_EMU_CUDA_RUNTIME_API_H
#define TERN_EMU_CUDA_RUNTIME_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError {
    cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2,
    cudaErrorNoDevice = 100, cudaErrorInsufficientDriver = 35, cudaErrorStubLibrary = 34,
    cudaErrorLaunchFailure = 719
} cudaError_t;
typedef struct emu_stream *cudaStream_t;
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                      cudaMemcpyDeviceToDevice, cudaMemcpyDefault };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
struct cudaDeviceProp {
    char name[256];
    int major, minor;
    size_t totalGlobalMem;
};

typedef struct emu_graph *cudaGraph_t;
typedef struct emu_graph *cudaGraphExec_t;
enum { cudaStreamNonBlocking = 1 };
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                             cudaStreamCaptureModeRelaxed };

cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaGetDevice(int *dev);
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int dev);
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b);
cudaError_t cudaDeviceGetPCIBusId(char *buf, int len, int dev);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t st);
cudaError_t cudaStreamSynchronize(cudaStream_t st);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaStreamBeginCapture(cudaStream_t st, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t st);
typedef void *cudaGraphNode_t;
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev);
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind k,
                            cudaStream_t st);
/* height rows of width bytes, pitches apart; a width over either pitch is
 * refused as the runtime refuses it (cudaErrorInvalidPitchValue there). */
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind k,
                              cudaStream_t st);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);

#ifdef __cplusplus
}
#endif

#endif
