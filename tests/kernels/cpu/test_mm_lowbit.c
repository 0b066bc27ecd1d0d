/* test_mm_lowbit: the Q2_K, Q3_K, IQ4_NL and IQ4_XS matmul (mm_lowbit.c and
 * its SIMD forms, mm_lowbit_simd.inc) and the reference's Q8_K activations
 * (mm_q8k_quant) that the K-quant kernels read.
 *  - mm_q8k_quant: one scale per 256 (the same d in its 8 blocks of 32),
 *    |q·d - x| <= |d|/2, the largest |x| at ±127, block sums, zeros.
 *  - scalar path vs an oracle (dequant_row, f64 dots with the unquantized
 *    x) within the bound 8-bit activations allow, Σ|w|·|d|/2 (d per 256 for
 *    the Q8_K types, per 32 and rounded to f16 for IQ4_NL).
 *  - every SIMD path up to cpu_isa_best() (TERN_ISA caps it: the isa-cap
 *    suite runs this capped at avx2 and scalar) vs the scalar path: exact
 *    integer sums per super-block and the same float steps, so the same
 *    bits wherever the activations are the same (the Q8_K types always;
 *    IQ4_NL's per-32 quantizer differs by ISA, so there: bit-identical when
 *    the two quantizers agree on x, else within 1e-5 · Σ|w·x|). Decode,
 *    prefill, 8-row tiles and their tails, 1 and 3 threads.
 *  - weights ending at an unreadable page; cpu_matmul_multi mixing Q8_K and
 *    Q8_0 activations gives the separate calls' numbers. */
#include <math.h>
#include <stddef.h>
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

static const uint32_t types[] = { QT_Q2_K, QT_Q3_K, QT_IQ4_NL, QT_IQ4_XS };

/* Random quant bytes with finite scales of a size that keeps y near 1. */
static void lb_weights(uint32_t wtype, uint8_t *w, int64_t rows, int64_t cols, uint64_t *s)
{
    const struct qtype_info *qi = qtype_get(wtype);
    const size_t nblk = (size_t)rows * (size_t)(cols / qi->block_size);
    for (size_t i = 0; i < nblk * qi->type_size; i++) w[i] = (uint8_t)td_next(s);
    for (size_t b = 0; b < nblk; b++) {
        uint8_t *blk = w + b * qi->type_size;
        const float d = 0.001f + 0.004f * (td_unif(s) + 1.0f);
        switch (wtype) {
        case QT_Q2_K:
            td_set_f16(blk + offsetof(block_q2_K, d), d);
            td_set_f16(blk + offsetof(block_q2_K, dmin), d * 0.5f);
            break;
        case QT_Q3_K: td_set_f16(blk + offsetof(block_q3_K, d), d); break;
        case QT_IQ4_NL: td_set_f16(blk + offsetof(block_iq4_nl, d), d * 0.1f); break;
        default: td_set_f16(blk + offsetof(block_iq4_xs, d), d * 0.1f); break;
        }
    }
}

static void check_q8k(uint64_t *seed)
{
    enum { N = 256 * 6 };
    float x[N];
    int8_t q[N];
    float d[N / 32];
    int32_t sum[N / 32];
    td_acts(x, 1, N, seed);
    for (int i = 0; i < 256; i++) x[256 + i] = 0.0f;                 /* an all-zero block */
    for (int i = 0; i < 256; i++) x[512 + i] = (float)(i % 64 - 32) * 0.25f;  /* ties */
    for (int i = 0; i < 256; i++) x[768 + i] = fabsf(x[768 + i]);  /* max positive: d < 0 */
    mm_q8k_quant(x, N, q, d, sum);
    int same_d = 1, within = 1, peak = 1, sums = 1;
    for (int sb = 0; sb < N / 256; sb++) {
        float amax = 0.0f;
        int at = 0;
        for (int i = 0; i < 256; i++)
            if (fabsf(x[256 * sb + i]) > amax) {
                amax = fabsf(x[256 * sb + i]);
                at = i;
            }
        for (int b = 0; b < 8; b++) same_d &= d[8 * sb + b] == d[8 * sb];
        if (amax > 0.0f) peak &= abs(q[256 * sb + at]) == 127 && q[256 * sb + at] * d[8 * sb] * x[256 * sb + at] > 0;
        for (int i = 0; i < 256; i++) {
            const float dd = fabsf(d[8 * sb]);
            within &= fabsf((float)q[256 * sb + i] * d[8 * sb] - x[256 * sb + i]) <= dd * 0.5001f &&
                      q[256 * sb + i] >= -127;
        }
    }
    for (int b = 0; b < N / 32; b++) {
        int32_t t = 0;
        for (int i = 0; i < 32; i++) t += q[32 * b + i];
        sums &= t == sum[b];
    }
    ok(same_d, "Q8_K activations: one scale per 256 columns");
    ok(within, "Q8_K activations: |q·d - x| <= |d|/2, q >= -127 (int8: <= 127)");
    ok(peak, "Q8_K activations: the largest |x| of each 256 quantizes to ±127 with its sign");
    ok(sums, "Q8_K activations: block sums");
    ok(d[8] == 0.0f && q[300] == 0 && sum[8] == 0, "Q8_K activations: an all-zero block gives d = 0, q = 0");
    ok(d[24] < 0.0f, "Q8_K activations: d = 1/iscale is negative when the largest element is positive (as the reference)");
}

