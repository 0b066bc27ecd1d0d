/* test_quant: tensor formats against gguf-py (fixtures/<TYPE>.bin, made by
 * make_fixtures.py). Dequantization must be bit-identical; the Q8_0 / Q4_0 /
 * Q4_1 quantizers and the f16/bf16 converters must produce the same bytes;
 * Q8_K (no gguf-py quantizer) is checked by its own invariants. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "tap.h"

struct fixture {
    uint32_t type, n, nbytes, has_input;
    float *input, *deq;
    uint8_t *q;
};

static bool load_fixture(const char *dir, const char *name, struct fixture *fx)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "rb");
    char magic[4];
    bool good = f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "TQFX", 4) == 0 &&
                fread(&fx->type, 4, 4, f) == 4 && fx->n <= 1 << 20 && fx->nbytes <= 1 << 22;
    if (good) {
        fx->input = malloc(fx->n * sizeof(float));
        fx->deq = malloc(fx->n * sizeof(float));
        fx->q = malloc(fx->nbytes);
        good = fx->input && fx->deq && fx->q && fread(fx->input, 4, fx->n, f) == fx->n &&
               fread(fx->q, 1, fx->nbytes, f) == fx->nbytes && fread(fx->deq, 4, fx->n, f) == fx->n;
    }
    if (f) fclose(f);
    if (!good) tap_diag("cannot read fixture %s", path);
    return good;
}

static void free_fixture(struct fixture *fx)
{
    free(fx->input);
    free(fx->deq);
    free(fx->q);
}

/* Bitwise comparison (so -0.0 vs 0.0 and NaN payloads count). */
static int first_mismatch(const float *a, const float *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) != 0) return (int)i;
    return -1;
}

static void check_dequant(const char *dir, const char *name)
{
    struct fixture fx = {0};
    if (!ok(load_fixture(dir, name, &fx), "%s: fixture loads", name)) return;
    is_str(qtype_name(fx.type), name, "type number matches name");
    is_int(qtype_row_bytes(fx.type, fx.n), fx.nbytes, "row bytes match gguf-py");
    float *out = malloc(fx.n * sizeof(float));
    bool done = out && dequant_row(fx.type, fx.q, out, fx.n);
    int bad = done ? first_mismatch(out, fx.deq, fx.n) : 0;
    if (!ok(done && bad < 0, "%s: dequantization bit-identical to gguf-py (%u values)", name, fx.n))
        if (done) tap_diag("  element %d: got %.9g, want %.9g", bad, out[bad], fx.deq[bad]);
    free(out);
    free_fixture(&fx);
}

typedef bool (*quant_fn)(const float *src, void *dst, int64_t n);

static bool q8_0(const float *s, void *d, int64_t n) { return quant_row_q8_0(s, d, n); }
static bool q4_0(const float *s, void *d, int64_t n) { return quant_row_q4_0(s, d, n); }
static bool q4_1(const float *s, void *d, int64_t n) { return quant_row_q4_1(s, d, n); }

static bool f16_row(const float *s, void *d, int64_t n)
{
    for (int64_t i = 0; i < n; i++) ((qt_f16 *)d)[i] = f32_to_fp16(s[i]);
    return true;
}

static bool bf16_row(const float *s, void *d, int64_t n)
{
    for (int64_t i = 0; i < n; i++) ((qt_bf16 *)d)[i] = f32_to_bf16(s[i]);
    return true;
}

static void check_quant(const char *dir, const char *name, quant_fn fn)
{
    struct fixture fx = {0};
    if (!load_fixture(dir, name, &fx)) {
        ok(0, "%s: fixture loads", name);
        return;
    }
    uint8_t *out = calloc(1, fx.nbytes);
    bool done = out && fn(fx.input, out, fx.n);
    size_t bad = 0;
    while (done && bad < fx.nbytes && out[bad] == fx.q[bad]) bad++;
    if (!ok(done && bad == fx.nbytes, "%s: quantization byte-identical to gguf-py (%u bytes)", name,
            fx.nbytes))
        if (done) tap_diag("  byte %zu: got 0x%02x, want 0x%02x", bad, out[bad], fx.q[bad]);
    free(out);
    free_fixture(&fx);
}

