/* test_attention_q4: attention over a q4_0 KV cache (--kv-type q4_0) on
 * every ISA path, against the unquantized K and V.
 *
 * - the stored rows read back as the reference dequantizer (quant.h
 *   dequant_row, ggml's nibble layout) reads them, each value within the
 *   quantization error of its block (|d|/2, or up to |d| for the values
 *   clamped at the top, plus the f16 rounding of d; d = max/-8), after the
 *   Walsh-Hadamard rotation (attn_kv_rot: K per head, V per 64) that the
 *   reference applies to a quantized cache, so everything below is checked
 *   in the rotated basis, where the kernel's output rotated back lives;
 * - prefill and decode outputs within a bound derived from that step: a
 *   key's score moves by at most e = scale · sum_i |q_i| · step_i, so every
 *   probability by a factor within exp(±2e), and the output by at most
 *   max step(V) + (exp(2e) - 1) · max |v| (plus the f16 rounding of the
 *   probabilities, 2^-10 · max |v|, and the kernel's own 1e-4 in float);
 * - every ISA equal to scalar bit for bit (the dequantized values are exact
 *   in f32, the rest is the f16 path's arithmetic), and a decode query alone
 *   on 1 or 2 threads (2 split its keys) the same bits as in the prefill;
 * - amx with attn_batch.bf16_tiles (prompt tiles on AMX-BF16,
 *   kernels/cpu/attn_amx.c): the
 *   bound widened by the tiles' rounding (q and K as bf16 hi + lo pairs,
 *   P and V as bf16, u = 2^-8; q's f16 rounding in the reference, 2^-11)
 *   as test_attention derives it, max |v| · (exp(2D + 2.01 u + 2e-5) - 1 +
 *   u + n · 2^-23) with D = scale · (2^-11 + 2^-14 + 3 hd · 2^-24) ·
 *   max_j Σ |q_i k_ji|, and the same bits
 *   on 1 and 2 threads instead of scalar's; decode keeps scalar's bits. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/attention.h"
#include "cpu/cpu_isa.h"
#include "cpu/ops.h"
#include "cpu/threadpool.h"
#include "quant.h"
#include "tap.h"

static uint32_t rng = 2024u;
static float frand(void)   /* [-1, 1) */
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}

enum { NH = 8, NKV = 2, HD = 64, BT = 16, NTOK = 400, KD = NKV * HD, QD = NH * HD };
static const float SCALE = 0.125f;

/* The quantization error bound of each element of a row. quant_row_q4_0
 * takes d = max/-8 (max: the signed value of largest magnitude), so a value
 * y = x/d in [-8, 8] becomes round(y) clamped to 15 (8 + 7): |d|/2 at most,
 * or (y - 7)·|d| <= |d| for the values of the other sign beyond 7.5·|d|.
 * d's rounding to f16 adds |q - 8|·|d - f16(d)| <= 8·|d|·2^-11. */
static void step_bounds(const float *x, float *step)
{
    for (int b = 0; b < KD / QK4_0; b++) {
        const float *xb = x + b * QK4_0;
        float amax = 0.0f, max = 0.0f;
        for (int i = 0; i < QK4_0; i++)
            if (fabsf(xb[i]) > amax) {
                amax = fabsf(xb[i]);
                max = xb[i];
            }
        const double d = max / -8.0, ad = fabs(d);
        for (int i = 0; i < QK4_0; i++) {
            const double y = d != 0.0 ? xb[i] / d : 0.0;
            step[b * QK4_0 + i] = (float)((y > 7.5 ? (y - 7.0) * ad : ad / 2) + ad / 256 + 1e-7);
        }
    }
}

