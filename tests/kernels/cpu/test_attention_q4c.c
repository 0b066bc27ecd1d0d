/* test_attention_q4c: attention over a q4c KV cache (--kv-type q4c) on
 * every ISA path: K per channel over each block (attn_kc_*), the queries'
 * own block from its f16 staging entry, V as q5_0 rows rotated by the
 * 64-point Walsh-Hadamard.
 *
 * - V's q5_0 rows: stored as the reference's quantize_row_q5_0_ref (the
 *   scale the f16 of max / -16, codes round(x / d) + 16 clamped to 31), read
 *   back as the reference dequantizer reads Q5_0, each value within d / 2
 *   (|d| where code 31 clamps the side opposite the block's largest);
 * - attn_kc_close / attn_kc_load / attn_kc_reopen round trip: per channel
 *   min and step the f16 of the keys' min and (max - min) / 15, every key
 *   within step/2 of its f16 input plus the f16 rounding of the pair (the
 *   clamped ends: |min - f16(min)| + 15 · |step - f16(step)|, each at most
 *   2^-11 of its value or 2^-25 below f16's normal range), the extreme keys
 *   at codes 0 and 15, the codes of keys n.. zero, reopen the f16 of load;
 * - the backend's use emulated (one layer's K and V parts interleaved in
 *   blocks with another layer's, its staging part in entries with another
 *   layer's, the blocks a batch fills closed after its stores, before its
 *   attention): prefill within a float bound of a double-precision
 *   attention over the very values the kernel must read (earlier blocks
 *   through attn_kc_load, the own block as the f16 of its keys, V as the
 *   stored q5_0 rows, rotated back); the bound: the scores' f32 sums move a
 *   probability by a factor within exp(±2D), D = scale · (hd + 4) · 2^-24 ·
 *   max_j Σ|q_i k_ji| (+ exp's 1e-7), the f16 probabilities by 2^-11 (twice
 *   that with the f32 normalisation), the f32 sums of P·V by n · 2^-23, and
 *   comparing in the rotated basis (H applied to an f32 rotation) by 2^-15,
 *   all times max |v|;
 * - every ISA equal to scalar bit for bit; decoding the tokens one by one,
 *   chunks of 7 and the whole prompt in one batch the same bits; decode on
 *   2 threads (its keys split, odd KV heads) the same as on 1; a decode
 *   query the same bits with the other blocks' staging entries dropped and
 *   poisoned (earlier blocks come from the pool only);
 * - GQA 8/2, 4/1, 9/3, MHA 4/4; head_dim 64, 96 (V unrotated), 128; blocks
 *   of 8, 16, 24 (the scalar K loader), 32 and 64; sliding windows. */
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

static uint32_t rng = 4242u;
static float frand(void)   /* [-1, 1) */
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}

/* V's q5_0 rows: values from tiny to large per block (a block all zero,
 * one with a single non-zero, the rest spread over 2^-6..2^6), stored and
 * read back through ops_kv_*, against quant.h's dequantizer and the
 * rounding bound: |x - d · (q - 16)| <= |d| / 2, |d| at the clamped code 31
 * (+ the f16 rounding of d, times 16), d the stored scale. */
