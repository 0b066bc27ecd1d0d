/* test_dequant: dequantization of Q2_K, Q3_K, IQ4_NL and IQ4_XS bit-identical
 * to gguf-py's on random blocks (dequant_ref.py writes them at test time). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "tap.h"

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
    free(q);
    free(want);
    free(got);
}

int main(void)
{
    const char *src = getenv("TERN_SRC"), *build = getenv("TERN_BUILD");
    char dir[1024], cmd[2400];
    snprintf(dir, sizeof dir, "%s/tests/conformance/dequant", build ? build : ".");
    snprintf(cmd, sizeof cmd, "python3 '%s/tests/conformance/dequant_ref.py' '%s'",
             src ? src : ".", dir);
    if (!ok(system(cmd) == 0, "dequant_ref.py writes the reference data")) return tap_done();
    const char *types[] = { "Q2_K", "Q3_K", "IQ4_NL", "IQ4_XS" };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check(dir, types[i]);
    return tap_done();
}
