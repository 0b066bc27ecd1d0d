/* limits: the streaming read and multiply-add peak loops, and their cache
 * file (see limits.h). The peak loops use function target attributes, not
 * per-file flags, so one file serves every ISA; each runs only where
 * cpu_isa_runs allows its level. AMX is driven with inline assembly (the
 * assembler knows the tile instructions whatever -m flags are given). */
#include "cpu/limits.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cpu/threadpool.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

/* Seconds per measurement: 2 read variants per thread count plus 2 peaks
 * x 2 thread counts stay near a second on a small machine. */
#define READ_SECS 0.08
#define PEAK_SECS 0.06
#define READ_MIN ((size_t)256 << 20)
#define READ_MAX ((size_t)1024 << 20)
#define READ_SLICE ((size_t)8 << 20)
#define STREAM_PF 4096

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The best rate over short windows of a timed loop: on a shared machine a
 * neighbour's burst lowers the average of one long window, never the best
 * of several short ones, and a limit is what the hardware can do. */
#define WINDOW_SECS 2e-3
struct window {
    double t0, tw, best;
    long n; /* steps since tw */
};

static void window_start(struct window *w)
{
    w->t0 = w->tw = now_s();
    w->best = 0;
    w->n = 0;
}

/* Counts n more steps; false once secs have passed. w->best: steps/s. */
static bool window_tick(struct window *w, long n, double secs)
{
    double t = now_s();
    w->n += n;
    if (t - w->tw >= WINDOW_SECS) {
        double r = (double)w->n / (t - w->tw);
        if (r > w->best) w->best = r;
        w->n = 0;
        w->tw = t;
    }
    return t - w->t0 < secs;
}

/* ---- streaming read ------------------------------------------------------ */

double limits_stream_read(const uint64_t *buf, size_t bytes, double secs, bool prefetch,
                          double *cpu_gbs)
{
    const size_t n = bytes / 64 * 8;
    uint64_t acc = 0;
    double t0 = now_s(), c0 = cpu_s(), t;
    size_t passes = 0;
    do {
        /* 4 independent sums keep the loads, not the adds, the limit */
        uint64_t a = 0, b = 0, c = 0, d = 0;
        if (prefetch) {
            for (size_t i = 0; i < n; i += 8) { /* one 64-byte line per step */
                __builtin_prefetch((const char *)(buf + i) + STREAM_PF);
                a += buf[i] + buf[i + 4];
                b += buf[i + 1] + buf[i + 5];
                c += buf[i + 2] + buf[i + 6];
                d += buf[i + 3] + buf[i + 7];
            }
        } else {
            for (size_t i = 0; i < n; i += 4) {
                a += buf[i];
                b += buf[i + 1];
                c += buf[i + 2];
                d += buf[i + 3];
            }
        }
        acc += a + b + c + d;
        passes++;
        t = now_s() - t0;
    } while (t < secs);
    /* the sum must look used, or the loads go */
    __asm__ volatile("" : : "r"(acc));
    const double moved = (double)(n * 8) * (double)passes;
    if (cpu_gbs) *cpu_gbs = moved / (cpu_s() - c0) / 1e9;
    return moved / t / 1e9;
}

struct read_job {
    const uint64_t *buf;
    size_t bytes;
    bool prefetch;
    double gbs[512];
};

static void read_worker(void *arg, int ith, int nth)
{
    struct read_job *j = arg;
    size_t part = j->bytes / (size_t)nth / 64 * 64, off = 0;
    const uint64_t *base = j->buf + part / 8 * (size_t)ith;
    /* the best of 8 MiB slices read in turn (a slice is a millisecond or
     * two, like the peaks' windows; the whole buffer keeps the caches cold) */
    double t0 = now_s(), best = 0;
    do {
        size_t len = part - off < READ_SLICE ? part - off : READ_SLICE;
        double g = limits_stream_read(base + off / 8, len, 0, j->prefetch, NULL);
        if (g > best) best = g;
        off = off + len >= part ? 0 : off + len;
    } while (now_s() - t0 < READ_SECS);
    j->gbs[ith] = best;
}

