// emu.cpp: the CPU stand-in for the CUDA runtime (see cuda_runtime_api.h).
// A launch runs its blocks one after another; the threads of a block are
// fibers (ucontext) switched at __syncthreads and warp shuffles, so the
// kernels' index math, bounds and synchronisation are exercised as written.
// A barrier that can never complete (a thread waiting while the others have
// exited or wait elsewhere) is reported as a launch failure.
#undef _FORTIFY_SOURCE /* longjmp between fiber stacks is intended */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <vector>

#include "cublas_v2.h"
#include "cuda_fp16.h"

dim3 threadIdx, blockIdx, blockDim, gridDim;
void *emu_dyn_smem;

namespace {
enum { WAIT_NONE, WAIT_BLOCK, WAIT_WARP, WAIT_END };
struct fiber {
    ucontext_t ctx;
    jmp_buf jb;
    bool started, done;
    int wait;
};
const size_t STACK = 128 * 1024;
std::vector<fiber> fibers;
std::vector<char *> stacks;
jmp_buf sched_jb;
/* stream capture: launches recorded instead of run (CUDA graphs) */
bool capturing;
std::vector<std::function<void()>> *recording;
int cur, n_threads;
std::function<void()> *body;
int block_arrived, block_alive;
std::vector<int> warp_arrived, warp_alive;
std::vector<float> warp_buf;
cudaError_t last_err = cudaSuccess;
bool failed;
bool last_block; // the block running is the launch's last

void set_index(int i)
{
    threadIdx.x = (unsigned)i % blockDim.x;
    threadIdx.y = ((unsigned)i / blockDim.x) % blockDim.y;
    threadIdx.z = (unsigned)i / (blockDim.x * blockDim.y);
}

void release(int kind, int warp)
{
    for (int i = 0; i < n_threads; i++)
        if (fibers[i].wait == kind && (kind == WAIT_BLOCK || i / 32 == warp)) fibers[i].wait = WAIT_NONE;
    if (kind == WAIT_BLOCK) block_arrived = 0;
    else warp_arrived[warp] = 0;
}

void check_release(int warp)
{
    if (block_arrived > 0 && block_arrived == block_alive) release(WAIT_BLOCK, 0);
    if (warp_arrived[warp] > 0 && warp_arrived[warp] == warp_alive[warp]) release(WAIT_WARP, warp);
}

// A fiber runs the kernel once per block; between blocks it waits at END
// (counted as exited for the barriers of the block still running).
void entry()
{
    for (;;) {
        (*body)();
        const bool last = last_block;
        block_alive--;
        warp_alive[cur / 32]--;
        check_release(cur / 32);
        fibers[cur].wait = WAIT_END;
        if (!_setjmp(fibers[cur].jb)) _longjmp(sched_jb, 1);
        if (last) break;
    }
    fibers[cur].done = true;
    _longjmp(sched_jb, 1);
}

void wait_at(int kind)
{
    const int w = cur / 32;
    fibers[cur].wait = kind;
    if (kind == WAIT_BLOCK) block_arrived++;
    else warp_arrived[w]++;
    check_release(w);
    if (!_setjmp(fibers[cur].jb)) _longjmp(sched_jb, 1);
}
} // namespace

void __syncthreads()
{
    wait_at(WAIT_BLOCK);
}

void __syncwarp(unsigned mask)
{
    (void)mask;
    wait_at(WAIT_WARP);
}

float emu_shfl(float v, int x, bool is_xor)
{
    const int w = cur / 32, lane = cur % 32;
    warp_buf[cur] = v;
    wait_at(WAIT_WARP);
    const int src = is_xor ? (lane ^ x) : x;
    const float r = (src >= 0 && src < 32 && w * 32 + src < n_threads) ? warp_buf[w * 32 + src] : v;
    wait_at(WAIT_WARP);
    return r;
}

static cudaError_t run_launch(dim3 grid, dim3 block, size_t smem, std::function<void()> fn);

