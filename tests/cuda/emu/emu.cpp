// emu.cpp: the CPU stand-in for the CUDA runtime (see cuda_runtime_api.h).
// A launch runs its blocks one after another; the threads of a block are
// fibers (ucontext) switched at __syncthreads and warp shuffles, so the
// kernels' index math, bounds and synchronisation are exercised as written.
// A barrier that can never complete (a thread waiting while the others have
// exited or wait elsewhere) is reported as a launch failure.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <vector>

#include "cuda_fp16.h"

dim3 threadIdx, blockIdx, blockDim, gridDim;
void *emu_dyn_smem;

namespace {
enum { WAIT_NONE, WAIT_BLOCK, WAIT_WARP };
struct fiber {
    ucontext_t ctx;
    bool done;
    int wait;
};
const size_t STACK = 128 * 1024;
std::vector<fiber> fibers;
std::vector<char *> stacks;
ucontext_t sched;
int cur, n_threads;
std::function<void()> *body;
int block_arrived, block_alive;
std::vector<int> warp_arrived, warp_alive;
std::vector<float> warp_buf;
cudaError_t last_err = cudaSuccess;
bool failed;

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

void entry()
{
    (*body)();
    fibers[cur].done = true;
    block_alive--;
    warp_alive[cur / 32]--;
    check_release(cur / 32);
}

void wait_at(int kind)
{
    const int w = cur / 32;
    fibers[cur].wait = kind;
    if (kind == WAIT_BLOCK) block_arrived++;
    else warp_arrived[w]++;
    check_release(w);
    swapcontext(&fibers[cur].ctx, &sched);
}
} // namespace

void __syncthreads()
{
    wait_at(WAIT_BLOCK);
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

cudaError_t emu_launch(dim3 grid, dim3 block, size_t smem, std::function<void()> fn)
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
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                blockIdx = dim3(bx, by, bz);
                memset(dyn.data(), 0xcd, dyn.size()); // shared memory starts as garbage
                block_arrived = 0;
                block_alive = n;
                warp_alive.assign((n + 31) / 32, 0);
                for (int i = 0; i < n; i++) {
                    warp_alive[i / 32]++;
                    fibers[i].done = false;
                    fibers[i].wait = WAIT_NONE;
                    getcontext(&fibers[i].ctx);
                    fibers[i].ctx.uc_stack.ss_sp = stacks[i];
                    fibers[i].ctx.uc_stack.ss_size = STACK;
                    fibers[i].ctx.uc_link = &sched;
                    makecontext(&fibers[i].ctx, entry, 0);
                }
                int left = n;
                while (left > 0) {
                    bool progress = false;
                    left = 0;
                    for (int i = 0; i < n; i++) {
                        if (fibers[i].done) continue;
                        left++;
                        if (fibers[i].wait != WAIT_NONE) continue;
                        cur = i;
                        set_index(i);
                        swapcontext(&sched, &fibers[i].ctx);
                        progress = true;
                    }
                    if (left > 0 && !progress) {
                        fprintf(stderr, "emu: deadlock in block (%u,%u,%u): %d threads wait at a "
                                "barrier the others never reach\n", bx, by, bz, left);
                        failed = true;
                        return last_err = cudaErrorLaunchFailure;
                    }
                }
            }
    return cudaSuccess;
}

extern "C" {
cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev)
{
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "CPU emulation of device %d", dev);
    p->major = 9;
    p->totalGlobalMem = (size_t)1 << 32;
    return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t bytes)
{
    *p = aligned_alloc(256, (bytes + 255) & ~(size_t)255);
    if (!*p) return cudaErrorMemoryAllocation;
    memset(*p, 0xcd, bytes); // device memory starts as garbage
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
cudaError_t cudaMemcpy(void *d, const void *s, size_t b, enum cudaMemcpyKind) { memmove(d, s, b); return cudaSuccess; }
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t b, enum cudaMemcpyKind, cudaStream_t)
{
    memmove(d, s, b);
    return cudaSuccess;
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
