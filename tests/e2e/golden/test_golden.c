/* test_golden: tern's CPU forward pass against the reference engine's
 * recorded behaviour (tests/e2e/golden/<model>.gold, made by make_golden.py from
 * llama.cpp): top-1 agreement over every teacher-forced position, KL
 * divergence on the recorded top-50 rows, greedy continuations, and
 * perplexity by the llama-perplexity method.
 *
 * Limits: the figures (top-1 >= 99 %, mean KL <= 0.005, max KL <=
 * 0.1, 16 greedy tokens per prompt) or the reference's own agreement with
 * itself when that is worse. make_golden.py measures the latter by running
 * the reference a second time with flash attention (another valid rounding
 * of the same model): on these small models it reaches only 92-98 % top-1
 * and KL up to 0.009, so no implementation can be held to more. The
 * figures are printed; the limits are top-1 >= self - 4 %, mean KL <=
 * 2 x self, max KL <= 3 x self, and summed greedy matches (each capped at
 * 16) at most two prompts' worth (32) below the reference's own: one
 * near-tie ends a greedy match, so single prompts are chance. A broken
 * layer scores far below all of these (KL > 1, top-1 < 50 %).
 *
 *   test_golden smollm2|gemma3 [--scalar] [--threads N] [--long N] [--ppl-chunks N]
 *               [--no-ppl]
 *
 * --long N caps the long prompt at N tokens, --ppl-chunks the chunks scored
 * and --no-ppl skips perplexity (the scalar runs use them to stay fast; the
 * scalar kernels are several times slower). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "gguf.h"
#include "perplexity.h"
#include "tap.h"

enum { TOPK = 50, MAX_PROMPTS = 16 };

struct gold_full {
    int32_t pos;
    int32_t id[TOPK];
    float logit[TOPK];
};

struct gold_prompt {
    char name[33];
    uint32_t n_tok, n_full, n_gen;
    float self_top1, self_kl_mean, self_kl_max; /* reference (flash attention) vs itself */
    uint32_t self_greedy;
    int32_t *tok, *top1, *gen;
    float *lse;
    struct gold_full *full;
};

struct gold {
    uint32_t n_vocab, n_prompts;
    double ppl;
    uint32_t ppl_ctx, ppl_chunks, n_ppl;
    double *ppl_running;        /* reference PPL after 1, 2, ... chunks */
    int32_t *ppl_tok;
    struct gold_prompt p[MAX_PROMPTS];
};

static int rd(FILE *f, void *dst, size_t n)
{
    return fread(dst, 1, n, f) == n ? 0 : -1;
}

/* Reads n u32-sized items into a fresh array. */
static void *rd_arr(FILE *f, uint32_t n, size_t size)
{
    void *a = malloc((size_t)n * size + 1);
    if (a && rd(f, a, (size_t)n * size)) {
        free(a);
        return NULL;
    }
    return a;
}

static int read_prompt(FILE *f, struct gold_prompt *p)
{
    if (rd(f, p->name, 32) || rd(f, &p->n_tok, 4)) return -1;
    p->name[32] = 0;
    if (!(p->tok = rd_arr(f, p->n_tok, 4)) || !(p->top1 = rd_arr(f, p->n_tok, 4)) ||
        !(p->lse = rd_arr(f, p->n_tok, 4)) || rd(f, &p->n_full, 4))
        return -1;
    p->full = calloc(p->n_full + 1, sizeof *p->full);
    if (!p->full) return -1;
    for (uint32_t i = 0; i < p->n_full; i++) {
        struct gold_full *g = &p->full[i];
        if (rd(f, &g->pos, 4)) return -1;
        for (int k = 0; k < TOPK; k++)
            if (rd(f, &g->id[k], 4) || rd(f, &g->logit[k], 4)) return -1;
    }
    if (rd(f, &p->n_gen, 4) || !(p->gen = rd_arr(f, p->n_gen, 4))) return -1;
    if (rd(f, &p->self_top1, 4) || rd(f, &p->self_kl_mean, 4) || rd(f, &p->self_kl_max, 4) ||
        rd(f, &p->self_greedy, 4))
        return -1;
    return 0;
}

