/* test_matmul: cpu_matmul for every weight type and several shapes
 * (n = 1 decode, n > 1 prefill, odd row counts, 1 and 3 threads).
 *  - scalar path vs an oracle that dequantizes W with kernels/quant.c
 *    (dequant_row) and takes f64 dot products with the unquantized x. The
 *    tolerance per output is the bound that 8-bit activations allow:
 *    Σ_i |w_i| · d_b(i) / 2 (d_b = max|x| / 127 over i's block of 32, or
 *    of 256 for the K-quants, which take the reference's Q8_K), plus
 *    f32 summation slack 1e-5 · Σ|w_i x_i|. F32/F16/BF16 use x unquantized.
 *  - every SIMD path this CPU runs vs the scalar path: the activations are
 *    bit-identical and the integer dots exact, so only the f32 summation
 *    order differs: tolerance 1e-5 · Σ|w_i x_i|.
 *  - the SIMD activation quantizers produce exactly the scalar bytes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu/matmul.h"
#include "cpu/mm_impl.h"
#include "cpu/threadpool.h"
#include "mm_testdata.h"
#include "tap.h"

static const uint32_t types[] = { QT_F32, QT_F16, QT_BF16, QT_Q8_0, QT_Q4_0, QT_Q4_1,
                                  QT_Q5_0, QT_Q5_1, QT_Q4_K, QT_Q5_K, QT_Q6_K };

struct shape {
    int64_t rows, cols, n;
};

/* cols are multiples of 256 so every type can use them; 576 (SmolLM2) only
 * for the 32-block types. */
static const struct shape shapes[] = {
    { 1, 256, 1 }, { 37, 256, 1 }, { 64, 512, 1 }, { 13, 256, 3 },
    { 40, 512, 8 }, { 21, 256, 37 }, { 67, 576, 2 }, { 19, 576, 19 },
};

struct oracle {
    double *y;      /* n × rows, f64 dot of dequantized W with x */
    double *tol;    /* n × rows, bound for the scalar path */
    double *mag;    /* n × rows, Σ|w_i x_i| */
    double *tol_bf16;   /* n × rows, the AMX-BF16 bound: (2^-7 + 1e-5) · Σ|w_i x_i| + 1e-6 */
};

/* F16 / BF16 weights on AMX-BF16 tiles or AVX512_BF16's vdpbf16ps
 * (prefill, isa amx, or avx512 on a CPU with AVX512_BF16): weights and
 * activations rounded to bf16 (relative error ≤ 2^-8 each), so a product
 * is off by at most 2^-7 of itself; f32 sums. Bound: (2^-7 + 1e-5) ·
 * Σ|w_i x_i| + 1e-6. */
static bool bf16_isa(enum cpu_isa isa)
{
    return isa == CPU_ISA_AMX || (isa == CPU_ISA_AVX512 && cpu_avx512bf16());
}

static bool amx_bf16_case(enum cpu_isa isa, uint32_t wtype, const struct shape *s)
{
    return bf16_isa(isa) && (wtype == QT_F16 || wtype == QT_BF16) && s->n >= MM_BF16_MIN_N &&
           s->cols % 32 == 0;
}

static void oracle_run(uint32_t wtype, const uint8_t *w, const struct shape *s,
                       const float *x, struct oracle *o)
{
    size_t rb = qtype_row_bytes(wtype, (uint64_t)s->cols);
    float *wf = malloc(sizeof(float) * (size_t)s->cols);
    double *dhalf = malloc(sizeof(double) * (size_t)(s->n * s->cols));
    bool quantized = mm_wants_xq(wtype);
    /* K-quants take the reference's Q8_K activations (one scale per 256);
     * the others its Q8_0 (per 32, d rounded to f16: |q| · |d - max/127| more). */
    const int qb = mm_wants_q8k(wtype) ? 256 : 32;
    for (int64_t j = 0; j < s->n; j++)
        for (int64_t b = 0; b < s->cols / qb; b++) {
            float amax = 0.0f;
            for (int i = 0; i < qb; i++) amax = fmaxf(amax, fabsf(x[j * s->cols + b * qb + i]));
            double d = amax / 127.0;
            double d16 = qb == 32 && !mm_wants_q8_f32d(wtype) ? mm_fp16_to_f32(f32_to_fp16(amax / 127.0f)) : d;
            for (int i = 0; i < qb; i++)
                dhalf[j * s->cols + b * qb + i] =
                    quantized ? (d / 2.0 + 127.0 * fabs(d16 - d)) * 1.0001 : 0.0;
        }
    for (int64_t r = 0; r < s->rows; r++) {
        dequant_row(wtype, w + rb * (size_t)r, wf, s->cols);
        for (int64_t j = 0; j < s->n; j++) {
            double acc = 0.0, bound = 0.0, mag = 0.0;
            for (int64_t i = 0; i < s->cols; i++) {
                double xi = x[j * s->cols + i];
                acc += (double)wf[i] * xi;
                mag += fabs((double)wf[i] * xi);
                bound += fabs((double)wf[i]) * dhalf[j * s->cols + i];
            }
            o->y[j * s->rows + r] = acc;
            o->mag[j * s->rows + r] = mag;
            o->tol[j * s->rows + r] = bound + 1e-5 * mag + 1e-6;
            o->tol_bf16[j * s->rows + r] = (0x1p-7 + 1e-5) * mag + 1e-6;
        }
    }
    free(dhalf);
    free(wf);
}

