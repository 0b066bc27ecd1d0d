/* bench_matmul: cpu_matmul speed per weight type, shape, token count, ISA
 * and thread count, in GB/s of weights read and GOP/s (2·rows·cols·n), plus
 * the machine's streaming-read bandwidth (the decode roofline: plain, and
 * with the decode kernels' software prefetch; the higher is the bound) and the
 * fixed cost of one tp_run / one tiny matmul. Decode cases cycle through
 * enough copies of the weights (≥ 256 MiB) that each call reads from DRAM,
 * as a forward pass does. Built, not registered as a test:
 *   bench_matmul [-t THREADS] [-s SECONDS_PER_CASE] [-f FILTER] [-c 1 (weights hot in cache)]
 *                [-n TOKENS (one token count)] [-p 1 (packed weights only)]
 *                [-w 1 (amx: also the W8A8 int8 prefill, mm_scratch.w8a8; prefill
 *                 lines then show % of the int8 peak measured in the same run)]
 *   bench_matmul -m smollm2|gemma3|NAME [-t THREADS] [-n 1|512]   (whole-model matmul pass;
 *                NAME a substring of the models[] names, e.g. -m smollm2-135m-f16) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

#include "cpu/limits.h"
#include "cpu/matmul.h"
#include "cpu/mm_impl.h"
#include "cpu/threadpool.h"
#include "mm_testdata.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct bench_case {
    const char *what;
    uint32_t wtype;
    int64_t rows, cols;
};

static const struct bench_case cases[] = {
    { "smollm2 ffn_up/gate", QT_Q4_1, 1536, 576 },
    { "smollm2 ffn_down", QT_Q4_1, 576, 1536 },
    { "smollm2 attn_q/o", QT_Q4_1, 576, 576 },
    { "smollm2 output", QT_Q8_0, 49152, 576 },
    { "gemma3 ffn_up/gate", QT_Q5_0, 2048, 640 },
    { "gemma3 ffn_down", QT_Q4_K, 640, 2048 },
    { "gemma3 ffn_down", QT_Q6_K, 640, 2048 },
    { "gemma3 output/64k", QT_Q8_0, 65536, 640 },
    { "q4_0 1536x576", QT_Q4_0, 1536, 576 },
    { "llama1b ffn_up", QT_Q4_0, 8192, 2048 },
    { "llama1b ffn_down", QT_Q4_0, 2048, 8192 },
    { "llama1b ffn_up", QT_Q4_K, 8192, 2048 },
    { "llama1b ffn_down", QT_Q6_K, 2048, 8192 },
    /* the output matrix of Llama 3.2 1B Q4_0 / Q4_K_M: 215 MB, a quarter of a decode step */
    { "llama1b output", QT_Q6_K, 128256, 2048 },
    { "llama1b attn_v", QT_Q8_0, 512, 2048 },
    { "q5_1 1536x576", QT_Q5_1, 1536, 576 },
    { "q5_K 640x2048", QT_Q5_K, 640, 2048 },
    { "f16 1536x576", QT_F16, 1536, 576 },
    /* the 1B shape's FFN in F16: AMX-BF16 tiles against the f32 FMA path */
    { "llama1b-f16 ffn_up", QT_F16, 8192, 2048 },
    { "llama1b-f16 ffn_down", QT_F16, 2048, 8192 },
    { "bf16 1536x576", QT_BF16, 1536, 576 },
    { "f32 1536x576", QT_F32, 1536, 576 },
    /* mm_lowbit: Qwen3-30B-A3B expert widths (n_embd 2048, expert ff 768) */
    { "q2_K expert up 768x2048", QT_Q2_K, 768, 2048 },
    { "q3_K expert up 768x2048", QT_Q3_K, 768, 2048 },
    { "iq4_xs expert up 768x2048", QT_IQ4_XS, 768, 2048 },
    { "iq4_nl expert up 768x2048", QT_IQ4_NL, 768, 2048 },
    /* the packed Q4_K kernel on the same shape: the low-bit kernels' yardstick */
    { "q4_K expert up 768x2048", QT_Q4_K, 768, 2048 },
};


/* CPU time of this thread: on a shared machine it excludes the time other
 * processes held the core, so single-thread figures stay comparable. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Weight-sized buffers as the CPU backend allocates its packed weights:
 * 2 MiB-aligned, advised for huge pages (4 KiB pages cost a TLB miss every
 * 4 KiB of a stream). Freed with free(). */
