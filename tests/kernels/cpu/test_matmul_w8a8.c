/* test_matmul_w8a8: the opt-in W8A8 prefill on AMX int8 tiles
 * (mm_scratch.w8a8, kernels/cpu/mm_w8a8_amx.c): packed Q4_0, Q4_1, Q8_0, Q4_K,
 * Q5_0, Q6_K, Q5_1, Q5_K; plain (never packed) Q2_K, Q3_K, IQ4_NL, IQ4_XS.
 *  - the vector row conversion (mm_w8a8_row_f32) equals dequant_row bit for
 *    bit, on random and on all-0 / all-1 code bytes.
 *  - against an f64 oracle of the dequantized weights times the unquantized
 *    x, within the bound of the two quantization steps: with s_w = max|w|/127
 *    of the row's and s_x = max|x|/127 of the token's column group
 *    (MM_W8A8_G), |w − ŵ| ≤ s_w/2 and |x − x̂| ≤ s_x/2, so
 *    |Σ w x − Σ ŵ x̂| ≤ Σ|w|·s_x/2 + Σ(|x| + s_x/2)·s_w/2;
 *    plus 1e-5 · Σ|w x| + 1e-6 for the f32 steps (dequantization, scales,
 *    the final product). The int32 sums are exact.
 *  - equal bit for bit to a scalar emulation of the same numbers (the
 *    bound alone would miss a scale off by a few per cent).
 *  - 1 thread equals 3 threads bit for bit; the result differs from the
 *    exact path (the tiles ran); below MM_W8A8_MIN_N tokens, or with the
 *    switch off, the exact path's bits.
 * Where AMX is unusable or TERN_ISA caps it: skipped with the reason, and
 * the switch checked to leave the exact path's bits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/matmul.h"
#include "cpu/mm_impl.h"
#include "cpu/threadpool.h"
#include "mm_testdata.h"
#include "tap.h"

struct shape {
    int64_t rows, cols, n;
};

/* rows: whole 32-row strips, a 16-row and an 8-row remainder; tokens: a
 * partial tile, two 256-token blocks; cols over several 1024-column chunks,
 * and a last scale group of 128 columns (640, Gemma 3's width) */
static const struct shape shapes[] = {
    { 64, 512, 32 }, { 48, 1280, 37 }, { 40, 256, 300 }, { 96, 2048, 64 }, { 8, 3072, 33 },
    { 32, 640, 40 },
};

static const uint32_t types[] = { QT_Q4_0, QT_Q4_1, QT_Q8_0, QT_Q4_K, QT_Q5_0, QT_Q6_K, QT_Q5_1,
                                  QT_Q5_K };
/* the types mm_lowbit.c multiplies, plain rows (mm_pack leaves them) */
static const uint32_t plain_types[] = { QT_Q2_K, QT_Q3_K, QT_IQ4_NL, QT_IQ4_XS };
/* plain rows need no 8-row tiles: odd row counts */
static const struct shape plain_shapes[] = { { 20, 512, 35 }, { 37, 1024, 64 } };

/* Rows of the weights (ptype at pw, as the matmul task holds them) through
 * the vector conversion against the scalar dequant_row (wf): the number of
 * rows that differ in any bit. */
static int64_t conv_differ(uint32_t ptype, const void *pw, size_t rb, int64_t R, int64_t C,
                           const float *wf)
{
    const struct mm_task t = { .wtype = ptype, .w = pw, .row_bytes = rb, .rows = R, .cols = C };
    float *row = malloc(sizeof(float) * (size_t)C);
    int64_t bad = 0;
    for (int64_t r = 0; r < R; r++) {
        memset(row, 0xFF, sizeof(float) * (size_t)C);   /* NaN where nothing was written */
        mm_w8a8_row_f32(&t, r, row);
        bad += memcmp(row, wf + r * C, sizeof(float) * (size_t)C) != 0;
    }
    free(row);
    return bad;
}