/* ---- multiply-add peaks ---------------------------------------------------- */

/* Each loop runs for PEAK_SECS and returns ops/s (a multiply and an add
 * count as two). Independent accumulators hide the instruction latency. */
typedef double (*peak_fn)(double secs);

static double scalar_int8(double secs)
{
    int32_t acc[8] = {0};
    volatile int8_t src = 3;
    int8_t a = src, b = (int8_t)(src + 1);
    struct window w;
    window_start(&w);
    do {
        for (int k = 0; k < 4096; k++) {
            __asm__ volatile("" : "+r"(a)); /* a new each step: no hoisted products */
            for (int i = 0; i < 8; i++) acc[i] += (int32_t)a * (int32_t)(b + i);
        }
    } while (window_tick(&w, 4096, secs));
    __asm__ volatile("" : : "r"(acc[0] + acc[7]));
    return w.best * 8 * 2;
}

static double scalar_f32(double secs)
{
    float acc[8] = {0};
    volatile float src = 1.0f;
    float a = src * 1e-7f;
    struct window w;
    window_start(&w);
    do {
        for (int k = 0; k < 4096; k++)
            for (int i = 0; i < 8; i++) acc[i] = acc[i] * 0.999f + a;
    } while (window_tick(&w, 4096, secs));
    __asm__ volatile("" : : "x"(acc[0] + acc[7]));
    return w.best * 8 * 2;
}

#if defined(__x86_64__)
/* One timed loop body over NACC vector accumulators. */
/* Every accumulator used after the loop, or the compiler drops the dead ones */
#define SINK_ALL(acc, REG)                                                                       \
    for (size_t i_ = 0; i_ < sizeof acc / sizeof acc[0]; i_++) __asm__ volatile("" : : REG(acc[i_]))
#define PEAK_LOOP(NACC, STEP, OPS_PER_STEP, SINK)                                                 \
    struct window w;                                                                             \
    window_start(&w);                                                                            \
    do {                                                                                         \
        for (int k = 0; k < 1024; k++) {                                                         \
            STEP;                                                                                \
        }                                                                                        \
    } while (window_tick(&w, 1024, secs));                                                       \
    SINK;                                                                                        \
    return w.best * (double)(NACC) * (OPS_PER_STEP);

__attribute__((target("avx2")))
static double avx2_int8(double secs)
{
    __m256i acc[6], x[6], a = _mm256_set1_epi8(3), one = _mm256_set1_epi16(1);
    for (int i = 0; i < 6; i++) acc[i] = _mm256_setzero_si256(), x[i] = _mm256_set1_epi8((char)i);
    /* 32 byte products summed to int32 per vpmaddubsw + vpmaddwd + vpaddd,
     * as the AVX2 kernels do it; the empty asm makes x[] new each step, so
     * the products cannot be hoisted out of the loop */
    PEAK_LOOP(6,
              for (int i = 0; i < 6; i++) __asm__ volatile("" : "+x"(x[i]));
              for (int i = 0; i < 6; i++) acc[i] = _mm256_add_epi32(
                  acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a, x[i]), one)),
              64, SINK_ALL(acc, "x"))
}

__attribute__((target("avx2,avxvnni")))
static double avxvnni_int8(double secs)
{
    __m256i acc[10], a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(5);
    for (int i = 0; i < 10; i++) acc[i] = _mm256_setzero_si256();
    PEAK_LOOP(10,
              for (int i = 0; i < 10; i++) acc[i] = _mm256_dpbusd_avx_epi32(acc[i], a, b);
              __asm__ volatile("" : "+x"(a)),
              64, SINK_ALL(acc, "x"))
}

