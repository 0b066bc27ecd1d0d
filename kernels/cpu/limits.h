/* limits: this machine's physical limits, the rooflines every speed is
 * shown against. Decode reads every weight once per token, so its bound is
 * the streaming read bandwidth at the thread count used; prefill is bound by
 * the multiply-add peak of the ISA in force (AMX tdpbssd / tdpbf16ps, else
 * AVX-512 vpdpbusd / vdpbf16ps, else AVX-VNNI, else AVX2 vpmaddubsw and f32
 * FMA); prefill's attention by the f32 FMA peak (its QKᵀ and PV products
 * run in f32 unless AMX tiles take them). Measured once, about a second,
 * and cached per CPU model, ISA and CPU count in a small text file
 * (limits_default_path). */
#ifndef TERN_LIMITS_H
#define TERN_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu/cpu_isa.h"

enum { LIMITS_MAX_POINTS = 16 };

struct limits {
    char cpu[64];     /* the CPU's model (cpuid brand string) */
    enum cpu_isa isa; /* the ISA the peaks were measured with */
    int cpus;         /* logical CPUs when measured: the highest thread count */
    int n_read;       /* read points: threads 1, 2, 4, ..., cpus */
    int read_threads[LIMITS_MAX_POINTS];
    double read_gbs[LIMITS_MAX_POINTS]; /* streaming read, GB/s, all threads together */
    double int8_tops[2];   /* int8 multiply-add peak, TOP/s: [0] 1 thread, [1] cpus threads */
    double bf16_tflops[2]; /* bf16 (or f32 FMA) peak, TFLOP/s, likewise */
    double f32_tflops[2];  /* f32 FMA peak, TFLOP/s, likewise */
    char int8_unit[24];    /* the instruction measured: "amx tdpbssd", "avx512 vpdpbusd", ... */
    char bf16_unit[24];
    char f32_unit[24];
    bool cached; /* read from the cache file, not measured in this process */
};

/* Cache outcome of limits_load. */
enum limits_cache {
    LIMITS_CACHE_OK,
    LIMITS_CACHE_MISSING,
    LIMITS_CACHE_STALE,
    LIMITS_CACHE_CORRUPT
};

/* The CPU's model string into buf ("Intel(R) Xeon(R) Processor"). */
void limits_cpu_name(char *buf, size_t n);
/* ${XDG_STATE_HOME:-$HOME/.local/state}/tern/limits-ISA.txt */
void limits_default_path(enum cpu_isa isa, char *buf, size_t n);

/* Measures l for isa (a level cpu_isa_runs allows) with 1..cpus threads
 * (cpus <= 0: the online CPUs). About a second. -1 with err on failure
 * (out of memory, threads not started). */
int limits_measure(struct limits *l, enum cpu_isa isa, int cpus, char *err, size_t errlen);
/* Reads path into l: OK only when its CPU model, ISA and CPU count equal
 * this machine's (cpus <= 0: the online CPUs) and every figure is sane;
 * otherwise err says why and l is unspecified. */
enum limits_cache limits_load(struct limits *l, const char *path, enum cpu_isa isa, int cpus,
                              char *err, size_t errlen);
/* Writes l to path (its folder created), atomically. -1 with err. */
int limits_save(const struct limits *l, const char *path, char *err, size_t errlen);
/* The cached limits at path, or measured and saved when the cache is
 * missing, stale, corrupt or remeasure is set. 0; 1 when measured but not
 * saved (err says why; l is usable); -1 with err when not measured. */
int limits_get(struct limits *l, const char *path, enum cpu_isa isa, bool remeasure, char *err,
               size_t errlen);

/* One thread's streaming read of buf (bytes, a multiple of 64) for secs,
 * GB/s of wall time; *cpu_gbs (may be NULL) per second of this thread's CPU
 * time. prefetch: also a software prefetch 4 KiB ahead, as the packed decode
 * kernels issue (one core alone keeps too few lines in flight without it). */
double limits_stream_read(const uint64_t *buf, size_t bytes, double secs, bool prefetch,
                          double *cpu_gbs);

/* Streaming read GB/s with threads threads (interpolated between points). */
double limits_read_gbs(const struct limits *l, int threads);
/* Peak ops/s with threads threads: int8 products, or bf16 for float weights. */
double limits_peak_ops(const struct limits *l, int threads, bool float_weights);
/* Peak f32 FMA flops/s with threads threads. */
double limits_peak_f32(const struct limits *l, int threads);
/* Predicted (roofline) tokens/s: decode reads bytes_per_token each token;
 * prefill does ops_per_token operations (2 x the weights each token multiplies). */
double limits_decode_tok_s(const struct limits *l, int threads, double bytes_per_token);
double limits_prefill_tok_s(const struct limits *l, int threads, double ops_per_token,
                            bool float_weights);

#endif
