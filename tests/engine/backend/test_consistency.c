/* test_consistency: properties of the CPU forward pass that need no
 * reference: a sequence's logits are the same alone or batched with other
 * sequences (and whatever the prefill chunking), scalar and SIMD kernels
 * agree, KV types agree, and bad batches or KV budgets are clear errors.
 * Runs on SmolLM2 (and Gemma 3 for the sliding-window layers). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "tap.h"

enum { NA = 40, NB = 24, NC = 7 };

/* Relative difference of two logit rows: max |a-b| / max |a|. */
static double rel_diff(const float *a, const float *b, int32_t n)
{
    double d = 0.0, s = 1e-30;
    for (int32_t i = 0; i < n; i++) {
        const double e = fabs((double)a[i] - (double)b[i]);
        d = e > d ? e : d;
        s = fabs((double)a[i]) > s ? fabs((double)a[i]) : s;
    }
    return d / s;
}

/* Token ids: a deterministic walk over the vocabulary (any ids are valid input). */
static void make_tokens(int32_t *t, int32_t n, uint32_t seed, int32_t n_vocab)
{
    uint32_t x = seed * 2654435761u + 1;
    for (int32_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        t[i] = (int32_t)((x >> 8) % (uint32_t)(n_vocab < 8000 ? n_vocab : 8000));
    }
}

/* Runs sequence A alone (one batch, all rows) into out[NA][n_vocab]. */
static int run_alone(struct backend *be, const int32_t *a, float *out, int32_t chunk)
{
    char err[256];
    const int32_t nv = be->model->hp.n_vocab;
    int32_t table[4] = { 0, 1, 2, 3 };
    float *tmp = malloc((size_t)64 * nv * sizeof(float));
    int rc = 0;
    for (int32_t i = 0; i < NA && !rc; i += chunk) {
        const int32_t k = NA - i < chunk ? NA - i : chunk;
        int32_t pos[NA], seq[NA];
        uint8_t want[NA];
        for (int32_t j = 0; j < k; j++) {
            pos[j] = i + j;
            seq[j] = 0;
            want[j] = 1;
        }
        const struct fwd_seq s = { table, 4 };
        const struct fwd_batch b = { k, a + i, pos, seq, want, 1, &s };
        rc = backend_forward(be, &b, tmp, err, sizeof err);
        if (!rc) memcpy(out + (size_t)i * nv, tmp, (size_t)k * nv * sizeof(float));
        else tap_diag("%s", err);
    }
    free(tmp);
    return rc;
}

/* A's 40 tokens in one batch with B's prefill and C's tokens around them,
 * each sequence in its own blocks; A's rows go to out. */
static int run_mixed(struct backend *be, const int32_t *a, const int32_t *bt, const int32_t *ct,
                     float *out)
{
    char err[256];
    const int32_t nv = be->model->hp.n_vocab, n = NA + NB + NC;
    int32_t tab_a[4] = { 9, 4, 7, 5 }, tab_b[2] = { 1, 8 }, tab_c[1] = { 2 };
    const struct fwd_seq seqs[3] = { { tab_b, 2 }, { tab_a, 4 }, { tab_c, 1 } };
    int32_t tok[NA + NB + NC], pos[NA + NB + NC], seq[NA + NB + NC];
    uint8_t want[NA + NB + NC];
    int32_t k = 0;
    for (int32_t i = 0; i < NB; i++, k++) { tok[k] = bt[i]; pos[k] = i; seq[k] = 0; want[k] = 1; }
    for (int32_t i = 0; i < NA; i++, k++) { tok[k] = a[i]; pos[k] = i; seq[k] = 1; want[k] = 1; }
    for (int32_t i = 0; i < NC; i++, k++) { tok[k] = ct[i]; pos[k] = i; seq[k] = 2; want[k] = i & 1; }
    int32_t n_out = 0;
    for (int32_t i = 0; i < n; i++) n_out += want[i];
    float *tmp = malloc((size_t)n_out * nv * sizeof(float));
    const struct fwd_batch b = { n, tok, pos, seq, want, 3, seqs };
    int rc = backend_forward(be, &b, tmp, err, sizeof err);
    if (rc) tap_diag("%s", err);
    else memcpy(out, tmp + (size_t)NB * nv, (size_t)NA * nv * sizeof(float));
    free(tmp);
    return rc;
}

