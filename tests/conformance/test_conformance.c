/* test_conformance: tern's CPU forward pass against the reference engine
 * (llama.cpp) on small random-weight models of every supported architecture
 * and variant (tests/conformance/gen_models.py writes them, deterministically;
 * make_fixtures.py recorded the reference's outputs in fixtures/NAME.conf).
 *
 * Per model: top-1 agreement at every teacher-forced position, KL(ref ‖
 * tern) on the recorded top-k rows (the rest as one bucket), perplexity of
 * the text, and the greedy continuation. Limits as docs/CORRECTNESS.md sets
 * them, relative to the reference's agreement with itself (flash attention
 * on vs off): top-1 >= min(99 %, self - 4 %), mean KL <= max(0.005, 2 x
 * self), max KL <= max(0.1, 3 x self), perplexity within max(0.5 %, 2 x
 * self); greedy
 * tokens summed over the suite at most a quarter of the models' worth (16
 * each) below the reference's own (one near-tie ends a match).
 *
 *   test_conformance [--scalar] [NAME...]     (default: every fixture) */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "tap.h"

struct conf {
    uint32_t n_vocab, n_tok, topk, n_gen;
    int32_t *tok, *top1, *gen, *id;   /* id, logit: [n_tok][topk] */
    float *lse, *logit;
    float self_top1, self_kl_mean, self_kl_max;
    uint32_t self_greedy;
    double ppl, self_ppl;
};

static int rd(FILE *f, void *dst, size_t n)
{
    return fread(dst, 1, n, f) == n ? 0 : -1;
}

static void *rd_arr(FILE *f, size_t n, size_t size)
{
    void *a = malloc(n * size + 1);
    if (a && rd(f, a, n * size)) {
        free(a);
        return NULL;
    }
    return a;
}

static void conf_free(struct conf *c)
{
    free(c->tok);
    free(c->top1);
    free(c->gen);
    free(c->id);
    free(c->lse);
    free(c->logit);
    memset(c, 0, sizeof *c);
}

static int conf_read(const char *path, struct conf *c)
{
    FILE *f = fopen(path, "rb");
    char magic[4];
    uint32_t version;
    int rc = -1;
    memset(c, 0, sizeof *c);
    if (!f) return -1;
    if (rd(f, magic, 4) || memcmp(magic, "TCNF", 4) || rd(f, &version, 4) || version != 1 ||
        rd(f, &c->n_vocab, 4) || rd(f, &c->n_tok, 4) || rd(f, &c->topk, 4) ||
        rd(f, &c->n_gen, 4) || c->n_tok < 2 || c->n_tok > 4096 || c->topk < 1 ||
        c->topk > 256 || c->n_gen > 4096)
        goto out;
    const size_t n = c->n_tok, k = c->topk;
    if (!(c->tok = rd_arr(f, n, 4)) || !(c->top1 = rd_arr(f, n, 4)) ||
        !(c->lse = rd_arr(f, n, 4)) || !(c->id = malloc(n * k * 4)) ||
        !(c->logit = malloc(n * k * 4)))
        goto out;
    for (size_t i = 0; i < n * k; i++)
        if (rd(f, &c->id[i], 4) || rd(f, &c->logit[i], 4)) goto out;
    if (!(c->gen = rd_arr(f, c->n_gen, 4)) || rd(f, &c->self_top1, 4) ||
        rd(f, &c->self_kl_mean, 4) || rd(f, &c->self_kl_max, 4) || rd(f, &c->self_greedy, 4) ||
        rd(f, &c->ppl, 8) || rd(f, &c->self_ppl, 8))
        goto out;
    for (size_t i = 0; i < n; i++)
        if (c->tok[i] < 0 || (uint32_t)c->tok[i] >= c->n_vocab) goto out;
    rc = 0;
out:
    fclose(f);
    if (rc) conf_free(c);
    return rc;
}