__attribute__((target("avx512f,avx512vnni")))
static double avx512_int8(double secs)
{
    __m512i acc[12], a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(5);
    for (int i = 0; i < 12; i++) acc[i] = _mm512_setzero_si512();
    PEAK_LOOP(12,
              for (int i = 0; i < 12; i++) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
              __asm__ volatile("" : "+v"(a)),
              128, SINK_ALL(acc, "v"))
}

__attribute__((target("avx2,fma")))
static double avx2_f32(double secs)
{
    __m256 acc[10], a = _mm256_set1_ps(0.5f), b = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 10; i++) acc[i] = _mm256_setzero_ps();
    PEAK_LOOP(10,
              for (int i = 0; i < 10; i++) acc[i] = _mm256_fmadd_ps(a, b, acc[i]);
              __asm__ volatile("" : "+x"(a)),
              16, SINK_ALL(acc, "x"))
}

__attribute__((target("avx512f")))
static double avx512_f32(double secs)
{
    __m512 acc[12], a = _mm512_set1_ps(0.5f), b = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) acc[i] = _mm512_setzero_ps();
    PEAK_LOOP(12,
              for (int i = 0; i < 12; i++) acc[i] = _mm512_fmadd_ps(a, b, acc[i]);
              __asm__ volatile("" : "+v"(a)),
              32, SINK_ALL(acc, "v"))
}

__attribute__((target("avx512f,avx512bf16")))
static double avx512_bf16(double secs)
{
    __m512 acc[12];
    __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f00), b = (__m512bh)_mm512_set1_epi16(0x3380);
    for (int i = 0; i < 12; i++) acc[i] = _mm512_setzero_ps();
    /* 32 bf16 pairs per vdpbf16ps: 64 flops */
    PEAK_LOOP(12,
              for (int i = 0; i < 12; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
              __asm__ volatile("" : "+v"(a)),
              64, SINK_ALL(acc, "v"))
}

static bool cpuid_bit(unsigned leaf, unsigned sub, int reg, unsigned bit)
{
    unsigned r[4];
    if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3])) return false;
    return (r[reg] >> bit) & 1u;
}

/* The tile configuration every AMX loop loads: palette 1, tiles 0-7 all
 * 16 rows x 64 bytes (the largest, so each instruction does the most). */
static void amx_config(uint8_t cfg[64])
{
    memset(cfg, 0, 64);
    cfg[0] = 1;
    for (int i = 0; i < 8; i++) {
        cfg[16 + 2 * i] = 64; /* colsb, little-endian uint16 */
        cfg[48 + i] = 16;     /* rows */
    }
}

/* tmm0-3 accumulate, tmm4-5 hold A and tmm6-7 B: four independent tile
 * products per step, as a 2x2 blocked kernel issues them. bf16: tdpbf16ps
 * (16x16x32 pairs = 16384 flops), else tdpbssd (16x16x64 = 32768 ops). */
static double amx_peak(double secs, bool bf16)
{
    _Alignas(64) uint8_t cfg[64];
    _Alignas(64) static const uint8_t src[16 * 64] = {1, 2, 3, 4};
    amx_config(cfg);
    __asm__ volatile("ldtilecfg %0" : : "m"(*(const uint8_t(*)[64])cfg));
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm4\n\t"
                     "tileloadd (%0,%1,1), %%tmm5\n\t"
                     "tileloadd (%0,%1,1), %%tmm6\n\t"
                     "tileloadd (%0,%1,1), %%tmm7\n\t"
                     "tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3"
                     :
                     : "r"(src), "r"((long)64)
                     : "memory");
    struct window w;
    window_start(&w);
    do {
        for (int k = 0; k < 256; k++) {
            if (bf16)
                __asm__ volatile("tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\t"
                                 "tdpbf16ps %%tmm7, %%tmm4, %%tmm1\n\t"
                                 "tdpbf16ps %%tmm6, %%tmm5, %%tmm2\n\t"
                                 "tdpbf16ps %%tmm7, %%tmm5, %%tmm3" ::);
            else
                __asm__ volatile("tdpbssd %%tmm6, %%tmm4, %%tmm0\n\t"
                                 "tdpbssd %%tmm7, %%tmm4, %%tmm1\n\t"
                                 "tdpbssd %%tmm6, %%tmm5, %%tmm2\n\t"
                                 "tdpbssd %%tmm7, %%tmm5, %%tmm3" ::);
        }
    } while (window_tick(&w, 256, secs));
    __asm__ volatile("tilerelease" ::);
    return w.best * 4 * (bf16 ? 16384.0 : 32768.0);
}