/* The conversion on random weights of every shape the products use. */
static void check_conv(uint32_t wt, bool packed, const struct shape *s, uint64_t *seed)
{
    const int64_t R = s->rows, C = s->cols;
    const size_t rb = qtype_row_bytes(wt, (uint64_t)C);
    /* packed K-quants take more bytes than plain (widened scales) */
    uint8_t *w = malloc(rb * (size_t)R), *pw = malloc(packed ? mm_pack_size(CPU_ISA_AMX, wt, R, C) : 1);
    float *wf = malloc(sizeof(float) * (size_t)(R * C));
    td_weights(wt, w, R, C, seed);
    for (int64_t r = 0; r < R; r++) dequant_row(wt, w + (size_t)r * rb, wf + r * C, C);
    const uint32_t pt = packed ? mm_pack(CPU_ISA_AMX, wt, w, R, C, pw) : wt;
    const int64_t bad = conv_differ(pt, packed ? (const void *)pw : w, rb, R, C, wf);
    ok(mm_w8a8_supported(pt) && bad == 0, "%s %s %lldx%lld: vector row conversion equals dequant_row "
       "bit for bit (%lld rows differ)", qtype_name(wt), packed ? "packed" : "plain", (long long)R,
       (long long)C, (long long)bad);
    free(w); free(pw); free(wf);
}

/* The conversion on extreme code bytes (every byte 0x00, then 0xFF: the
 * lowest and highest codes, fifth / hmask bits all clear or all set). */
static void check_conv_extremes(uint32_t wt, bool packed, uint64_t *seed)
{
    const int64_t R = 16, C = 512;
    const size_t rb = qtype_row_bytes(wt, (uint64_t)C);
    /* packed K-quants take more bytes than plain (widened scales) */
    uint8_t *w = malloc(rb * (size_t)R), *pw = malloc(packed ? mm_pack_size(CPU_ISA_AMX, wt, R, C) : 1);
    float *wf = malloc(sizeof(float) * (size_t)(R * C));
    int64_t bad = 0;
    for (int f = 0; f < 2; f++) {
        td_weights_fill(wt, w, R, C, seed, f ? 0xFF : 0x00);
        for (int64_t r = 0; r < R; r++) dequant_row(wt, w + (size_t)r * rb, wf + r * C, C);
        const uint32_t pt = packed ? mm_pack(CPU_ISA_AMX, wt, w, R, C, pw) : wt;
        bad += conv_differ(pt, packed ? (const void *)pw : w, rb, R, C, wf);
    }
    ok(bad == 0, "%s %s: conversion of all-0 / all-1 code bytes equals dequant_row bit for bit "
       "(%lld rows differ)", qtype_name(wt), packed ? "packed" : "plain", (long long)bad);
    free(w); free(pw); free(wf);
}

/* Every type's conversion (AVX-512 only, no tiles: also under a cap). */
static void check_conv_all(uint64_t *seed)
{
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            if (shapes[si].cols % qtype_get(types[k])->block_size == 0)
                check_conv(types[k], true, &shapes[si], seed);
        check_conv_extremes(types[k], true, seed);
    }
    for (size_t k = 0; k < sizeof plain_types / sizeof plain_types[0]; k++) {
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            if (shapes[si].cols % qtype_get(plain_types[k])->block_size == 0)
                check_conv(plain_types[k], false, &shapes[si], seed);
        for (size_t si = 0; si < sizeof plain_shapes / sizeof plain_shapes[0]; si++)
            check_conv(plain_types[k], false, &plain_shapes[si], seed);
        check_conv_extremes(plain_types[k], false, seed);
    }
}

/* The kernel's numbers emulated in scalar C: f32 group maxima, s = max /
 * 127 and q = rint(v · (127 / max)) in f32 (round to nearest even, as
 * cvtps2dq), exact integer sums per group, and acc = Σ_g (f32)sum_g ·
 * (s_x · s_w) accumulated with fmaf, the first group by a product. */
static void quant_group(const float *v, int64_t len, int8_t *q, float *s)
{
    float mx = 0.0f;
    for (int64_t i = 0; i < len; i++) mx = fmaxf(mx, fabsf(v[i]));
    *s = mx / 127.0f;
    const float inv = mx > 0.0f ? 127.0f / mx : 0.0f;
    for (int64_t i = 0; i < len; i++) {
        float r = rintf(v[i] * inv);
        q[i] = (int8_t)(r > 127.0f ? 127 : r < -128.0f ? -128 : r);
    }
}

