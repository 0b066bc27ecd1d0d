/* test_dequant: dequantization of Q2_K, Q3_K, IQ4_NL and IQ4_XS bit-identical
 * to gguf-py's on random blocks (dequant_ref.py writes them at test time),
 * and their matmul kernels (8-bit activations) against the f64 product of
 * the dequantized rows with x, on the scalar and the best ISA path. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "cpu/matmul.h"
#include "quant.h"
#include "tap.h"

/* y = W x for the fixture's bytes as 8 rows, 3 tokens: within the error
 * of rounding x to 8 bits (|err| <= 1/254 of each block's max per element). */
static void check_matmul(uint32_t type, const uint8_t *q, const float *deq, uint32_t n)
{
    enum { ROWS = 8, NTOK = 3 };
    const int64_t cols = n / ROWS;
    float *x = malloc((size_t)NTOK * cols * sizeof(float)), y[NTOK * ROWS];
    if (!x) return;
    uint32_t seed = 12345;
    for (int64_t i = 0; i < NTOK * cols; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((int32_t)(seed >> 8) % 2001 - 1000) / 1000.0f;
    }
    const enum cpu_isa isas[2] = { CPU_ISA_SCALAR, cpu_isa_detect() };
    for (int k = 0; k < 2; k++) {
        struct mm_scratch mm = { 0 };
        cpu_matmul(NULL, isas[k], &mm, type, q, ROWS, cols, x, NTOK, y);
        mm_scratch_free(&mm);
        int bad = 0;
        double worst = 0.0;
        for (int t = 0; t < NTOK; t++)
            for (int r = 0; r < ROWS; r++) {
                double ref = 0.0, mag = 0.0;
                for (int64_t c = 0; c < cols; c++) {
                    ref += (double)deq[r * cols + c] * x[t * cols + c];
                    mag += fabs((double)deq[r * cols + c]);
                }
                const double err = fabs((double)y[t * ROWS + r] - ref), lim = mag / 254.0 + 1e-4;
                worst = fmax(worst, err / lim);
                bad += !(err <= lim);
            }
        ok(bad == 0, "%s matmul (%s): within activation rounding of the f64 product (worst "
           "%.2f of the bound)", qtype_name(type), cpu_isa_name(isas[k]), worst);
    }
    free(x);
}

static void check(const char *dir, const char *name)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "rb");
    uint32_t hdr[3];
    if (!ok(f && fread(hdr, 4, 3, f) == 3 && hdr[1] <= 1 << 20 && hdr[2] <= 1 << 22,
            "%s: reference data reads", name)) {
        if (f) fclose(f);
        return;
    }
    uint8_t *q = malloc(hdr[2]);
    float *want = malloc(hdr[1] * sizeof(float)), *got = malloc(hdr[1] * sizeof(float));
    const bool rd = q && want && got && fread(q, 1, hdr[2], f) == hdr[2] &&
                    fread(want, 4, hdr[1], f) == hdr[1];
    fclose(f);
    is_str(qtype_name(hdr[0]), name, "type number names the type");
    is_int(qtype_row_bytes(hdr[0], hdr[1]), hdr[2], "row bytes match gguf-py");
    const bool done = rd && dequant_row(hdr[0], q, got, hdr[1]);
    int64_t bad = -1;
    for (uint32_t i = 0; done && i < hdr[1] && bad < 0; i++)
        if (memcmp(&got[i], &want[i], 4)) bad = i;
    if (!ok(done && bad < 0, "%s: dequantization bit-identical to gguf-py (%u values)", name,
            hdr[1]) && done)
        tap_diag("  element %lld: got %.9g, want %.9g", (long long)bad, got[bad], want[bad]);
    if (rd) check_matmul(hdr[0], q, want, hdr[1]);
    free(q);
    free(want);
    free(got);
}

int main(void)
{
    const char *src = getenv("TERN_SRC"), *build = getenv("TERN_BUILD");
    char dir[1024], cmd[2400];
    snprintf(dir, sizeof dir, "%s/tests/e2e/conformance/dequant", build ? build : ".");
    snprintf(cmd, sizeof cmd, "python3 '%s/tests/e2e/conformance/dequant_ref.py' '%s'",
             src ? src : ".", dir);
    if (!ok(system(cmd) == 0, "dequant_ref.py writes the reference data")) return tap_done();
    const char *types[] = { "Q2_K", "Q3_K", "IQ4_NL", "IQ4_XS" };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check(dir, types[i]);
    return tap_done();
}