static double max_rel(const float *x, const float *y, int32_t rows, int32_t nv)
{
    double worst = 0.0;
    for (int32_t r = 0; r < rows; r++) {
        const double d = rel_diff(x + (size_t)r * nv, y + (size_t)r * nv, nv);
        worst = d > worst ? d : worst;
    }
    return worst;
}

static void batch_invariance(struct model *m, const char *name, int scalar)
{
    char err[256];
    const int32_t nv = m->hp.n_vocab;
    int32_t a[NA], b[NB], c[NC];
    make_tokens(a, NA, 1, nv);
    make_tokens(b, NB, 2, nv);
    make_tokens(c, NC, 3, nv);
    struct backend *be = eu_cpu(m, 2, scalar, KV_F16, 0, err, sizeof err);
    if (!ok(be != NULL, "%s: backend opens", name)) return;
    float *alone = malloc((size_t)NA * nv * sizeof(float));
    float *other = malloc((size_t)NA * nv * sizeof(float));
    if (!ok(run_alone(be, a, alone, NA) == 0, "%s: A alone runs", name)) goto out;
    if (ok(run_mixed(be, a, b, c, other) == 0, "%s: A batched with B and C runs", name)) {
        const double d = max_rel(alone, other, NA, nv);
        ok(d <= 1e-4, "%s: A's logits alone vs batched: max relative difference %.2g <= 1e-4",
           name, d);
    }
    if (ok(run_alone(be, a, other, 16) == 0, "%s: A in 16-token chunks runs", name)) {
        const double d = max_rel(alone, other, NA, nv);
        ok(d <= 1e-4, "%s: A's logits in one batch vs 16-token chunks: %.2g <= 1e-4", name, d);
    }
    if (ok(run_alone(be, a, other, 1) == 0, "%s: A one token at a time runs", name)) {
        const double d = max_rel(alone, other, NA, nv);
        ok(d <= 1e-4, "%s: A's logits in one batch vs token by token: %.2g <= 1e-4", name, d);
    }
    {   /* the split over threads (matmul rows, attention items, the per-token
         * steps of a 40-token batch) changes no bit */
        struct backend *be1 = eu_cpu(m, 1, scalar, KV_F16, 0, err, sizeof err);
        if (ok(be1 && run_alone(be1, a, other, NA) == 0, "%s: A alone on 1 thread runs", name))
            ok(memcmp(alone, other, (size_t)NA * nv * sizeof(float)) == 0,
               "%s: A's logits on 2 threads and on 1 are the same bits", name);
        backend_close(be1);
    }
out:
    free(alone);
    free(other);
    backend_close(be);
}

/* KL(p || q) of two logit rows. */
static double kl_rows(const float *a, const float *b, int32_t n)
{
    double ma = a[0], mb = b[0], sa = 0.0, sb = 0.0, kl = 0.0;
    for (int32_t i = 1; i < n; i++) {
        ma = a[i] > ma ? a[i] : ma;
        mb = b[i] > mb ? b[i] : mb;
    }
    for (int32_t i = 0; i < n; i++) {
        sa += exp(a[i] - ma);
        sb += exp(b[i] - mb);
    }
    const double la = ma + log(sa), lb = mb + log(sb);
    for (int32_t i = 0; i < n; i++) {
        const double lpa = a[i] - la, lpb = b[i] - lb;
        kl += exp(lpa) * (lpa - lpb);
    }
    return kl;
}

/* Scalar vs SIMD kernels, and f32 / q8_0 KV against f16, on the same tokens.
 * Activations are quantized to 8 bits, so a last-bit difference upstream
 * can move a value across a rounding step: the paths agree as
 * distributions (KL), not bit for bit. The limit is the reference engine's
 * own spread between two of its kernels (tests/e2e/golden self-check: mean KL
 * up to 0.009 for SmolLM2 and 0.016 for Gemma 3 on real text; these
 * random-token rows are flatter, so the limits are about twice that). */