/* Q8_K: each value within half a step of the input, the largest magnitude
 * mapped to -127, bsums the sums of 16 quants. */
static void check_q8_K(const char *dir)
{
    struct fixture fx = {0};
    if (!load_fixture(dir, "Q8_0", &fx)) {
        ok(0, "Q8_K: input loads");
        return;
    }
    block_q8_K *b = malloc((fx.n / QK_K) * sizeof *b);
    float *back = malloc(fx.n * sizeof(float));
    bool done = b && back && quant_row_q8_K(fx.input, b, fx.n) && dequant_row(QT_Q8_K, b, back, fx.n);
    int far = 0, sums = 0, peak = 0;
    for (uint32_t k = 0; done && k < fx.n / QK_K; k++) {
        for (int j = 0; j < QK_K; j++) {
            float x = fx.input[k * QK_K + j];
            if (fabsf(back[k * QK_K + j] - x) > fabsf(b[k].d) * 0.5001f) far++;
            if (b[k].qs[j] == -127) peak++;
        }
        for (int g = 0; g < QK_K / 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += b[k].qs[g * 16 + j];
            sums += s != b[k].bsums[g];
        }
    }
    ok(done && far == 0, "Q8_K: round trip within half a step (%d off)", far);
    ok(done && sums == 0, "Q8_K: bsums are group sums (%d wrong)", sums);
    ok(done && peak >= (int)(fx.n / QK_K), "Q8_K: each block's extreme maps to -127");
    float zeros[QK_K] = {0};
    block_q8_K z;
    ok(quant_row_q8_K(zeros, &z, QK_K) && z.d == 0.0f && z.qs[0] == 0, "Q8_K: zero block");
    ok(!quant_row_q8_K(zeros, &z, 100), "Q8_K: n not a multiple of 256 rejected");
    free(b);
    free(back);
    free_fixture(&fx);
}

/* Q8_0 with scale exactly 1 (amax 127): the quants are the inputs rounded,
 * halves away from zero as ggml's roundf-based reference (libm is the oracle;
 * gguf-py's floor(|x| + 0.5) differs at 0.49999997). */
static void check_q8_0_ties(void)
{
    float x[QK8_0] = {127.0f, 0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 126.5f, -126.5f,
                      0.49999997f, -0.49999997f, 0.50000006f, 3.4999998f, 0.0f, -0.0f, 64.5f};
    for (int j = 16; j < QK8_0; j++) x[j] = (float)(j - 24) + 0.25f * (float)(j % 4);
    block_q8_0 b;
    int bad = 0;
    ok(quant_row_q8_0(x, &b, QK8_0) && fp16_to_f32(b.d) == 1.0f, "Q8_0 ties: scale 1");
    for (int j = 0; j < QK8_0; j++)
        if (b.qs[j] != (int8_t)roundf(x[j])) {
            if (!bad++) tap_diag("  x=%.9g: got %d, roundf %g", x[j], b.qs[j], roundf(x[j]));
        }
    ok(bad == 0, "Q8_0 rounds halves away from zero like roundf (%d differ)", bad);
}

/* FNV-1a over little-endian u64 words, zero-padded (as make_fixtures.py). */
struct fold {
    uint64_t h;
    uint8_t buf[8];
    int n;
};

static void fold_bytes(struct fold *f, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        f->buf[f->n++] = ((const uint8_t *)p)[i];
        if (f->n == 8) {
            uint64_t w = 0;
            for (int k = 7; k >= 0; k--) w = w << 8 | f->buf[k];
            f->h = (f->h ^ w) * 0x100000001b3ull;
            f->n = 0;
        }
    }
}

