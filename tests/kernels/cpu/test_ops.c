/* test_ops: CPU elementwise ops and paged attention against direct double
 * precision formulas, and f16 conversion against kernels/quant.c's. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/attention.h"
#include "cpu/ops.h"
#include "cpu/threadpool.h"
#include "quant.h"
#include "tap.h"

static uint32_t rng = 12345;
static float frand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void test_expf(void)
{
    double worst = 0.0;
    for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
        const double e = exp((double)x), r = fabs(ops_expf(x) - e) / e;
        worst = r > worst ? r : worst;
    }
    ok(worst < 4e-7, "ops_expf relative error %.2g < 4e-7 over [-87, 88]", worst);
    ok(ops_expf(-1000.0f) < 1e-37f && ops_expf(-INFINITY) < 1e-37f, "ops_expf of very "
       "negative x is ~0");
}

static void test_rmsnorm(void)
{
    float x[96], w[96], y[96];
    double ss = 0.0;
    for (int i = 0; i < 96; i++) {
        x[i] = frand() * 3.0f;
        w[i] = 1.0f + frand();
        ss += (double)x[i] * x[i];
    }
    ops_rmsnorm(y, x, w, 96, 1e-5f);
    const double s = 1.0 / sqrt(ss / 96.0 + 1e-5);
    double worst = 0.0;
    for (int i = 0; i < 96; i++) worst = fmax(worst, fabs(y[i] - x[i] * s * w[i]));
    ok(worst < 1e-5, "rmsnorm matches the formula (max error %.2g)", worst);
}

static void test_rope(void)
{
    enum { HD = 64, NH = 3 };
    for (int neox = 0; neox <= 1; neox++) {
        float x[NH * HD], y[NH * HD], cs[HD];
        double worst = 0.0;
        for (int pos = 0; pos < 600; pos += 37) {
            for (int i = 0; i < NH * HD; i++) x[i] = y[i] = frand();
            ops_rope_cache(cs, HD, pos, 10000.0f, 1.0f, NULL);
            ops_rope_apply(y, NH, HD, HD, cs, neox);
            for (int h = 0; h < NH; h++) {
                for (int i = 0; i < HD / 2; i++) {
                    const double th = pos * pow(10000.0, -2.0 * i / HD);
                    const int a = neox ? i : 2 * i, b = neox ? i + HD / 2 : 2 * i + 1;
                    const double xa = x[h * HD + a], xb = x[h * HD + b];
                    worst = fmax(worst, fabs(y[h * HD + a] - (xa * cos(th) - xb * sin(th))));
                    worst = fmax(worst, fabs(y[h * HD + b] - (xa * sin(th) + xb * cos(th))));
                }
            }
        }
        ok(worst < 2e-3, "rope (%s) matches the formula up to position 600 (max error %.2g)",
           neox ? "neox" : "normal", worst);
    }
    /* factors divide the angle, freq_scale multiplies it */
    float a[8], b[8], f[4] = { 1.0f, 2.0f, 4.0f, 8.0f };
    ops_rope_cache(a, 8, 100, 500.0f, 0.5f, f);
    ok(fabs(a[0] - cos(50.0)) < 1e-4 && fabs(a[3] - sin(50.0 * pow(500.0, -0.25) / 2.0)) < 1e-4,
       "rope scaling: freq_scale and frequency factors");
    ops_rope_cache(b, 8, 0, 500.0f, 1.0f, NULL);
    ok(b[0] == 1.0f && b[1] == 0.0f, "rope at position 0 is the identity");
}

static void test_f16(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const uint16_t v = (uint16_t)h;
        float a, b;
        ops_kv_load(OPS_KV_F16, &v, &a, 1);
        b = fp16_to_f32(v);
        if (!(a == b || (isnan(a) && isnan(b)))) bad++;
    }
    is_int(bad, 0, "f16 -> f32 equals quant.c's for all 65536 values");
    bad = 0;
    for (int i = 0; i < 200000; i++) {
        const float x = ldexpf(frand(), (int)(i % 40) - 28);
        uint16_t h;
        ops_kv_store(OPS_KV_F16, &h, &x, 1);
        if (h != f32_to_fp16(x)) bad++;
    }
    is_int(bad, 0, "f32 -> f16 rounding equals quant.c's on 200000 values");
    /* whole rows go through F16C where the CPU has it: the same values */
    enum { NR = 65536 };
    float *xs = malloc(NR * sizeof *xs), *back = malloc(NR * sizeof *back);
    uint16_t *hs = malloc(NR * sizeof *hs), *all = malloc(NR * sizeof *all);
    for (int i = 0; i < NR; i++) {
        xs[i] = i % 97 == 0 ? (i % 2 ? INFINITY : 70000.0f) : ldexpf(frand() - 0.5f, (int)(i % 44) - 30);
        all[i] = (uint16_t)i;
    }
    ops_kv_store(OPS_KV_F16, hs, xs, NR);
    ops_kv_load(OPS_KV_F16, all, back, NR);
    bad = 0;
    for (int i = 0; i < NR; i++) {
        const float b = fp16_to_f32(all[i]);
        bad += hs[i] != f32_to_fp16(xs[i]) || !(back[i] == b || (isnan(back[i]) && isnan(b)));
    }
    is_int(bad, 0, "f16 rows of 65536 (stored, and every half loaded) equal quant.c's");
    free(xs); free(back); free(hs); free(all);
}

