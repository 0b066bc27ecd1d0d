/* test_attention: the CPU attention kernel (kernels/cpu/attention.h) over
 * long spans (several parts of ATTN_PART keys), sliding windows, softcap,
 * GQA ratios 1 to 8, f32 / f16 / q8_0 / q4_0 KV (head dims of one to four
 * quantization blocks, lengths off the blocks) and block sizes that do not divide
 * the part: against a direct double computation on the stored values, every
 * ISA equal to scalar bit for bit, and a query's output the same bits
 * whether it runs in one prefill batch, in chunks, or alone as a decode
 * step on 1, 2 or 3 threads (the key split over threads).
 *
 * On amx, attn_batch.bf16_tiles puts prompt tiles on AMX-BF16
 * (kernels/cpu/attn_amx.c; without it amx is the f32 path, scalar's bits):
 * Q and K as bf16 hi + lo pairs (three products: 2^-14 of |q||k| at
 * most), P and V rounded to bf16 (unit roundoff u = 2^-8), so that path is
 * checked against exact attention in double (unrounded q) within a bound
 * derived from that rounding, per query row: a score moves by at most
 * D = scale · (2^-14 + 3 hd · 2^-24) · max_j Σ_d |q_d k_jd| (the f32 sums
 * of 3 hd products; softcap's tanh is 1-Lipschitz), so every weight by a
 * factor within exp(±2D); P's rounding and the exp2 polynomial (1e-5)
 * move the weights by another (1 + u)/(1 - u); V's rounding adds u · Σ p
 * |v| and the f32 sums over n keys n · 2^-23 of it:
 *   |out - exact| ≤ max|v| · (exp(2D + 2.01 u + 2e-5) - 1 + u + n · 2^-23).
 * Its results must not depend on the thread count (bits), nor on where the
 * prompt's tiles start (bits for rows on tiles in both cuts); decode keeps
 * the f32 path, so a query alone equals scalar's prefill bit for bit. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/attention.h"
#include "cpu/cpu_isa.h"
#include "cpu/ops.h"
#include "cpu/threadpool.h"
#include "tap.h"

static uint32_t rng = 12345u;
static float frand(void)   /* [-1, 1) */
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}

struct cfg {
    const char *name;
    int32_t nh, nkv, hd, bt, ntok, window;
    enum ops_kv_type type;
    float softcap;
};

struct fixture {
    const struct cfg *c;
    char *kp, *vp;
    float *K, *V, *q, *qr;   /* stored K, V as loaded; q; q rounded to f16 */
    int32_t *pos, *table;
    const int32_t **tabs;
    struct attn_layer L;
};