struct shape {
    int64_t rows, cols, n;
};

static const struct shape shapes[] = {
    { 1, 256, 1 }, { 37, 256, 1 }, { 64, 512, 1 }, { 13, 256, 3 }, { 40, 512, 8 },
    { 21, 256, 37 }, { 16, 2048, 1 }, { 24, 1024, 17 },
};

/* Whether isa's per-32 quantizer gives the scalar one's bytes for x. */
static int same_q8_0_acts(enum cpu_isa isa, const float *x, int64_t n, int64_t cols)
{
#ifdef __x86_64__
    const int64_t nb = cols / 32;
    int8_t *qa = malloc((size_t)cols), *qb = malloc((size_t)cols);
    float *da = malloc(sizeof(float) * (size_t)nb), *db = malloc(sizeof(float) * (size_t)nb);
    int32_t *sa = malloc(sizeof(int32_t) * (size_t)nb), *sb = malloc(sizeof(int32_t) * (size_t)nb);
    int same = 1;
    for (int64_t j = 0; j < n && same; j++) {
        mm_scalar_quant(x + j * cols, cols, qa, da, sa);
        (isa >= CPU_ISA_AVX512 ? mm_avx512_quant : mm_avx2_quant)(x + j * cols, cols, qb, db, sb);
        same = !memcmp(qa, qb, (size_t)cols) && !memcmp(da, db, sizeof(float) * (size_t)nb);
    }
    free(qa); free(qb); free(da); free(db); free(sa); free(sb);
    return same;
#else
    (void)isa; (void)x; (void)n; (void)cols;
    return 0;
#endif
}

static double worst_ratio(const float *got, const double *want, const double *tol, size_t n, size_t *at)
{
    double worst = 0.0;
    *at = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)got[i] - want[i]) / tol[i];
        if (!(r <= worst)) {
            worst = isnan(r) ? INFINITY : r;
            *at = i;
        }
    }
    return worst;
}