// The butterfly's result (same pairing order) for every lane, in one exchange.
float emu_warp_reduce(float v, bool is_max)
{
    // a + b == b + a, so after each butterfly stage partners hold equal
    // values and every lane ends with the same result: compute it once
    static std::vector<float> result;
    static std::vector<char> done;
    const int w = cur / 32;
    if ((int)result.size() <= w) {
        result.resize((size_t)w + 1);
        done.resize((size_t)w + 1);
    }
    warp_buf[cur] = v;
    done[w] = 0;
    wait_at(WAIT_WARP);
    if (!done[w]) {
        float t[32];
        for (int l = 0; l < 32; l++) t[l] = w * 32 + l < n_threads ? warp_buf[w * 32 + l] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) {
            float u[32];
            for (int l = 0; l < 32; l++) u[l] = is_max ? fmaxf(t[l], t[l ^ o]) : t[l] + t[l ^ o];
            memcpy(t, u, sizeof t);
        }
        result[w] = t[0];
        done[w] = 1;
    }
    const float r = result[w];
    wait_at(WAIT_WARP);
    return r;
}

cudaError_t emu_launch(dim3 grid, dim3 block, size_t smem, std::function<void()> fn)
{
    if (capturing) {
        recording->push_back([=]() { run_launch(grid, block, smem, fn); });
        return cudaSuccess;
    }
    return run_launch(grid, block, smem, fn);
}

// Runs fiber i until it waits or ends. The first time starts it on its own
// stack (setcontext); later switches are _setjmp/_longjmp, no system calls.
__attribute__((noinline)) static void resume(int i)
{
    cur = i;
    set_index(i);
    if (_setjmp(sched_jb)) return; // back from the fiber
    fiber &f = fibers[cur];
    if (f.started) _longjmp(f.jb, 1);
    f.started = true;
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = stacks[cur];
    f.ctx.uc_stack.ss_size = STACK;
    f.ctx.uc_link = nullptr; // entry leaves by _longjmp
    makecontext(&f.ctx, entry, 0);
    setcontext(&f.ctx);
}

static cudaError_t run_launch(dim3 grid, dim3 block, size_t smem, std::function<void()> fn)
{
    const int n = (int)(block.x * block.y * block.z);
    if (n < 1 || n > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 || smem > 227 * 1024) {
        fprintf(stderr, "emu: bad launch grid (%u,%u,%u) block (%u,%u,%u) smem %zu\n", grid.x,
                grid.y, grid.z, block.x, block.y, block.z, smem);
        return last_err = cudaErrorInvalidValue;
    }
    while ((int)stacks.size() < n) stacks.push_back((char *)malloc(STACK));
    fibers.resize(n);
    warp_arrived.assign((n + 31) / 32, 0);
    warp_buf.assign((size_t)((n + 31) / 32) * 32, 0.0f);
    std::vector<char> dyn(smem + 16);
    emu_dyn_smem = dyn.data();
    body = &fn;
    gridDim = grid;
    blockDim = block;
    n_threads = n;
    for (int i = 0; i < n; i++) {
        fibers[i].done = false;
        fibers[i].started = false;
        fibers[i].wait = WAIT_NONE;
    }
    const uint64_t total = (uint64_t)grid.x * grid.y * grid.z;
    // fibers live for the whole launch and run the blocks one after another
    for (uint64_t blk = 0; blk < total; blk++) {
        blockIdx = dim3((unsigned)(blk % grid.x), (unsigned)(blk / grid.x % grid.y),
                        (unsigned)(blk / ((uint64_t)grid.x * grid.y)));
        memset(dyn.data(), 0xcd, dyn.size()); // shared memory starts as garbage
        block_arrived = 0;
        block_alive = n;
        warp_alive.assign((n + 31) / 32, 0);
        for (int i = 0; i < n; i++) {
            warp_alive[i / 32]++;
            fibers[i].wait = WAIT_NONE;
        }
        last_block = blk + 1 == total;
        for (;;) {
            bool progress = false;
            int at_end = 0;
            for (int i = 0; i < n; i++) {
                if (fibers[i].done || fibers[i].wait == WAIT_END) {
                    at_end++;
                    continue;
                }
                if (fibers[i].wait != WAIT_NONE) continue;
                resume(i);
                progress = true;
            }
            if (at_end == n) break;
            if (!progress) {
                fprintf(stderr, "emu: deadlock in block (%u,%u,%u): %d threads wait at a "
                        "barrier the others never reach\n", blockIdx.x, blockIdx.y, blockIdx.z,
                        n - at_end);
                failed = true;
                // abandon the fibers: their stacks are reused by the next launch
                return last_err = cudaErrorLaunchFailure;
            }
        }
    }
    // let the fibers leave their loop so the next launch starts them afresh
    for (int i = 0; i < n; i++)
        if (!fibers[i].done) {
            fibers[i].wait = WAIT_NONE;
            resume(i);
        }
    return cudaSuccess;
}