static double amx_int8(double secs)
{
    return amx_peak(secs, false);
}

static double amx_bf16(double secs)
{
    return amx_peak(secs, true);
}

/* The loops for isa, and the names of the instructions they time. */
static void pick(enum cpu_isa isa, peak_fn *i8, peak_fn *bf, const char **i8n, const char **bfn,
                 peak_fn *f32, const char **f32n)
{
    *i8 = scalar_int8, *i8n = "scalar int32";
    *bf = scalar_f32, *bfn = "scalar f32";
    if (isa >= CPU_ISA_AVX2) *i8 = avx2_int8, *i8n = "avx2 vpmaddubsw", *bf = avx2_f32,
                             *bfn = "avx2 f32 fma";
    if (isa == CPU_ISA_AVXVNNI) *i8 = avxvnni_int8, *i8n = "avxvnni vpdpbusd";
    if (isa >= CPU_ISA_AVX512) {
        *i8 = avx512_int8, *i8n = "avx512 vpdpbusd";
        *bf = avx512_f32, *bfn = "avx512 f32 fma";
    }
    *f32 = *bf, *f32n = *bfn;   /* the f32 FMA, before bf16 takes its own instruction */
    if (isa >= CPU_ISA_AVX512 && cpuid_bit(7, 1, 0, 5))   /* AVX512_BF16 */
        *bf = avx512_bf16, *bfn = "avx512 vdpbf16ps";
    if (isa >= CPU_ISA_AMX && cpu_amx_usable(NULL, 0)) {
        *i8 = amx_int8, *i8n = "amx tdpbssd";
        if (cpuid_bit(7, 0, 3, 22)) *bf = amx_bf16, *bfn = "amx tdpbf16ps"; /* AMX-BF16 */
    }
}
#else
static void pick(enum cpu_isa isa, peak_fn *i8, peak_fn *bf, const char **i8n, const char **bfn,
                 peak_fn *f32, const char **f32n)
{
    (void)isa;
    *i8 = scalar_int8, *i8n = "scalar int32";
    *bf = scalar_f32, *bfn = "scalar f32";
    *f32 = scalar_f32, *f32n = "scalar f32";
}
#endif

struct peak_job {
    peak_fn fn;
    double ops[512];
};

static void peak_worker(void *arg, int ith, int nth)
{
    (void)nth;
    struct peak_job *j = arg;
    j->ops[ith] = j->fn(PEAK_SECS);
}

/* ---- measuring ----------------------------------------------------------- */

void limits_cpu_name(char *buf, size_t n)
{
    snprintf(buf, n, "unknown CPU");
#if defined(__x86_64__)
    unsigned r[12];
    if (__get_cpuid_max(0x80000000, NULL) < 0x80000004) return;
    for (unsigned k = 0; k < 3; k++)
        __get_cpuid(0x80000002 + k, &r[4 * k], &r[4 * k + 1], &r[4 * k + 2], &r[4 * k + 3]);
    char s[49];
    memcpy(s, r, 48);
    s[48] = 0;
    const char *p = s;
    while (*p == ' ') p++;
    snprintf(buf, n, "%s", p);
    for (size_t l = strlen(buf); l > 0 && buf[l - 1] == ' '; l--) buf[l - 1] = 0;
#endif
}

static int online_cpus(void)
{
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c < 1 ? 1 : c > 512 ? 512 : (int)c;
}

