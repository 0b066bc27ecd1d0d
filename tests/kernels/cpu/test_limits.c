/* test_limits: the machine limits of kernels/cpu/limits.h, measured for
 * real at the ISA in force (TERN_ISA caps it; meson runs this under
 * several): sane ranges only, never a speed target. Then the cache file:
 * written, read back equal, and refused when the CPU model, ISA or CPU
 * count differ or the file is damaged; limits_get measures again then. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu/limits.h"
#include "tap.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void check_measured(const struct limits *l, enum cpu_isa isa)
{
    tap_ok(l->n_read >= 1 && l->read_threads[0] == 1, "read measured from 1 thread (%d points)",
           l->n_read);
    tap_ok(l->read_threads[l->n_read - 1] == l->cpus, "read measured up to %d threads (last %d)",
           l->cpus, l->read_threads[l->n_read - 1]);
    for (int i = 0; i < l->n_read; i++)
        tap_ok(l->read_gbs[i] >= 0.5 && l->read_gbs[i] <= 500,
               "read %d threads: %.2f GB/s in [0.5, 500]", l->read_threads[i], l->read_gbs[i]);
    for (int k = 0; k < 2; k++) {
        tap_ok(l->int8_tops[k] >= 1e-3 && l->int8_tops[k] <= 1000, "int8 peak[%d] %.3f TOP/s sane",
               k, l->int8_tops[k]);
        tap_ok(l->bf16_tflops[k] >= 1e-3 && l->bf16_tflops[k] <= 1000,
               "bf16 peak[%d] %.3f TFLOP/s sane", k, l->bf16_tflops[k]);
        tap_ok(l->f32_tflops[k] >= 1e-4 && l->f32_tflops[k] <= 1000,
               "f32 peak[%d] %.3f TFLOP/s sane", k, l->f32_tflops[k]);
    }
    /* any SIMD unit multiplies more int8 values per second than one core
     * streams bytes from memory: otherwise prefill could never beat decode */
    if (isa >= CPU_ISA_AVX2)
        tap_ok(l->int8_tops[0] * 1e12 >= l->read_gbs[0] * 1e9,
               "int8 peak %.0f GOP/s >= read %.1f GB/s (1 thread)", l->int8_tops[0] * 1e3,
               l->read_gbs[0]);
    const char *want = isa == CPU_ISA_AMX       ? "amx tdpbssd"
                       : isa == CPU_ISA_AVX512  ? "avx512 vpdpbusd"
                       : isa == CPU_ISA_AVXVNNI ? "avxvnni vpdpbusd"
                       : isa == CPU_ISA_AVX2    ? "avx2 vpmaddubsw"
                                                : "scalar int32";
    tap_ok(!strcmp(l->int8_unit, want), "int8 unit '%s' for %s (want '%s')", l->int8_unit,
           cpu_isa_name(isa), want);
    tap_ok(l->bf16_unit[0] != 0, "bf16 unit '%s'", l->bf16_unit);
    const char *want_f = isa >= CPU_ISA_AVX512 ? "avx512 f32 fma"
                         : isa >= CPU_ISA_AVX2 ? "avx2 f32 fma"
                                               : "scalar f32";
    tap_ok(!strcmp(l->f32_unit, want_f), "f32 unit '%s' for %s (want '%s')", l->f32_unit,
           cpu_isa_name(isa), want_f);
    tap_ok(limits_peak_f32(l, 1) == l->f32_tflops[0] * 1e12,
           "limits_peak_f32(1) is the 1-thread peak");
    tap_ok(limits_read_gbs(l, 1) == l->read_gbs[0], "limits_read_gbs(1) is the 1-thread point");
    tap_ok(limits_read_gbs(l, 100000) == l->read_gbs[l->n_read - 1],
           "more threads than CPUs: the last point");
    double d = limits_decode_tok_s(l, 1, 1e8), want_d = l->read_gbs[0] * 1e9 / 1e8;
    tap_ok(d > 0.999 * want_d && d < 1.001 * want_d, "decode prediction %.2f tok/s = read / bytes",
           d);
    double p = limits_prefill_tok_s(l, 1, 2e8, false);
    tap_ok(p > 0 && p < limits_peak_ops(l, 1, false), "prefill prediction %.1f tok/s", p);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* path's text with the line starting with key replaced by repl */
static void replace_line(const char *path, const char *key, const char *repl)
{
    char out[8192] = "", line[512];
    FILE *f = fopen(path, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f))
        strncat(out, !strncmp(line, key, strlen(key)) ? repl : line, sizeof out - strlen(out) - 1);
    fclose(f);
    write_file(path, out);
}