/* Largest |got - want| / tol over all outputs (≤ 1 passes). */
static double worst_ratio(const float *got, const double *want, const double *tol, int64_t count,
                          int64_t *at)
{
    double worst = 0.0;
    *at = 0;
    for (int64_t i = 0; i < count; i++) {
        double r = fabs((double)got[i] - want[i]) / tol[i];
        if (!(r <= worst)) {   /* NaN counts as worst */
            worst = isnan(r) ? INFINITY : r;
            *at = i;
        }
    }
    return worst;
}

static void check_case(uint32_t wtype, const struct shape *s, struct threadpool *tp,
                       struct mm_scratch *scr, uint64_t *seed)
{
    size_t rb = qtype_row_bytes(wtype, (uint64_t)s->cols);
    size_t ny = (size_t)(s->n * s->rows);
    uint8_t *w = malloc(rb * (size_t)s->rows);
    float *x = malloc(sizeof(float) * (size_t)(s->n * s->cols));
    float *ys = malloc(sizeof(float) * ny), *yv = malloc(sizeof(float) * ny);
    struct oracle o = { malloc(sizeof(double) * ny), malloc(sizeof(double) * ny),
                        malloc(sizeof(double) * ny), malloc(sizeof(double) * ny) };
    double *simd_tol = malloc(sizeof(double) * ny), *ys_d = malloc(sizeof(double) * ny);
    td_weights(wtype, w, s->rows, s->cols, seed);
    td_acts(x, s->n, s->cols, seed);
    oracle_run(wtype, w, s, x, &o);

    int nth = tp_n_threads(tp);
    cpu_matmul(tp, CPU_ISA_SCALAR, scr, wtype, w, s->rows, s->cols, x, s->n, ys);
    int64_t at;
    double r = worst_ratio(ys, o.y, o.tol, (int64_t)ny, &at);
    if (!ok(r <= 1.0, "%s %lldx%lld n=%lld t=%d scalar vs dequant oracle (worst %.3f of bound)",
            qtype_name(wtype), (long long)s->rows, (long long)s->cols, (long long)s->n, nth, r))
        tap_diag("  at %lld: got %.9g want %.9g tol %.3g", (long long)at, ys[at], o.y[at], o.tol[at]);

    for (size_t i = 0; i < ny; i++) {
        simd_tol[i] = 1e-5 * o.mag[i] + 1e-7;
        ys_d[i] = ys[i];
    }
    for (int isa = CPU_ISA_AVX2; isa <= (int)cpu_isa_best(); isa++) {
        if (!cpu_isa_runs((enum cpu_isa)isa)) continue;   /* avxvnni on Ice Lake, Zen 4 */
        for (size_t i = 0; i < ny; i++) yv[i] = NAN;
        cpu_matmul(tp, (enum cpu_isa)isa, scr, wtype, w, s->rows, s->cols, x, s->n, yv);
        if (amx_bf16_case((enum cpu_isa)isa, wtype, s)) {   /* bf16 products: the oracle's bound */
            r = worst_ratio(yv, o.y, o.tol_bf16, (int64_t)ny, &at);
            if (!ok(r <= 1.0, "%s %lldx%lld n=%lld t=%d %s bf16 vs f64 oracle (worst %.3f of 2^-7 bound)",
                    qtype_name(wtype), (long long)s->rows, (long long)s->cols, (long long)s->n, nth,
                    cpu_isa_name((enum cpu_isa)isa), r))
                tap_diag("  at %lld: got %.9g want %.9g", (long long)at, yv[at], o.y[at]);
            continue;
        }
        r = worst_ratio(yv, ys_d, simd_tol, (int64_t)ny, &at);
        if (!ok(r <= 1.0, "%s %lldx%lld n=%lld t=%d %s vs scalar (worst %.3f of tolerance)",
                qtype_name(wtype), (long long)s->rows, (long long)s->cols, (long long)s->n, nth,
                cpu_isa_name((enum cpu_isa)isa), r))
            tap_diag("  at %lld: got %.9g want %.9g", (long long)at, yv[at], ys[at]);
    }
    free(simd_tol); free(ys_d);
    free(o.y); free(o.tol); free(o.mag); free(o.tol_bf16);
    free(w); free(x); free(ys); free(yv);
}

