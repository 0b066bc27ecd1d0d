/* test_conformance: tern's CPU forward pass against the reference engine
 * (llama.cpp) on small random-weight models of every supported architecture
 * and variant (tests/e2e/conformance/gen_models.py writes them, deterministically;
 * make_fixtures.py recorded the reference's outputs in fixtures/NAME.conf).
 *
 * Per model: top-1 agreement at every teacher-forced position, KL(ref ‖
 * tern) on the recorded top-k rows (the rest as one bucket), perplexity of
 * the sampled text, and the greedy continuation. The limits of
 * docs/CORRECTNESS.md, relative to the reference's agreement with itself
 * (flash attention on vs off), apply to each model and to each
 * architecture's models together: top-1 >= min(99 %, self - 4 %), mean KL
 * <= max(0.005, 2 x self), max KL <= max(0.1, 3 x self), perplexity within
 * max(0.5 %, 2 x self, what the tokens resolve). A broken layer fails all
 * of them (KL > 1). Greedy tokens summed
 * over the suite at most a quarter of the models' worth (16 each) below the
 * reference's own.
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
    uint32_t n_vocab, n_tok, topk, n_gen, ppl_from;
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
    if (rd(f, magic, 4) || memcmp(magic, "TCNF", 4) || rd(f, &version, 4) || version != 2 ||
        rd(f, &c->n_vocab, 4) || rd(f, &c->n_tok, 4) || rd(f, &c->topk, 4) ||
        rd(f, &c->n_gen, 4) || rd(f, &c->ppl_from, 4) || c->ppl_from < 1 ||
        c->ppl_from >= c->n_tok || c->n_tok < 2 || c->n_tok > 4096 || c->topk < 1 ||
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

enum { MAX_POS = 4096 };

/* Per-position figures of one run. */
struct stats {
    const struct conf *c;
    int32_t n_vocab;
    double kl[MAX_POS], nll[MAX_POS];   /* nll: -log p(next token) */
    uint8_t top1_ok[MAX_POS];
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
    if (getenv("TERN_CONF_VERBOSE") && kl > 0.05) tap_diag("  position %d: KL %.4f", pos, kl);
    s->kl[pos] = kl;
    s->top1_ok[pos] = eu_argmax(logits, s->n_vocab) == c->top1[pos];
    s->nll[pos] = (uint32_t)pos + 1 < c->n_tok ? lse - (double)logits[c->tok[pos + 1]] : 0.0;
}

/* Sums over positions (a model, or an architecture's models together). */
struct agg {
    double rows, top1, kl, kl_max, self_top1, self_kl, self_kl_max;
    double dnll, ppl_rows, self_dnll;   /* summed log-perplexity differences */
    int models;
};

static double ppl_limit(double self_rel, double kl_mean, double n)
{
    /* 0.5 %, twice the reference's own drift, or what n tokens resolve: a
     * perturbation of mean KL k moves log p of a token sampled from the
     * model by about sqrt(2k), so the mean over n tokens by sqrt(2k / n);
     * three of those. */
    return fmax(fmax(0.005, 2.0 * self_rel), 3.0 * sqrt(2.0 * kl_mean / n));
}

/* The standard's limits (docs/CORRECTNESS.md), on each model and on each
 * architecture's models together. */
static void check_agg(const char *what, const struct agg *a)
{
    const double top1 = a->top1 / a->rows, st = a->self_top1 / a->rows;
    const double kl = a->kl / a->rows, sk = a->self_kl / a->rows;
    const double lim_top1 = fmin(0.99, st - 0.04);
    const double lim_kl = fmax(0.005, 2.0 * sk);
    const double lim_kl_max = fmax(0.1, 3.0 * a->self_kl_max);
    const double dppl = exp(a->dnll / a->ppl_rows) - 1.0, sppl = exp(a->self_dnll / a->ppl_rows) - 1.0;
    const double lim_ppl = ppl_limit(fabs(sppl), kl, a->ppl_rows);
    tap_diag("%-24s top-1 %5.1f %% (self %5.1f), KL mean %.5f (self %.5f) max %.5f (self %.5f), "
             "ppl %+.2f %% (self %+.2f %%)", what, 100.0 * top1, 100.0 * st, kl, sk, a->kl_max,
             a->self_kl_max, 100.0 * dppl, 100.0 * sppl);
    ok(top1 >= lim_top1, "%s: top-1 %.1f %% >= %.1f %%", what, 100.0 * top1, 100.0 * lim_top1);
    ok(kl <= lim_kl, "%s: mean KL %.5f <= %.5f", what, kl, lim_kl);
    ok(a->kl_max <= lim_kl_max, "%s: max KL %.5f <= %.4f", what, a->kl_max, lim_kl_max);
    ok(fabs(dppl) <= lim_ppl, "%s: perplexity %+.2f %% within %.2f %%", what, 100.0 * dppl,
       100.0 * lim_ppl);
}

struct totals {
    int models, greedy_ours, greedy_self;
    char family[64];
    struct agg fam;
};