static uint64_t fold_end(struct fold *f)
{
    static const uint8_t zeros[8];
    if (f->n) fold_bytes(f, zeros, (size_t)(8 - f->n));
    return f->h;
}

static uint64_t json_u64(const char *text, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(text, pat);
    return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

/* Every f16 -> f32, and ~a million f32 bit patterns -> f16 / bf16, against
 * numpy's conversions (hashed in fixtures/conversions.json). */
static void check_conversions(const char *dir)
{
    char path[1024], text[1024] = "";
    snprintf(path, sizeof path, "%s/conversions.json", dir);
    FILE *fp = fopen(path, "r");
    size_t got = fp ? fread(text, 1, sizeof text - 1, fp) : 0;
    text[got] = 0;
    if (fp) fclose(fp);
    if (!ok(got > 0, "conversions.json loads")) return;
    struct fold a = {0xcbf29ce484222325ull, {0}, 0}, b = a, c = a;
    for (uint32_t h = 0; h < 65536; h++) {
        float v = fp16_to_f32((qt_f16)h);
        if (isnan(v)) v = 0.0f; /* NaN payloads are not compared */
        fold_bytes(&a, &v, 4);
    }
    uint64_t stride = json_u64(text, "f32_stride"), n = 0;
    for (uint64_t bits = 0; stride && bits < (1ull << 32); bits += stride) {
        uint32_t u = (uint32_t)bits;
        float v;
        memcpy(&v, &u, 4);
        if (isnan(v)) continue;
        qt_f16 h = f32_to_fp16(v);
        qt_bf16 bf = f32_to_bf16(v);
        fold_bytes(&b, &h, 2);
        fold_bytes(&c, &bf, 2);
        n++;
    }
    ok(fold_end(&a) == json_u64(text, "f16_to_f32_all"), "all 65536 f16 values convert to f32 as numpy");
    is_int(n, json_u64(text, "n_strided_finite"), "strided f32 inputs");
    ok(fold_end(&b) == json_u64(text, "f32_to_f16_stride"), "f32 -> f16 rounds as numpy (%llu inputs)",
       (unsigned long long)n);
    ok(fold_end(&c) == json_u64(text, "f32_to_bf16_stride"), "f32 -> bf16 rounds as gguf-py (%llu inputs)",
       (unsigned long long)n);
}

static void check_table(void)
{
    ok(qtype_get(4) == NULL && qtype_get(1000) == NULL, "retired/unknown type numbers");
    is_str(qtype_name(77), "unknown", "unknown type name");
    is_int(qtype_row_bytes(QT_Q4_K, 4096), 16 * 144, "Q4_K row bytes");
    is_int(qtype_row_bytes(QT_Q4_K, 100), 0, "partial block row");
    /* IQ2_XXS (16): known, no dequantization (Q2_K, Q3_K, IQ4_NL and IQ4_XS
     * have one now, checked in tests/e2e/conformance/test_dequant) */
    ok(qtype_get(16) && !qtype_get(16)->supported, "IQ2_XXS known but not supported");
    float y[256];
    ok(!dequant_row(16, y, y, 256), "dequant of an unsupported type refused");
    ok(!dequant_row(QT_Q8_0, y, y, 31), "dequant of a partial block refused");
    ok(!quant_row_q8_0(y, NULL, 33), "quant of a partial block refused");
}

int main(int argc, char **argv)
{
    if (argc < 2) return tap_bail("usage: test_quant FIXTURE_DIR");
    const char *dir = argv[1];
    static const char *const types[] = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0",
                                        "Q5_1", "Q4_K", "Q5_K", "Q6_K"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check_dequant(dir, types[i]);
    check_quant(dir, "F16", f16_row);
    check_quant(dir, "BF16", bf16_row);
    check_quant(dir, "Q8_0", q8_0);
    check_quant(dir, "Q4_0", q4_0);
    check_quant(dir, "Q4_1", q4_1);
    check_q8_K(dir);
    check_q8_0_ties();
    check_conversions(dir);
    check_table();
    return tap_done();
}