static void check_quantizers(uint64_t *seed)
{
    enum { N = 32 * 40 };
    float x[N];
    int8_t q0[N], q1[N];
    float d0[N / 32], d1[N / 32];
    int32_t s0[N / 32], s1[N / 32];
    td_acts(x, 1, N, seed);
    for (int i = 0; i < 32; i++) x[32 + i] = 0.0f;              /* an all-zero block */
    for (int i = 0; i < 32; i++) x[64 + i] = (float)(i - 16) * 0.5f;  /* exact halves: ties */
    mm_scalar_quant(x, N, q0, d0, s0);
    int within = 1;
    for (int i = 0; i < N; i++) {
        int32_t q = q0[i];
        /* d = f16(max/127), as the reference's Q8_0: off by |q| · |d - max/127| more */
        float amax = 0.0f;
        for (int k = 0; k < 32; k++) amax = fmaxf(amax, fabsf(x[i / 32 * 32 + k]));
        const float slack = 127.0f * fabsf(d0[i / 32] - amax / 127.0f);
        within &= fabsf((float)q * d0[i / 32] - x[i]) <= (amax / 127.0f) * 0.5001f + slack &&
                  q >= -127 && q <= 127;
    }
    ok(within, "scalar activation quantizer: |q·d - x| <= max/254 + f16 rounding of d, |q| <= 127");
    int sums = 1;
    for (int b = 0; b < N / 32; b++) {
        int32_t t = 0;
        for (int i = 0; i < 32; i++) t += q0[b * 32 + i];
        sums &= t == s0[b];
    }
    ok(sums, "scalar activation quantizer: block sums");
    is_int(d0[1] == 0.0f && q0[40] == 0, 1, "all-zero block quantizes to d=0, q=0");
#ifdef __x86_64__
    for (int isa = CPU_ISA_AVX2; isa <= (int)cpu_isa_best(); isa++) {
        if (!cpu_isa_runs((enum cpu_isa)isa)) continue;   /* avxvnni on Ice Lake, Zen 4 */
        if (isa == CPU_ISA_AVX2) mm_avx2_quant(x, N, q1, d1, s1);
        else if (isa == CPU_ISA_AVXVNNI) mm_avxvnni_quant(x, N, q1, d1, s1);
        else mm_avx512_quant(x, N, q1, d1, s1);
        ok(memcmp(q0, q1, N) == 0 && memcmp(d0, d1, sizeof d0) == 0 && memcmp(s0, s1, sizeof s0) == 0,
           "%s activation quantizer is bit-identical to scalar", cpu_isa_name((enum cpu_isa)isa));
    }
#endif
}

/* The SIMD Q8_K quantizers against the portable mm_q8k_quant, bit for bit
 * (qs, d, sums), on ordinary and extreme super-blocks. */
static void check_q8k_simd(uint64_t *seed)
{
    enum { SB = 12, N = 256 * SB };
    static float x[N];
    static int8_t q0[N], q1[N];
    static float d0[N / 32], d1[N / 32];
    static int32_t s0[N / 32], s1[N / 32];
    td_acts(x, 1, N, seed);
    float *b = x + 256;
    for (int i = 0; i < 256; i++) b[i] = 0.0f;                           /* 1: all zero */
    b += 256;
    for (int i = 0; i < 256; i++) b[i] = (float)(i % 64 - 32) * 0.25f;   /* 2: ties (x·127/8) */
    b[7] = 8.0f;
    b += 256;
    for (int i = 0; i < 256; i++) b[i] = (float)((i * 37) % 255 - 127);  /* 3: ±max, first wins */
    b[100] = -300.0f; b[200] = 300.0f;
    b += 256;
    for (int i = 0; i < 256; i++) b[i] = (i & 1 ? -1.0f : 1.0f) * 3.4e38f * (float)(i % 7) / 6.0f;
    b += 256;                                                            /* 4: near FLT_MAX */
    for (int i = 0; i < 256; i++) b[i] = (float)(i % 5) * 1e-45f;        /* 5: subnormal (iscale = -inf) */
    b += 256;
    for (int i = 0; i < 256; i++) b[i] = (float)i * 1e-40f;              /* 6: subnormal, finite iscale */
    b += 256;
    for (int i = 0; i < 256; i++) b[i] = (float)(i - 128);               /* 7: +inf in it */
    b[255] = INFINITY;
    b += 256;
    for (int i = 0; i < 256; i++) b[i] = (float)(i - 128) * 0.01f;       /* 8: NaNs in it */
    b[0] = NAN; b[130] = -NAN;
    b += 256;
    for (int i = 0; i < 256; i++) b[i] = -0.0f;                          /* 9: negative zeros */
    b[255] = -1e-30f;
    b += 256;
    for (int i = 0; i < 256; i++) b[i] = 1.0f;                           /* 10: max at every place */
    mm_q8k_quant(x, N, q0, d0, s0);
#ifdef __x86_64__
    for (int isa = CPU_ISA_AVX2; isa <= (int)cpu_isa_best(); isa++) {
        if (!cpu_isa_runs((enum cpu_isa)isa)) continue;
        memset(q1, 0x55, sizeof q1);
        if (isa == CPU_ISA_AVX2) mm_avx2_q8k_quant(x, N, q1, d1, s1);
        else if (isa == CPU_ISA_AVXVNNI) mm_avxvnni_q8k_quant(x, N, q1, d1, s1);
        else mm_avx512_q8k_quant(x, N, q1, d1, s1);
        int bad = -1;
        for (int k = 0; k < SB && bad < 0; k++)
            if (memcmp(q0 + 256 * k, q1 + 256 * k, 256) || memcmp(d0 + 8 * k, d1 + 8 * k, 32) ||
                memcmp(s0 + 8 * k, s1 + 8 * k, 32))
                bad = k;
        if (!ok(bad < 0, "%s Q8_K quantizer is bit-identical to mm_q8k_quant (%d super-blocks, "
                "zeros, ties, ±max, FLT_MAX, subnormals, inf, NaN)", cpu_isa_name((enum cpu_isa)isa), SB))
            tap_diag("  first differing super-block %d", bad);
    }
#else
    (void)q1; (void)d1; (void)s1;
#endif
}