/* The model's family: its name without the weight type suffix. */
static void family_of(const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s", name);
    char *dash = strrchr(out, '-');
    if (dash) *dash = 0;
}

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
    struct stats *st = calloc(1, sizeof *st);
    int rc = -1;
    if (!ok(be && logits && st && m->hp.n_vocab == (int32_t)c.n_vocab, "%s: backend opens, "
            "vocabulary %d (reference %u)", name, m->hp.n_vocab, c.n_vocab)) {
        tap_diag("%s", be ? "" : err);
        goto out;
    }
    int32_t table[64];
    const int32_t nb = (int32_t)((c.n_tok + c.n_gen) / 16 + 2);
    for (int32_t i = 0; i < nb && i < 64; i++) table[i] = i;
    st->c = &c;
    st->n_vocab = m->hp.n_vocab;
    /* chunks of 24: prefill batches and their boundaries are exercised too */
    if (eu_feed(be, table, nb, c.tok, (int32_t)c.n_tok, 0, 24, 1, on_row, st, logits, err,
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
    struct agg a = { .models = 1 };
    /* the reference's own figures are per fixture: weighted by the rows kept */
    for (uint32_t i = 0; i < c.n_tok; i++) {
        a.rows++;
        a.top1 += st->top1_ok[i];
        a.kl += st->kl[i];
        a.kl_max = fmax(a.kl_max, st->kl[i]);
        if (i + 1 >= c.ppl_from && i + 1 < c.n_tok) a.ppl_rows++;
    }
    a.self_top1 = c.self_top1 * a.rows;
    a.self_kl = c.self_kl_mean * a.rows;
    a.self_kl_max = c.self_kl_max;
    a.self_dnll = log(c.self_ppl / c.ppl) * a.ppl_rows;
    /* tern's log-perplexity minus the reference's */
    double nll = 0.0;
    for (uint32_t i = c.ppl_from - 1; i + 1 < c.n_tok; i++) nll += st->nll[i];
    a.dnll = nll - log(c.ppl) * a.ppl_rows;
    check_agg(name, &a);
    tap_diag("%-24s greedy %u/%u (reference vs itself %u)", name, match, c.n_gen, c.self_greedy);
    struct agg *f = &t->fam;
    f->rows += a.rows;
    f->top1 += a.top1;
    f->kl += a.kl;
    f->kl_max = fmax(f->kl_max, a.kl_max);
    f->self_top1 += a.self_top1;
    f->self_kl += a.self_kl;
    f->self_kl_max = fmax(f->self_kl_max, a.self_kl_max);
    f->dnll += a.dnll;
    f->self_dnll += a.self_dnll;
    f->ppl_rows += a.ppl_rows;
    f->models++;
    t->models++;
    t->greedy_ours += match < 16 ? (int)match : 16;
    t->greedy_self += c.self_greedy < 16 ? (int)c.self_greedy : 16;
    rc = 0;
out:
    free(st);
    free(logits);
    backend_close(be);
    model_close(m);
    conf_free(&c);
    return rc;
}

/* Closes the current architecture's aggregate (the standard's limits). */
static void end_family(struct totals *t)
{
    if (t->fam.models > 0) {
        char what[96];
        snprintf(what, sizeof what, "%s (%d types)", t->family, t->fam.models);
        check_agg(what, &t->fam);
    }
    memset(&t->fam, 0, sizeof t->fam);
}

/* By family (the name without its type), then by name. */
static int cmp_str(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    char fx[64], fy[64];
    family_of(x, fx, sizeof fx);
    family_of(y, fy, sizeof fy);
    const int c = strcmp(fx, fy);
    return c ? c : strcmp(x, y);
}

int main(int argc, char **argv)
{
    const char *src = getenv("TERN_SRC");
    char fix_dir[1024], model_dir[1024], cmd[4096];
    int scalar = 0, n_names = 0;
    char *names[256];
    snprintf(fix_dir, sizeof fix_dir, "%s/tests/e2e/conformance/fixtures", src ? src : ".");
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
    int len = snprintf(cmd, sizeof cmd, "python3 '%s/tests/e2e/conformance/gen_models.py' --out '%s'",
                       src ? src : ".", model_dir);
    for (int i = 0; i < n_names && len < (int)sizeof cmd - 80; i++)
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " '%s'", names[i]);
    snprintf(cmd + len, sizeof cmd - (size_t)len, " >/dev/null");
    if (!ok(system(cmd) == 0, "gen_models.py writes the %d models (same bytes as recorded)",
            n_names))
        return tap_done();

    struct totals t = { 0 };
    for (int i = 0; i < n_names; i++) {
        char fam[64];
        family_of(names[i], fam, sizeof fam);
        if (strcmp(fam, t.family)) {
            end_family(&t);
            snprintf(t.family, sizeof t.family, "%s", fam);
        }
        check_model(names[i], fix_dir, model_dir, scalar, &t);
    }
    end_family(&t);
    const int lim = t.greedy_self - 16 * ((t.models + 3) / 4);
    ok(t.greedy_ours >= lim, "greedy tokens matched over %d models, each capped at 16: %d "
       "(reference vs itself %d, limit %d)", t.models, t.greedy_ours, t.greedy_self, lim);
    for (int i = 0; i < n_names; i++) free(names[i]);
    return tap_done();
}