static void check_cache(const struct limits *l, enum cpu_isa isa, const char *dir)
{
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/state/tern/limits-%s.txt", dir, cpu_isa_name(isa));
    struct limits r;
    tap_ok(limits_load(&r, path, isa, 0, err, sizeof err) == LIMITS_CACHE_MISSING,
           "no file: missing (%s)", err);
    tap_ok(limits_save(l, path, err, sizeof err) == 0, "saved, folders made (%s)", path);
    tap_ok(limits_load(&r, path, isa, 0, err, sizeof err) == LIMITS_CACHE_OK, "read back");
    tap_ok(r.cached && r.n_read == l->n_read && r.cpus == l->cpus && !strcmp(r.cpu, l->cpu) &&
               !strcmp(r.int8_unit, l->int8_unit) && !strcmp(r.bf16_unit, l->bf16_unit) &&
               !strcmp(r.f32_unit, l->f32_unit) &&
               fabs(r.f32_tflops[0] / l->f32_tflops[0] - 1) < 1e-5,
           "read back equal: %d points, %d CPUs, '%s'", r.n_read, r.cpus, r.cpu);
    double worst = 0;
    for (int i = 0; i < l->n_read; i++) {
        double e = r.read_gbs[i] - l->read_gbs[i];
        if (e < 0) e = -e;
        if (e > worst) worst = e;
    }
    tap_ok(worst < 1e-3, "read figures equal to 1e-3 (off by %g)", worst);
    tap_ok(r.int8_tops[1] > 0.999 * l->int8_tops[1] && r.int8_tops[1] < 1.001 * l->int8_tops[1],
           "int8 peak read back");
    enum cpu_isa other = isa == CPU_ISA_AVX2 ? CPU_ISA_SCALAR : CPU_ISA_AVX2;
    tap_ok(limits_load(&r, path, other, 0, err, sizeof err) == LIMITS_CACHE_STALE,
           "another ISA: stale (%s)", err);
    tap_ok(limits_load(&r, path, isa, l->cpus + 1, err, sizeof err) == LIMITS_CACHE_STALE,
           "another CPU count: stale");
    replace_line(path, "cpu ", "cpu Imaginary CPU 9000\n");
    tap_ok(limits_load(&r, path, isa, 0, err, sizeof err) == LIMITS_CACHE_STALE,
           "another CPU model: stale (%s)", err);
    /* limits_get measures again and rewrites the file */
    tap_ok(limits_get(&r, path, isa, false, err, sizeof err) == 0 && !r.cached,
           "stale cache: measured again");
    tap_ok(limits_load(&r, path, isa, 0, err, sizeof err) == LIMITS_CACHE_OK, "and saved");
    double t0 = now_s();
    tap_ok(limits_get(&r, path, isa, false, err, sizeof err) == 0 && r.cached,
           "good cache: read, not measured");
    tap_diag("cached read took %.4f s", now_s() - t0);
    replace_line(path, "f32 0 ", "\n");
    tap_ok(limits_load(&r, path, isa, 0, err, sizeof err) == LIMITS_CACHE_CORRUPT,
           "an older tern's cache, without the f32 peak: corrupt, so measured again (%s)", err);
    tap_ok(limits_get(&r, path, isa, false, err, sizeof err) == 0 && !r.cached &&
               r.f32_tflops[0] > 0,
           "measured again with it");
    replace_line(path, "read 1 ", "read 1 banana\n");
    tap_ok(limits_load(&r, path, isa, 0, err, sizeof err) == LIMITS_CACHE_CORRUPT,
           "garbled figure: corrupt (%s)", err);
    replace_line(path, "read 1 ", "read 1 -4.0\n");
    tap_ok(limits_load(&r, path, isa, 0, err, sizeof err) == LIMITS_CACHE_CORRUPT,
           "negative figure: corrupt");
    write_file(path, "tern-limits 1\ncpu x\n");
    tap_ok(limits_load(&r, path, isa, 0, err, sizeof err) == LIMITS_CACHE_CORRUPT,
           "truncated: corrupt");
    write_file(path, "\x7f"
                     "ELF\x01\x02garbage");
    tap_ok(limits_load(&r, path, isa, 0, err, sizeof err) == LIMITS_CACHE_CORRUPT,
           "not text: corrupt");
    tap_ok(limits_get(&r, path, isa, false, err, sizeof err) == 0 && !r.cached,
           "corrupt cache: measured again");
    tap_ok(limits_load(&r, path, isa, 0, err, sizeof err) == LIMITS_CACHE_OK, "and rewritten");
    remove(path);
    snprintf(path, sizeof path, "%s/state/tern", dir);
    rmdir(path);
    snprintf(path, sizeof path, "%s/state", dir);
    rmdir(path);
}

int main(void)
{
    enum cpu_isa isa = cpu_isa_best();
    struct limits l;
    char err[512], cpu[64];
    limits_cpu_name(cpu, sizeof cpu);
    tap_diag("%s, ISA in force %s", cpu, cpu_isa_name(isa));
    double t0 = now_s();
    int rc = limits_measure(&l, isa, 0, err, sizeof err);
    tap_ok(rc == 0, "measured (%s)", rc ? err : "ok");
    if (rc) return tap_done();
    tap_diag("measured in %.2f s", now_s() - t0);
    for (int i = 0; i < l.n_read; i++)
        tap_diag("read %d threads %.1f GB/s", l.read_threads[i], l.read_gbs[i]);
    tap_diag("int8 %s: %.2f / %.2f TOP/s; bf16 %s: %.2f / %.2f TFLOP/s (1 / %d threads)",
             l.int8_unit, l.int8_tops[0], l.int8_tops[1], l.bf16_unit, l.bf16_tflops[0],
             l.bf16_tflops[1], l.cpus);
    tap_ok(!strcmp(cpu, l.cpu), "CPU model recorded");
    check_measured(&l, isa);
    char dir[] = "/tmp/tern-limits-XXXXXX";
    if (!mkdtemp(dir)) {
        tap_ok(0, "mkdtemp");
        return tap_done();
    }
    check_cache(&l, isa, dir);
    rmdir(dir);
    return tap_done();
}