static void test_geglu(void)
{
    float *t = malloc(65536 * sizeof *t);
    ops_gelu_table_init(t);
    double worst = 0.0;
    for (float x = -12.0f; x < 12.0f; x += 0.01f) {
        float g = x, u = 1.0f;
        ops_geglu(&g, &u, 1, t);
        const double ref = 0.5 * x * (1.0 + tanh(0.7978845608 * x * (1.0 + 0.044715 * x * x)));
        worst = fmax(worst, fabs(g - ref) / fmax(1.0, fabs(ref)));
    }
    ok(worst < 4e-3, "geglu (f16 table) within f16 precision of GELU-tanh (%.2g)", worst);
    /* Whole rows take the vector path (F16C index, gather) on CPUs that have
     * it; every element must equal the one-at-a-time scalar result, at the
     * ±10 clamps, infinities, f16 overflow, subnormals and ties too. */
    enum { NV = 2411 };
    float *gv = malloc(NV * sizeof *gv), *uv = malloc(NV * sizeof *uv);
    const float edge[] = { -10.0f, 10.0f, -9.9999990f, 9.9999990f, INFINITY, -INFINITY, 70000.0f,
                           -70000.0f, 1e-6f, -3e-8f, 0.0f, -0.0f, 1.00048828125f, 65504.0f };
    for (int i = 0; i < NV; i++) {
        gv[i] = i < (int)(sizeof edge / sizeof edge[0]) ? edge[i] : (frand() - 0.5f) * 30.0f;
        uv[i] = frand() + 0.5f;
    }
    size_t same = 0;
    float *gs = malloc(NV * sizeof *gs);
    memcpy(gs, gv, NV * sizeof *gs);
    ops_geglu(gv, uv, NV, t);
    for (int i = 0; i < NV; i++) {
        ops_geglu(&gs[i], &uv[i], 1, t);
        same += memcmp(&gs[i], &gv[i], sizeof(float)) == 0;
    }
    ok(same == NV, "geglu over a row equals element-wise geglu bit for bit (%zu of %d)", same, NV);
    free(gv); free(uv); free(gs);
    free(t);
    float g = 2.0f, u = 3.0f;
    ops_swiglu(&g, &u, 1);
    ok(fabs(g - 2.0 / (1.0 + exp(-2.0)) * 3.0) < 1e-5, "swiglu matches silu(g) * u");
}

/* Paged attention vs a direct double computation over a shuffled block table. */
enum { NHA = 4, NKV = 2, HDA = 64, NBLK = 16, NTOK = 40 };

static void attn_ref(const float *q, const float *K, const float *V, const int32_t *pos,
                     int32_t window, float *out)
{
    /* K, V: [position][NKV * HDA] in logical order */
    for (int t = 0; t < NTOK; t++) {
        for (int h = 0; h < NHA; h++) {
            const int g = h / (NHA / NKV), p = pos[t];
            const int lo = window && p - window + 1 > 0 ? p - window + 1 : 0;
            double s[64], mx = -1e300, sum = 0.0;
            for (int j = lo; j <= p; j++) {
                s[j] = 0.0;
                for (int d = 0; d < HDA; d++)
                    s[j] += (double)q[(t * NHA + h) * HDA + d] * K[(j * NKV + g) * HDA + d] * 0.8;
                mx = fmax(mx, s[j]);
            }
            for (int j = lo; j <= p; j++) sum += (s[j] = exp(s[j] - mx));
            for (int d = 0; d < HDA; d++) {
                double acc = 0.0;
                for (int j = lo; j <= p; j++) acc += s[j] * V[(j * NKV + g) * HDA + d];
                out[(t * NHA + h) * HDA + d] = (float)(acc / sum);
            }
        }
    }
}