static float emulate(const float *w, const float *x, int64_t C, int8_t *qw, int8_t *qx)
{
    float acc = 0.0f;
    for (int64_t g0 = 0, g = 0; g0 < C; g0 += MM_W8A8_G, g++) {
        const int64_t len = C - g0 < MM_W8A8_G ? C - g0 : MM_W8A8_G;
        float sw, sx;
        quant_group(w + g0, len, qw, &sw);
        quant_group(x + g0, len, qx, &sx);
        int32_t sum = 0;
        for (int64_t i = 0; i < len; i++) sum += qw[i] * qx[i];
        const float sc = sx * sw, v = (float)sum;
        acc = g == 0 ? v * sc : fmaf(v, sc, acc);
    }
    return acc;
}

static void check(uint32_t wt, bool packed, const struct shape *s, struct threadpool *tp3,
                  struct mm_scratch *scr, uint64_t *seed, double *worst)
{
    const int64_t R = s->rows, C = s->cols, N = s->n;
    const size_t rb = qtype_row_bytes(wt, (uint64_t)C), ny = (size_t)(R * N);
    uint8_t *w = malloc(rb * (size_t)R);
    float *x = malloc(sizeof(float) * (size_t)(N * C)), *wf = malloc(sizeof(float) * (size_t)(R * C));
    float *y1 = malloc(sizeof(float) * ny), *y3 = malloc(sizeof(float) * ny);
    float *ye = malloc(sizeof(float) * ny);
    td_weights(wt, w, R, C, seed);
    td_acts(x, N, C, seed);
    for (int64_t r = 0; r < R; r++) dequant_row(wt, w + (size_t)r * rb, wf + r * C, C);
    uint32_t ptype = wt;
    void *pw = w;
    if (packed) {
        size_t pb = mm_pack_size(CPU_ISA_AMX, wt, R, C);
        pw = malloc(pb);
        ptype = mm_pack(CPU_ISA_AMX, wt, w, R, C, pw);
    }
    const char *tn = qtype_name(wt), *pk = packed ? "packed" : "plain";
    ok(mm_w8a8_supported(ptype), "%s %s: W8A8 supported", tn, pk);
    scr->w8a8 = true;
    cpu_matmul(NULL, CPU_ISA_AMX, scr, ptype, pw, R, C, x, N, y1);
    cpu_matmul(tp3, CPU_ISA_AMX, scr, ptype, pw, R, C, x, N, y3);
    scr->w8a8 = false;
    cpu_matmul(NULL, CPU_ISA_AMX, scr, ptype, pw, R, C, x, N, ye);
    double wr = 0.0;
    int64_t at = -1;
    size_t differ = 0;
    const int64_t G = MM_W8A8_G;
    size_t emul_differ = 0;
    int8_t *qw = malloc((size_t)G), *qx = malloc((size_t)G);
    for (int64_t j = 0; j < N; j++)
        for (int64_t r = 0; r < R; r++)
            emul_differ += emulate(wf + r * C, x + j * C, C, qw, qx) != y1[j * R + r];
    free(qw); free(qx);
    for (int64_t j = 0; j < N; j++) {
        for (int64_t r = 0; r < R; r++) {
            double y = 0.0, mag = 0.0, tol = 0.0;
            for (int64_t g0 = 0; g0 < C; g0 += G) {   /* the scales of each column group */
                const int64_t g1 = g0 + G < C ? g0 + G : C;
                double wmax = 0.0, xmax = 0.0;
                for (int64_t i = g0; i < g1; i++) {
                    wmax = fmax(wmax, fabs(wf[r * C + i]));
                    xmax = fmax(xmax, fabs(x[j * C + i]));
                }
                const double sw = wmax / 127.0, sx = xmax / 127.0;
                for (int64_t i = g0; i < g1; i++) {
                    const double a = wf[r * C + i], b = x[j * C + i];
                    y += a * b;
                    mag += fabs(a * b);
                    tol += fabs(a) * sx / 2 + (fabs(b) + sx / 2) * sw / 2;
                }
            }
            tol += 1e-5 * mag + 1e-6;
            const size_t k = (size_t)(j * R + r);
            const double e = fabs((double)y1[k] - y) / tol;
            if (!(e <= wr)) wr = e, at = (int64_t)k;
            differ += y1[k] != ye[k];
        }
    }
    if (wr > *worst) *worst = wr;
    if (!ok(wr <= 1.0, "%s %s %lldx%lld n=%lld w8a8 vs f64 oracle: worst %.3f of the bound", tn, pk,
            (long long)R, (long long)C, (long long)N, wr))
        tap_diag("  at %lld: got %.9g", (long long)at, y1[at]);
    ok(emul_differ == 0, "%s %s %lldx%lld n=%lld w8a8 equals its scalar emulation bit for bit "
       "(%zu of %zu differ)", tn, pk, (long long)R, (long long)C, (long long)N, emul_differ, ny);
    ok(memcmp(y1, y3, sizeof(float) * ny) == 0, "%s %s %lldx%lld n=%lld w8a8: 3 threads equal 1", tn,
       pk, (long long)R, (long long)C, (long long)N);
    ok(differ > 0, "%s %s %lldx%lld n=%lld w8a8: the tiles ran (%zu of %zu outputs differ from exact)",
       tn, pk, (long long)R, (long long)C, (long long)N, differ, ny);
    /* below the minimum batch the switch changes nothing */
    const int64_t ns = MM_W8A8_MIN_N - 1;
    scr->w8a8 = true;
    cpu_matmul(tp3, CPU_ISA_AMX, scr, ptype, pw, R, C, x, ns, y1);
    scr->w8a8 = false;
    cpu_matmul(tp3, CPU_ISA_AMX, scr, ptype, pw, R, C, x, ns, ye);
    ok(memcmp(y1, ye, sizeof(float) * (size_t)(ns * R)) == 0,
       "%s %s %lldx%lld n=%lld (below %d): w8a8 on equals exact bit for bit", tn, pk, (long long)R,
       (long long)C, (long long)ns, MM_W8A8_MIN_N);
    if (packed) free(pw);
    free(w); free(x); free(wf); free(y1); free(y3); free(ye);
}