static void paths_agree(struct model *m, const char *name, double kl_limit, double kl_max_limit)
{
    char err[256];
    const int32_t nv = m->hp.n_vocab;
    int32_t a[NA];
    make_tokens(a, NA, 4, nv);
    float *ref = malloc((size_t)NA * nv * sizeof(float));
    float *got = malloc((size_t)NA * nv * sizeof(float));
    /* q4_0 (4-bit keys and values: perplexity +6 % on SmolLM2 and +11 % on
     * Gemma 3, the reference's +6 % and +13 %) gets KL_Q4 times the limits;
     * measured on these random-token rows: KL mean 0.053 (SmolLM2) and 1.1
     * (Gemma 3), max 0.22 and 2.9 */
    enum { KL_Q4 = 20 };
    struct { int scalar; enum kv_type kv; const char *what; double lim; } v[] = {
        { 0, KV_F16, "simd f16 KV", 1 },
        { 1, KV_F16, "scalar f16 KV", 1 },
        { 0, KV_F32, "simd f32 KV", 1 },
        { 0, KV_Q8_0, "simd q8_0 KV", 1 },
        { 0, KV_Q4_0, "simd q4_0 KV", KL_Q4 },
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        struct backend *be = eu_cpu(m, 2, v[i].scalar, v[i].kv, 0, err, sizeof err);
        if (!ok(be != NULL, "%s: %s backend opens", name, v[i].what)) continue;
        if (ok(run_alone(be, a, i ? got : ref, NA) == 0, "%s: %s runs", name, v[i].what) && i) {
            double kl_sum = 0.0, kl_max = 0.0;
            int agree = 0;
            for (int32_t r = 0; r < NA; r++) {
                const double kl = kl_rows(ref + (size_t)r * nv, got + (size_t)r * nv, nv);
                kl_sum += kl;
                kl_max = kl > kl_max ? kl : kl_max;
                agree += eu_argmax(ref + (size_t)r * nv, nv) == eu_argmax(got + (size_t)r * nv, nv);
            }
            tap_diag("%s: %s vs simd f16 KV: argmax agrees on %d/%d rows, max relative logit "
                     "difference %.3g", name, v[i].what, agree, NA, max_rel(ref, got, NA, nv));
            ok(kl_sum / NA <= kl_limit * v[i].lim && kl_max <= kl_max_limit * v[i].lim,
               "%s: %s vs simd f16 KV: KL mean %.5f (<= %g) max %.5f (<= %g)", name, v[i].what,
               kl_sum / NA, kl_limit * v[i].lim, kl_max, kl_max_limit * v[i].lim);
        }
        backend_close(be);
    }
    free(ref);
    free(got);
}

static void bad_input(struct model *m)
{
    char err[512];
    struct backend *be = eu_cpu(m, 1, 0, KV_F16, 0, err, sizeof err);
    if (!ok(be != NULL, "backend opens")) return;
    float *logits = malloc((size_t)m->hp.n_vocab * sizeof(float));
    int32_t table[2] = { 0, 1 }, tok = 5, pos = 0, seq = 0;
    uint8_t want = 1;
    struct fwd_seq s = { table, 2 };
    struct fwd_batch b = { 1, &tok, &pos, &seq, &want, 1, &s };

    tok = m->hp.n_vocab;
    err[0] = 0;
    ok(backend_forward(be, &b, logits, err, sizeof err) != 0 && strstr(err, "vocabulary"),
       "token id beyond the vocabulary is an error: %s", err);
    tok = 5;
    pos = 32;
    ok(backend_forward(be, &b, logits, err, sizeof err) != 0 && strstr(err, "position"),
       "position beyond the block table is an error: %s", err);
    pos = 0;
    table[0] = be->kv_n_blocks;
    ok(backend_forward(be, &b, logits, err, sizeof err) != 0 && strstr(err, "block"),
       "block id outside the pool is an error: %s", err);
    table[0] = 0;
    seq = 3;
    ok(backend_forward(be, &b, logits, err, sizeof err) != 0, "sequence index out of range "
       "is an error: %s", err);
    seq = 0;
    ok(backend_forward(be, &b, logits, err, sizeof err) == 0, "the corrected batch runs");
    backend_close(be);
    free(logits);

    be = eu_cpu(m, 1, 0, KV_F16, 1ull << 52, err, sizeof err);
    ok(be == NULL && strstr(err, "KV") && strstr(err, "bytes"),
       "a KV cache too large to allocate is a clear error: %s", err);
    backend_close(be);
    be = eu_cpu(m, 1, 0, KV_F16, 100, err, sizeof err);
    ok(be == NULL && strstr(err, "KV"), "a KV budget below one block is a clear error: %s", err);
    backend_close(be);
}

/* Resident kB of the mappings of file `path` in this process (smaps). */
static long file_rss_kb(const char *path)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[1280];
    long kb = 0;
    int in = 0;
    while (fgets(line, sizeof line, f)) {
        long v;
        if (strchr(line, '-') && strchr(line, ':') && line[0] != ' ' && !strstr(line, " kB")) {
            const size_t n = strlen(line), p = strlen(path);   /* a mapping's header line */
            in = n > p && !strncmp(line + n - p - 1, path, p);
        } else if (in && sscanf(line, "Rss: %ld kB", &v) == 1) {
            kb += v;
        }
    }
    fclose(f);
    return kb;
}