/* cpu_matmul_multi: the same numbers as one cpu_matmul per matrix. */
static void check_multi(struct threadpool *tp, struct mm_scratch *scr, uint64_t *seed)
{
    static const uint32_t mt[] = { QT_Q4_1, QT_Q8_0, QT_F16, QT_Q4_K, QT_Q6_K, QT_Q5_0 };
    enum { K = sizeof mt / sizeof mt[0], COLS = 512 };
    static const int64_t mrows[K] = { 37, 13, 9, 64, 8, 3 };
    static const int64_t ns[] = { 1, 2, 20 };
    struct mm_op ops[K];
    float *ref[K];
    for (int k = 0; k < K; k++) {
        ops[k] = (struct mm_op){ .wtype = mt[k], .rows = mrows[k] };
        ops[k].w = malloc(qtype_row_bytes(mt[k], COLS) * (size_t)mrows[k]);
        td_weights(mt[k], (uint8_t *)ops[k].w, mrows[k], COLS, seed);
        ops[k].y = malloc(sizeof(float) * 20 * (size_t)mrows[k]);
        ref[k] = malloc(sizeof(float) * 20 * (size_t)mrows[k]);
    }
    float *x = malloc(sizeof(float) * 20 * COLS);
    td_acts(x, 20, COLS, seed);
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
        for (int isa = CPU_ISA_SCALAR; isa <= (int)cpu_isa_best(); isa++) {
            if (!cpu_isa_runs((enum cpu_isa)isa)) continue;   /* avxvnni on Ice Lake, Zen 4 */
            int64_t n = ns[ni];
            for (int k = 0; k < K; k++)
                cpu_matmul(tp, (enum cpu_isa)isa, scr, mt[k], ops[k].w, mrows[k], COLS, x, n, ref[k]);
            cpu_matmul_multi(tp, (enum cpu_isa)isa, scr, K, ops, COLS, x, n);
            int same = 1;
            for (int k = 0; k < K; k++)
                same &= memcmp(ref[k], ops[k].y, sizeof(float) * (size_t)(n * mrows[k])) == 0;
            ok(same, "cpu_matmul_multi (%d matrices, n=%lld, %s, t=%d) equals separate calls", K,
               (long long)n, cpu_isa_name((enum cpu_isa)isa), tp_n_threads(tp));
        }
    for (int k = 0; k < K; k++) {
        free((void *)ops[k].w);
        free(ops[k].y);
        free(ref[k]);
    }
    free(x);
}

/* Weights that end exactly at an inaccessible page (as the last tensor of
 * a mapped file may): any read past the matrix faults and fails the run. */
static void check_guard(struct mm_scratch *scr, uint64_t *seed)
{
    long page = sysconf(_SC_PAGESIZE);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const int64_t rows = 9, cols = 256;
        size_t bytes = qtype_row_bytes(types[k], cols) * rows;
        size_t span = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
        uint8_t *map = mmap(NULL, span + (size_t)page, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (!ok(map != MAP_FAILED, "mmap guard for %s", qtype_name(types[k]))) continue;
        mprotect(map + span, (size_t)page, PROT_NONE);
        uint8_t *w = map + span - bytes;
        td_weights(types[k], w, rows, cols, seed);
        float x[17 * 256], y[17 * 9];
        td_acts(x, 17, cols, seed);
        for (int isa = CPU_ISA_SCALAR; isa <= (int)cpu_isa_best(); isa++) {
            if (!cpu_isa_runs((enum cpu_isa)isa)) continue;   /* avxvnni on Ice Lake, Zen 4 */
            cpu_matmul(NULL, (enum cpu_isa)isa, scr, types[k], w, rows, cols, x, 1, y);
            cpu_matmul(NULL, (enum cpu_isa)isa, scr, types[k], w, rows, cols, x, 17, y);
        }
        ok(1, "%s: no read past the end of the weights (every ISA, n = 1 and 17)",
           qtype_name(types[k]));
        munmap(map, span + (size_t)page);
    }
}

/* Packed weights (mm_pack) give exactly the plain layout's results on every
 * SIMD ISA: decode tiles (n < 16), prefill tiles and their token tails, one
 * and three threads; and types or shapes without a packed form say so. */