static void v_rows(void)
{
    enum { N = 32 * 64 };
    static float x[N], got[N], ref[N];
    static unsigned char row[N / 32 * 22];
    uint32_t r = 777u;   /* its own stream: the attention cases' inputs stay as they were */
    for (int i = 0; i < N; i++) {
        r = r * 1664525u + 1013904223u;
        const float u = (float)((r >> 8) & 0xffffff) / 8388608.0f - 1.0f;
        const int b = i / 32;
        const float mag = ldexpf(1.0f, b % 13 - 6);
        x[i] = b == 0 ? 0.0f : b == 1 ? (i == 40 ? -3.0f : 0.0f) : u * mag;
    }
    ops_kv_store(OPS_KV_Q4C, row, x, N);
    ops_kv_load(OPS_KV_Q4C, row, got, N);
    dequant_row(QT_Q5_0, row, ref, N);
    ok(memcmp(got, ref, sizeof got) == 0, "q4c's V rows read back as quant.h's Q5_0 dequantizer");
    block_q5_0 want[N / 32];
    quant_row_q5_0(x, want, N);
    ok(memcmp(row, want, sizeof want) == 0, "q4c's V rows stored as quant_row_q5_0");
    int within = 1, used_hi = 0, used_lo = 0;
    for (int b = 0; b < N / 32; b++) {
        const float d = fabsf(fp16_to_f32(want[b].d));
        for (int j = 0; j < 32; j++) {
            const float e = fabsf(got[b * 32 + j] - x[b * 32 + j]);
            /* code 31 (15 d) clamps the side opposite the largest value,
             * which reaches 16 |d|: there within |d| */
            const float ds = fp16_to_f32(want[b].d);
            const float bound = (got[b * 32 + j] == 15.0f * ds ? d : d / 2) + 16.0f * d * 0x1p-11f;
            if (e > bound) {
                if (within) tap_diag("V value %d: %g read %g (d %g)", b * 32 + j, x[b * 32 + j],
                                     got[b * 32 + j], d);
                within = 0;
            }
            used_hi |= d > 0 && got[b * 32 + j] / d >= 15.0f;
            used_lo |= d > 0 && got[b * 32 + j] / d <= -15.0f;
        }
    }
    ok(within && used_hi && used_lo && got[40] == -3.0f && got[0] == 0.0f,
       "q4c's V: each value within d / 2 of its input (d clamped), both ends of the codes used, "
       "a block's largest value exact, zeros zero");
}

static uint16_t to_f16(float x)
{
    uint16_t h;
    ops_kv_store(OPS_KV_F16, &h, &x, 1);
    return h;
}

static float from_f16(uint16_t h)
{
    float x;
    ops_kv_load(OPS_KV_F16, &h, &x, 1);
    return x;
}

static float f16r(float x)   /* x rounded to f16 */
{
    return from_f16(to_f16(x));
}

/* f16's rounding error bound of x: half an ulp, 2^-11 relative in the
 * normal range, 2^-25 absolute below it */
static double f16_err(double x)
{
    return fmax(fabs(x) * 0x1p-11, 0x1p-25);
}

/* A key's channel d at position t: most channels small, a few with large
 * offsets (one drifting slowly with the position), as real K has. */
static float key_value(int32_t t, int32_t d)
{
    float x = frand() * 0.5f;
    if (d % 16 == 3) x += 8.0f;
    if (d % 29 == 5) x -= 12.0f + 0.01f * (float)t;
    if (d % 37 == 7) x *= 30.0f;
    return x;
}

/* ---- round trip ------------------------------------------------------------ */

static int code_of(const uint8_t *codes, int32_t bt, int32_t d, int32_t j)
{
    return (codes[(size_t)d * (bt / 2) + j / 2] >> (4 * (j & 1))) & 15;
}