/* Sum of a job's per-thread figures with threads threads. */
static double run_on(int threads, tp_fn fn, void *job, const double *out, int *ok)
{
    struct threadpool *tp = tp_open(threads);
    if (!tp) {
        *ok = 0;
        return 0;
    }
    tp_run(tp, fn, job);
    tp_close(tp);
    double sum = 0;
    for (int i = 0; i < threads; i++) sum += out[i];
    return sum;
}

/* Twice the last-level cache (server parts have hundreds of MiB of it),
 * within [READ_MIN, READ_MAX]: the stream must come from memory. */
static size_t read_bytes(void)
{
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    size_t b = l3 > 0 ? 2 * (size_t)l3 : READ_MIN;
    b = b < READ_MIN ? READ_MIN : b > READ_MAX ? READ_MAX : b;
    return b & ~(((size_t)2 << 20) - 1); /* whole huge pages */
}

static void measure_read(struct limits *l, const uint64_t *buf, size_t bytes, int *ok)
{
    l->n_read = 0;
    /* 1, 2, 4, ... and the CPU count itself */
    for (int t = 1; *ok && l->n_read < LIMITS_MAX_POINTS;
         t = t * 2 > l->cpus && t < l->cpus ? l->cpus : t * 2) {
        struct read_job job = {.buf = buf, .bytes = bytes};
        double best = 0;
        for (int pf = 0; pf <= 1; pf++) { /* the higher of the two is the bound */
            job.prefetch = pf;
            double g = run_on(t, read_worker, &job, job.gbs, ok);
            if (g > best) best = g;
        }
        l->read_threads[l->n_read] = t;
        l->read_gbs[l->n_read++] = best;
        if (t >= l->cpus) break;
    }
}

int limits_measure(struct limits *l, enum cpu_isa isa, int cpus, char *err, size_t errlen)
{
    memset(l, 0, sizeof *l);
    limits_cpu_name(l->cpu, sizeof l->cpu);
    l->isa = isa;
    l->cpus = cpus > 0 ? (cpus > 512 ? 512 : cpus) : online_cpus();
    const size_t huge = (size_t)2 << 20;
    const size_t bytes = read_bytes();
    uint64_t *buf = aligned_alloc(huge, bytes);
    if (!buf) {
        snprintf(err, errlen, "out of memory for the %zu MiB read buffer", bytes >> 20);
        return -1;
    }
#ifdef MADV_HUGEPAGE
    madvise(buf, bytes, MADV_HUGEPAGE); /* 4 KiB pages cost a TLB miss every 4 KiB */
#endif
    for (size_t i = 0; i < bytes / 8; i++) buf[i] = i;
    int ok = 1;
    measure_read(l, buf, bytes, &ok);
    free(buf);
    peak_fn i8, bf, f32;
    const char *i8n, *bfn, *f32n;
    pick(isa, &i8, &bf, &i8n, &bfn, &f32, &f32n);
    snprintf(l->int8_unit, sizeof l->int8_unit, "%s", i8n);
    snprintf(l->bf16_unit, sizeof l->bf16_unit, "%s", bfn);
    snprintf(l->f32_unit, sizeof l->f32_unit, "%s", f32n);
    const int counts[2] = {1, l->cpus};
    for (int k = 0; k < 2 && ok; k++) {
        struct peak_job job = {.fn = i8};
        l->int8_tops[k] = run_on(counts[k], peak_worker, &job, job.ops, &ok) / 1e12;
        job.fn = bf;
        l->bf16_tflops[k] = run_on(counts[k], peak_worker, &job, job.ops, &ok) / 1e12;
        job.fn = f32;
        l->f32_tflops[k] = f32 == bf ? l->bf16_tflops[k]
                                     : run_on(counts[k], peak_worker, &job, job.ops, &ok) / 1e12;
    }
    if (!ok) {
        snprintf(err, errlen, "could not start the measuring threads");
        return -1;
    }
    return 0;
}

/* ---- cache file ---------------------------------------------------------- */

