/* emu/cublas_v2.h: the cuBLAS calls of engine/backend_cuda.c for the CPU
 * emulation (a plain GEMM over f16/bf16 inputs, f32 output). */
#ifndef TERN_EMU_CUBLAS_V2_H
#define TERN_EMU_CUBLAS_V2_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct emu_blas *cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7,
               CUBLAS_STATUS_NOT_SUPPORTED = 15 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType_t;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0 } cublasMath_t;

cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t st);
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m);
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType_t at,
                            int lda, const void *B, cudaDataType_t bt, int ldb, const void *beta,
                            void *C, cudaDataType_t ct, int ldc, cublasComputeType_t comp,
                            cublasGemmAlgo_t algo);

#ifdef __cplusplus
}
#endif

#endif
