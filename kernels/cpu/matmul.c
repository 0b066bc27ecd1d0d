/* matmul: the dispatcher. Picks the kernel for (ISA, weight type), quantizes
 * the activations once per call, and splits output rows across the thread
 * pool. The arithmetic lives in mm_scalar.c / mm_avx2.c / mm_avx512.c. */
#include "cpu/matmul.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu/mm_impl.h"
#include "cpu/threadpool.h"

/* Rows are handed out in chunks of a multiple of this, so every kernel call
 * runs whole 8-row tiles. */
#define MM_ROW_ALIGN 8
/* Chunks per thread: threads claim chunks from a shared counter, so one
 * that the OS preempts (a shared machine) delays only its current chunk. */
#define MM_CHUNKS_PER_THREAD 4
/* From this many tokens on, quantizing x is itself split across threads. */
#define MM_PAR_QUANT_MIN_N 8

bool mm_supported(uint32_t wtype)
{
    return mm_scalar_kernel(wtype) != NULL;
}

void mm_scratch_free(struct mm_scratch *s)
{
    if (!s) return;
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}

/* Bytes per weight row; 0 for types without a kernel. */
static size_t row_bytes(uint32_t wtype, int64_t cols)
{
    switch (wtype) {
    case QT_F32: return (size_t)cols * 4;
    case QT_F16: case QT_BF16: return (size_t)cols * 2;
    case QT_Q8_0: return (size_t)cols / 32 * sizeof(block_q8_0);
    case QT_Q4_0: return (size_t)cols / 32 * sizeof(block_q4_0);
    case QT_Q4_1: return (size_t)cols / 32 * sizeof(block_q4_1);
    case QT_Q5_0: return (size_t)cols / 32 * sizeof(block_q5_0);
    case QT_Q5_1: return (size_t)cols / 32 * sizeof(block_q5_1);
    case QT_Q4_K: return (size_t)cols / QK_K * sizeof(block_q4_K);
    case QT_Q5_K: return (size_t)cols / QK_K * sizeof(block_q5_K);
    case QT_Q6_K: return (size_t)cols / QK_K * sizeof(block_q6_K);
    default: return 0;
    }
}

static mm_kernel_fn kernel_for(enum cpu_isa isa, uint32_t wtype)
{
    mm_kernel_fn k = NULL;
#ifdef __x86_64__   /* the SIMD libraries are built for x86-64 only */
    if (isa == CPU_ISA_AVX512) k = mm_avx512_kernel(wtype);
    else if (isa == CPU_ISA_AVX2) k = mm_avx2_kernel(wtype);
#else
    (void)isa;
#endif
    return k ? k : mm_scalar_kernel(wtype);
}

static mm_quant_fn quant_for(enum cpu_isa isa)
{
#ifdef __x86_64__   /* the SIMD libraries are built for x86-64 only */
    if (isa == CPU_ISA_AVX512) return mm_avx512_quant;
    if (isa == CPU_ISA_AVX2) return mm_avx2_quant;
#else
    (void)isa;
#endif
    return mm_scalar_quant;
}

/* Lays out struct mm_xq in the scratch buffer (64-byte aligned parts). */
static size_t xq_parts(int64_t n, int64_t cols, size_t *qs_bytes, size_t *d_bytes)
{
    *qs_bytes = ((size_t)(n * cols) + 63) & ~(size_t)63;
    *d_bytes = ((size_t)(n * (cols / 32)) * 4 + 63) & ~(size_t)63;
    return *qs_bytes + 2 * *d_bytes + 64;
}

bool mm_scratch_reserve(struct mm_scratch *s, int64_t n, int64_t cols)
{
    size_t qs_bytes, d_bytes, need = xq_parts(n, cols, &qs_bytes, &d_bytes);
    if (s->cap >= need) return true;
    free(s->buf);
    s->buf = malloc(need);
    s->cap = s->buf ? need : 0;
    return s->buf != NULL;
}