static int read_gold(const char *path, struct gold *g)
{
    FILE *f = fopen(path, "rb");
    char magic[4];
    uint32_t version;
    int rc = -1;
    if (!f) return -1;
    if (rd(f, magic, 4) || memcmp(magic, "TGLD", 4) || rd(f, &version, 4) || version != 2 ||
        rd(f, &g->n_vocab, 4) || rd(f, &g->n_prompts, 4) || g->n_prompts > MAX_PROMPTS ||
        rd(f, &g->ppl, 8) || rd(f, &g->ppl_ctx, 4) || rd(f, &g->ppl_chunks, 4) ||
        rd(f, &g->n_ppl, 4) || g->ppl_chunks < 1 ||
        !(g->ppl_running = rd_arr(f, g->ppl_chunks, 8)) ||
        !(g->ppl_tok = rd_arr(f, g->n_ppl, 4)))
        goto out;
    for (uint32_t i = 0; i < g->n_prompts; i++)
        if (read_prompt(f, &g->p[i])) goto out;
    rc = 0;
out:
    fclose(f);
    return rc;
}

static void free_gold(struct gold *g)
{
    free(g->ppl_tok);
    free(g->ppl_running);
    for (uint32_t i = 0; i < g->n_prompts; i++) {
        struct gold_prompt *p = &g->p[i];
        free(p->tok);
        free(p->top1);
        free(p->gen);
        free(p->lse);
        free(p->full);
    }
}

/* Statistics over the teacher-forced rows of one run. */
struct stats {
    const struct gold_prompt *p;
    int32_t n_vocab;
    uint32_t next_full;
    int64_t rows, top1_ok, kl_rows;
    double kl_sum, kl_max;
};