static void check_case(uint32_t wtype, const struct shape *s, struct threadpool *tp,
                       struct mm_scratch *scr, uint64_t *seed)
{
    const size_t rb = qtype_row_bytes(wtype, (uint64_t)s->cols), ny = (size_t)(s->n * s->rows);
    uint8_t *w = malloc(rb * (size_t)s->rows);
    float *x = malloc(sizeof(float) * (size_t)(s->n * s->cols)), *wf = malloc(sizeof(float) * (size_t)s->cols);
    float *ys = malloc(sizeof(float) * ny), *yv = malloc(sizeof(float) * ny);
    double *want = malloc(sizeof(double) * ny), *tol = malloc(sizeof(double) * ny);
    double *simd_tol = malloc(sizeof(double) * ny), *ys_d = malloc(sizeof(double) * ny);
    double *dhalf = malloc(sizeof(double) * (size_t)(s->n * s->cols));
    lb_weights(wtype, w, s->rows, s->cols, seed);
    td_acts(x, s->n, s->cols, seed);
    const int qb = mm_wants_q8k(wtype) ? 256 : 32;
    for (int64_t j = 0; j < s->n; j++)
        for (int64_t b = 0; b < s->cols / qb; b++) {
            float amax = 0.0f;
            for (int i = 0; i < qb; i++) amax = fmaxf(amax, fabsf(x[j * s->cols + b * qb + i]));
            const double d = amax / 127.0, d16 = qb == 32 ? mm_fp16_to_f32(f32_to_fp16(amax / 127.0f)) : d;
            for (int i = 0; i < qb; i++) dhalf[j * s->cols + b * qb + i] = (d / 2.0 + 127.0 * fabs(d16 - d)) * 1.0001;
        }
    for (int64_t r = 0; r < s->rows; r++) {
        dequant_row(wtype, w + rb * (size_t)r, wf, s->cols);
        for (int64_t j = 0; j < s->n; j++) {
            double acc = 0.0, bound = 0.0, mag = 0.0;
            for (int64_t i = 0; i < s->cols; i++) {
                const double xi = x[j * s->cols + i];
                acc += (double)wf[i] * xi;
                mag += fabs((double)wf[i] * xi);
                bound += fabs((double)wf[i]) * dhalf[j * s->cols + i];
            }
            want[j * s->rows + r] = acc;
            tol[j * s->rows + r] = bound + 1e-5 * mag + 1e-6;
            simd_tol[j * s->rows + r] = 1e-5 * mag + 1e-7;
        }
    }
    const int nth = tp_n_threads(tp);
    cpu_matmul(tp, CPU_ISA_SCALAR, scr, wtype, w, s->rows, s->cols, x, s->n, ys);
    size_t at;
    double r = worst_ratio(ys, want, tol, ny, &at);
    if (!ok(r <= 1.0, "%s %lldx%lld n=%lld t=%d scalar vs dequant oracle (worst %.3f of bound)",
            qtype_name(wtype), (long long)s->rows, (long long)s->cols, (long long)s->n, nth, r))
        tap_diag("  at %zu: got %.9g want %.9g tol %.3g", at, ys[at], want[at], tol[at]);
    for (size_t i = 0; i < ny; i++) ys_d[i] = ys[i];
    for (int isa = CPU_ISA_AVX2; isa <= (int)cpu_isa_best(); isa++) {
        if (!cpu_isa_runs((enum cpu_isa)isa)) continue;
        for (size_t i = 0; i < ny; i++) yv[i] = NAN;
        cpu_matmul(tp, (enum cpu_isa)isa, scr, wtype, w, s->rows, s->cols, x, s->n, yv);
        if (mm_wants_q8k(wtype) || same_q8_0_acts((enum cpu_isa)isa, x, s->n, s->cols)) {
            at = ny;
            for (size_t i = 0; i < ny && at == ny; i++)
                if (memcmp(&yv[i], &ys[i], sizeof(float))) at = i;
            if (!ok(at == ny, "%s %lldx%lld n=%lld t=%d %s vs scalar: bit-identical",
                    qtype_name(wtype), (long long)s->rows, (long long)s->cols, (long long)s->n, nth,
                    cpu_isa_name((enum cpu_isa)isa)))
                tap_diag("  at %zu: got %.9g want %.9g", at, yv[at], ys[at]);
            continue;
        }
        r = worst_ratio(yv, ys_d, simd_tol, ny, &at);
        if (!ok(r <= 1.0, "%s %lldx%lld n=%lld t=%d %s vs scalar (worst %.3f of tolerance; "
                "the activations differ)", qtype_name(wtype), (long long)s->rows, (long long)s->cols,
                (long long)s->n, nth, cpu_isa_name((enum cpu_isa)isa), r))
            tap_diag("  at %zu: got %.9g want %.9g", at, yv[at], ys[at]);
    }
    free(w); free(x); free(wf); free(ys); free(yv); free(want); free(tol); free(simd_tol);
    free(ys_d); free(dhalf);
}

static void check_guard(struct mm_scratch *scr, uint64_t *seed)
{
    const long page = sysconf(_SC_PAGESIZE);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const int64_t rows = 9, cols = 256;
        const size_t bytes = qtype_row_bytes(types[k], cols) * rows;
        const size_t span = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
        uint8_t *map = mmap(NULL, span + (size_t)page, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (!ok(map != MAP_FAILED, "mmap guard for %s", qtype_name(types[k]))) continue;
        mprotect(map + span, (size_t)page, PROT_NONE);
        uint8_t *w = map + span - bytes;
        lb_weights(types[k], w, rows, cols, seed);
        float x[17 * 256], y[17 * 9];
        td_acts(x, 17, cols, seed);
        for (int isa = CPU_ISA_SCALAR; isa <= (int)cpu_isa_best(); isa++) {
            if (!cpu_isa_runs((enum cpu_isa)isa)) continue;
            cpu_matmul(NULL, (enum cpu_isa)isa, scr, types[k], w, rows, cols, x, 1, y);
            cpu_matmul(NULL, (enum cpu_isa)isa, scr, types[k], w, rows, cols, x, 17, y);
        }
        ok(1, "%s: no read past the end of the weights (every ISA, n = 1 and 17)", qtype_name(types[k]));
        munmap(map, span + (size_t)page);
    }
}