extern "C" {
cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
/* The emulation says it is CUDA 13.0 (the GPU image's). */
cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev)
{
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "CPU emulation of device %d", dev);
    p->major = 9;
    p->totalGlobalMem = (size_t)1 << 32;
    return cudaSuccess;
}
/* Every allocation is followed by guard bytes, checked when it is freed, so a
 * kernel or test writing past the end of a buffer fails here as it does under
 * compute-sanitizer on a GPU (the GLU test once wrote 16 rows into 13). */
#define EMU_GUARD 256
static const unsigned char emu_canary = 0xa5;
cudaError_t cudaMalloc(void **p, size_t bytes)
{
    const size_t body = (bytes + 255) & ~(size_t)255;
    unsigned char *base = (unsigned char *)aligned_alloc(256, 256 + body + EMU_GUARD);
    if (!base) return cudaErrorMemoryAllocation;
    memcpy(base, &bytes, sizeof bytes);
    *p = base + 256;
    memset(*p, 0xcd, bytes); // device memory starts as garbage
    memset((unsigned char *)*p + bytes, emu_canary, body - bytes + EMU_GUARD);
    return cudaSuccess;
}
cudaError_t cudaFree(void *p)
{
    if (!p) return cudaSuccess;
    unsigned char *base = (unsigned char *)p - 256;
    size_t bytes;
    memcpy(&bytes, base, sizeof bytes);
    const size_t body = (bytes + 255) & ~(size_t)255;
    for (size_t i = bytes; i < body + EMU_GUARD; i++)
        if (((unsigned char *)p)[i] != emu_canary) {
            fprintf(stderr, "emu: write %zu bytes past the end of a cudaMalloc of %zu bytes\n", i - bytes + 1, bytes);
            abort();
        }
    free(base);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *d, const void *s, size_t b, enum cudaMemcpyKind) { memmove(d, s, b); return cudaSuccess; }
cudaError_t cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,
                              enum cudaMemcpyKind, cudaStream_t)
{
    if (w > dp || w > sp) return cudaErrorInvalidValue;
    auto copy = [=]() {
        for (size_t r = 0; r < h; r++) memmove((char *)d + r * dp, (const char *)s + r * sp, w);
    };
    if (capturing) recording->push_back(copy);
    else copy();
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t b, enum cudaMemcpyKind, cudaStream_t)
{
    if (capturing) {
        recording->push_back([=]() { memmove(d, s, b); });
        return cudaSuccess;
    }
    memmove(d, s, b);
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int dev) { return dev == 0 ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaMemGetInfo(size_t *f, size_t *t)
{
    *f = (size_t)3 << 30;
    *t = (size_t)4 << 30;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetPCIBusId(char *buf, int len, int) { snprintf(buf, (size_t)len, "emu"); return cudaErrorInvalidValue; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned) { *st = (cudaStream_t)1; return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return failed ? cudaErrorLaunchFailure : cudaSuccess; }
cudaError_t cudaMallocHost(void **p, size_t bytes) { return cudaMalloc(p, bytes); }
cudaError_t cudaFreeHost(void *p) { return cudaFree(p); }
struct emu_graph {
    std::vector<std::function<void()>> ops;
};
cudaError_t cudaStreamBeginCapture(cudaStream_t, enum cudaStreamCaptureMode)
{
    if (capturing) return cudaErrorInvalidValue;
    capturing = true;
    recording = new std::vector<std::function<void()>>();
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t *g)
{
    if (!capturing) return cudaErrorInvalidValue;
    capturing = false;
    *g = new emu_graph{ std::move(*recording) };
    delete recording;
    recording = nullptr;
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long)
{
    *e = new emu_graph{ g->ops };
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t)
{
    for (auto &op : e->ops) op();
    return failed ? cudaErrorLaunchFailure : cudaSuccess;
}
cudaError_t cudaGetDevice(int *dev)
{
    *dev = 0;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int)
{
    if (attr != cudaDevAttrMultiProcessorCount) return cudaErrorInvalidValue;
    *value = 4;
    return cudaSuccess;
}
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n)
{
    if (nodes) return cudaErrorInvalidValue; /* only the count is asked for */
    *n = g->ops.size();
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete g; return cudaSuccess; }
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) { delete e; return cudaSuccess; }