static void round_trip(int32_t nkv, int32_t hd, int32_t bt, int32_t n)
{
    const size_t hb = attn_kc_head_bytes(hd, bt), kpart = (size_t)nkv * hb;
    ok(hb == (size_t)hd * 4 + (size_t)hd * bt / 2,
       "kc head bytes %zu: %d (min, step) f16 pairs and %d runs of %d bytes", hb, hd, hd, bt / 2);
    /* two blocks, block 1 tested (the offset of a block) */
    char *pool = malloc(2 * kpart);
    memset(pool, 0xA5, 2 * kpart);   /* garbage the close must overwrite */
    const size_t row = ops_kv_row_bytes(OPS_KV_Q4C, (int64_t)nkv * hd);
    const struct attn_layer L = { pool, NULL, OPS_KV_Q4C, bt, row, kpart, NULL, NULL, 0 };
    const size_t halves = (size_t)nkv * hd * bt;
    uint16_t *st = malloc(halves * sizeof *st), *re = malloc(halves * sizeof *re);
    for (int32_t g = 0; g < nkv; g++)
        for (int32_t d = 0; d < hd; d++)
            for (int32_t j = 0; j < bt; j++) {
                float x = key_value(j, d);
                if (d == 1) x = 0.75f;                   /* a constant channel: step 0 */
                if (d == 2) x = 1e-6f * frand();         /* below f16's normal range */
                st[((size_t)g * hd + d) * bt + j] = to_f16(j < n ? x : NAN);   /* keys n.. unread */
            }
    attn_kc_close(&L, nkv, hd, 1, st, n);
    int pairs_ok = 1, within = 1, ends = 1, zero_tail = 1, block0 = 1;
    double worst = 0.0;
    for (size_t i = 0; i < kpart; i++) block0 &= (unsigned char)pool[i] == 0xA5;
    float *buf = malloc(sizeof(float) * (size_t)hd * bt);
    for (int32_t g = 0; g < nkv; g++) {
        const char *h = pool + kpart + (size_t)g * hb;
        const uint16_t *pairs = (const uint16_t *)(const void *)h;
        const uint8_t *codes = (const uint8_t *)h + (size_t)hd * 4;
        attn_kc_load(h, hd, bt, buf);
        for (int32_t d = 0; d < hd; d++) {
            const uint16_t *x = st + ((size_t)g * hd + d) * bt;
            float lo = from_f16(x[0]), hi = lo;
            int32_t jlo = 0, jhi = 0;
            for (int32_t j = 1; j < n; j++) {
                const float v = from_f16(x[j]);
                if (v < lo) { lo = v; jlo = j; }
                if (v > hi) { hi = v; jhi = j; }
            }
            const uint16_t mn_h = to_f16(lo), st_h = to_f16((hi - lo) / 15.0f);
            if (pairs[2 * d] != mn_h || pairs[2 * d + 1] != st_h) {
                if (pairs_ok) tap_diag("head %d dim %d: pair %04x %04x, want %04x %04x", g, d,
                                       pairs[2 * d], pairs[2 * d + 1], mn_h, st_h);
                pairs_ok = 0;
            }
            const double step = from_f16(st_h);
            const double slack = f16_err(lo) + 15.0 * f16_err((hi - lo) / 15.0) +
                                 step * 0x1p-20 + (fabs(lo) + fabs(hi)) * 0x1p-23;
            for (int32_t j = 0; j < n; j++) {
                const double e = fabs((double)buf[(size_t)d * bt + j] - from_f16(x[j]));
                worst = fmax(worst, e / (step / 2 + slack));
                if (e > step / 2 + slack) {
                    if (within) tap_diag("head %d dim %d key %d: %g read as %g (step %g)", g, d, j,
                                         from_f16(x[j]), buf[(size_t)d * bt + j], step);
                    within = 0;
                }
            }
            if (step >= 0x1p-14 &&
                (code_of(codes, bt, d, jlo) != 0 || code_of(codes, bt, d, jhi) != 15)) {
                if (ends) tap_diag("head %d dim %d: min key code %d, max key code %d", g, d,
                                   code_of(codes, bt, d, jlo), code_of(codes, bt, d, jhi));
                ends = 0;
            }
            for (int32_t j = n; j < bt; j++) zero_tail &= code_of(codes, bt, d, j) == 0;
        }
    }
    ok(block0, "bt %d n %d: closing block 1 leaves block 0's bytes", bt, n);
    ok(pairs_ok, "bt %d n %d: each channel's (min, step) the f16 of min and (max - min) / 15",
       bt, n);
    ok(within, "bt %d n %d: every key within step/2 (+ f16 rounding of the pair) of its f16 "
       "input (worst %.0f %% of the bound)", bt, n, 100.0 * worst);
    ok(ends, "bt %d n %d: a channel's smallest key at code 0, its largest at 15 (steps in "
       "f16's normal range)", bt, n);
    ok(zero_tail, "bt %d n %d: codes of keys %d.. are 0", bt, n, n);
    /* reopen: the f16 of load's values for keys < n, the rest left */
    for (size_t i = 0; i < halves; i++) re[i] = 0x7E01;   /* a NaN pattern */
    attn_kc_reopen(&L, nkv, hd, 1, re, n);
    int reopen_ok = 1, untouched = 1;
    for (int32_t g = 0; g < nkv; g++) {
        attn_kc_load(pool + kpart + (size_t)g * hb, hd, bt, buf);
        for (int32_t d = 0; d < hd; d++)
            for (int32_t j = 0; j < bt; j++) {
                const uint16_t r = re[((size_t)g * hd + d) * bt + j];
                if (j < n) reopen_ok &= r == to_f16(buf[(size_t)d * bt + j]);
                else untouched &= r == 0x7E01;
            }
    }
    ok(reopen_ok, "bt %d n %d: reopen gives the f16 of load's values", bt, n);
    ok(untouched, "bt %d n %d: reopen leaves keys %d.. of the staging as they were", bt, n, n);
    free(buf);
    free(st);
    free(re);
    free(pool);
}