int main(void)
{
    const int32_t nblk = (NTOK + BT - 1) / BT;
    const size_t row = ops_kv_row_bytes(OPS_KV_Q4_0, KD);
    ok(row == (size_t)KD / 32 * 18, "a q4_0 row of %d values is %zu bytes (18 per 32)", KD, row);
    char *kp = calloc((size_t)nblk * BT, row), *vp = calloc((size_t)nblk * BT, row);
    float *K = malloc(sizeof(float) * NTOK * KD), *V = malloc(sizeof(float) * NTOK * KD);
    float *Ks = malloc(sizeof(float) * NTOK * KD), *Vs = malloc(sizeof(float) * NTOK * KD);
    float *Kstep = malloc(sizeof(float) * NTOK * KD), *Vstep = malloc(sizeof(float) * NTOK * KD);
    float *Kr = malloc(sizeof(float) * NTOK * KD), *Vr = malloc(sizeof(float) * NTOK * KD);
    float *q = malloc(sizeof(float) * NTOK * QD), *qr = malloc(sizeof(float) * NTOK * QD);
    const int32_t rk = attn_kv_rot(OPS_KV_Q4_0, HD, 0), rv = attn_kv_rot(OPS_KV_Q4_0, HD, 1);
    ok(rk == 64 && rv == 64 && attn_kv_rot(OPS_KV_Q4_0, 128, 0) == 128 &&
       attn_kv_rot(OPS_KV_Q4_0, 96, 0) == 0 && attn_kv_rot(OPS_KV_Q8_0, 64, 0) == 0,
       "rotation sizes: K the largest power of two >= 64 dividing head_dim, V 64, q4_0 only");
    {   /* H·e_1 is H's first column, all 1/sqrt(n); H·H = I */
        float x[128] = { 0 }, y[128];
        x[0] = 1.0f;
        attn_hadamard(x, 128);
        int flat = 1;
        for (int i = 0; i < 128; i++) flat &= fabsf(x[i] - 1.0f / sqrtf(128.0f)) < 1e-7f;
        for (int i = 0; i < 128; i++) x[i] = y[i] = frand();
        attn_hadamard(x, 128);
        attn_hadamard(x, 128);
        double e = 0.0;
        for (int i = 0; i < 128; i++) e = fmax(e, fabs(x[i] - y[i]));
        ok(flat && e < 1e-6, "Hadamard rotation orthonormal and its own inverse (error %.2g)", e);
    }
    int32_t pos[NTOK], table[(NTOK + BT - 1) / BT];
    const int32_t *tabs[NTOK];
    for (int32_t i = 0; i < nblk; i++) table[i] = (i * 7 + 3) % nblk;   /* shuffled blocks */
    const struct attn_layer L = { kp, vp, OPS_KV_Q4_0, BT, row, 0, NULL, NULL, 0 };

    /* Store every token; read the stored rows back both ways. */
    char *stored = malloc(row);
    float *ref = malloc(sizeof(float) * KD);
    int same_deq = 1, in_step = 1;
    for (int32_t t = 0; t < NTOK; t++) {
        float *k = K + (size_t)t * KD, *v = V + (size_t)t * KD;
        for (int32_t i = 0; i < KD; i++) {
            k[i] = frand() * (0.5f + 0.1f * (float)(t % 4));   /* rows of different scales */
            v[i] = frand();
        }
        for (int32_t i = 0; i < QD; i++) q[(size_t)t * QD + i] = frand() * 0.6f;
        pos[t] = t;
        tabs[t] = table;
        attn_kv_store(&L, NKV, HD, table[t / BT], t % BT, k, v);
        float *kr = Kr + (size_t)t * KD, *vr = Vr + (size_t)t * KD;
        memcpy(kr, k, sizeof(float) * KD);
        memcpy(vr, v, sizeof(float) * KD);
        for (int32_t h = 0; h < NKV; h++)
            for (int32_t i = 0; i < HD; i += rk) attn_hadamard(kr + h * HD + i, rk);
        for (int32_t h = 0; h < NKV; h++)
            for (int32_t i = 0; i < HD; i += rv) attn_hadamard(vr + h * HD + i, rv);
        step_bounds(kr, Kstep + (size_t)t * KD);
        step_bounds(vr, Vstep + (size_t)t * KD);
        for (int kv = 0; kv < 2; kv++) {
            const float *x = kv ? vr : kr;
            float *xs = (kv ? Vs : Ks) + (size_t)t * KD;
            const float *st = (kv ? Vstep : Kstep) + (size_t)t * KD;
            const char *pool = kv ? vp : kp;
            const char *r = pool + ((size_t)table[t / BT] * BT + t % BT) * row;
            ops_kv_load(OPS_KV_Q4_0, r, xs, KD);
            dequant_row(QT_Q4_0, r, ref, KD);
            if (memcmp(xs, ref, sizeof(float) * KD)) same_deq = 0;
            for (int32_t i = 0; i < KD; i++)
                if (fabsf(xs[i] - x[i]) > st[i]) {
                    if (in_step) tap_diag("token %d %s[%d]: %g stored as %g, step %g", t,
                                          kv ? "V" : "K", i, x[i], xs[i], st[i]);
                    in_step = 0;
                }
        }
    }
    ok(same_deq, "stored rows read as the reference dequantizer reads Q4_0 (ggml's layout)");
    ok(in_step, "every stored value within its block's quantization error bound");
    /* the queries as the kernel sees them: rotated as K, rounded to f16 */
    memcpy(qr, q, sizeof(float) * NTOK * QD);
    for (int32_t h = 0; h < NTOK * NH; h++)
        for (int32_t i = 0; i < HD; i += rk) attn_hadamard(qr + (size_t)h * HD + i, rk);
    ops_round_f16(qr, (int64_t)NTOK * QD);

    /* The bound per query and head, and the unquantized answer in double,
     * both in the rotated basis (Kr, Vr: rotated, not quantized). */
    float *want = malloc(sizeof(float) * NTOK * QD), *bound = malloc(sizeof(float) * NTOK * NH);
    float *bound_amx = malloc(sizeof(float) * NTOK * NH);
    double *s = malloc(sizeof(double) * NTOK);
    double worst_bound = 0.0;
    for (int32_t t = 0; t < NTOK; t++)
        for (int32_t h = 0; h < NH; h++) {
            const int32_t g = h / (NH / NKV);
            const float *qh = qr + ((size_t)t * NH + h) * HD;
            double mx = -1e300, sum = 0.0, eps = 0.0, vstep = 0.0, vmax = 0.0, amax = 0.0;
            for (int32_t j = 0; j <= t; j++) {
                const size_t o = (size_t)j * KD + (size_t)g * HD;
                double d = 0.0, e = 0.0, a = 0.0;
                for (int32_t i = 0; i < HD; i++) {
                    d += (double)qh[i] * Kr[o + i];
                    a += fabs((double)qh[i] * Kr[o + i]);
                    e += fabs((double)qh[i]) * Kstep[o + i];
                    vstep = fmax(vstep, Vstep[o + i]);
                    vmax = fmax(vmax, fabs(Vr[o + i]));
                }
                s[j] = d * SCALE;
                amax = fmax(amax, a);
                eps = fmax(eps, e * SCALE);
                mx = fmax(mx, s[j]);
            }
            for (int32_t j = 0; j <= t; j++) sum += (s[j] = exp(s[j] - mx));
            for (int32_t i = 0; i < HD; i++) {
                double acc = 0.0;
                for (int32_t j = 0; j <= t; j++) acc += s[j] / sum * Vr[(size_t)j * KD + g * HD + i];
                want[((size_t)t * NH + h) * HD + i] = (float)acc;
            }
            bound[t * NH + h] =
                (float)(vstep + (exp(2.0 * eps) - 1.0) * vmax + vmax / 1024.0 + 1e-4);
            worst_bound = fmax(worst_bound, bound[t * NH + h]);
            const double u = 1.0 / 256.0, D = SCALE * amax * (0x1p-11 + 0x1p-14 + 3.0 * HD * 0x1p-24);
            bound_amx[t * NH + h] = bound[t * NH + h] +
                (float)(vmax * (exp(2.0 * D + 2.01 * u + 2e-5) - 1.0 + u + (t + 1) * 0x1p-23));
        }
    free(s);

    struct threadpool *tp1 = tp_open(1), *tp2 = tp_open(2);
    struct attn_scratch sc = { 0 };
    float *out = malloc(sizeof(float) * NTOK * QD), *out0 = malloc(sizeof(float) * NTOK * QD);
    float *one = malloc(sizeof(float) * QD);
    for (int isa = CPU_ISA_SCALAR; isa <= (int)cpu_isa_best(); isa++) {
        const char *iname = cpu_isa_name((enum cpu_isa)isa);
        /* amx: prompt tiles on bf16 tiles (attn_batch.bf16_tiles) */
        const struct attn_batch b = { NTOK, NH, NKV, HD, 0, q, out, pos, tabs, SCALE, 0.0f, 1,
                                      isa >= CPU_ISA_AMX };
        ok(attn_forward(tp2, (enum cpu_isa)isa, &L, &b, &sc) == 0, "%s: prefill of %d runs",
           iname, NTOK);
        /* the output back in the rotated basis (H·H = I) */
        float *outr = malloc(sizeof(float) * NTOK * QD);
        memcpy(outr, out, sizeof(float) * NTOK * QD);
        for (int32_t h = 0; h < NTOK * NH; h++)
            for (int32_t i = 0; i < HD; i += rv) attn_hadamard(outr + (size_t)h * HD + i, rv);
        double worst = 0.0, ratio = 0.0, mean = 0.0;
        for (int32_t t = 0; t < NTOK; t++)
            for (int32_t h = 0; h < NH; h++)
                for (int32_t i = 0; i < HD; i++) {
                    const size_t o = ((size_t)t * NH + h) * HD + i;
                    const double e = fabs(outr[o] - want[o]);
                    worst = fmax(worst, e);
                    ratio = fmax(ratio, e / (isa >= CPU_ISA_AMX ? bound_amx : bound)[t * NH + h]);
                    mean += e;
                }
        mean /= (double)NTOK * QD;
        free(outr);
        ok(ratio <= 1.0, "%s: prefill within the quantization bound of the unquantized answer "
           "(max error %.3g, mean %.3g, at most %.0f %% of its bound; bounds up to %.3g)",
           iname, worst, mean, 100.0 * ratio, worst_bound);
        if (isa == CPU_ISA_SCALAR)
            memcpy(out0, out, sizeof(float) * NTOK * QD);
        else if (isa < CPU_ISA_AMX)
            ok(memcmp(out0, out, sizeof(float) * NTOK * QD) == 0,
               "%s: prefill equals scalar bit for bit", iname);
        else {   /* bf16 tiles: not scalar's bits, but the same on any thread count */
            float *o1 = malloc(sizeof(float) * NTOK * QD);
            const struct attn_batch b1 = { NTOK, NH, NKV, HD, 0, q, o1, pos, tabs, SCALE, 0.0f, 1, 1 };
            attn_forward(tp1, (enum cpu_isa)isa, &L, &b1, &sc);
            ok(memcmp(o1, out, sizeof(float) * NTOK * QD) == 0,
               "%s: prefill on 1 thread equals 2 bit for bit", iname);
            free(o1);
        }
        /* decode: one query alone, on 1 thread and on 2 (its keys split) */
        static const int32_t dec[] = { 0, 15, 16, 255, 256, 257, NTOK - 1 };
        int same = 1;
        for (size_t d = 0; d < sizeof dec / sizeof dec[0]; d++)
            for (int n = 0; n < 2; n++) {
                const int32_t t = dec[d];
                const struct attn_batch b1 = { 1, NH, NKV, HD, 0, q + (size_t)t * QD, one,
                                               pos + t, tabs + t, SCALE, 0.0f, 1, 0 };
                attn_forward(n ? tp2 : tp1, (enum cpu_isa)isa, &L, &b1, &sc);
                if (memcmp(one, out0 + (size_t)t * QD, sizeof(float) * QD)) {
                    if (same) tap_diag("%s: decode at %d on %d threads differs", iname, t, n + 1);
                    same = 0;
                }
            }
        ok(same, "%s: decode queries alone on 1 and 2 threads equal scalar's prefill bit for bit",
           iname);
    }
    attn_scratch_free(&sc);
    tp_close(tp1);
    tp_close(tp2);
    free(out); free(out0); free(one); free(want); free(bound); free(bound_amx); free(stored); free(ref);
    free(kp); free(vp); free(K); free(V); free(Kr); free(Vr); free(Ks); free(Vs); free(Kstep); free(Vstep);
    free(q); free(qr);
    return tap_done();
}