static void *big_alloc(size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    bytes = (bytes + huge - 1) & ~(huge - 1);
    void *p = aligned_alloc(huge, bytes);
#ifdef MADV_HUGEPAGE
    if (p) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

/* Streaming read of bytes for secs (limits_stream_read: the same loop tern
 * measures its decode roofline with); *cpu_gbs per second of this thread's
 * CPU time (on a loaded machine the wall figure counts the time others held
 * the core, which the 1-thread kernel figures exclude). */
static double stream_read_gbs(size_t bytes, double secs, int prefetch, double *cpu_gbs)
{
    uint64_t *buf = big_alloc(bytes);
    if (!buf) return 0.0;
    for (size_t i = 0; i < bytes / 8; i++) buf[i] = i;
    double gbs = limits_stream_read(buf, bytes, secs, prefetch != 0, cpu_gbs);
    free(buf);
    return gbs;
}

struct stream_job {
    size_t bytes;
    double secs;
    int prefetch;
    double gbs[64], cpu_gbs[64];
};

static void stream_worker(void *arg, int ith, int nth)
{
    struct stream_job *j = arg;
    j->gbs[ith] = stream_read_gbs(j->bytes / (size_t)nth, j->secs, j->prefetch, &j->cpu_gbs[ith]);
}

static void noop(void *arg, int ith, int nth)
{
    (void)arg; (void)ith; (void)nth;
}

static void bench_overhead(struct threadpool *tp, double secs)
{
    double t0 = now_s();
    long calls = 0;
    while (now_s() - t0 < secs) {
        for (int i = 0; i < 1000; i++) tp_run(tp, noop, NULL);
        calls += 1000;
    }
    printf("tp_run (empty job), %d threads: %.2f us/call\n", tp_n_threads(tp),
           (now_s() - t0) / (double)calls * 1e6);
    calls = 0;
    t0 = now_s();
    while (now_s() - t0 < secs) {
        for (int i = 0; i < 1000; i++) tp_run_any(tp, noop, NULL);
        calls += 1000;
    }
    printf("tp_run_any (empty job), %d threads: %.2f us/call\n", tp_n_threads(tp),
           (now_s() - t0) / (double)calls * 1e6);
    static uint8_t w[8 * 18 * 20];
    static float x[576], y[8];
    uint64_t seed = 1;
    td_weights(QT_Q4_1, w, 8, 576, &seed);
    td_acts(x, 1, 576, &seed);
    struct mm_scratch scr = { 0 };
    enum cpu_isa isa = cpu_isa_best();
    calls = 0;
    t0 = now_s();
    while (now_s() - t0 < secs) {
        for (int i = 0; i < 1000; i++) cpu_matmul(tp, isa, &scr, QT_Q4_1, w, 8, 576, x, 1, y);
        calls += 1000;
    }
    printf("cpu_matmul Q4_1 8x576 n=1 (%s), %d threads: %.2f us/call\n", cpu_isa_name(isa),
           tp_n_threads(tp), (now_s() - t0) / (double)calls * 1e6);
    mm_scratch_free(&scr);
}

static void bench_case(struct threadpool *tp, enum cpu_isa isa, const struct bench_case *c,
                       int64_t n, double secs, bool hot, bool pack, bool w8a8, double peak_tops)
{
    size_t rb = qtype_row_bytes(c->wtype, (uint64_t)c->cols);
    size_t wbytes = rb * (size_t)c->rows;
    /* decode: enough copies to defeat the caches; prefill: one copy */
    size_t copies = n <= 8 && !hot ? (256u << 20) / wbytes + 1 : 1;
    if (copies > 64) copies = 64;
    uint8_t *w = big_alloc(wbytes * copies);
    float *x = malloc(sizeof(float) * (size_t)(n * c->cols));
    float *y = malloc(sizeof(float) * (size_t)(n * c->rows));
    if (!w || !x || !y) {
        printf("%s: out of memory\n", c->what);
        goto done;
    }
    uint64_t seed = 7;
    td_weights(c->wtype, w, c->rows, c->cols, &seed);
    for (size_t k = 1; k < copies; k++) memcpy(w + k * wbytes, w, wbytes);
    td_acts(x, n, c->cols, &seed);
    uint32_t wtype = c->wtype;
    size_t stride = wbytes;   /* bytes per copy as the kernel reads it */
    if (pack) {   /* mm_pack's layout (Q4_K's and Q5_K's are 2-3 % larger) */
        stride = mm_pack_size(isa, c->wtype, c->rows, c->cols);
        uint8_t *pw = big_alloc(stride * copies);
        if (!pw) goto done;
        for (size_t k = 0; k < copies; k++)
            wtype = mm_pack(isa, c->wtype, w + k * wbytes, c->rows, c->cols, pw + k * stride);
        free(w);
        w = pw;
    }
    struct mm_scratch scr = { .w8a8 = w8a8 };
    cpu_matmul(tp, isa, &scr, wtype, w, c->rows, c->cols, x, n, y);   /* warm-up */
    long calls = 0;
    double t0 = now_s(), c0 = cpu_s(), t;
    do {
        cpu_matmul(tp, isa, &scr, wtype, w + (size_t)(calls % (long)copies) * stride,
                   c->rows, c->cols, x, n, y);
        calls++;
        t = now_s() - t0;
    } while (t < secs);
    /* one thread: CPU time (immune to other processes); more: wall time */
    double per = (tp_n_threads(tp) == 1 ? cpu_s() - c0 : t) / (double)calls;
    const double gops = 2.0 * (double)c->rows * (double)c->cols * (double)n / per / 1e9;
    printf("%-20s %-5s%s %6lldx%-5lld n=%-4lld %-6s%s t=%d%s %9.1f us  %6.1f GB/s  %7.1f GOP/s",
           c->what, qtype_name(c->wtype), pack ? "x8" : "  ", (long long)c->rows, (long long)c->cols, (long long)n,
           cpu_isa_name(isa), w8a8 ? "-w8a8" : "", tp_n_threads(tp), hot ? " hot" : "", per * 1e6,
           (double)wbytes / per / 1e9, gops);
    if (peak_tops > 0.0 && n >= 32) printf("  %5.1f %% of int8 peak", 100.0 * gops / (peak_tops * 1e3));
    printf("\n");
    fflush(stdout);
    mm_scratch_free(&scr);
done:
    free(w); free(x); free(y);
}

/* A whole model's matmuls (random weights, real types and shapes): per
 * layer q, k, v, o, gate, up, down, then the output projection for one
 * token; decode (n = 1) and prefill (n = 512). Tokens/s of the matmuls
 * alone: an upper bound for the forward pass, comparable to llama-bench. */
struct model_shape {
    const char *name;
    int layers;
    int64_t dim, qdim, kvdim, ff, vocab;
    uint32_t t_attn, t_kv, t_ffn_up, t_ffn_down, t_out;
};

static const struct model_shape models[] = {
    { "smollm2-135m-q4_1", 30, 576, 576, 192, 1536, 49152, QT_Q4_1, QT_Q4_1, QT_Q4_1, QT_Q4_1, QT_Q8_0 },
    /* Gemma 3 270M Q4_K_M: q/k/v/gate/up Q5_0, o Q4_K, down Q4_K (half Q6_K), tied Q8_0 output */
    { "gemma3-270m-q4_k_m", 18, 640, 1024, 256, 2048, 262144, QT_Q5_0, QT_Q5_0, QT_Q5_0, QT_Q4_K, QT_Q8_0 },
    /* the float decode's short rows (576 F16 = 1152 bytes) and its tied 49152x576 output */
    { "smollm2-135m-f16", 30, 576, 576, 192, 1536, 49152, QT_F16, QT_F16, QT_F16, QT_F16, QT_F16 },
    { "llama1b-f16", 16, 2048, 2048, 512, 8192, 128256, QT_F16, QT_F16, QT_F16, QT_F16, QT_F16 },
};

static void bench_model(struct threadpool *tp, const struct model_shape *ms, int reps, int64_t only_n)
{
    struct mat { uint32_t t; int64_t rows, cols; uint8_t *w; } per[7] = {
        { ms->t_attn, ms->qdim, ms->dim, NULL }, { ms->t_kv, ms->kvdim, ms->dim, NULL },
        { ms->t_kv, ms->kvdim, ms->dim, NULL }, { ms->t_ffn_down, ms->dim, ms->qdim, NULL },
        { ms->t_ffn_up, ms->ff, ms->dim, NULL }, { ms->t_ffn_up, ms->ff, ms->dim, NULL },
        { ms->t_ffn_down, ms->dim, ms->ff, NULL },
    };
    size_t layer_bytes = 0;
    for (int k = 0; k < 7; k++) layer_bytes += qtype_row_bytes(per[k].t, (uint64_t)per[k].cols) * (size_t)per[k].rows;
    size_t out_bytes = qtype_row_bytes(ms->t_out, (uint64_t)ms->dim) * (size_t)ms->vocab;
    size_t total = layer_bytes * (size_t)ms->layers + out_bytes;
    uint8_t *all = big_alloc(total);
    float *x = malloc(sizeof(float) * 512 * (size_t)ms->ff), *y = malloc(sizeof(float) * 512 * (size_t)ms->ff);
    float *logits = malloc(sizeof(float) * (size_t)ms->vocab);
    if (!all || !x || !y || !logits) {
        printf("%s: out of memory\n", ms->name);
        goto done;
    }
    uint64_t seed = 3;
    /* one random layer, copied: values do not change the speed */
    size_t off = 0;
    for (int k = 0; k < 7; k++) {
        td_weights(per[k].t, all + off, per[k].rows, per[k].cols, &seed);
        off += qtype_row_bytes(per[k].t, (uint64_t)per[k].cols) * (size_t)per[k].rows;
    }
    for (int l = 1; l < ms->layers; l++) memcpy(all + (size_t)l * layer_bytes, all, layer_bytes);
    td_weights(ms->t_out, all + layer_bytes * (size_t)ms->layers, ms->vocab, ms->dim, &seed);
    td_acts(x, 512, ms->ff, &seed);
    struct mm_scratch scr = { 0 };
    enum cpu_isa isa = cpu_isa_best();
    static const int64_t ns[] = { 1, 512 };
    for (int ni = 0; ni < 2; ni++) {
        int64_t n = ns[ni];
        if (only_n && n != only_n) continue;   /* -n 1: decode alone */
        double best = 1e30;
        for (int rep = 0; rep < reps + 1; rep++) {   /* first one warms up */
            double t0 = now_s(), c0 = cpu_s();
            for (int l = 0; l < ms->layers; l++) {
                const uint8_t *lw = all + (size_t)l * layer_bytes;
                for (int k = 0; k < 7; k++) {
                    cpu_matmul(tp, isa, &scr, per[k].t, lw, per[k].rows, per[k].cols, x, n, y);
                    lw += qtype_row_bytes(per[k].t, (uint64_t)per[k].cols) * (size_t)per[k].rows;
                }
            }
            cpu_matmul(tp, isa, &scr, ms->t_out, all + layer_bytes * (size_t)ms->layers, ms->vocab,
                       ms->dim, x, 1, logits);
            /* one thread: CPU time (immune to other processes), as the cases */
            double t = tp_n_threads(tp) == 1 ? cpu_s() - c0 : now_s() - t0;
            if (rep > 0 && t < best) best = t;
        }
        printf("model %-20s %s t=%d n=%-3lld matmuls only: %8.1f tok/s  (%.2f ms per pass, %.1f MB "
               "weights, %.1f GB/s)\n", ms->name, cpu_isa_name(isa), tp_n_threads(tp), (long long)n,
               (double)n / best, best * 1e3, (double)total / 1e6, (double)total / best / 1e9);
        fflush(stdout);
    }
    mm_scratch_free(&scr);
done:
    free(all); free(x); free(y); free(logits);
}

int main(int argc, char **argv)
{
    int threads = 1;
    double secs = 0.3;
    const char *filter = NULL;
    bool hot = false;
    const char *model = NULL;   /* -m NAME: whole-model matmul pass only */
    /* -c: decode weights stay in cache (compute bound, not DRAM);
     * -n N: that token count only; -p 1: packed weights only */
    int64_t only_n = 0;
    bool packed_only = false, w8a8 = false;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-s")) secs = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "-f")) filter = argv[i + 1];
        else if (!strcmp(argv[i], "-c")) hot = atoi(argv[i + 1]) != 0;
        else if (!strcmp(argv[i], "-m")) model = argv[i + 1];
        else if (!strcmp(argv[i], "-n")) only_n = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-p")) packed_only = atoi(argv[i + 1]) != 0;
        else if (!strcmp(argv[i], "-w")) w8a8 = atoi(argv[i + 1]) != 0;
    }
    struct threadpool *tp = tp_open(threads);
    if (!tp) return 1;
    enum cpu_isa best = cpu_isa_best();
    if (model) {
        for (size_t k = 0; k < sizeof models / sizeof models[0]; k++)
            if (strstr(models[k].name, model)) bench_model(tp, &models[k], 3, only_n);
        tp_close(tp);
        return 0;
    }
    printf("# cpu: %s, threads %d, physical cores %d\n", cpu_isa_name(best), threads,
           tp_physical_cores());
    for (int pf = 0; pf <= 1; pf++) {
        struct stream_job sj = { .bytes = 512u << 20, .secs = secs * 2, .prefetch = pf };
        tp_run(tp, stream_worker, &sj);
        double total = 0.0, cpu_total = 0.0;
        for (int i = 0; i < threads; i++) {
            total += sj.gbs[i];
            cpu_total += sj.cpu_gbs[i];
        }
        printf("streaming read%s, 512 MiB, %d threads: %.1f GB/s (per thread CPU-second: %.1f GB/s)\n",
               pf ? " (prefetch 4 KiB ahead)" : "", threads, total, cpu_total);
    }
    /* the prefill roofline: the multiply-add peak of the ISA in force */
    struct limits lim;
    char lerr[256];
    double peak = 0.0;   /* int8 TOP/s, for -w */
    if (limits_measure(&lim, best, threads, lerr, sizeof lerr) == 0) {
        if (w8a8) peak = lim.int8_tops[1];
        printf("peak, %d threads: int8 %.2f TOP/s (%s), bf16 %.2f TFLOP/s (%s)\n", threads,
               lim.int8_tops[1], lim.int8_unit, lim.bf16_tflops[1], lim.bf16_unit);
    } else
        printf("peak: %s\n", lerr);
    bench_overhead(tp, secs);
    /* -n: that token count alone, any (2 and 3: the decode tiles' token tails) */
    const int64_t ns[] = { only_n ? only_n : 1, 4, 64, 512 };
    const size_t nn = only_n ? 1 : sizeof ns / sizeof ns[0];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const struct bench_case *c = &cases[k];
        if (filter && !strstr(qtype_name(c->wtype), filter) && !strstr(c->what, filter)) continue;
        for (size_t ni = 0; ni < nn; ni++) {
            if (ns[ni] == 512 && c->rows > 8192) continue;   /* keep the run short */
            if (ns[ni] >= 64 && c->rows > 65536) continue;   /* (an output matrix: decode only) */
            for (int isa = best; isa >= CPU_ISA_AVX2; isa--) {
                if (!cpu_isa_runs((enum cpu_isa)isa)) continue;
                if (!packed_only || !mm_pack_size((enum cpu_isa)isa, c->wtype, c->rows, c->cols))
                    bench_case(tp, (enum cpu_isa)isa, c, ns[ni], secs, hot, false, false, peak);
                /* the never-packed types W8A8 takes from plain rows (Q2_K, Q3_K, IQ4_*) */
                if (w8a8 && isa == CPU_ISA_AMX && ns[ni] >= MM_W8A8_MIN_N &&
                    !mm_pack_size((enum cpu_isa)isa, c->wtype, c->rows, c->cols) &&
                    mm_w8a8_supported(c->wtype))
                    bench_case(tp, (enum cpu_isa)isa, c, ns[ni], secs, hot, false, true, peak);
                if (mm_pack_size((enum cpu_isa)isa, c->wtype, c->rows, c->cols)) {
                    bench_case(tp, (enum cpu_isa)isa, c, ns[ni], secs, hot, true, false, peak);
                    if (w8a8 && isa == CPU_ISA_AMX && ns[ni] >= MM_W8A8_MIN_N)
                        bench_case(tp, (enum cpu_isa)isa, c, ns[ni], secs, hot, true, true, peak);
                }
            }
            if (ns[ni] == 1 && !packed_only) bench_case(tp, CPU_ISA_SCALAR, c, 1, secs, hot, false, false, 0.0);
        }
    }
    tp_close(tp);
    return 0;
}