/* ---- attention over an emulated backend layer --------------------------------- */

struct cfg {
    int32_t nh, nkv, hd, bt, window, ntok;
};

/* One layer as backend_cpu lays it out: blocks of two layers' K and V
 * parts (ours the second), staging entries of two layers (ours the
 * second), entry per block id (every block written by "this forward"). */
struct cache {
    const struct cfg *c;
    int32_t nblk, kd;
    char *mem;
    uint16_t *stage;
    int32_t *entry, *table;
    size_t kpart, vpart, halves;
    struct attn_layer L;
};

static void cache_init(struct cache *k, const struct cfg *c)
{
    memset(k, 0, sizeof *k);
    k->c = c;
    k->nblk = (c->ntok + c->bt - 1) / c->bt;
    k->kd = c->nkv * c->hd;
    const size_t row = ops_kv_row_bytes(OPS_KV_Q4C, k->kd);
    k->kpart = (size_t)c->nkv * attn_kc_head_bytes(c->hd, c->bt);
    k->vpart = (size_t)c->bt * row;
    const size_t stride = 2 * (k->kpart + k->vpart);
    k->mem = malloc((size_t)k->nblk * stride);
    memset(k->mem, 0x5A, (size_t)k->nblk * stride);   /* the other layer's bytes, and garbage */
    k->halves = (size_t)k->kd * c->bt;
    k->stage = malloc((size_t)k->nblk * 2 * k->halves * sizeof *k->stage);
    for (size_t i = 0; i < (size_t)k->nblk * 2 * k->halves; i++) k->stage[i] = 0x7E01;
    k->entry = malloc((size_t)k->nblk * sizeof *k->entry);
    k->table = malloc((size_t)k->nblk * sizeof *k->table);
    for (int32_t i = 0; i < k->nblk; i++) {
        k->table[i] = k->nblk - 1 - i;   /* blocks in reverse */
        /* entries a permutation of the blocks, not their ids */
        k->entry[i] = k->nblk % 5 ? (i * 5 + 2) % k->nblk : i;
    }
    char *l1 = k->mem + k->kpart + k->vpart;
    k->L = (struct attn_layer){ l1, l1 + k->kpart, OPS_KV_Q4C, c->bt, row, stride, k->entry,
                                k->stage + k->halves, 2 * k->halves };
}

static void cache_free(struct cache *k)
{
    free(k->mem);
    free(k->stage);
    free(k->entry);
    free(k->table);
}

static uint16_t *stage_of(const struct cache *k, int32_t blk)
{
    return k->L.kc_stage + (size_t)k->entry[blk] * k->L.kc_stride;
}

/* KV head g's part of block blk's K */
static const char *kc_head(const struct cache *k, int32_t blk, int32_t g)
{
    return attn_block(&k->L, k->L.k, blk) + (size_t)g * attn_kc_head_bytes(k->c->hd, k->c->bt);
}

/* Tokens [t0, t1) as the backend forwards them in batches of `chunk`: each
 * batch's stores, the blocks it fills closed, then its attention. */
static int feed(struct cache *k, const float *q, const float *K, const float *V, int32_t t0,
                int32_t t1, int32_t chunk, struct threadpool *tp, enum cpu_isa isa, float *out,
                struct attn_scratch *sc)
{
    const struct cfg *c = k->c;
    const int32_t qd = c->nh * c->hd;
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)chunk);
    const int32_t **tabs = malloc(sizeof(int32_t *) * (size_t)chunk);
    int rc = 0;
    for (int32_t i = t0; i < t1 && !rc; i += chunk) {
        const int32_t n = t1 - i < chunk ? t1 - i : chunk;
        for (int32_t t = i; t < i + n; t++) {
            const int32_t blk = k->table[t / c->bt];
            attn_kv_store(&k->L, c->nkv, c->hd, blk, t % c->bt, K + (size_t)t * k->kd,
                          V + (size_t)t * k->kd);
            pos[t - i] = t;
            tabs[t - i] = k->table;
        }
        for (int32_t t = i; t < i + n; t++)
            if (t % c->bt == c->bt - 1) {
                const int32_t blk = k->table[t / c->bt];
                attn_kc_close(&k->L, c->nkv, c->hd, blk, stage_of(k, blk), c->bt);
            }
        const struct attn_batch b = { n, c->nh, c->nkv, c->hd, c->window, q + (size_t)i * qd,
                                      out + (size_t)i * qd, pos, tabs, 1.0f / sqrtf((float)c->hd),
                                      0.0f, 1, 0 };
        rc = attn_forward(tp, isa, &k->L, &b, sc);
    }
    free(pos);
    free(tabs);
    return rc;
}