static void check_packed(struct threadpool *tp, struct mm_scratch *scr, uint64_t *seed)
{
    static const uint32_t pt[] = { QT_Q4_0, QT_Q4_1, QT_Q5_0, QT_Q5_1, QT_Q8_0, QT_Q4_K, QT_Q5_K, QT_Q6_K };
    static const struct shape ps[] = { { 8, 32, 1 }, { 64, 576, 1 }, { 96, 576, 2 },
                                       { 40, 1536, 3 }, { 16, 256, 4 }, { 24, 576, 5 },
                                       { 48, 576, 17 }, { 56, 512, 37 }, { 64, 2048, 1 },
                                       { 32, 1024, 16 }, { 16, 512, 70 },
                                       { 24, 256, 161 } };   /* two passes (MM_TP), tail 32 + 1 */
    for (size_t k = 0; k < sizeof pt / sizeof pt[0]; k++) {
        for (size_t si = 0; si < sizeof ps / sizeof ps[0]; si++) {
            const struct shape *s = &ps[si];
            if (s->cols % qtype_get(pt[k])->block_size) continue;   /* K-quants: 256 */
            size_t rb = qtype_row_bytes(pt[k], (uint64_t)s->cols), ny = (size_t)(s->n * s->rows);
            uint8_t *w = malloc(rb * (size_t)s->rows);
            float *x = malloc(sizeof(float) * (size_t)(s->n * s->cols));
            float *y0 = malloc(sizeof(float) * ny), *y1 = malloc(sizeof(float) * ny);
            td_weights(pt[k], w, s->rows, s->cols, seed);
            td_acts(x, s->n, s->cols, seed);
            for (int isa = CPU_ISA_AVX2; isa <= (int)cpu_isa_best(); isa++) {
        if (!cpu_isa_runs((enum cpu_isa)isa)) continue;   /* avxvnni on Ice Lake, Zen 4 */
                size_t bytes = mm_pack_size((enum cpu_isa)isa, pt[k], s->rows, s->cols);
                uint8_t *pw = malloc(bytes ? bytes : 1);
                uint32_t ptype = bytes ? mm_pack((enum cpu_isa)isa, pt[k], w, s->rows, s->cols, pw) : 0;
                ok(bytes >= rb * (size_t)s->rows && ptype != 0 && ptype != pt[k],
                   "%s %lldx%lld packs for %s", qtype_name(pt[k]), (long long)s->rows,
                   (long long)s->cols, cpu_isa_name((enum cpu_isa)isa));
                cpu_matmul(tp, (enum cpu_isa)isa, scr, pt[k], w, s->rows, s->cols, x, s->n, y0);
                for (size_t i = 0; i < ny; i++) y1[i] = NAN;
                if (ptype) cpu_matmul(tp, (enum cpu_isa)isa, scr, ptype, pw, s->rows, s->cols, x, s->n, y1);
                size_t bad = 0;
                for (size_t i = 0; i < ny; i++) bad += memcmp(&y0[i], &y1[i], sizeof(float)) != 0;
                ok(bad == 0, "%s %lldx%lld n=%lld t=%d %s: packed equals plain bit for bit "
                   "(%zu of %zu differ)", qtype_name(pt[k]), (long long)s->rows,
                   (long long)s->cols, (long long)s->n, tp_n_threads(tp),
                   cpu_isa_name((enum cpu_isa)isa), bad, ny);
                if (ptype && isa == CPU_ISA_AVX2 && tp == NULL) {
                    uint8_t *row = malloc(rb);
                    int64_t same = 0;
                    for (int64_t r = 0; r < s->rows; r++) {
                        mm_unpack_row(ptype, pw, s->cols, r, row);
                        same += memcmp(row, w + (size_t)r * rb, rb) == 0;
                    }
                    ok(same == s->rows, "%s %lldx%lld: every row unpacks to its plain bytes (%lld of %lld)",
                       qtype_name(pt[k]), (long long)s->rows, (long long)s->cols, (long long)same,
                       (long long)s->rows);
                    free(row);
                }
                free(pw);
            }
            free(w); free(x); free(y0); free(y1);
        }
    }
    ok(mm_pack_size(CPU_ISA_SCALAR, QT_Q4_1, 64, 576) == 0, "no packed form for the scalar path");
    ok(mm_pack_size(CPU_ISA_AVX2, QT_Q4_1, 63, 576) == 0, "no packed form for rows not a multiple of 8");
    ok(mm_pack_size(CPU_ISA_AVX2, QT_F16, 64, 512) == 0, "no packed form for F16 (plain layout used)");
    ok(mm_pack_size(CPU_ISA_AVX2, QT_Q5_K, 64, 576) == 0, "no packed Q5_K for columns not a multiple of 256");
    ok(mm_pack_size(CPU_ISA_AVX2, QT_Q6_K, 64, 576) == 0, "no packed Q6_K for columns not a multiple of 256");
    ok(mm_pack_size(CPU_ISA_AVX2, QT_Q4_K, 64, 576) == 0, "no packed Q4_K for columns not a multiple of 256");
}