struct emu_blas {
    int unused;
};
cublasStatus_t cublasCreate(cublasHandle_t *h) { *h = new emu_blas{ 0 }; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDestroy(cublasHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetWorkspace(cublasHandle_t, void *, size_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }

static float emu_half_at(const void *p, cudaDataType_t t, size_t i)
{
    uint16_t u;
    memcpy(&u, (const uint8_t *)p + 2 * i, 2);
    if (t == CUDA_R_16BF) return __uint_as_float((uint32_t)u << 16);
    return __half2float(__ushort_as_half(u));
}

/* C (m x n, column-major, ldc) = alpha op(A) op(B) + beta C, the cuBLAS convention */
static void emu_gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                     const void *A, cudaDataType_t at, int lda, const void *B, cudaDataType_t bt,
                     int ldb, float beta, float *C, int ldc)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int l = 0; l < k; l++) {
                const size_t ai = ta == CUBLAS_OP_T ? (size_t)l + (size_t)i * lda : (size_t)i + (size_t)l * lda;
                const size_t bi = tb == CUBLAS_OP_N ? (size_t)l + (size_t)j * ldb : (size_t)j + (size_t)l * ldb;
                s += (double)emu_half_at(A, at, ai) * emu_half_at(B, bt, bi);
            }
            float *c = C + (size_t)i + (size_t)j * ldc;
            *c = alpha * (float)s + (beta != 0.0f ? beta * *c : 0.0f);
        }
}

cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType_t at,
                            int lda, const void *B, cudaDataType_t bt, int ldb, const void *beta,
                            void *C, cudaDataType_t ct, int ldc, cublasComputeType_t, cublasGemmAlgo_t)
{
    if (ct != CUDA_R_32F || at != bt || (at != CUDA_R_16F && at != CUDA_R_16BF) || m < 0 || n < 0 || k < 0)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if ((ta == CUBLAS_OP_T ? lda < k : lda < m) || (tb == CUBLAS_OP_N ? ldb < k : ldb < n) || ldc < m)
        return CUBLAS_STATUS_INVALID_VALUE;
    const float al = *(const float *)alpha, be = *(const float *)beta;
    float *c = (float *)C;
    if (capturing) {
        recording->push_back([=]() { emu_gemm(ta, tb, m, n, k, al, A, at, lda, B, bt, ldb, be, c, ldc); });
        return CUBLAS_STATUS_SUCCESS;
    }
    emu_gemm(ta, tb, m, n, k, al, A, at, lda, B, bt, ldb, be, c, ldc);
    return CUBLAS_STATUS_SUCCESS;
}
cudaError_t cudaDeviceSynchronize(void) { return failed ? cudaErrorLaunchFailure : cudaSuccess; }
cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_err;
    last_err = cudaSuccess;
    return e;
}
const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorLaunchFailure: return "unspecified launch failure (emulated deadlock)";
    default: return "emulated error";
    }
}
cudaError_t cu_copy_bandwidth(size_t, int, double *gbps)
{
    *gbps = 0;
    return cudaErrorInvalidValue; // nothing to measure on the CPU
}
}