/* x = H·x in double (the orthonormal Sylvester-Hadamard of size n) */
static void hadamard_d(double *x, int32_t n)
{
    for (int32_t h = 1; h < n; h *= 2)
        for (int32_t i = 0; i < n; i += 2 * h)
            for (int32_t j = i; j < i + h; j++) {
                const double a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
    for (int32_t i = 0; i < n; i++) x[i] /= sqrt((double)n);
}

static void run_cfg(const struct cfg *c, struct threadpool *tp1, struct threadpool *tp2)
{
    char name[96];
    snprintf(name, sizeof name, "heads %d/%d hd %d bt %d window %d, %d tokens", c->nh, c->nkv,
             c->hd, c->bt, c->window, c->ntok);
    const int32_t kd = c->nkv * c->hd, qd = c->nh * c->hd, G = c->nh / c->nkv, bt = c->bt;
    const int32_t N = c->ntok, rv = attn_kv_rot(OPS_KV_Q4C, c->hd, 1);
    const float scale = 1.0f / sqrtf((float)c->hd);
    float *K = malloc(sizeof(float) * (size_t)N * kd), *V = malloc(sizeof(float) * (size_t)N * kd);
    float *q = malloc(sizeof(float) * (size_t)N * qd);
    for (int32_t t = 0; t < N; t++) {
        for (int32_t i = 0; i < kd; i++) {
            K[(size_t)t * kd + i] = key_value(t, i % c->hd);
            V[(size_t)t * kd + i] = frand() * (i % 64 == 9 ? 4.0f : 1.0f);
        }
        for (int32_t i = 0; i < qd; i++) q[(size_t)t * qd + i] = frand() * 0.3f;
    }
    struct attn_scratch sc = { 0 };
    const size_t ob = sizeof(float) * (size_t)N * qd;
    float *out0 = malloc(ob), *out = malloc(ob);

    /* the prompt in one batch, scalar: against the reference */
    struct cache P;
    cache_init(&P, c);
    if (!ok(feed(&P, q, K, V, 0, N, N, tp2, CPU_ISA_SCALAR, out0, &sc) == 0,
            "%s: scalar prefill runs", name)) {
        cache_free(&P);
        free(K); free(V); free(q); free(out0); free(out);
        return;
    }
    {
        /* the closed blocks read back within the quantization bound (the
         * round trip's, on this layer's keys) */
        float *buf = malloc(sizeof(float) * (size_t)c->hd * bt);
        int within = 1;
        for (int32_t b = 0; b < N / bt; b++)
            for (int32_t g = 0; g < c->nkv; g++) {
                attn_kc_load(kc_head(&P, P.table[b], g), c->hd, bt, buf);
                for (int32_t d = 0; d < c->hd; d++) {
                    float lo = INFINITY, hi = -INFINITY;
                    for (int32_t j = 0; j < bt; j++) {
                        const float x = f16r(K[(size_t)(b * bt + j) * kd + g * c->hd + d]);
                        lo = fminf(lo, x);
                        hi = fmaxf(hi, x);
                    }
                    const double step = from_f16(to_f16((hi - lo) / 15.0f));
                    const double lim = step / 2 + f16_err(lo) + 15.0 * f16_err((hi - lo) / 15.0) +
                                       step * 0x1p-20 + (fabs(lo) + fabs(hi)) * 0x1p-23;
                    for (int32_t j = 0; j < bt; j++) {
                        const double x = f16r(K[(size_t)(b * bt + j) * kd + g * c->hd + d]);
                        within &= fabs(buf[(size_t)d * bt + j] - x) <= lim;
                    }
                }
            }
        free(buf);
        ok(within, "%s: every closed block's keys within the quantization bound of their f16",
           name);
    }
    {
        /* reference: double precision over the values the kernel reads */
        float *kq = malloc(sizeof(float) * (size_t)N * kd);   /* keys as closed blocks hold them */
        float *kh = malloc(sizeof(float) * (size_t)N * kd);   /* keys as f16 (own block) */
        float *vq = malloc(sizeof(float) * (size_t)N * kd);   /* V rows as stored (rotated) */
        float *buf = malloc(sizeof(float) * (size_t)c->hd * bt);
        for (int32_t b = 0; b < P.nblk; b++)
            for (int32_t g = 0; g < c->nkv; g++) {
                attn_kc_load(kc_head(&P, P.table[b], g), c->hd, bt, buf);
                for (int32_t j = 0; j < bt && b * bt + j < N; j++)
                    for (int32_t d = 0; d < c->hd; d++)
                        kq[(size_t)(b * bt + j) * kd + g * c->hd + d] = buf[(size_t)d * bt + j];
            }
        for (size_t i = 0; i < (size_t)N * kd; i++) kh[i] = from_f16(to_f16(K[i]));
        const size_t hb = ops_kv_row_bytes(OPS_KV_Q4C, c->hd);
        for (int32_t t = 0; t < N; t++)
            for (int32_t g = 0; g < c->nkv; g++)
                ops_kv_load(OPS_KV_Q4C, attn_block(&P.L, P.L.v, P.table[t / bt]) +
                                            (size_t)(t % bt) * P.L.row_bytes + g * hb,
                            vq + (size_t)t * kd + g * c->hd, c->hd);
        float *qh = malloc(sizeof(float) * (size_t)N * qd);
        memcpy(qh, q, sizeof(float) * (size_t)N * qd);
        ops_round_f16(qh, (int64_t)N * qd);
        double *s = malloc(sizeof(double) * (size_t)N), *o = malloc(sizeof(double) * (size_t)c->hd);
        double *orot = malloc(sizeof(double) * (size_t)c->hd);
        double ratio = 0.0, worst = 0.0;
        for (int32_t t = 0; t < N; t++) {
            const int32_t lo = c->window > 0 && t - c->window + 1 > 0 ? t - c->window + 1 : 0;
            const int32_t own0 = t / bt * bt;
            for (int32_t h = 0; h < c->nh; h++) {
                const int32_t g = h / G;
                const float *qv = qh + ((size_t)t * c->nh + h) * c->hd;
                double mx = -INFINITY, sum = 0.0, amax = 0.0, vmax = 0.0;
                for (int32_t j = lo; j <= t; j++) {
                    const float *kv = (j >= own0 ? kh : kq) + (size_t)j * kd + g * c->hd;
                    double d = 0.0, a = 0.0;
                    for (int32_t i = 0; i < c->hd; i++) {
                        d += (double)qv[i] * kv[i];
                        a += fabs((double)qv[i] * kv[i]);
                        vmax = fmax(vmax, fabs(vq[(size_t)j * kd + g * c->hd + i]));
                    }
                    s[j] = d * scale;
                    amax = fmax(amax, a);
                    mx = fmax(mx, s[j]);
                }
                for (int32_t j = lo; j <= t; j++) sum += (s[j] = exp(s[j] - mx));
                for (int32_t i = 0; i < c->hd; i++) {
                    double acc = 0.0;
                    for (int32_t j = lo; j <= t; j++)
                        acc += s[j] / sum * vq[(size_t)j * kd + g * c->hd + i];
                    o[i] = acc;
                }
                /* the kernel's output taken to the rotated basis (H·H = I) */
                const float *ko = out0 + ((size_t)t * c->nh + h) * c->hd;
                for (int32_t i = 0; i < c->hd; i++) orot[i] = ko[i];
                if (rv)
                    for (int32_t i = 0; i < c->hd; i += rv) hadamard_d(orot + i, rv);
                const double D = scale * amax * (c->hd + 4) * 0x1p-24 + 1e-7;
                const double bound = vmax * (exp(2.0 * D) - 1.0 + 0x1p-10 +
                                             (t - lo + 1 + 64) * 0x1p-23 + 0x1p-15);
                for (int32_t i = 0; i < c->hd; i++) {
                    const double e = fabs(orot[i] - o[i]);
                    worst = fmax(worst, e);
                    ratio = fmax(ratio, e / bound);
                }
            }
        }
        ok(ratio <= 1.0, "%s: scalar prefill within float rounding of the exact attention over "
           "the cache's values (max error %.3g, %.0f %% of its bound)", name, worst, 100.0 * ratio);
        free(kq); free(kh); free(vq); free(buf); free(qh); free(s); free(o); free(orot);
    }
    for (int isa = CPU_ISA_AVX2; isa <= (int)cpu_isa_best() && isa <= CPU_ISA_AVX512; isa++) {
        if (isa == CPU_ISA_AVXVNNI) continue;   /* attention has no avxvnni path */
        struct cache C;
        cache_init(&C, c);
        const int rc = feed(&C, q, K, V, 0, N, N, tp2, (enum cpu_isa)isa, out, &sc);
        ok(rc == 0 && memcmp(out, out0, ob) == 0, "%s: %s prefill equals scalar bit for bit",
           name, cpu_isa_name((enum cpu_isa)isa));
        cache_free(&C);
    }
    const enum cpu_isa best = cpu_isa_best() > CPU_ISA_AVX512 ? CPU_ISA_AVX512 : cpu_isa_best();
    const char *bn = cpu_isa_name(best);
    /* 40: prompt tiles that read their run's blocks converted once, the
     * run starting inside a block whose staged K its own tile reads */
    static const int32_t chunks[] = { 1, 7, 40 };
    for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++) {
        for (int nt = 1; nt <= 2; nt++) {
            struct cache C;
            cache_init(&C, c);
            const int rc = feed(&C, q, K, V, 0, N, chunks[ci], nt == 1 ? tp1 : tp2, best, out, &sc);
            int32_t first = -1;
            for (int32_t t = 0; t < N && first < 0; t++)
                if (memcmp(out + (size_t)t * qd, out0 + (size_t)t * qd, sizeof(float) * qd))
                    first = t;
            if (first >= 0) tap_diag("first differing token %d", first);
            char how[32];
            snprintf(how, sizeof how, chunks[ci] == 1 ? "token by token" : "chunks of %d",
                     chunks[ci]);
            ok(rc == 0 && first < 0, "%s: %s, %s on %d thread%s equals the prefill bit for bit",
               name, bn, how, nt, nt > 1 ? "s" : "");
            cache_free(&C);
        }
    }
    {
        /* decode queries with every other block's staging dropped and
         * poisoned: earlier blocks are read from the pool only */
        int same = 1, ran = 0;
        float *one = malloc(sizeof(float) * qd);
        for (int32_t t = bt + 3; t < N; t += 2 * bt + 5) {
            const int32_t own = P.table[t / bt];
            const size_t sbytes = (size_t)P.nblk * 2 * P.halves * sizeof *P.stage;
            uint16_t *keep = malloc(sbytes);
            memcpy(keep, P.stage, sbytes);
            for (int32_t b = 0; b < P.nblk; b++)
                if (b != own) {
                    uint16_t *st = stage_of(&P, b);
                    for (size_t i = 0; i < P.halves; i++) st[i] = 0x7E01;
                }
            int32_t *saved = malloc(sizeof(int32_t) * (size_t)P.nblk);
            memcpy(saved, P.entry, sizeof(int32_t) * (size_t)P.nblk);
            for (int32_t b = 0; b < P.nblk; b++)
                if (b != own) P.entry[b] = -1;
            for (int nt = 1; nt <= 2; nt++) {
                const int32_t *tab = P.table;
                const struct attn_batch b = { 1, c->nh, c->nkv, c->hd, c->window,
                                              q + (size_t)t * qd, one, &t, &tab, scale,
                                              0.0f, 1, 0 };
                ran += attn_forward(nt == 1 ? tp1 : tp2, best, &P.L, &b, &sc) == 0;
                if (memcmp(one, out0 + (size_t)t * qd, sizeof(float) * qd)) {
                    if (same) tap_diag("decode at %d on %d threads differs", t, nt);
                    same = 0;
                }
            }
            memcpy(P.entry, saved, sizeof(int32_t) * (size_t)P.nblk);
            memcpy(P.stage, keep, sbytes);
            free(saved);
            free(keep);
        }
        ok(ran > 0 && same, "%s: %s decode with the other blocks' staging dropped and poisoned "
           "equals the prefill (earlier blocks from the pool; %d runs)", name, bn, ran);
        free(one);
    }
    cache_free(&P);
    attn_scratch_free(&sc);
    free(K); free(V); free(q); free(out0); free(out);
}