/* The packed prefill tiles add maddubs byte-pair sums in int16 before
 * widening (AVX2), and the packed Q6_K decode tile sums 8 products per
 * int16 (packs, ±32512 at the extremes): extreme codes (every quant byte
 * 0x00, 0x80 or 0xFF, so 4-bit codes 0 / 15, 5-bit 0 / 31, Q6_K −32 / 31,
 * Q8_0 0 / −128 / −1) against activations of one magnitude (all quantized
 * to ±127), in both signs and alternating, must give the plain layout's
 * results bit for bit (its int32 dot products cannot overflow): an int16
 * overflow would not. N: prefill, or the decode tiles and their token tails. */
static void check_extremes(struct mm_scratch *scr, uint64_t *seed, int N)
{
    static const uint32_t pt[] = { QT_Q4_0, QT_Q4_1, QT_Q5_0, QT_Q5_1, QT_Q8_0, QT_Q4_K, QT_Q5_K, QT_Q6_K };
    static const int fills[] = { 0x00, 0x80, 0xFF };
    enum { ROWS = 16, COLS = 512, NMAX = 40 };
    if (N > NMAX) N = NMAX;
    float *x = malloc(sizeof(float) * NMAX * COLS);
    float *y0 = malloc(sizeof(float) * NMAX * ROWS), *y1 = malloc(sizeof(float) * NMAX * ROWS);
    uint8_t *w = malloc(qtype_row_bytes(QT_Q8_0, COLS) * ROWS);   /* the largest of pt */
    for (int64_t j = 0; j < N; j++)   /* tokens: all +1, all −1, alternating */
        for (int64_t i = 0; i < COLS; i++)
            x[j * COLS + i] = j % 3 == 0 ? 1.0f : j % 3 == 1 ? -1.0f : (i % 2 ? 1.0f : -1.0f);
    for (size_t k = 0; k < sizeof pt / sizeof pt[0]; k++)
        for (size_t f = 0; f < sizeof fills / sizeof fills[0]; f++) {
            td_weights_fill(pt[k], w, ROWS, COLS, seed, fills[f]);
            for (int isa = CPU_ISA_AVX2; isa <= (int)cpu_isa_best(); isa++) {
        if (!cpu_isa_runs((enum cpu_isa)isa)) continue;   /* avxvnni on Ice Lake, Zen 4 */
                size_t bytes = mm_pack_size((enum cpu_isa)isa, pt[k], ROWS, COLS);
                uint8_t *pw = malloc(bytes);
                uint32_t ptype = mm_pack((enum cpu_isa)isa, pt[k], w, ROWS, COLS, pw);
                cpu_matmul(NULL, (enum cpu_isa)isa, scr, pt[k], w, ROWS, COLS, x, N, y0);
                cpu_matmul(NULL, (enum cpu_isa)isa, scr, ptype, pw, ROWS, COLS, x, N, y1);
                ok(memcmp(y0, y1, sizeof(float) * N * ROWS) == 0,
                   "%s bytes 0x%02x, activations ±127, n=%d %s: packed equals plain",
                   qtype_name(pt[k]), fills[f], N, cpu_isa_name((enum cpu_isa)isa));
                free(pw);
            }
        }
    free(x); free(y0); free(y1); free(w);
}

/* The bf16 prefill of F16 / BF16 weights, on AMX-BF16 tiles (isa amx) or
 * vdpbf16ps (isa avx512 with AVX512_BF16): 32- and 16-row strips and the
 * rows after them (f32 path), token counts that leave partial tiles and
 * groups and span two 256-token blocks, columns over several 512- and
 * 1024-column chunks and a partial one; within the bf16 bound of the f64
 * oracle, the same on 1 and 3 threads bit for bit, and different from the
 * f32 path (avx2's FMAs: the bf16 products ran). */