static void test_attention(enum ops_kv_type type, int32_t bt, double tol, const char *name)
{
    const int32_t table[NBLK] = { 5, 2, 7, 0, 3, 6, 1, 4, 12, 9, 15, 8, 11, 14, 10, 13 };
    const size_t row = ops_kv_row_bytes(type, NKV * HDA);
    char *kp = calloc((size_t)NBLK * bt, row), *vp = calloc((size_t)NBLK * bt, row);
    float K[NTOK * NKV * HDA], V[NTOK * NKV * HDA], q[NTOK * NHA * HDA];
    float out[NTOK * NHA * HDA], ref[NTOK * NHA * HDA];
    int32_t pos[NTOK];
    const int32_t *tabs[NTOK];
    for (int t = 0; t < NTOK; t++) {
        for (int i = 0; i < NKV * HDA; i++) {
            K[t * NKV * HDA + i] = frand();
            V[t * NKV * HDA + i] = frand();
        }
        const struct attn_layer L = { kp, vp, type, bt, row, 0, NULL, NULL, 0 };
        attn_kv_store(&L, NKV, HDA, table[t / bt], t % bt, K + t * NKV * HDA, V + t * NKV * HDA);
        /* the reference sees the stored (rounded) values */
        char stored[NKV * HDA * 4];
        ops_kv_store(type, stored, K + t * NKV * HDA, NKV * HDA);
        ops_kv_load(type, stored, K + t * NKV * HDA, NKV * HDA);
        ops_kv_store(type, stored, V + t * NKV * HDA, NKV * HDA);
        ops_kv_load(type, stored, V + t * NKV * HDA, NKV * HDA);
        for (int i = 0; i < NHA * HDA; i++) q[t * NHA * HDA + i] = frand() * 0.7f;
        pos[t] = t;
        tabs[t] = table;
    }
    struct threadpool *tp = tp_open(2);
    struct attn_scratch s = { 0 };
    const struct attn_layer L = { kp, vp, type, bt, row, 0, NULL, NULL, 0 };
    static float out0[NTOK * NHA * HDA];
    for (int32_t window = 0; window <= 6; window += 6) {
      for (int isa = CPU_ISA_SCALAR; isa <= (int)cpu_isa_best(); isa++) {
        const char *iname = cpu_isa_name((enum cpu_isa)isa);
        const struct attn_batch b = { NTOK, NHA, NKV, HDA, window, q, out, pos, tabs, 0.8f, 0.0f, 0, 0 };
        ok(attn_forward(tp, (enum cpu_isa)isa, &L, &b, &s) == 0, "%s window %d %s: attention runs",
           name, window, iname);
        attn_ref(q, K, V, pos, window, ref);
        double worst = 0.0;
        for (int i = 0; i < NTOK * NHA * HDA; i++) worst = fmax(worst, fabs(out[i] - ref[i]));
        ok(worst < tol, "%s window %d %s: paged attention matches the direct computation "
           "(max error %.2g)", name, window, iname, worst);
        if (isa == CPU_ISA_SCALAR)
            memcpy(out0, out, sizeof out0);
        else
            ok(memcmp(out0, out, sizeof out0) == 0, "%s window %d: %s equals scalar bit for bit",
               name, window, iname);
        /* the last token alone gives bit-identical output */
        float one[NHA * HDA];
        const struct attn_batch b1 = { 1, NHA, NKV, HDA, window, q + (NTOK - 1) * NHA * HDA,
                                       one, pos + NTOK - 1, tabs, 0.8f, 0.0f, 0, 0 };
        attn_forward(tp, (enum cpu_isa)isa, &L, &b1, &s);
        ok(memcmp(one, out + (NTOK - 1) * NHA * HDA, sizeof one) == 0,
           "%s window %d %s: a query alone equals the same query in a batch", name, window, iname);
      }
    }
    attn_scratch_free(&s);
    tp_close(tp);
    free(kp);
    free(vp);
}

int main(void)
{
    test_expf();
    test_rmsnorm();
    test_rope();
    test_f16();
    test_geglu();
    /* f16 rounding of Q and of the probabilities bounds the agreement */
    /* blocks of 4 (the generic loops) and of 16 (the vector path) */
    test_attention(OPS_KV_F32, 4, 3e-3, "f32 KV, blocks of 4");
    test_attention(OPS_KV_F16, 4, 3e-3, "f16 KV, blocks of 4");
    test_attention(OPS_KV_Q8_0, 4, 3e-3, "q8_0 KV, blocks of 4");
    test_attention(OPS_KV_F32, 16, 3e-3, "f32 KV, blocks of 16");
    test_attention(OPS_KV_F16, 16, 3e-3, "f16 KV, blocks of 16");
    test_attention(OPS_KV_Q8_0, 16, 3e-3, "q8_0 KV, blocks of 16");
    return tap_done();
}