void limits_default_path(enum cpu_isa isa, char *buf, size_t n)
{
    const char *x = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    if (x && x[0]) snprintf(buf, n, "%s/tern/limits-%s.txt", x, cpu_isa_name(isa));
    else snprintf(buf, n, "%s/.local/state/tern/limits-%s.txt", home ? home : ".",
                  cpu_isa_name(isa));
}

static bool sane(double v, double lo, double hi)
{
    return isfinite(v) && v >= lo && v <= hi;
}

/* One "key value..." line into l; false when it is malformed. */
static bool parse_line(struct limits *l, const char *line, char *isa, size_t isan)
{
    int t, k;
    double v;
    if (sscanf(line, "read %d %lf", &t, &v) == 2) {
        if (l->n_read >= LIMITS_MAX_POINTS || t < 1 || !sane(v, 1e-3, 1e5)) return false;
        l->read_threads[l->n_read] = t;
        l->read_gbs[l->n_read++] = v;
        return true;
    }
    if (sscanf(line, "int8 %d %lf", &k, &v) == 2 && (k == 0 || k == 1) && sane(v, 1e-6, 1e4))
        return l->int8_tops[k] = v, true;
    if (sscanf(line, "bf16 %d %lf", &k, &v) == 2 && (k == 0 || k == 1) && sane(v, 1e-6, 1e4))
        return l->bf16_tflops[k] = v, true;
    if (sscanf(line, "f32 %d %lf", &k, &v) == 2 && (k == 0 || k == 1) && sane(v, 1e-6, 1e4))
        return l->f32_tflops[k] = v, true;
    if (sscanf(line, "cpus %d", &t) == 1) return l->cpus = t, t >= 1;
    size_t m = strcspn(line, "\n");
    if (!strncmp(line, "cpu ", 4))
        return snprintf(l->cpu, sizeof l->cpu, "%.*s", (int)(m - 4), line + 4), true;
    if (!strncmp(line, "isa ", 4)) return snprintf(isa, isan, "%.*s", (int)(m - 4), line + 4), true;
    if (!strncmp(line, "int8_unit ", 10))
        return snprintf(l->int8_unit, sizeof l->int8_unit, "%.*s", (int)(m - 10), line + 10), true;
    if (!strncmp(line, "bf16_unit ", 10))
        return snprintf(l->bf16_unit, sizeof l->bf16_unit, "%.*s", (int)(m - 10), line + 10), true;
    if (!strncmp(line, "f32_unit ", 9))
        return snprintf(l->f32_unit, sizeof l->f32_unit, "%.*s", (int)(m - 9), line + 9), true;
    return line[0] == '#' || line[0] == '\n';
}

enum limits_cache limits_load(struct limits *l, const char *path, enum cpu_isa isa, int cpus,
                              char *err, size_t errlen)
{
    memset(l, 0, sizeof *l);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return LIMITS_CACHE_MISSING;
    }
    char line[256], isa_s[32] = "", cpu[64];
    int lineno = 0;
    bool ok = fgets(line, sizeof line, f) && !strcmp(line, "tern-limits 1\n");
    while (ok && fgets(line, sizeof line, f)) {
        lineno++;
        ok = parse_line(l, line, isa_s, sizeof isa_s);
    }
    fclose(f);
    ok = ok && l->n_read > 0 && l->int8_tops[0] > 0 && l->int8_tops[1] > 0 &&
         l->bf16_tflops[0] > 0 && l->bf16_tflops[1] > 0 && l->f32_tflops[0] > 0 &&
         l->f32_tflops[1] > 0 && l->int8_unit[0] && l->bf16_unit[0] && l->f32_unit[0];
    if (!ok) {
        snprintf(err, errlen, "%s: not a limits file (line %d)", path, lineno + 1);
        return LIMITS_CACHE_CORRUPT;
    }
    limits_cpu_name(cpu, sizeof cpu);
    int want = cpus > 0 ? cpus : online_cpus();
    if (strcmp(cpu, l->cpu) || strcmp(isa_s, cpu_isa_name(isa)) || l->cpus != want) {
        snprintf(err, errlen, "%s: measured on %s (%s, %d CPUs), this is %s (%s, %d CPUs)", path,
                 l->cpu, isa_s, l->cpus, cpu, cpu_isa_name(isa), want);
        return LIMITS_CACHE_STALE;
    }
    l->isa = isa;
    l->cached = true;
    return LIMITS_CACHE_OK;
}