/* Packed pools (attn_layer.block_stride 0): q4c's K block is n_head_kv ·
 * attn_kc_head_bytes, more than block_tokens · row_bytes (12 against 9
 * bytes per value at 16 tokens), so attn_block must not step K's pool by
 * V's block. */
static void packed_pools(void)
{
    enum { NKV = 2, HD = 64, BT = 16, KD = NKV * HD };
    const size_t row = ops_kv_row_bytes(OPS_KV_Q4C, KD), kpart = NKV * attn_kc_head_bytes(HD, BT);
    char *kp = calloc(2, kpart), *vp = calloc(2 * BT, row);
    uint16_t *stage = malloc(2 * (size_t)KD * BT * sizeof *stage);
    int32_t entry[2] = { 0, 1 };
    char *snap = malloc(kpart);
    const struct attn_layer L = { kp, vp, OPS_KV_Q4C, BT, row, 0, entry, stage, (size_t)KD * BT };
    float k[KD], v[KD];
    for (int32_t b = 0; b < 2; b++) {
        for (int32_t j = 0; j < BT; j++) {
            for (int32_t i = 0; i < KD; i++) {
                k[i] = key_value(j, i % HD);
                v[i] = frand();
            }
            attn_kv_store(&L, NKV, HD, b, j, k, v);
        }
        attn_kc_close(&L, NKV, HD, b, stage + (size_t)b * KD * BT, BT);
        if (b == 0) memcpy(snap, attn_block(&L, L.k, 0), kpart);
    }
    const size_t s0 = (size_t)(attn_block(&L, L.k, 1) - attn_block(&L, L.k, 0));
    ok(s0 >= kpart && memcmp(snap, attn_block(&L, L.k, 0), kpart) == 0,
       "packed pools (block_stride 0): K blocks %zu bytes apart hold %zu bytes each; closing "
       "block 1 leaves block 0's codes", s0, kpart);
    free(snap);
    free(kp);
    free(vp);
    free(stage);
}