static void check_bf16_on(enum cpu_isa isa, struct threadpool *tp3, struct mm_scratch *scr,
                          uint64_t *seed)
{
    static const struct shape sh[] = { { 64, 512, 32 }, { 48, 1088, 37 }, { 77, 256, 300 },
                                       { 16, 32, 33 }, { 96, 2048, 64 }, { 45, 3104, 41 } };
    static const uint32_t wt[] = { QT_F16, QT_BF16 };
    const char *name = isa == CPU_ISA_AMX ? "amx-bf16" : "avx512-bf16";
    for (size_t k = 0; k < 2; k++)
        for (size_t si = 0; si < sizeof sh / sizeof sh[0]; si++) {
            const struct shape *s = &sh[si];
            const size_t ny = (size_t)(s->n * s->rows);
            uint8_t *w = malloc(qtype_row_bytes(wt[k], (uint64_t)s->cols) * (size_t)s->rows);
            float *x = malloc(sizeof(float) * (size_t)(s->n * s->cols));
            float *y1 = malloc(sizeof(float) * ny), *y3 = malloc(sizeof(float) * ny);
            float *yf = malloc(sizeof(float) * ny);
            struct oracle o = { malloc(sizeof(double) * ny), malloc(sizeof(double) * ny),
                                malloc(sizeof(double) * ny), malloc(sizeof(double) * ny) };
            td_weights(wt[k], w, s->rows, s->cols, seed);
            td_acts(x, s->n, s->cols, seed);
            oracle_run(wt[k], w, s, x, &o);
            cpu_matmul(NULL, isa, scr, wt[k], w, s->rows, s->cols, x, s->n, y1);
            cpu_matmul(tp3, isa, scr, wt[k], w, s->rows, s->cols, x, s->n, y3);
            cpu_matmul(NULL, CPU_ISA_AVX2, scr, wt[k], w, s->rows, s->cols, x, s->n, yf);
            int64_t at;
            double r = worst_ratio(y1, o.y, o.tol_bf16, (int64_t)ny, &at);
            size_t differ = 0;
            double rel = 0.0;   /* largest |bf16 - f32 path| / Σ|w x| */
            for (size_t i = 0; i < ny; i++) {
                differ += y1[i] != yf[i];
                double e = fabs((double)y1[i] - yf[i]) / (o.mag[i] + 1e-30);
                if (e > rel) rel = e;
            }
            if (!ok(r <= 1.0, "%s %lldx%lld n=%lld %s vs f64 oracle: worst %.3f of the 2^-7 bound "
                    "(largest |bf16 - avx2| = %.2g of Σ|w x|)", qtype_name(wt[k]), (long long)s->rows,
                    (long long)s->cols, (long long)s->n, name, r, rel))
                tap_diag("  at %lld: got %.9g want %.9g", (long long)at, y1[at], o.y[at]);
            ok(memcmp(y1, y3, sizeof(float) * ny) == 0, "%s %lldx%lld n=%lld %s: 3 threads equal 1",
               qtype_name(wt[k]), (long long)s->rows, (long long)s->cols, (long long)s->n, name);
            ok(differ > 0, "%s %lldx%lld n=%lld %s: the bf16 path ran (%zu of %zu outputs differ "
               "from the f32 path)", qtype_name(wt[k]), (long long)s->rows, (long long)s->cols,
               (long long)s->n, name, differ, ny);
            free(o.y); free(o.tol); free(o.mag); free(o.tol_bf16);
            free(w); free(x); free(y1); free(y3); free(yf);
        }
}

/* Without the path (no such CPU, or TERN_ISA below it): skipped, and the
 * best ISA's F16 prefill is the f32 path, within 1e-5 · Σ|w x| of the
 * oracle (bf16 products would be ~2^-9 of it off). */
static void check_f32_kept(struct mm_scratch *scr, uint64_t *seed)
{
    const struct shape s = { 48, 1024, 40 };
    const size_t ny = (size_t)(s.n * s.rows);
    uint8_t *w = malloc(qtype_row_bytes(QT_F16, (uint64_t)s.cols) * (size_t)s.rows);
    float *x = malloc(sizeof(float) * (size_t)(s.n * s.cols)), *y = malloc(sizeof(float) * ny);
    struct oracle o = { malloc(sizeof(double) * ny), malloc(sizeof(double) * ny),
                        malloc(sizeof(double) * ny), malloc(sizeof(double) * ny) };
    double *tol = malloc(sizeof(double) * ny);
    td_weights(QT_F16, w, s.rows, s.cols, seed);
    td_acts(x, s.n, s.cols, seed);
    oracle_run(QT_F16, w, &s, x, &o);
    for (size_t i = 0; i < ny; i++) tol[i] = 1e-5 * o.mag[i] + 1e-7;
    cpu_matmul(NULL, cpu_isa_best(), scr, QT_F16, w, s.rows, s.cols, x, s.n, y);
    int64_t at;
    double r = worst_ratio(y, o.y, tol, (int64_t)ny, &at);
    ok(r <= 1.0, "F16 48x1024 n=40 %s: the f32 path (worst %.3f of 1e-5 of the oracle)",
       cpu_isa_name(cpu_isa_best()), r);
    free(o.y); free(o.tol); free(o.mag); free(o.tol_bf16);
    free(w); free(x); free(y); free(tol);
}

static void check_amx_bf16(struct threadpool *tp3, struct mm_scratch *scr, uint64_t *seed)
{
    char why[128], msg[200];
    const enum cpu_isa best = cpu_isa_best();
    ok(!cpu_avx512bf16() || cpu_isa_detect() >= CPU_ISA_AVX512, "AVX512_BF16 only with the avx512 level");
    if (best != CPU_ISA_AMX) {
        if (cpu_amx_usable(why, sizeof why)) snprintf(why, sizeof why, "TERN_ISA caps it");
        snprintf(msg, sizeof msg, "AMX-BF16 F16/BF16 prefill: %s", why);
        tap_skip(msg);
    } else {
        check_bf16_on(CPU_ISA_AMX, tp3, scr, seed);
    }
    if (best >= CPU_ISA_AVX512 && cpu_avx512bf16()) {
        check_bf16_on(CPU_ISA_AVX512, tp3, scr, seed);
    } else {
        snprintf(msg, sizeof msg, "AVX512_BF16 F16/BF16 prefill: %s",
                 cpu_avx512bf16() ? "TERN_ISA caps it" : "this CPU has no AVX512_BF16");
        tap_skip(msg);
        if (best != CPU_ISA_AMX) check_f32_kept(scr, seed);
    }
}