static double logsumexp(const float *x, int32_t n)
{
    float m = x[0];
    for (int32_t i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    double s = 0.0;
    for (int32_t i = 0; i < n; i++) s += exp((double)(x[i] - m));
    return (double)m + log(s);
}

struct stats {
    const struct conf *c;
    int32_t n_vocab;
    int64_t rows, top1_ok;
    double kl_sum, kl_max, nll;
};

static void on_row(void *ud, int32_t pos, const float *logits)
{
    struct stats *s = ud;
    const struct conf *c = s->c;
    const double lse = logsumexp(logits, s->n_vocab), lse_ref = c->lse[pos];
    double kl = 0.0, pr = 0.0, pt = 0.0;
    for (uint32_t j = 0; j < c->topk; j++) {
        const size_t at = (size_t)pos * c->topk + j;
        const double lr = (double)c->logit[at] - lse_ref, lt = (double)logits[c->id[at]] - lse;
        kl += exp(lr) * (lr - lt);
        pr += exp(lr);
        pt += exp(lt);
    }
    const double tr = 1.0 - pr, tt = 1.0 - pt;
    if (tr > 1e-12 && tt > 1e-12) kl += tr * (log(tr) - log(tt));
    s->rows++;
    s->top1_ok += eu_argmax(logits, s->n_vocab) == c->top1[pos];
    s->kl_sum += kl;
    s->kl_max = kl > s->kl_max ? kl : s->kl_max;
    if ((uint32_t)pos + 1 < c->n_tok) s->nll += lse - (double)logits[c->tok[pos + 1]];
}

struct totals {
    int models, greedy_ours, greedy_self;
};

/* Runs one model against its fixture; returns 0, or -1 when it could not run. */
static int check_model(const char *name, const char *fix_dir, const char *model_dir, int scalar,
                       struct totals *t)
{
    char path[2200], mpath[2200], err[512];
    snprintf(path, sizeof path, "%.1024s/%.1024s.conf", fix_dir, name);
    snprintf(mpath, sizeof mpath, "%.1024s/%.1024s.gguf", model_dir, name);
    struct conf c;
    if (!ok(conf_read(path, &c) == 0, "%s: fixture reads", name)) return -1;
    struct model *m = model_open(mpath, err, sizeof err);
    if (!ok(m != NULL, "%s: model loads", name)) {
        tap_diag("%s", err);
        conf_free(&c);
        return -1;
    }
    /* the reference ran a 256-token context (LongRoPE picks its factors by it) */
    const struct backend_config cfg = {
        .kind = BACKEND_CPU, .threads = 2, .kv_type = KV_F16, .kv_block_tokens = 16,
        .max_batch_tokens = 64, .max_seqs = 1, .force_scalar = scalar != 0, .n_ctx = 256,
    };
    struct backend *be = backend_cpu_open(m, &cfg, err, sizeof err);
    float *logits = malloc((size_t)64 * m->hp.n_vocab * sizeof(float));
    int rc = -1;
    if (!ok(be && logits && m->hp.n_vocab == (int32_t)c.n_vocab, "%s: backend opens, vocabulary "
            "%d (reference %u)", name, m->hp.n_vocab, c.n_vocab)) {
        tap_diag("%s", be ? "" : err);
        goto out;
    }
    int32_t table[64];
    const int32_t nb = (int32_t)((c.n_tok + c.n_gen) / 16 + 2);
    for (int32_t i = 0; i < nb && i < 64; i++) table[i] = i;
    struct stats st = { .c = &c, .n_vocab = m->hp.n_vocab };
    /* chunks of 24: prefill batches and their boundaries are exercised too */
    if (eu_feed(be, table, nb, c.tok, (int32_t)c.n_tok, 0, 24, 1, on_row, &st, logits, err,
                sizeof err)) {
        ok(0, "%s: forward runs", name);
        tap_diag("%s", err);
        goto out;
    }
    const int32_t last = (int32_t)((c.n_tok - 1) % 24);
    int32_t tok = eu_argmax(logits + (size_t)last * m->hp.n_vocab, m->hp.n_vocab);
    uint32_t match = 0;
    for (uint32_t i = 0; i < c.n_gen && tok == c.gen[i]; i++) {
        match++;
        if (i + 1 == c.n_gen) break;
        if (eu_feed(be, table, nb, &tok, 1, (int32_t)(c.n_tok + i), 1, 0, NULL, NULL, logits,
                    err, sizeof err))
            break;
        tok = eu_argmax(logits, m->hp.n_vocab);
    }
    const double top1 = (double)st.top1_ok / (double)st.rows, kl = st.kl_sum / (double)st.rows;
    const double ppl = exp(st.nll / (double)(c.n_tok - 1));
    const double lim_top1 = fmin(0.99, (double)c.self_top1 - 0.04);
    const double lim_kl = fmax(0.005, 2.0 * c.self_kl_mean);
    const double lim_kl_max = fmax(0.1, 3.0 * c.self_kl_max);
    tap_diag("%-22s top-1 %5.1f %% (self %5.1f), KL mean %.5f (self %.5f) max %.5f (self %.5f), "
             "ppl %.4g vs %.4g (%+.3f %%), greedy %u/%u (self %u)", name, 100.0 * top1,
             100.0 * c.self_top1, kl, c.self_kl_mean, st.kl_max, c.self_kl_max, ppl, c.ppl,
             100.0 * (ppl - c.ppl) / c.ppl, match, c.n_gen, c.self_greedy);
    ok(top1 >= lim_top1, "%s: top-1 %.1f %% >= %.1f %%", name, 100.0 * top1, 100.0 * lim_top1);
    ok(kl <= lim_kl, "%s: mean KL %.5f <= %.5f", name, kl, lim_kl);
    ok(st.kl_max <= lim_kl_max, "%s: max KL %.5f <= %.4f", name, st.kl_max, lim_kl_max);
    /* 0.5 %, or twice the reference's own drift under flash attention */
    const double self_ppl = fabs(c.self_ppl - c.ppl) / c.ppl;
    const double lim_ppl = fmax(0.005, 2.0 * self_ppl);
    ok(fabs(ppl - c.ppl) / c.ppl <= lim_ppl, "%s: perplexity %.4g within %.2f %% of %.4g "
       "(reference vs itself %.3f %%)", name, ppl, 100.0 * lim_ppl, c.ppl, 100.0 * self_ppl);
    t->models++;
    t->greedy_ours += match < 16 ? (int)match : 16;
    t->greedy_self += c.self_greedy < 16 ? (int)c.self_greedy : 16;
    rc = 0;
out:
    free(logits);
    backend_close(be);
    model_close(m);
    conf_free(&c);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    const char *src = getenv("TERN_SRC");
    char fix_dir[1024], model_dir[1024], cmd[4096];
    int scalar = 0, n_names = 0;
    char *names[256];
    snprintf(fix_dir, sizeof fix_dir, "%s/tests/conformance/fixtures", src ? src : ".");
    const char *cache = getenv("TERN_CONFORMANCE_DIR");
    const char *home = getenv("HOME");
    if (cache) snprintf(model_dir, sizeof model_dir, "%s", cache);
    else snprintf(model_dir, sizeof model_dir, "%s/.cache/tern/conformance", home ? home : ".");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--scalar")) scalar = 1;
        else if (n_names < 256) names[n_names++] = strdup(argv[i]);
    }
    if (!n_names) {   /* every fixture, in name order */
        DIR *d = opendir(fix_dir);
        if (!d) return tap_bail("cannot open %s", fix_dir);
        struct dirent *e;
        while ((e = readdir(d)) && n_names < 256) {
            const size_t len = strlen(e->d_name);
            if (len > 5 && !strcmp(e->d_name + len - 5, ".conf")) {
                names[n_names] = strdup(e->d_name);
                names[n_names++][len - 5] = 0;
            }
        }
        closedir(d);
        qsort(names, (size_t)n_names, sizeof *names, cmp_str);
    }
    /* The models: written (or found cached with the right hash) by the generator. */
    int len = snprintf(cmd, sizeof cmd, "python3 '%s/tests/conformance/gen_models.py' --out '%s'",
                       src ? src : ".", model_dir);
    for (int i = 0; i < n_names && len < (int)sizeof cmd - 80; i++)
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " '%s'", names[i]);
    snprintf(cmd + len, sizeof cmd - (size_t)len, " >/dev/null");
    if (!ok(system(cmd) == 0, "gen_models.py writes the %d models (same bytes as recorded)",
            n_names))
        return tap_done();

    struct totals t = { 0 };
    for (int i = 0; i < n_names; i++) check_model(names[i], fix_dir, model_dir, scalar, &t);
    const int lim = t.greedy_self - 16 * ((t.models + 3) / 4);
    ok(t.greedy_ours >= lim, "greedy tokens matched over %d models, each capped at 16: %d "
       "(reference vs itself %d, limit %d)", t.models, t.greedy_ours, t.greedy_self, lim);
    for (int i = 0; i < n_names; i++) free(names[i]);
    return tap_done();
}