/* F16 weights (no packed layout) are copied out of the file mapping like
 * the packed types, so decode streams them from huge-page memory and the
 * file's pages are given back: after a forward pass the mapping holds the
 * header, the tokenizer and the few embedding rows read, not the weights
 * (before, every F16 matrix was read from the file's 4 KiB pages). The
 * tied model's embedding rows come from the copy (its output matrix). */
static void weights_home(void)
{
    const char *src = getenv("TERN_SRC"), *cache = getenv("TERN_CONFORMANCE_DIR"),
               *home = getenv("HOME");
    char dir[1024], cmd[2400], path[1200], err[512];
    if (cache) snprintf(dir, sizeof dir, "%s", cache);
    else snprintf(dir, sizeof dir, "%s/.cache/tern/conformance", home ? home : ".");
    snprintf(cmd, sizeof cmd, "python3 '%s/tests/e2e/conformance/gen_models.py' --out '%s' "
             "llama-f16 llama-tied-l3rope-f16 >/dev/null", src ? src : ".", dir);
    if (!ok(system(cmd) == 0, "gen_models.py writes llama-f16 and llama-tied-l3rope-f16"))
        return;
    static const char *const names[] = { "llama-f16", "llama-tied-l3rope-f16" };
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s.gguf", dir, names[i]);
        struct model *m = model_open(path, err, sizeof err);
        struct backend *be = m ? eu_cpu(m, 1, 0, KV_F16, 0, err, sizeof err) : NULL;
        if (!ok(be != NULL, "%s opens on the CPU backend: %s", names[i], be ? "" : err)) {
            if (m) model_close(m);
            continue;
        }
        const int32_t nv = m->hp.n_vocab, table[2] = { 0, 1 };
        int32_t toks[24];
        make_tokens(toks, 24, 7 + (uint32_t)i, nv);
        float *logits = malloc((size_t)24 * nv * sizeof(float));
        const int rc = eu_feed(be, table, 2, toks, 24, 0, 24, 0, NULL, NULL, logits, err, sizeof err);
        int finite = rc == 0;
        for (int32_t k = 0; finite && k < nv; k++) finite = isfinite(logits[k]);
        ok(finite, "%s: a 24-token forward gives finite logits %s", names[i], rc ? err : "");
        FILE *f = fopen(path, "rb");
        long size = 0;
        if (f) { fseek(f, 0, SEEK_END); size = ftell(f); fclose(f); }
        const long rss = file_rss_kb(path);
        ok(rss >= 0 && size > 0 && rss * 1024 < size / 5,
           "%s: %ld kB of the %ld kB file resident after the forward (< 20 %%: the weights "
           "were copied out and their pages given back)", names[i], rss, size / 1024);
        free(logits);
        backend_close(be);
        model_close(m);
    }
}

int main(void)
{
    char path[1024], err[512];
    if (eu_model_path("smollm2", path, sizeof path))
        return tap_bail("packaging/fetch-model cannot provide the default model");
    struct model *m = model_open(path, err, sizeof err);
    if (!m) return tap_bail("%s", err);
    batch_invariance(m, "smollm2 simd", 0);
    batch_invariance(m, "smollm2 scalar", 1);
    paths_agree(m, "smollm2", 0.015, 0.2);
    bad_input(m);
    model_close(m);

    if (eu_model_path("gemma3-270m", path, sizeof path))
        return tap_bail("packaging/fetch-model cannot provide gemma3-270m");
    m = model_open(path, err, sizeof err);
    if (!m) return tap_bail("%s", err);
    batch_invariance(m, "gemma3 simd", 0);
    /* Gemma 3's K-quant matmuls take the reference's Q8_K activations (one
     * scale per 256, kernels/cpu/mm_lowbit.c), coarser than the former
     * per-32 ones: on this random-token walk its paths part by KL mean
     * 0.059-0.070, max 0.15-0.25 (per 32 they were 0.015-0.029 and
     * 0.06-0.12). Against the reference (test_golden) it moved closer. */
    paths_agree(m, "gemma3", 0.09, 0.35);
    model_close(m);
    weights_home();
    return tap_done();
}