/* Continuous batching: a token's outputs must not depend on the tokens
 * decoded beside it. F16 (and BF16, F32) weights: each token of n = 3, 7
 * and 31 batches (below MM_BF16_MIN_N, so the f32 path) equals the same
 * token decoded alone (n = 1) bit for bit, on every ISA this CPU runs, with
 * 1 and 3 threads. 23 rows: 8-row, 4-row and single-row tiles; 1000
 * columns: whole 64-byte lines, a partial line and a sub-vector tail. */
static void check_decode_batch_bits(struct threadpool *tp3, struct mm_scratch *scr, uint64_t *seed)
{
    static const uint32_t wt[] = { QT_F16, QT_BF16, QT_F32 };
    static const int64_t ns[] = { 3, 7, 31 };
    static const int64_t colss[] = { 1000, 2048 };
    enum { ROWS = 23, NMAX = 31 };
    for (size_t k = 0; k < sizeof wt / sizeof wt[0]; k++)
        for (size_t c = 0; c < sizeof colss / sizeof colss[0]; c++) {
            const int64_t cols = colss[c];
            uint8_t *w = malloc(qtype_row_bytes(wt[k], (uint64_t)cols) * ROWS);
            float *x = malloc(sizeof(float) * NMAX * (size_t)cols);
            float *y1 = malloc(sizeof(float) * NMAX * ROWS), *yn = malloc(sizeof(float) * NMAX * ROWS);
            td_weights(wt[k], w, ROWS, cols, seed);
            td_acts(x, NMAX, cols, seed);
            for (int isa = CPU_ISA_SCALAR; isa <= (int)cpu_isa_best(); isa++) {
                if (!cpu_isa_runs((enum cpu_isa)isa)) continue;   /* avxvnni on Ice Lake, Zen 4 */
                for (int64_t j = 0; j < NMAX; j++)
                    cpu_matmul(NULL, (enum cpu_isa)isa, scr, wt[k], w, ROWS, cols, x + j * cols, 1,
                               y1 + j * ROWS);
                for (int pass = 0; pass < 2; pass++)
                    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                        const int64_t n = ns[ni];
                        struct threadpool *tp = pass ? tp3 : NULL;
                        for (int64_t i = 0; i < n * ROWS; i++) yn[i] = NAN;
                        cpu_matmul(tp, (enum cpu_isa)isa, scr, wt[k], w, ROWS, cols, x, n, yn);
                        int64_t bad = -1;
                        for (int64_t i = 0; i < n * ROWS && bad < 0; i++)
                            if (memcmp(&yn[i], &y1[i], sizeof(float)) != 0) bad = i;
                        if (!ok(bad < 0, "%s %dx%lld %s t=%d: every token of n=%lld equals its n=1 decode bit for bit",
                                qtype_name(wt[k]), ROWS, (long long)cols, cpu_isa_name((enum cpu_isa)isa),
                                pass ? tp_n_threads(tp3) : 1, (long long)n))
                            tap_diag("  token %lld row %lld: %.9g vs %.9g alone", (long long)(bad / ROWS),
                                     (long long)(bad % ROWS), yn[bad], y1[bad]);
                    }
            }
            free(w); free(x); free(y1); free(yn);
        }
}

int main(void)
{
    uint64_t seed = 12345;
    tap_diag("cpu_isa_detect: %s", cpu_isa_name(cpu_isa_best()));
    check_quantizers(&seed);
    check_q8k_simd(&seed);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
        ok(mm_supported(types[k]), "mm_supported(%s)", qtype_name(types[k]));
    ok(!mm_supported(16) && !mm_supported(999), "IQ2_XXS and unknown types unsupported");

    struct mm_scratch scr = { 0 };
    struct threadpool *tp3 = tp_open(3);
    for (int pass = 0; pass < 2; pass++) {
        struct threadpool *tp = pass ? tp3 : NULL;
        for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                const struct shape *s = &shapes[si];
                if (s->cols % qtype_get(types[k])->block_size) continue;
                check_case(types[k], s, tp, &scr, &seed);
            }
    }
    /* F32 rows whose length is not a multiple of the vector width */
    struct shape odd = { 9, 37, 3 };
    check_case(QT_F32, &odd, tp3, &scr, &seed);
    check_case(QT_F16, &odd, NULL, &scr, &seed);
    check_guard(&scr, &seed);
    check_multi(NULL, &scr, &seed);
    check_multi(tp3, &scr, &seed);
    check_packed(NULL, &scr, &seed);
    check_packed(tp3, &scr, &seed);
    static const int extreme_n[] = { 40, 1, 2, 3, 5 };   /* prefill; decode tiles and tails */
    for (size_t k = 0; k < sizeof extreme_n / sizeof extreme_n[0]; k++) check_extremes(&scr, &seed, extreme_n[k]);
    check_amx_bf16(tp3, &scr, &seed);
    check_decode_batch_bits(tp3, &scr, &seed);
    tp_close(tp3);
    mm_scratch_free(&scr);
    return tap_done();
}