static bool xq_reserve(struct mm_scratch *s, int64_t n, int64_t cols, struct mm_xq *xq)
{
    int64_t nb = cols / 32;
    size_t qs_bytes, d_bytes;
    xq_parts(n, cols, &qs_bytes, &d_bytes);
    if (!mm_scratch_reserve(s, n, cols)) return false;
    uint8_t *p = (uint8_t *)(((uintptr_t)s->buf + 63) & ~(uintptr_t)63);
    xq->qs = (int8_t *)p;
    xq->d = (float *)(p + qs_bytes);
    xq->sum = (int32_t *)(p + qs_bytes + d_bytes);
    xq->nb = nb;
    return true;
}

struct mm_job {
    struct mm_task t;
    mm_kernel_fn kernel;
    mm_quant_fn quant;
    int64_t chunk;          /* rows per claim */
    atomic_llong next_row;  /* first unclaimed row */
};

static void range_for(int64_t total, int64_t align, int ith, int nth, int64_t *lo, int64_t *hi)
{
    int64_t per = (total + nth - 1) / nth;
    per = (per + align - 1) / align * align;
    *lo = per * ith < total ? per * ith : total;
    *hi = *lo + per < total ? *lo + per : total;
}

static void quant_tokens(const struct mm_job *job, int64_t j0, int64_t j1)
{
    const struct mm_task *t = &job->t;
    for (int64_t j = j0; j < j1; j++)
        job->quant(t->x + j * t->cols, t->cols, t->xq.qs + j * t->cols,
                   t->xq.d + j * t->xq.nb, t->xq.sum + j * t->xq.nb);
}

static void quant_worker(void *arg, int ith, int nth)
{
    const struct mm_job *job = arg;
    int64_t lo, hi;
    range_for(job->t.n, 1, ith, nth, &lo, &hi);
    quant_tokens(job, lo, hi);
}

static void mm_worker(void *arg, int ith, int nth)
{
    struct mm_job *job = arg;
    (void)ith; (void)nth;
    for (;;) {
        int64_t lo = atomic_fetch_add_explicit(&job->next_row, job->chunk, memory_order_relaxed);
        if (lo >= job->t.rows) break;
        int64_t hi = lo + job->chunk < job->t.rows ? lo + job->chunk : job->t.rows;
        job->kernel(&job->t, lo, hi);
    }
}

void cpu_matmul(struct threadpool *tp, enum cpu_isa isa, struct mm_scratch *scratch,
                uint32_t wtype, const void *w, int64_t rows, int64_t cols,
                const float *x, int64_t n, float *y)
{
    struct mm_job job = {
        .t = { .wtype = wtype, .w = w, .row_bytes = row_bytes(wtype, cols),
               .rows = rows, .cols = cols, .n = n, .x = x, .y = y },
        .kernel = kernel_for(isa, wtype),
        .quant = quant_for(isa),
    };
    if (!job.kernel || n <= 0 || rows <= 0) return;
    if (mm_wants_xq(wtype)) {
        if (!scratch || !xq_reserve(scratch, n, cols, &job.t.xq)) {
            /* Out of memory: make the failure visible downstream rather
             * than leaving stale numbers (mm_scratch_reserve reports it). */
            for (int64_t i = 0; i < n * rows; i++) y[i] = NAN;
            return;
        }
        if (n >= MM_PAR_QUANT_MIN_N && tp_n_threads(tp) > 1) tp_run(tp, quant_worker, &job);
        else quant_tokens(&job, 0, n);
    }
    int nth = tp_n_threads(tp);
    job.chunk = (rows + (int64_t)nth * MM_CHUNKS_PER_THREAD - 1) / ((int64_t)nth * MM_CHUNKS_PER_THREAD);
    job.chunk = (job.chunk + MM_ROW_ALIGN - 1) / MM_ROW_ALIGN * MM_ROW_ALIGN;
    if (nth == 1) job.chunk = rows;
    atomic_init(&job.next_row, 0);
    tp_run(tp, mm_worker, &job);
}