/* mkdir -p of path's folder */
static int make_parent(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int rc = mkdir(path, 0755);
        *p = '/';
        if (rc != 0 && errno != EEXIST) return -1;
    }
    return 0;
}

int limits_save(const struct limits *l, const char *path, char *err, size_t errlen)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%ld", path, (long)getpid());
    if (make_parent(tmp) != 0) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "tern-limits 1\n# measured by tern; 'tern info --limits' measures again\n");
    fprintf(f, "cpu %s\nisa %s\ncpus %d\n", l->cpu, cpu_isa_name(l->isa), l->cpus);
    for (int i = 0; i < l->n_read; i++)
        fprintf(f, "read %d %.3f\n", l->read_threads[i], l->read_gbs[i]);
    for (int k = 0; k < 2; k++)
        fprintf(f, "int8 %d %.6f\nbf16 %d %.6f\nf32 %d %.6f\n", k, l->int8_tops[k], k,
                l->bf16_tflops[k], k, l->f32_tflops[k]);
    fprintf(f, "int8_unit %s\nbf16_unit %s\nf32_unit %s\n", l->int8_unit, l->bf16_unit,
            l->f32_unit);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

int limits_get(struct limits *l, const char *path, enum cpu_isa isa, bool remeasure, char *err,
               size_t errlen)
{
    if (!remeasure && limits_load(l, path, isa, 0, err, errlen) == LIMITS_CACHE_OK) return 0;
    if (limits_measure(l, isa, 0, err, errlen) != 0) return -1;
    return limits_save(l, path, err, errlen) == 0 ? 0 : 1;
}

/* ---- figures ------------------------------------------------------------- */

double limits_read_gbs(const struct limits *l, int threads)
{
    if (l->n_read < 1) return 0;
    if (threads <= l->read_threads[0]) return l->read_gbs[0];
    for (int i = 1; i < l->n_read; i++) {
        if (threads > l->read_threads[i]) continue;
        const double t0 = l->read_threads[i - 1], t1 = l->read_threads[i];
        const double f = ((double)threads - t0) / (t1 - t0);
        return l->read_gbs[i - 1] + f * (l->read_gbs[i] - l->read_gbs[i - 1]);
    }
    return l->read_gbs[l->n_read - 1]; /* more threads than CPUs: no more bandwidth */
}

/* A peak measured at 1 thread (p[0]) and all (p[1]), per second, at threads. */
static double peak_at(const struct limits *l, const double p[2], int threads)
{
    if (threads <= 1 || l->cpus <= 1) return p[0] * 1e12;
    const double f = threads >= l->cpus ? 1.0 : (double)(threads - 1) / (double)(l->cpus - 1);
    return (p[0] + f * (p[1] - p[0])) * 1e12;
}

double limits_peak_ops(const struct limits *l, int threads, bool float_weights)
{
    return peak_at(l, float_weights ? l->bf16_tflops : l->int8_tops, threads);
}

double limits_peak_f32(const struct limits *l, int threads)
{
    return peak_at(l, l->f32_tflops, threads);
}

double limits_decode_tok_s(const struct limits *l, int threads, double bytes_per_token)
{
    return bytes_per_token > 0 ? limits_read_gbs(l, threads) * 1e9 / bytes_per_token : 0;
}

double limits_prefill_tok_s(const struct limits *l, int threads, double ops_per_token,
                            bool float_weights)
{
    return ops_per_token > 0 ? limits_peak_ops(l, threads, float_weights) / ops_per_token : 0;
}