static double logsumexp(const float *x, int32_t n)
{
    float m = x[0];
    for (int32_t i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    double s = 0.0;
    for (int32_t i = 0; i < n; i++) s += exp((double)(x[i] - m));
    return (double)m + log(s);
}

/* KL(ref ‖ tern) over the reference's top-50 plus the rest as one bucket. */
static double kl_row(const struct gold_full *g, double lse_ref, const float *logits, double lse)
{
    double kl = 0.0, pr_sum = 0.0, pt_sum = 0.0;
    for (int k = 0; k < TOPK; k++) {
        const double lr = (double)g->logit[k] - lse_ref, lt = (double)logits[g->id[k]] - lse;
        kl += exp(lr) * (lr - lt);
        pr_sum += exp(lr);
        pt_sum += exp(lt);
    }
    const double tr = 1.0 - pr_sum, tt = 1.0 - pt_sum;
    if (tr > 1e-12 && tt > 1e-12) kl += tr * (log(tr) - log(tt));
    return kl;
}

static void on_row(void *ud, int32_t pos, const float *logits)
{
    struct stats *s = ud;
    const struct gold_prompt *p = s->p;
    s->rows++;
    s->top1_ok += eu_argmax(logits, s->n_vocab) == p->top1[pos];
    if (s->next_full < p->n_full && p->full[s->next_full].pos == pos) {
        const double kl = kl_row(&p->full[s->next_full], p->lse[pos], logits,
                                 logsumexp(logits, s->n_vocab));
        s->kl_sum += kl;
        s->kl_rows++;
        if (kl > s->kl_max) s->kl_max = kl;
        s->next_full++;
    }
}

/* Teacher-forced pass over one prompt, then greedy decoding; returns the
 * number of continuation tokens equal to the reference's, or -1. */
static int run_prompt(struct backend *be, const struct gold_prompt *p, uint32_t n_tok,
                      struct stats *st, float *logits)
{
    char err[512];
    int32_t table[256];
    const int32_t nb = (int32_t)((n_tok + p->n_gen) / 16 + 2);
    for (int32_t i = 0; i < nb && i < 256; i++) table[i] = i;
    st->p = p;
    st->next_full = 0;
    if (eu_feed(be, table, nb, p->tok, (int32_t)n_tok, 0, 64, 1, on_row, st, logits, err,
                sizeof err)) {
        tap_diag("%s: %s", p->name, err);
        return -1;
    }
    /* logits holds the last chunk; its last row is the prompt's last position. */
    const int32_t last_rows = (int32_t)((n_tok - 1) % 64);
    const float *row = logits + (size_t)last_rows * st->n_vocab;
    int32_t match = 0, diverged = 0;
    int32_t tok = eu_argmax(row, st->n_vocab);
    for (uint32_t i = 0; i < p->n_gen; i++) {
        if (!diverged && tok == p->gen[i]) match++;
        else diverged = 1;
        if (diverged || i + 1 == p->n_gen) break;
        if (eu_feed(be, table, nb, &tok, 1, (int32_t)(n_tok + i), 1, 0, NULL, NULL, logits,
                    err, sizeof err)) {
            tap_diag("%s: %s", p->name, err);
            return -1;
        }
        tok = eu_argmax(logits, st->n_vocab);
    }
    return match;
}

/* The reference's perplexity against itself on the fixture's text (flash
 * attention on vs off; the fixtures were recorded with it on), |on - off| /
 * on, measured with the reference's llama-perplexity (llama-cpp-python
 * 0.3.36): `llama-perplexity -m MODEL -f gpl-3.0.txt -c 512 -b 512
 * --chunks 4 -t 1 -fa on|off`. Gemma 3 270M Q4_K_M 15.1743 / 15.1306,
 * SmolLM2-135M Q4_1 18.3363 / 18.2422. The limit is the standard's
 * (docs/CORRECTNESS.md): within max(0.5 %, 2 x self). */
static double ppl_self_rel(const char *which)
{
    return strcmp(which, "gemma3") == 0 ? (15.1743 - 15.1306) / 15.1743
                                         : (18.3363 - 18.2422) / 18.3363;
}

static void check_ppl(struct backend *be, const struct model *m, const struct gold *g,
                      int32_t chunks, const char *label, double self_rel)
{
    char err[512];
    bool add_bos = false;
    uint32_t bos = 0;
    gguf_get_bool(m->gguf, "tokenizer.ggml.add_bos_token", &add_bos);
    gguf_get_u32(m->gguf, "tokenizer.ggml.bos_token_id", &bos);
    /* Fewer chunks than recorded: compare with the reference's running
     * figure after the same chunks. */
    if (chunks < 1 || chunks > (int32_t)g->ppl_chunks) chunks = (int32_t)g->ppl_chunks;
    const double want = g->ppl_running[chunks - 1];
    struct ppl_params pp = { .n_ctx = (int32_t)g->ppl_ctx, .n_chunks = chunks,
                             .bos = add_bos ? (int32_t)bos : -1, .n_batch = 128 };
    struct ppl_result r;
    if (!ok(ppl_run(be, g->ppl_tok, g->n_ppl, &pp, &r, err, sizeof err) == 0,
            "%s: perplexity runs", label)) {
        tap_diag("%s", err);
        return;
    }
    const double rel = fabs(r.ppl - want) / want;
    tap_diag("%s: perplexity %.4f over %d chunks (reference %.4f, %+.3f %%)", label, r.ppl,
             r.n_chunks, want, 100.0 * (r.ppl - want) / want);
    const double lim = fmax(0.005, 2.0 * self_rel);
    ok(rel <= lim, "%s: perplexity within %.3f %% of the reference (max(0.5 %%, 2 x its own "
       "flash-attention on/off difference %.3f %%))", label, 100.0 * lim, 100.0 * self_rel);
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "smollm2";
    int scalar = 0, threads = 2, long_cap = 0, ppl_chunks = 0, no_ppl = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--scalar")) scalar = 1;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--long") && i + 1 < argc) long_cap = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ppl-chunks") && i + 1 < argc) ppl_chunks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-ppl")) no_ppl = 1;
    }
    const char *src = getenv("TERN_SRC");
    char path[1024], mpath[1024], err[512], label[64];
    snprintf(label, sizeof label, "%s/%s", which, scalar ? "scalar" : "simd");
    snprintf(path, sizeof path, "%s/tests/e2e/golden/%s.gold", src ? src : ".", which);
    struct gold g;
    memset(&g, 0, sizeof g);
    if (read_gold(path, &g)) return tap_bail("cannot read %s", path);
    if (eu_model_path(strcmp(which, "gemma3") ? "smollm2" : "gemma3-270m", mpath, sizeof mpath))
        return tap_bail("packaging/fetch-model cannot provide the %s model", which);
    struct model *m = model_open(mpath, err, sizeof err);
    if (!m) return tap_bail("%s", err);
    struct backend *be = eu_cpu(m, threads, scalar, KV_F16, 0, err, sizeof err);
    if (!be) return tap_bail("%s", err);
    is_int(m->hp.n_vocab, g.n_vocab, "vocabulary size matches the reference");
    float *logits = malloc((size_t)64 * m->hp.n_vocab * sizeof(float));
    if (!logits) return tap_bail("out of memory");

    struct stats total = { .n_vocab = m->hp.n_vocab };
    double self_top1 = 0.0, self_kl = 0.0, self_kl_max = 0.0, self_rows = 0.0;
    int greedy_ours = 0, greedy_self = 0;
    for (uint32_t i = 0; i < g.n_prompts; i++) {
        const struct gold_prompt *p = &g.p[i];
        const bool is_long = !strcmp(p->name, "long");
        uint32_t n_tok = p->n_tok;
        if (is_long && long_cap > 0 && (uint32_t)long_cap < n_tok) n_tok = (uint32_t)long_cap;
        struct stats st = { .n_vocab = m->hp.n_vocab };
        const int match = run_prompt(be, p, n_tok, &st, logits);
        total.rows += st.rows;
        total.top1_ok += st.top1_ok;
        total.kl_rows += st.kl_rows;
        total.kl_sum += st.kl_sum;
        total.kl_max = st.kl_max > total.kl_max ? st.kl_max : total.kl_max;
        self_top1 += (double)p->self_top1 * p->n_tok;
        self_kl += (double)p->self_kl_mean * p->n_tok;
        self_rows += p->n_tok;
        self_kl_max = p->self_kl_max > self_kl_max ? p->self_kl_max : self_kl_max;
        tap_diag("%s %-8s %4u tokens: top-1 %5.1f %%, KL mean %.5f max %.5f, greedy %d/%u "
                 "match%s", label, p->name, n_tok, 100.0 * (double)st.top1_ok / (double)st.rows,
                 st.kl_rows ? st.kl_sum / (double)st.kl_rows : 0.0, st.kl_max, match, p->n_gen,
                 n_tok < p->n_tok ? " (continuation not checked: prompt capped)" : "");
        tap_diag("%*s reference vs itself: top-1 %5.1f %%, KL mean %.5f max %.5f, greedy %u/%u",
                 (int)strlen(label) + 9, "", 100.0 * p->self_top1, p->self_kl_mean,
                 p->self_kl_max, p->self_greedy, p->n_gen);
        if (n_tok == p->n_tok) {
            ok(match >= 0, "%s %s: greedy continuation runs", label, p->name);
            greedy_ours += match < 16 ? match : 16;
            greedy_self += p->self_greedy < 16 ? (int)p->self_greedy : 16;
        }
    }
    self_top1 /= self_rows;
    self_kl /= self_rows;
    const double top1 = (double)total.top1_ok / (double)total.rows;
    const double kl_mean = total.kl_sum / (double)total.kl_rows;
    const double lim_top1 = fmin(0.99, self_top1 - 0.04), lim_kl = fmax(0.005, 2.0 * self_kl);
    const double lim_kl_max = fmax(0.1, 3.0 * self_kl_max);
    ok(top1 >= lim_top1, "%s: top-1 agreement %.2f %% over %lld positions (>= %.2f %%; "
       "reference vs itself %.2f %%)", label, 100.0 * top1, (long long)total.rows,
       100.0 * lim_top1, 100.0 * self_top1);
    ok(kl_mean <= lim_kl, "%s: mean KL %.5f over %lld rows (<= %.5f; reference vs itself "
       "%.5f)", label, kl_mean, (long long)total.kl_rows, lim_kl, self_kl);
    ok(total.kl_max <= lim_kl_max, "%s: max KL %.5f (<= %.4f; reference vs itself %.5f)", label,
       total.kl_max, lim_kl_max, self_kl_max);
    ok(greedy_ours >= greedy_self - 32, "%s: greedy tokens matched, each prompt capped at 16: "
       "%d (reference vs itself %d, limit %d)", label, greedy_ours, greedy_self,
       greedy_self - 32);
    if (!no_ppl) check_ppl(be, m, &g, ppl_chunks > 0 ? ppl_chunks : (int32_t)g.ppl_chunks, label,
                          ppl_self_rel(which));

    free(logits);
    backend_close(be);
    model_close(m);
    free_gold(&g);
    return tap_done();
}