int main(void)
{
    ok(attn_kv_rot(OPS_KV_Q4C, 64, 0) == 0 && attn_kv_rot(OPS_KV_Q4C, 128, 0) == 0 &&
       attn_kv_rot(OPS_KV_Q4C, 64, 1) == 64 && attn_kv_rot(OPS_KV_Q4C, 128, 1) == 64 &&
       attn_kv_rot(OPS_KV_Q4C, 96, 1) == 0,
       "q4c rotation: K never (per channel), V by 64 where head_dim is a multiple of 64");
    ok(ops_kv_row_bytes(OPS_KV_Q4C, 192) == 132, "q4c's V row is q5_0: 192 values in 132 bytes");
    v_rows();
    tap_diag("isa in force: %s", cpu_isa_name(cpu_isa_best()));
    round_trip(2, 64, 16, 16);
    round_trip(2, 64, 16, 15);
    round_trip(1, 128, 32, 5);
    round_trip(3, 96, 24, 1);
    round_trip(1, 64, 256, 200);

    struct threadpool *tp1 = tp_open(1), *tp2 = tp_open(2);
    static const struct cfg cfgs[] = {
        { 8, 2, 64, 16, 0, 200 },     /* GQA 4, the default blocks */
        { 4, 1, 64, 16, 0, 300 },     /* one KV head: decode splits its keys on 2 threads */
        { 9, 3, 96, 16, 0, 290 },     /* head_dim 96: V unrotated; 3 KV heads */
        { 4, 4, 128, 32, 0, 150 },    /* MHA, head_dim 128, blocks of 32 */
        { 6, 3, 64, 32, 45, 300 },    /* sliding window */
        { 4, 1, 64, 24, 0, 280 },     /* blocks of 24: the scalar K loader on every ISA */
        { 4, 2, 64, 8, 0, 120 },      /* blocks of 8: shorter than a tile */
        { 8, 1, 64, 64, 20, 300 },    /* blocks of 64, a window shorter than a block */
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) run_cfg(&cfgs[i], tp1, tp2);
    tp_close(tp1);
    tp_close(tp2);
    packed_pools();
    return tap_done();
}