int main(void)
{
    char why[128];
    if (cpu_isa_best() != CPU_ISA_AMX) {
        if (cpu_amx_usable(why, sizeof why)) snprintf(why, sizeof why, "TERN_ISA caps it");
        char msg[200];
        snprintf(msg, sizeof msg, "W8A8 AMX int8 prefill: %s", why);
        tap_skip(msg);
        uint64_t cseed = 779;
        if (cpu_isa_best() >= CPU_ISA_AVX512) check_conv_all(&cseed);   /* no tiles in it */
        /* below amx the switch leaves the exact path: its bits with it on */
        const enum cpu_isa isa = cpu_isa_best();
        const int64_t R = 64, C = 512, N = 64;
        uint64_t seed = 778;
        struct mm_scratch scr = { 0 };
        uint8_t *w = malloc(qtype_row_bytes(QT_Q4_0, C) * R);
        uint8_t *pw = malloc(qtype_row_bytes(QT_Q4_0, C) * R + 4096);
        float *x = malloc(sizeof(float) * N * C), *y = malloc(sizeof(float) * 2 * N * R);
        td_weights(QT_Q4_0, w, R, C, &seed);
        td_acts(x, N, C, &seed);
        const uint32_t packed = mm_pack(isa, QT_Q4_0, w, R, C, pw); /* 0: not packed (scalar) */
        const uint32_t pt = packed ? packed : QT_Q4_0;
        const void *wp = packed ? (const void *)pw : w;
        scr.w8a8 = true;
        cpu_matmul(NULL, isa, &scr, pt, wp, R, C, x, N, y);
        scr.w8a8 = false;
        cpu_matmul(NULL, isa, &scr, pt, wp, R, C, x, N, y + N * R);
        ok(memcmp(y, y + N * R, sizeof(float) * N * R) == 0,
           "below amx (%s) the switch keeps the exact path's bits", cpu_isa_name(isa));
        free(w); free(pw); free(x); free(y);
        mm_scratch_free(&scr);
        return tap_done();
    }
    uint64_t seed = 777;
    struct mm_scratch scr = { 0 };
    struct threadpool *tp3 = tp_open(3);
    double worst = 0.0;
    check_conv_all(&seed);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            if (shapes[si].cols % qtype_get(types[k])->block_size) continue;
            check(types[k], true, &shapes[si], tp3, &scr, &seed, &worst);
        }
    for (size_t k = 0; k < sizeof plain_types / sizeof plain_types[0]; k++) {
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            if (shapes[si].cols % qtype_get(plain_types[k])->block_size) continue;
            check(plain_types[k], false, &shapes[si], tp3, &scr, &seed, &worst);
        }
        for (size_t si = 0; si < sizeof plain_shapes / sizeof plain_shapes[0]; si++)
            check(plain_types[k], false, &plain_shapes[si], tp3, &scr, &seed, &worst);
    }
    /* plain rows of the packable types (the conversion reads their tiles):
     * the exact path */
    {
        const int64_t R = 64, C = 512, N = 40;
        static const uint32_t other[] = { QT_Q5_1, QT_Q5_K, QT_Q4_0 };
        for (size_t k = 0; k < 3; k++) {
            const size_t rb = qtype_row_bytes(other[k], C);
            uint8_t *w = malloc(rb * R);
            float *x = malloc(sizeof(float) * N * C), *ya = malloc(sizeof(float) * 2 * N * R);
            td_weights(other[k], w, R, C, &seed);
            td_acts(x, N, C, &seed);
            const uint32_t pt = other[k];
            const void *wp = w;
            scr.w8a8 = true;
            cpu_matmul(tp3, CPU_ISA_AMX, &scr, pt, wp, R, C, x, N, ya);
            scr.w8a8 = false;
            cpu_matmul(tp3, CPU_ISA_AMX, &scr, pt, wp, R, C, x, N, ya + N * R);
            ok(!mm_w8a8_supported(pt) && memcmp(ya, ya + N * R, sizeof(float) * N * R) == 0,
               "%s plain: no W8A8 conversion, the exact path's bits", qtype_name(other[k]));
            free(w); free(x); free(ya);
        }
    }
    /* a multi call mixing a W8A8 type with F16 (bf16 tiles): each as alone */
    {
        const int64_t R = 64, C = 512, N = 40;
        uint8_t *wq = malloc(qtype_row_bytes(QT_Q4_0, C) * R), *wh = malloc(qtype_row_bytes(QT_F16, C) * R);
        float *x = malloc(sizeof(float) * N * C), *ya = malloc(sizeof(float) * 4 * N * R);
        float *yb = ya + N * R, *ya1 = yb + N * R, *yb1 = ya1 + N * R;
        td_weights(QT_Q4_0, wq, R, C, &seed);
        td_weights(QT_F16, wh, R, C, &seed);
        td_acts(x, N, C, &seed);
        scr.w8a8 = true;
        uint8_t *pq = malloc(qtype_row_bytes(QT_Q4_0, C) * R);
        const uint32_t pt = mm_pack(CPU_ISA_AMX, QT_Q4_0, wq, R, C, pq);
        struct mm_op ops[2] = { { pt, pq, R, ya }, { QT_F16, wh, R, yb } };
        cpu_matmul_multi(tp3, CPU_ISA_AMX, &scr, 2, ops, C, x, N);
        cpu_matmul(NULL, CPU_ISA_AMX, &scr, pt, pq, R, C, x, N, ya1);
        cpu_matmul(NULL, CPU_ISA_AMX, &scr, QT_F16, wh, R, C, x, N, yb1);
        scr.w8a8 = false;
        ok(memcmp(ya, ya1, sizeof(float) * N * R) == 0 && memcmp(yb, yb1, sizeof(float) * N * R) == 0,
           "multi call Q4_0 (w8a8) + F16 (bf16 tiles) equals the separate calls");
        free(wq); free(pq); free(wh); free(x); free(ya);
    }
    tap_diag("worst error: %.3f of the bound", worst);
    tp_close(tp3);
    mm_scratch_free(&scr);
    return tap_done();
}