/* Q8_K-activation and Q8_0-activation types in one cpu_matmul_multi. */
static void check_multi(struct threadpool *tp, struct mm_scratch *scr, uint64_t *seed)
{
    static const uint32_t mt[] = { QT_Q2_K, QT_Q8_0, QT_IQ4_NL, QT_Q4_K, QT_IQ4_XS, QT_F16 };
    enum { K = sizeof mt / sizeof mt[0], COLS = 512 };
    static const int64_t mrows[K] = { 24, 13, 9, 64, 8, 3 };
    struct mm_op ops[K];
    float *ref[K];
    for (int k = 0; k < K; k++) {
        ops[k] = (struct mm_op){ .wtype = mt[k], .rows = mrows[k] };
        ops[k].w = malloc(qtype_row_bytes(mt[k], COLS) * (size_t)mrows[k]);
        if (mt[k] == QT_Q8_0 || mt[k] == QT_Q4_K || mt[k] == QT_F16)
            td_weights(mt[k], (uint8_t *)ops[k].w, mrows[k], COLS, seed);
        else
            lb_weights(mt[k], (uint8_t *)ops[k].w, mrows[k], COLS, seed);
        ops[k].y = malloc(sizeof(float) * 20 * (size_t)mrows[k]);
        ref[k] = malloc(sizeof(float) * 20 * (size_t)mrows[k]);
    }
    float *x = malloc(sizeof(float) * 20 * COLS);
    td_acts(x, 20, COLS, seed);
    for (int64_t n = 1; n <= 20; n += 19)
        for (int isa = CPU_ISA_SCALAR; isa <= (int)cpu_isa_best(); isa++) {
            if (!cpu_isa_runs((enum cpu_isa)isa)) continue;
            for (int k = 0; k < K; k++)
                cpu_matmul(tp, (enum cpu_isa)isa, scr, mt[k], ops[k].w, mrows[k], COLS, x, n, ref[k]);
            cpu_matmul_multi(tp, (enum cpu_isa)isa, scr, K, ops, COLS, x, n);
            int same = 1;
            for (int k = 0; k < K; k++)
                same &= memcmp(ref[k], ops[k].y, sizeof(float) * (size_t)(n * mrows[k])) == 0;
            ok(same, "cpu_matmul_multi mixing Q8_K and Q8_0 activations (n=%lld, %s, t=%d) "
               "equals separate calls", (long long)n, cpu_isa_name((enum cpu_isa)isa), tp_n_threads(tp));
        }
    for (int k = 0; k < K; k++) {
        free((void *)ops[k].w);
        free(ops[k].y);
        free(ref[k]);
    }
    free(x);
}

int main(void)
{
    uint64_t seed = 4242;
    tap_diag("ISA: %s", cpu_isa_name(cpu_isa_best()));
    check_q8k(&seed);
    struct mm_scratch scr = { 0 };
    struct threadpool *tp3 = tp_open(3);
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
                check_case(types[k], &shapes[si], pass ? tp3 : NULL, &scr, &seed);
    /* IQ4_NL alone: an odd number of blocks per row (its decode kernel
     * takes blocks in pairs and the last one alone) */
    static const struct shape nl_shapes[] = { { 19, 96, 1 }, { 9, 32, 1 }, { 16, 160, 1 }, { 11, 96, 5 } };
    for (int pass = 0; pass < 2; pass++)
        for (size_t si = 0; si < sizeof nl_shapes / sizeof nl_shapes[0]; si++)
            check_case(QT_IQ4_NL, &nl_shapes[si], pass ? tp3 : NULL, &scr, &seed);
    check_guard(&scr, &seed);
    check_multi(NULL, &scr, &seed);
    check_multi(tp3, &scr, &seed);
    tp_close(tp3);
    mm_scratch_free(&scr);
    return tap_done();
}