static int32_t gcd(int32_t a, int32_t b)
{
    while (b) {
        const int32_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

static void fixture_open(struct fixture *f, const struct cfg *c)
{
    const int32_t kd = c->nkv * c->hd, qd = c->nh * c->hd;
    const int32_t nblk = (c->ntok + c->bt - 1) / c->bt;
    const size_t row = ops_kv_row_bytes(c->type, kd);
    f->c = c;
    /* The backend's layout: each block holds K then V (of every layer
     * there), block_stride apart; the gap between blocks is filled with
     * bytes that read as huge values, so a kernel that steps by
     * block_tokens · row_bytes instead reads them. */
    const size_t part = (size_t)c->bt * row, stride = 2 * part + 192;
    f->kp = malloc((size_t)nblk * stride);
    memset(f->kp, 0x7b, (size_t)nblk * stride);
    for (int32_t i = 0; i < nblk; i++) memset(f->kp + (size_t)i * stride, 0, 2 * part);
    f->vp = f->kp + part;
    f->K = malloc(sizeof(float) * (size_t)c->ntok * kd);
    f->V = malloc(sizeof(float) * (size_t)c->ntok * kd);
    f->q = malloc(sizeof(float) * (size_t)c->ntok * qd);
    f->qr = malloc(sizeof(float) * (size_t)c->ntok * qd);
    f->pos = malloc(sizeof(int32_t) * (size_t)c->ntok);
    f->table = malloc(sizeof(int32_t) * (size_t)nblk);
    f->tabs = malloc(sizeof(*f->tabs) * (size_t)c->ntok);
    int32_t mul = 7;   /* a shuffled block table: i -> (i·mul + 3) mod nblk, mul coprime to nblk */
    while (gcd(nblk, mul) != 1) mul += 2;   /* (nblk % mul alone let 21 blocks take 9) */
    for (int32_t i = 0; i < nblk; i++) f->table[i] = (int32_t)(((int64_t)i * mul + 3) % nblk);
    f->L = (struct attn_layer){ f->kp, f->vp, c->type, c->bt, row, stride, NULL, NULL, 0 };
    char *stored = malloc(row);
    for (int32_t t = 0; t < c->ntok; t++) {
        float *k = f->K + (size_t)t * kd, *v = f->V + (size_t)t * kd;
        for (int32_t i = 0; i < kd; i++) {
            k[i] = frand();
            v[i] = frand();
        }
        attn_kv_store(&f->L, c->nkv, c->hd, f->table[t / c->bt], t % c->bt, k, v);
        ops_kv_store(c->type, stored, k, kd);   /* the reference sees the stored values */
        ops_kv_load(c->type, stored, k, kd);
        ops_kv_store(c->type, stored, v, kd);
        ops_kv_load(c->type, stored, v, kd);
        for (int32_t i = 0; i < qd; i++) f->q[(size_t)t * qd + i] = frand() * 0.6f;
        f->pos[t] = t;
        f->tabs[t] = f->table;
    }
    memcpy(f->qr, f->q, sizeof(float) * (size_t)c->ntok * qd);
    ops_round_f16(f->qr, (int64_t)c->ntok * qd);
    free(stored);
}

static void fixture_close(struct fixture *f)
{
    free(f->kp); free(f->K); free(f->V); free(f->q); free(f->qr);
    free(f->pos); free(f->table); free(f->tabs);
}

/* Direct attention in double of query t on the stored K and V. */
static void ref_query(const struct fixture *f, int32_t t, float *out)
{
    const struct cfg *c = f->c;
    const int32_t kd = c->nkv * c->hd, G = c->nh / c->nkv;
    const int32_t lo = c->window && t - c->window + 1 > 0 ? t - c->window + 1 : 0;
    double *s = malloc(sizeof(double) * (size_t)(t + 1));
    for (int32_t h = 0; h < c->nh; h++) {
        const int32_t g = h / G;
        const float *qh = f->qr + ((size_t)t * c->nh + h) * c->hd;
        double mx = -1e300, sum = 0.0;
        for (int32_t j = lo; j <= t; j++) {
            double d = 0.0;
            for (int32_t i = 0; i < c->hd; i++) d += (double)qh[i] * f->K[(size_t)j * kd + g * c->hd + i];
            d *= 0.125;
            if (c->softcap > 0.0f) d = c->softcap * tanh(d / c->softcap);
            s[j] = d;
            mx = fmax(mx, d);
        }
        for (int32_t j = lo; j <= t; j++) sum += (s[j] = exp(s[j] - mx));
        /* probabilities rounded to f16, as the reference (and tern) does */
        for (int32_t j = lo; j <= t; j++) {
            float pj = (float)(s[j] / sum);
            ops_round_f16(&pj, 1);
            s[j] = pj;
        }
        for (int32_t i = 0; i < c->hd; i++) {
            double acc = 0.0;
            for (int32_t j = lo; j <= t; j++) acc += s[j] * f->V[(size_t)j * kd + g * c->hd + i];
            out[(size_t)h * c->hd + i] = (float)acc;
        }
    }
    free(s);
}

static struct attn_batch batch(const struct fixture *f, int32_t t0, int32_t n, float *out);

/* Exact attention in double of query t (unrounded q, probabilities
 * unrounded) on the stored K and V, and the bf16 bound of each head's row
 * (see the top). */
static void exact_query(const struct fixture *f, int32_t t, float *out, double *bound)
{
    const struct cfg *c = f->c;
    const int32_t kd = c->nkv * c->hd, G = c->nh / c->nkv;
    const int32_t lo = c->window && t - c->window + 1 > 0 ? t - c->window + 1 : 0;
    const double u = 1.0 / 256.0;
    double *s = malloc(sizeof(double) * (size_t)(t + 1));
    for (int32_t h = 0; h < c->nh; h++) {
        const int32_t g = h / G;
        const float *qh = f->q + ((size_t)t * c->nh + h) * c->hd;
        double mx = -1e300, sum = 0.0, amax = 0.0, vmax = 0.0;
        for (int32_t j = lo; j <= t; j++) {
            double d = 0.0, a = 0.0;
            for (int32_t i = 0; i < c->hd; i++) {
                const double kv = f->K[(size_t)j * kd + g * c->hd + i];
                d += (double)qh[i] * kv;
                a += fabs((double)qh[i] * kv);
                vmax = fmax(vmax, fabs(f->V[(size_t)j * kd + g * c->hd + i]));
            }
            d *= 0.125;
            amax = fmax(amax, a);
            if (c->softcap > 0.0f) d = c->softcap * tanh(d / c->softcap);
            s[j] = d;
            mx = fmax(mx, d);
        }
        for (int32_t j = lo; j <= t; j++) sum += (s[j] = exp(s[j] - mx));
        for (int32_t i = 0; i < c->hd; i++) {
            double acc = 0.0;
            for (int32_t j = lo; j <= t; j++) acc += s[j] / sum * f->V[(size_t)j * kd + g * c->hd + i];
            out[(size_t)h * c->hd + i] = (float)acc;
        }
        const double D = 0.125 * amax * (0x1p-14 + 3.0 * c->hd * 0x1p-24);
        bound[h] = vmax * (exp(2.0 * D + 2.01 * u + 2e-5) - 1.0 + u + (t - lo + 1) * 0x1p-23);
    }
    free(s);
}

/* Whether token i of a batch of n runs on AMX tiles (attn_amx_fits: tiles
 * of ATTN_AMX_TILE = 64 tokens from the batch's start, at least 2 tokens
 * and 16 rows). */
static int on_tiles(const struct cfg *c, int32_t i, int32_t n)
{
    enum { TILE = 64 };
    const int32_t T = n - i / TILE * TILE < TILE ? n - i / TILE * TILE : TILE, G = c->nh / c->nkv;
    return T >= 2 && T * G >= 16 && c->hd % 64 == 0 && c->bt % 16 == 0;
}

/* The AMX path, bf16_tiles (see the top): bound, thread count, tile cuts,
 * decode. */
static void check_amx(const struct fixture *f, struct threadpool *const tps[3], const float *out0,
                      float *out, float *chunk, float *ref, struct attn_scratch *s)
{
    const struct cfg *c = f->c;
    const size_t qd = (size_t)c->nh * c->hd, all = (size_t)c->ntok * qd;
    struct attn_batch b = batch(f, 0, c->ntok, out);
    b.bf16_tiles = 1;
    ok(attn_forward(tps[1], CPU_ISA_AMX, &f->L, &b, s) == 0, "%s amx: prefill of %d runs", c->name,
       c->ntok);
    double worst = 0.0, ratio = 0.0, bmax = 0.0, bound[64];
    int32_t tiles = 0;
    for (int32_t t = 0; t < c->ntok; t += (t < 40 ? 1 : 7)) {
        exact_query(f, t, ref, bound);
        tiles += on_tiles(c, t, c->ntok);
        for (size_t i = 0; i < qd; i++) {
            const double e = fabs(out[(size_t)t * qd + i] - ref[i]);
            worst = fmax(worst, e);
            ratio = fmax(ratio, e / bound[i / (size_t)c->hd]);
            bmax = fmax(bmax, bound[i / (size_t)c->hd]);
        }
    }
    ok(ratio <= 1.0, "%s amx: within the bf16 bound of exact attention (%d rows on tiles; max "
       "error %.3g, at most %.0f %% of its bound; bounds up to %.3g)", c->name, tiles, worst,
       100.0 * ratio, bmax);
    int same = 1;
    for (int n = 0; n < 3; n += 2) {
        struct attn_batch bn = batch(f, 0, c->ntok, chunk);
        bn.bf16_tiles = 1;
        attn_forward(tps[n], CPU_ISA_AMX, &f->L, &bn, s);
        same &= memcmp(out, chunk, sizeof(float) * all) == 0;
    }
    ok(same, "%s amx: prefill on 1 and 3 threads equals 2 bit for bit", c->name);
    /* chunks of 40: tiles start elsewhere; a row on tiles in both cuts has
     * the same bits (each row alone over fixed key chunks) */
    for (int32_t t0 = 0; t0 < c->ntok; t0 += 40) {
        const int32_t n = c->ntok - t0 < 40 ? c->ntok - t0 : 40;
        struct attn_batch bc = batch(f, t0, n, chunk + (size_t)t0 * qd);
        bc.bf16_tiles = 1;
        attn_forward(tps[0], CPU_ISA_AMX, &f->L, &bc, s);
    }
    int32_t both = 0;
    same = 1;
    for (int32_t t = 0; t < c->ntok; t++) {
        if (!on_tiles(c, t, c->ntok) || !on_tiles(c, t % 40, c->ntok - t / 40 * 40 < 40 ?
                                                               c->ntok - t / 40 * 40 : 40))
            continue;
        both++;
        same &= memcmp(out + (size_t)t * qd, chunk + (size_t)t * qd, sizeof(float) * qd) == 0;
    }
    ok(same, "%s amx: chunks of 40 equal one batch bit for bit on the %d rows on tiles in both",
       c->name, both);
    const int32_t dec[] = { 0, 1, 255, 256, c->ntok - 1 };
    same = 1;
    for (size_t d = 0; d < sizeof dec / sizeof dec[0]; d++)
        for (int n = 0; n < 3; n++) {
            struct attn_batch b1 = batch(f, dec[d], 1, chunk);
            b1.bf16_tiles = 1;
            attn_forward(tps[n], CPU_ISA_AMX, &f->L, &b1, s);
            same &= memcmp(chunk, out0 + (size_t)dec[d] * qd, sizeof(float) * qd) == 0;
        }
    ok(same, "%s amx: decode queries alone on 1, 2, 3 threads equal scalar's prefill bit for bit",
       c->name);
}

static struct attn_batch batch(const struct fixture *f, int32_t t0, int32_t n, float *out)
{
    const struct cfg *c = f->c;
    return (struct attn_batch){ n, c->nh, c->nkv, c->hd, c->window,
                                f->q + (size_t)t0 * c->nh * c->hd, out, f->pos + t0, f->tabs + t0,
                                0.125f, c->softcap, 1, 0 };
}

static void run_cfg(const struct cfg *c, struct threadpool *const tps[3])
{
    struct fixture f;
    fixture_open(&f, c);
    const size_t qd = (size_t)c->nh * c->hd, all = (size_t)c->ntok * qd;
    float *out = malloc(sizeof(float) * all), *out0 = malloc(sizeof(float) * all);
    float *chunk = malloc(sizeof(float) * all), *ref = malloc(sizeof(float) * qd);
    struct attn_scratch s = { 0 };
    /* decode positions: both sides of part and block boundaries, the last */
    const int32_t P = (256 + c->bt - 1) / c->bt * c->bt;   /* ATTN_PART (attn_impl.h) in whole blocks */
    const int32_t dec[] = { 0, 1, c->bt - 1, c->bt, P - 1, P, P + 1, 2 * P, c->ntok - 1 };
    for (int isa = CPU_ISA_SCALAR; isa <= (int)cpu_isa_best(); isa++) {
        const char *iname = cpu_isa_name((enum cpu_isa)isa);
        const struct attn_batch b = batch(&f, 0, c->ntok, out);
        ok(attn_forward(tps[1], (enum cpu_isa)isa, &f.L, &b, &s) == 0, "%s %s: prefill of %d runs",
           c->name, iname, c->ntok);
        double worst = 0.0;
        for (int32_t t = 0; t < c->ntok; t += (t < 40 ? 1 : 13)) {
            ref_query(&f, t, ref);
            for (size_t i = 0; i < qd; i++) worst = fmax(worst, fabs(out[(size_t)t * qd + i] - ref[i]));
        }
        ok(worst < 1e-4, "%s %s: matches the direct computation in double (max error %.2g)",
           c->name, iname, worst);
        if (isa == CPU_ISA_SCALAR)
            memcpy(out0, out, sizeof(float) * all);
        else
            ok(memcmp(out0, out, sizeof(float) * all) == 0, "%s %s: equals scalar bit for bit",
               c->name, iname);
        /* chunks of 37 tokens, 1 thread: the same bits */
        for (int32_t t0 = 0; t0 < c->ntok; t0 += 37) {
            const int32_t n = c->ntok - t0 < 37 ? c->ntok - t0 : 37;
            const struct attn_batch bc = batch(&f, t0, n, chunk + (size_t)t0 * qd);
            attn_forward(tps[0], (enum cpu_isa)isa, &f.L, &bc, &s);
        }
        ok(memcmp(out, chunk, sizeof(float) * all) == 0,
           "%s %s: chunks of 37 on 1 thread equal one batch on 2", c->name, iname);
        /* decode steps alone on 1, 2, 3 threads (2 and 3 split the keys) */
        int same = 1;
        for (size_t d = 0; d < sizeof dec / sizeof dec[0]; d++) {
            if (dec[d] < 0 || dec[d] >= c->ntok) continue;
            for (int n = 0; n < 3; n++) {
                float *one = chunk;
                const struct attn_batch b1 = batch(&f, dec[d], 1, one);
                attn_forward(tps[n], (enum cpu_isa)isa, &f.L, &b1, &s);
                if (memcmp(one, out + (size_t)dec[d] * qd, sizeof(float) * qd)) {
                    if (same) tap_diag("%s %s: position %d differs on %d threads", c->name, iname, dec[d], n + 1);
                    same = 0;
                }
            }
        }
        ok(same, "%s %s: decode queries alone on 1, 2, 3 threads equal the prefill bit for bit",
           c->name, iname);
    }
    if (cpu_isa_best() >= CPU_ISA_AMX)
        check_amx(&f, tps, out0, out, chunk, ref, &s);
    else
        tap_skip("amx cases: TERN_ISA or this CPU has no AMX tiles");
    attn_scratch_free(&s);
    free(out); free(out0); free(chunk); free(ref);
    fixture_close(&f);
}

int main(void)
{
    static const struct cfg cfgs[] = {
        { "GQA 3, f16, blocks of 16, 700 tokens", 9, 3, 64, 16, 700, 0, OPS_KV_F16, 0.0f },
        { "GQA 4, f16, hd 256, window 100", 4, 1, 256, 16, 420, 100, OPS_KV_F16, 0.0f },
        { "GQA 8, q8_0, softcap 30", 8, 1, 32, 16, 600, 0, OPS_KV_Q8_0, 30.0f },
        { "GQA 4, q4_0 (hd 32: unrotated), window 300", 8, 2, 32, 16, 560, 300, OPS_KV_Q4_0, 0.0f },
        { "GQA 1, f32, hd 48, blocks of 12, window 300, softcap 20", 2, 2, 48, 12, 560, 300,
          OPS_KV_F32, 20.0f },
        { "GQA 2, f16, blocks of 4", 4, 2, 64, 4, 530, 0, OPS_KV_F16, 0.0f },
        /* decode's pairs of whole f16 blocks (qk_pair: G up to 2 on AVX2)
         * beside a window that starts inside a block */
        { "GQA 2, f16, window 250, 390 tokens", 8, 4, 64, 16, 390, 250, OPS_KV_F16, 0.0f },
        /* the quantized rows read in place by decode and transposed per
         * quantization block (attn_tile.inc): lengths off the blocks of 16
         * and 32, one, two and three quantization blocks per head, blocks
         * of 32 keys; a wrong block or scale breaks the double reference */
        { "GQA 3, q8_0, hd 64, 301 tokens", 9, 3, 64, 16, 301, 0, OPS_KV_Q8_0, 0.0f },
        { "GQA 4, q8_0, hd 128, window 200, 333 tokens", 8, 2, 128, 16, 333, 200, OPS_KV_Q8_0,
          0.0f },
        { "GQA 2, q4_0 (hd 96: unrotated), softcap 30, 275 tokens", 4, 2, 96, 16, 275, 0,
          OPS_KV_Q4_0, 30.0f },
        { "GQA 1, q8_0, blocks of 32, 259 tokens", 2, 2, 64, 32, 259, 0, OPS_KV_Q8_0, 0.0f },
        /* softcap and f32 blocks on AMX tiles too */
        { "GQA 4, f32, hd 64, window 90, softcap 30, 300 tokens", 8, 2, 64, 16, 300, 90,
          OPS_KV_F32, 30.0f },
    };
    struct threadpool *tps[3] = { tp_open(1), tp_open(2), tp_open(3) };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) run_cfg(&cfgs[i], tps);
    for (int i = 0; i < 3; i++) tp_close(tps[i]);
    return tap_done();
}
