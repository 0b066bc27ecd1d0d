/* matmul: y = x · Wᵀ for every weight type, with activations quantized to
 * 8 bits where that is faster, f32 accumulation, and run-time ISA dispatch
 * (AVX-512 VNNI / AVX2+FMA / portable scalar).
 *
 * W is (rows × cols) in GGML type `wtype`, row-major with cols contiguous
 * (GGUF ne[0] = cols). x is (n × cols) f32, y is (n × rows) f32. */
#ifndef TERN_MATMUL_H
#define TERN_MATMUL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu/cpu_isa.h"

struct threadpool;

/* Scratch for quantized activations; grows as needed, owned by the caller. */
struct mm_scratch {
    void *buf;
    size_t cap;
    void *xb;        /* x as bf16 tiles (AMX-BF16 prefill of F16 / BF16 weights) */
    size_t xb_cap;
    void *x8;        /* x as int8 tiles and per-token scales (W8A8 prefill) */
    size_t x8_cap;
    void *w8;        /* W8A8: each pool thread's strip buffers (mm_w8a8_work_bytes) */
    size_t w8_cap;
    /* Set by the owner: W8A8 prefill. With isa amx and from 32 tokens on,
     * packed Q4_0 / Q4_1 / Q5_0 / Q8_0 / Q4_K / Q6_K weights are requantized
     * per call to int8 with one scale per row and 256 columns (max|w| / 127
     * of the dequantized values) and x to int8 with one scale per token and
     * 256 columns, and multiplied on AMX int8 tiles (a change of numbers: not
     * the exact path's bits; decode, other types and ISAs keep it). */
    bool w8a8;
    /* cpu_avx512bf16(), asked once per scratch by cpu_matmul (0: not yet,
     * 1: yes, -1: no): with isa avx512 and from 32 tokens on, F16 / BF16
     * weights then run on vdpbf16ps (the AMX-BF16 path's numbers). */
    signed char avx512bf16;
};
void mm_scratch_free(struct mm_scratch *s);
/* Grows the scratch for up to n tokens of cols; false when out of memory.
 * Optional: cpu_matmul reserves on demand, and writes NaN to y when it cannot. */
bool mm_scratch_reserve(struct mm_scratch *s, int64_t n, int64_t cols);

/* Returns false when wtype is unsupported (caller reports the tensor). */
bool mm_supported(uint32_t wtype);
/* tp may be NULL (single thread). isa must not exceed cpu_isa_detect();
 * types without a kernel for isa fall back to the scalar kernel. cols must be
 * a multiple of the type's block size. w, x, y must not overlap. */
void cpu_matmul(struct threadpool *tp, enum cpu_isa isa, struct mm_scratch *scratch,
                uint32_t wtype, const void *w, int64_t rows, int64_t cols,
                const float *x, int64_t n, float *y);

/* Repacking for faster kernels: the rows of a weight matrix interleaved 8
 * at a time, with each block's 8 scales side by side, so one vector holds
 * two rows' quants and the scales need no gather. Same bytes in another
 * order (no precision change: results equal the plain layout's bit for bit).
 * mm_pack_size returns the bytes needed, or 0 when (isa, wtype, shape) has
 * no packed form (then use the plain weights). mm_pack fills out and returns
 * the packed type to pass as wtype, with out as w, to cpu_matmul(_multi)
 * under the same isa only. Packed: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K
 * and Q6_K on AVX2 / AVX-512, rows a multiple of 8 (K-quants: columns a
 * multiple of 256; packed Q4_K and Q5_K widen the 6-bit scales to bytes,
 * 2.8 % and 2.3 % larger). */
size_t mm_pack_size(enum cpu_isa isa, uint32_t wtype, int64_t rows, int64_t cols);
uint32_t mm_pack(enum cpu_isa isa, uint32_t wtype, const void *w, int64_t rows, int64_t cols,
                 void *out);

/* Row `row` of a packed matrix (ptype from mm_pack) in its plain layout
 * (row_bytes of the base type, written to out): lets a reader that needs
 * single rows, such as an embedding lookup on a tied output matrix, use the
 * packed copy instead of the file pages it replaced. */
void mm_unpack_row(uint32_t ptype, const void *w, int64_t cols, int64_t row, void *out);

/* Several matmuls that share x (q/k/v, gate/up): x is quantized once and
 * all rows go through one tp_run, which saves a pool sync per extra matrix.
 * Each op k computes ops[k].y (n × ops[k].rows) = x · W_kᵀ. Results are
 * identical to separate cpu_matmul calls. */
struct mm_op {
    uint32_t wtype;
    const void *w;   /* rows × cols, borrowed */
    int64_t rows;
    float *y;        /* n × rows */
};
void cpu_matmul_multi(struct threadpool *tp, enum cpu_isa isa, struct mm_scratch *scratch,
                      int n_ops, const struct mm_op *ops, int64_t cols,
                      const float *x, int64_t n);

#endif
