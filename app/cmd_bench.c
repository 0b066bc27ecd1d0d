/* cmd_bench: 'tern bench' raw mode in the reference's llama-bench terms:
 * ppN = one forward batch of N prompt tokens into an empty context, tgN =
 * N single-token decode steps from an empty context (or after -d tokens
 * already in it, llama-bench's -d); each repeated -r times
 * after one warm-up, reporting the median and the spread. --profile hands
 * over to the serving load profiles (bench_profiles.c); --synthetic runs a
 * generated model of a known shape instead of a file. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "bench_compare.h"
#include "bench_contract.h"
#include "bench_drill.h"
#include "bench_profiles.h"
#include "bench_resume.h"
#include "cli.h"
#include "cli_opts.h"
#include "clock.h"
#include "commands.h"
#include "bench_env.h"
#include "cpu/threadpool.h"
#include "model.h"
#include "roofline.h"
#include "cpu_share.h"
#include "quant.h"
#include "store.h"
#include "synthetic.h"

enum {
    OPT_PP = CLI_OPT_CMD, OPT_TG, OPT_JSON, OPT_PROFILE, OPT_SYNTH, OPT_TYPE, OPT_SCALAR,
    OPT_DEPTH, OPT_SAVE, OPT_DB
};

struct bench_opts {
    const struct cli *cli;
    long pp, tg, reps, depth;
    long threads;               /* eng.backend.threads, 0 resolved to the physical cores */
    bool json, scalar, save;
    const char *synthetic, *db;
    uint32_t synth_type;
    struct engine_config eng;   /* the shared engine options (cli_engine_opt) */
};

static int on_opt(int c, const char *arg, void *ud)
{
    struct bench_opts *o = ud;
    switch (c) {
    case OPT_PP: return cli_int(o->cli, "--pp", arg, 0, 1 << 20, &o->pp);
    case OPT_TG: return cli_int(o->cli, "--tg", arg, 0, 1 << 20, &o->tg);
    case 'r': return cli_int(o->cli, "--repetitions", arg, 1, 1000, &o->reps);
    case 'd': return cli_int(o->cli, "--depth", arg, 0, 1 << 20, &o->depth);
    case OPT_JSON: o->json = true; return 0;
    case OPT_SCALAR: o->scalar = true; return 0;
    case OPT_SAVE: o->save = true; return 0;
    case OPT_DB: o->db = arg; return 0;
    case OPT_SYNTH: o->synthetic = arg; return 0;
    case OPT_TYPE:
        if (!strcmp(arg, "q4_0")) o->synth_type = QT_Q4_0;
        else if (!strcmp(arg, "q8_0")) o->synth_type = QT_Q8_0;
        else if (!strcmp(arg, "f16")) o->synth_type = QT_F16;
        else {
            fprintf(stderr, "tern bench: --type: '%s' is not q4_0, q8_0 or f16\n", arg);
            return -1;
        }
        return 0;
    }
    /* the engine options every command shares; anything else is not bench's */
    return cli_engine_opt(o->cli, c, arg, &o->eng, NULL, 0) == 0 ? 0 : -1;
}

/* One benchmark sequence: the backend and its single-sequence buffers. */
struct run {
    struct backend *be;
    struct fwd_single s;
};

/* One forward of n tokens at positions p0.. (logits for the last only). */
static int forward(struct run *r, int32_t n, int32_t p0, char *err, size_t errlen)
{
    for (int32_t i = 0; i < n; i++) r->s.want[i] = i == n - 1;
    return fwd_single_forward(r->be, &r->s, n, p0, err, errlen);
}

/* Tokens/s of one pp run (one batch) or one tg run (n single steps), at
 * positions p0.. (the context before p0 was filled by fill_depth). */
static int measure(struct run *r, bool prompt, int32_t n, int32_t p0, double *tps, char *err,
                   size_t errlen)
{
    const int32_t nv = r->be->model->hp.n_vocab;
    uint32_t x = 12345u;
    for (int32_t i = 0; prompt && i < n; i++) {
        x = x * 1103515245u + 12345u;
        r->s.tok[i] = (int32_t)((x >> 8) % (uint32_t)nv);
    }
    const double t0 = app_now_s();
    if (prompt) {
        if (forward(r, n, p0, err, errlen)) return -1;
    } else {
        for (int32_t i = 0; i < n; i++) {
            x = x * 1103515245u + 12345u;
            r->s.tok[0] = (int32_t)((x >> 8) % (uint32_t)nv);
            if (forward(r, 1, p0 + i, err, errlen)) return -1;
        }
    }
    *tps = (double)n / (app_now_s() - t0);
    return 0;
}

/* Positions [0, depth) of the context, in batches of at most chunk tokens;
 * once: every test then writes only positions from depth on. */
static int fill_depth(struct run *r, int32_t depth, int32_t chunk, char *err, size_t errlen)
{
    const int32_t nv = r->be->model->hp.n_vocab;
    uint32_t x = 777u;
    for (int32_t p = 0; p < depth; p += chunk) {
        const int32_t n = depth - p < chunk ? depth - p : chunk;
        for (int32_t i = 0; i < n; i++) {
            x = x * 1103515245u + 12345u;
            r->s.tok[i] = (int32_t)((x >> 8) % (uint32_t)nv);
        }
        if (forward(r, n, p, err, errlen)) return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct figures {
    double median, min, max, mean, sd;
};

static struct figures summarize(const double *v, long n)
{
    double *s = malloc((size_t)n * sizeof *s);
    struct figures f = { 0 };
    if (!s || n < 1) {
        free(s);
        return f;
    }
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    f.median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    f.min = s[0];
    f.max = s[n - 1];
    for (long i = 0; i < n; i++) f.mean += s[i] / (double)n;
    for (long i = 0; i < n; i++) f.sd += (s[i] - f.mean) * (s[i] - f.mean);
    f.sd = n > 1 ? sqrt(f.sd / (double)(n - 1)) : 0.0;
    free(s);
    return f;
}

static void print_runs(const char *key, const double *v, long n)
{
    printf("\"%s\":[", key);
    for (long i = 0; i < n; i++) printf("%s%.3f", i ? "," : "", v[i]);
    printf("]");
}

/* The model's cost per token at the bench's depth: decode reads the K and V
 * of every key its positions attend (kv_token_bytes: one token's, all
 * layers) beside the weights; a prompt token multiplies its query by each
 * such key and the probabilities by each V (2 flops a dimension, each). */
static struct roofline_model model_cost(const struct bench_opts *o, const struct model *m,
                                        uint64_t kv_token_bytes, bool attn_bf16)
{
    /* the embedding table, and the output matrix where it is its own */
    const uint64_t table = (uint64_t)m->hp.n_vocab * (uint64_t)m->hp.dim;
    const bool tied = m->output.data == m->tok_embd.data;
    struct roofline_model c =
        roofline_model_cost(m->weight_bytes_active, m->n_params_active, tied ? table : 2 * table);
    const int32_t nl = m->hp.n_layer, win = m->hp.sliding_window;
    int32_t n_swa = 0;
    for (int32_t l = 0; l < nl; l++) n_swa += model_layer_is_swa(m, l);
    if (nl > 0) {
        c.kv_bytes_per_token = engine_kv_keys(nl, n_swa, win, o->depth, o->tg) *
                               (double)kv_token_bytes / (double)nl;
        c.attn_flops_per_token = engine_kv_keys(nl, n_swa, win, o->depth, o->pp) * 4.0 *
                                 (double)m->hp.n_head * (double)m->hp.head_dim;
    }
    c.attn_bf16 = attn_bf16;
    return c;
}

/* Prefill's share of its peaks, %: the time the matrices and the attention
 * would take at their peaks over the time measured (the matrices alone: the
 * TOP/s over the peak). */
static double pp_share(const struct roofline_fig *f, double pp_med)
{
    return f->pp_pred_tok_s > 0 ? 100.0 * pp_med / f->pp_pred_tok_s : 0;
}

/* The medians as shares of the machine's limits (lim NULL: none known, a
 * GPU run): JSON keys, null where unknown. */
static void json_roofline(const struct bench_opts *o, const struct roofline_model c,
                          const struct limits *lim, double pp_med, double tg_med)
{
    printf("\"bytes_per_token\":%.0f,\"kv_bytes_per_token\":%.0f,\"ops_per_token\":%.0f,",
           c.bytes_per_token, c.kv_bytes_per_token, c.ops_per_token);
    if (!lim) {
        printf("\"limits\":null,\"tg_gb_s\":%.3f,\"pp_tops\":%.4f,",
               roofline_decode_gbs(&c, tg_med), roofline_prefill_tops(&c, pp_med));
        return;
    }
    const struct roofline_fig f = roofline_predict(lim, &c, (int)o->threads);
    printf("\"limits\":{\"cpu\":\"%s\",\"isa\":\"%s\",\"threads\":%d,\"read_gb_s\":%.3f,"
           "\"peak_tops\":%.4f,\"peak_unit\":\"%s\",\"cached\":%s},",
           lim->cpu, cpu_isa_name(lim->isa), f.threads, f.read_gbs, f.peak_tops,
           c.float_weights ? lim->bf16_unit : lim->int8_unit, lim->cached ? "true" : "false");
    const double gbs = roofline_decode_gbs(&c, tg_med), tops = roofline_prefill_tops(&c, pp_med);
    printf("\"tg_gb_s\":%.3f,\"tg_pct_of_read\":%.2f,\"tg_predicted_tok_s\":%.3f,", gbs,
           100.0 * gbs / f.read_gbs, f.tg_pred_tok_s);
    printf("\"pp_tops\":%.4f,\"pp_attn_flops_per_token\":%.0f,\"pp_pct_of_peak\":%.2f,"
           "\"pp_predicted_tok_s\":%.3f,", tops, c.attn_flops_per_token,
           pp_share(&f, pp_med), f.pp_pred_tok_s);
}

/* Below the table: each median as a share of its limit, and the roofline's
 * prediction beside it. */
static void text_roofline(const struct bench_opts *o, const struct roofline_model c,
                          const struct limits *lim, double pp_med, double tg_med)
{
    const double gbs = roofline_decode_gbs(&c, tg_med), tops = roofline_prefill_tops(&c, pp_med);
    if (!lim) {
        printf("\nroofline: no CPU limits for this device; tg %.2f GB/s of weights read, "
               "pp %.3f TOP/s\n", gbs, tops);
        return;
    }
    const struct roofline_fig f = roofline_predict(lim, &c, (int)o->threads);
    const char *unit = c.float_weights ? lim->bf16_unit : lim->int8_unit;
    printf("\nroofline, %s, %s, %d thread%s: streaming read %.1f GB/s, peak %.2f TOP/s (%s)\n",
           lim->cpu, cpu_isa_name(lim->isa), f.threads, f.threads == 1 ? "" : "s", f.read_gbs,
           f.peak_tops, unit);
    printf("| test | t/s measured | t/s predicted | achieved | of the limit |\n");
    printf("| --- | ---: | ---: | ---: | ---: |\n");
    if (o->pp)
        printf("| pp%ld | %.2f | %.2f | %.3f TOP/s | %.1f %% of peak |\n", o->pp, pp_med,
               f.pp_pred_tok_s, tops, pp_share(&f, pp_med));
    if (o->tg)
        printf("| tg%ld | %.2f | %.2f | %.2f GB/s | %.1f %% of read |\n", o->tg, tg_med,
               f.tg_pred_tok_s, gbs, 100.0 * gbs / f.read_gbs);
    if (o->pp && c.attn_flops_per_token >= 0.01 * c.ops_per_token) {
        const double peak = c.attn_bf16 ? limits_peak_ops(lim, f.threads, true)
                                        : limits_peak_f32(lim, f.threads);
        printf("prompt attention: %.1f MFLOP a token beside the matrices' %.1f MOP, on the %s peak "
               "%.3f TFLOP/s\n", c.attn_flops_per_token / 1e6, c.ops_per_token / 1e6,
               c.attn_bf16 ? lim->bf16_unit : lim->f32_unit, peak / 1e12);
    }
    if (o->tg && o->depth)
        printf("decode at depth %ld reads %.1f MB of weights and %.1f MB of K and V a token\n",
               o->depth, c.bytes_per_token / 1e6, c.kv_bytes_per_token / 1e6);
}

/* The machine beside the runs: what other processes (and the hypervisor)
 * took, so a figure read on a shared machine says so. */
static void json_machine(const struct cpu_share_fig *sh)
{
    if (!sh) {
        printf("\"machine\":null,");
        return;
    }
    printf("\"machine\":{\"cpus\":%d,\"other_cpus\":%.3f,\"steal_cpus\":%.3f,"
           "\"self_cpus\":%.3f,\"contended\":%s},", sh->cpus, sh->others, sh->steal, sh->self,
           cpu_share_contended(sh) ? "true" : "false");
}

static void text_machine(const struct cpu_share_fig *sh)
{
    if (!sh) return;
    if (cpu_share_contended(sh))
        printf("machine: other processes kept %.2f of %d CPUs busy during the runs (hypervisor "
               "steal %.2f): these figures are below this machine's best\n", sh->others,
               sh->cpus, sh->steal);
    else
        printf("machine: quiet during the runs (other processes %.2f of %d CPUs, steal %.2f)\n",
               sh->others, sh->cpus, sh->steal);
}

static void report(const struct bench_opts *o, const char *model_name, const struct model *m,
                   const struct backend_info *info, uint64_t kv_token_bytes, const double *pp,
                   const double *tg, const struct limits *lim, const struct cpu_share_fig *sh)
{
    const struct figures fp = summarize(pp, o->reps), ft = summarize(tg, o->reps);
    const struct roofline_model cost = model_cost(o, m, kv_token_bytes, info->prompt_attn_bf16);
    if (o->json) {
        printf("{\"model\":\"%s\",\"arch\":\"%s\",\"params\":%llu,\"weight_bytes\":%llu,"
               "\"active_params\":%llu,\"active_weight_bytes\":%llu,"
               "\"backend\":\"%s\",\"device\":\"%s\",\"threads\":%ld,\"kv_type\":\"%s\","
               "\"prompt_attn\":\"%s\",\"prefill_int8\":\"%s\","
               "\"repetitions\":%ld,\"depth\":%ld,\"pp\":%ld,\"tg\":%ld,",
               model_name, m->hp.arch_name, (unsigned long long)m->n_params,
               (unsigned long long)m->weight_bytes, (unsigned long long)m->n_params_active,
               (unsigned long long)m->weight_bytes_active, info->name, info->device, o->threads,
               cli_kv_type_name(o->eng.backend.kv_type), info->prompt_attn_bf16 ? "bf16" : "f32",
               info->prefill_w8a8 ? "w8a8" : "exact", o->reps, o->depth,
               o->pp, o->tg);
        printf("\"pp_tok_s\":%.3f,\"pp_min\":%.3f,\"pp_max\":%.3f,\"pp_sd\":%.3f,", fp.median,
               fp.min, fp.max, fp.sd);
        printf("\"tg_tok_s\":%.3f,\"tg_min\":%.3f,\"tg_max\":%.3f,\"tg_sd\":%.3f,", ft.median,
               ft.min, ft.max, ft.sd);
        json_roofline(o, cost, lim, fp.median, ft.median);
        json_machine(sh);
        print_runs("pp_runs", pp, o->pp ? o->reps : 0);
        printf(",");
        print_runs("tg_runs", tg, o->tg ? o->reps : 0);
        printf("}\n");
        return;
    }
    printf("| model | size | params | backend | threads | test | t/s (median) | min - max |\n");
    printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n");
    const double mib = (double)m->weight_bytes / 1048576.0, mp = (double)m->n_params / 1e6;
    char at[32] = "";
    if (o->depth) snprintf(at, sizeof at, " @ d%ld", o->depth);
    if (o->pp)
        printf("| %s | %.2f MiB | %.2f M | %s | %ld | pp%ld%s | %.2f | %.2f - %.2f |\n",
               model_name, mib, mp, info->name, o->threads, o->pp, at, fp.median, fp.min, fp.max);
    if (o->tg)
        printf("| %s | %.2f MiB | %.2f M | %s | %ld | tg%ld%s | %.2f | %.2f - %.2f |\n",
               model_name, mib, mp, info->name, o->threads, o->tg, at, ft.median, ft.min, ft.max);
    text_roofline(o, cost, lim, fp.median, ft.median);
    text_machine(sh);
    /* the fallback note only when a backend was asked for (auto on a CPU-only
     * machine is not news) */
    bool note = info->note[0] && o->eng.backend.kind != BACKEND_AUTO;
    fprintf(stderr, "device: %s%s%s\n", info->device, note ? "; " : "", note ? info->note : "");
}


/* path gets the model file ("" for a synthetic model). */
/* --save: the run and its environment in the history (kind "bench-raw"),
 * so 'tern bench compare' can set two of them side by side. */
static int save_run(const struct bench_opts *o, const char *name, const char *path,
                    const struct backend_info *info, const double *pp, const double *tg,
                    const struct cpu_share_fig *sh)
{
    const struct figures fp = summarize(pp, o->reps), ft = summarize(tg, o->reps);
    cJSON *cfg = cJSON_CreateObject(), *sum = cJSON_CreateObject();
    const char *ck[5] = {"pp", "tg", "repetitions", "depth", "threads"};
    const long cv[5] = {o->pp, o->tg, o->reps, o->depth, o->threads};
    for (int k = 0; k < 5; k++) cJSON_AddNumberToObject(cfg, ck[k], (double)cv[k]);
    cJSON_AddStringToObject(cfg, "kv_type", cli_kv_type_name(o->eng.backend.kv_type));
    cJSON_AddStringToObject(cfg, "prompt_attn", o->eng.backend.prompt_attn_bf16 ? "bf16" : "f32");
    cJSON_AddStringToObject(cfg, "prefill_int8", info->prefill_w8a8 ? "w8a8" : "exact");
    const char *sk[6] = {"pp_tok_s", "pp_tok_s_min", "pp_tok_s_max", "tg_tok_s", "tg_tok_s_min",
                         "tg_tok_s_max"};
    const double sv[6] = {fp.median, fp.min, fp.max, ft.median, ft.min, ft.max};
    for (int k = 0; k < 6; k++)
        if ((k < 3 && o->pp) || (k >= 3 && o->tg)) cJSON_AddNumberToObject(sum, sk[k], sv[k]);
    if (sh) {
        cJSON_AddNumberToObject(sum, "other_cpus", sh->others);
        cJSON_AddNumberToObject(sum, "steal_cpus", sh->steal);
    }
    cJSON *env = bench_env_collect_raw(name, path[0] ? path : NULL, info, o->threads);
    char *c = cJSON_PrintUnformatted(cfg), *s = cJSON_PrintUnformatted(sum),
         *e = env ? cJSON_PrintUnformatted(env) : NULL, err[1024];
    struct store *st;
    int rc = store_open(&st, o->db, STORE_READWRITE, err, sizeof err);
    if (rc == 0) {
        store_key k = store_run_add_env(st, "bench-raw", name, c, s, e, NULL);
        rc = store_flush(st, err, sizeof err);
        if (rc == 0)
            fprintf(stderr, "tern bench: stored as run %lld in %s\n", (long long)store_resolve(st, k),
                    store_path(st));
        store_close(st);
    }
    if (rc != 0) fprintf(stderr, "tern bench: --save: %s\n", err);
    free(c);
    free(s);
    free(e);
    cJSON_Delete(cfg);
    cJSON_Delete(sum);
    cJSON_Delete(env);
    return rc;
}

static struct model *open_model(const struct bench_opts *o, const struct cli *cli, char *name,
                                size_t namelen, char path[4096], char *err, size_t errlen)
{
    path[0] = 0;
    if (o->synthetic) {
        snprintf(name, namelen, "synthetic:%s:%s", o->synthetic, qtype_name(o->synth_type));
        return model_open_synthetic(o->synthetic, o->synth_type, 1, err, errlen);
    }
    if (cli_model_path(cli, path, 4096, err, errlen)) return NULL;
    const char *base = strrchr(path, '/');
    snprintf(name, namelen, "%s", base ? base + 1 : path);
    return model_open(path, err, errlen);
}

static int run_bench(const struct bench_opts *o, const struct cli *cli)
{
    char err[512], name[4200], path[4096];
    struct model *m = open_model(o, cli, name, sizeof name, path, err, sizeof err);
    if (!m) {
        fprintf(stderr, "tern bench: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    const long need = o->depth + (o->pp > o->tg ? o->pp : o->tg);
    const long chunk = o->pp > 0 ? o->pp : (o->depth < 512 ? (o->depth > 0 ? o->depth : 1) : 512);
    if (need > m->hp.n_ctx_train) {
        fprintf(stderr, "tern bench: a test of %ld tokens exceeds the model's context of %d\n",
                need, m->hp.n_ctx_train);
        model_close(m);
        return CLI_EXIT_FAIL;
    }
    const struct backend_config cfg = {
        .kind = o->eng.backend.kind, .threads = (int)o->threads, .kv_type = o->eng.backend.kv_type,
        .kv_block_tokens = 16, .max_batch_tokens = (int32_t)chunk,
        .max_seqs = 1, .force_scalar = o->scalar, .prompt_attn_bf16 = o->eng.backend.prompt_attn_bf16,
        .prefill_w8a8 = o->eng.backend.prefill_w8a8,
    };
    struct run r = { 0 };
    int rc = CLI_EXIT_FAIL;
    r.be = backend_open(m, &cfg, err, sizeof err);
    if (!r.be) {
        fprintf(stderr, "tern bench: %s\n", err);
        goto out;
    }
    const int32_t n_blocks = (int32_t)((need + 15) / 16);
    if (n_blocks > r.be->kv_n_blocks) {
        fprintf(stderr, "tern bench: %ld tokens need %d KV blocks, the cache holds %d\n", need,
                n_blocks, r.be->kv_n_blocks);
        goto out;
    }
    double *pp = calloc((size_t)o->reps, sizeof *pp), *tg = calloc((size_t)o->reps, sizeof *tg);
    if (fwd_single_alloc(&r.s, (int32_t)(need > 0 ? need : 1), n_blocks, 1,
                         m->hp.n_vocab) || !pp || !tg) {
        fprintf(stderr, "tern bench: out of memory\n");
        free(pp);
        free(tg);
        goto out;
    }
    double warm;
    const int32_t d = (int32_t)o->depth;
    /* the context before the tests, then a warm-up (first-touch of weights
     * and buffers), as llama-bench does */
    if (fill_depth(&r, d, (int32_t)chunk, err, sizeof err) ||
        measure(&r, true, (int32_t)(o->pp ? o->pp : 1), d, &warm, err, sizeof err) ||
        (o->tg && measure(&r, false, 1, d, &warm, err, sizeof err)))
        goto fail_run;
    struct cpu_share share;
    cpu_share_begin(&share);
    for (long i = 0; i < o->reps; i++) {
        if (o->pp && measure(&r, true, (int32_t)o->pp, d, &pp[i], err, sizeof err)) goto fail_run;
        if (o->tg && measure(&r, false, (int32_t)o->tg, d, &tg[i], err, sizeof err)) goto fail_run;
    }
    struct cpu_share_fig shf;
    const struct cpu_share_fig *sh = cpu_share_end(&share, &shf) == 0 ? &shf : NULL;
    struct backend_info info;
    r.be->ops->get_info(r.be, &info);
    /* the CPU's limits for a CPU run (measured once per machine, then cached) */
    struct limits lim;
    char lerr[512];
    const int isa = o->scalar ? CPU_ISA_SCALAR : -1;
    bool have_lim = !strcmp(info.name, "cpu") &&
                    roofline_limits(&lim, isa, false, lerr, sizeof lerr) == 0;
    if (!strcmp(info.name, "cpu") && !have_lim) fprintf(stderr, "tern bench: limits: %s\n", lerr);
    report(o, name, m, &info, r.be->kv_bytes_per_token, pp, tg, have_lim ? &lim : NULL, sh);
    rc = o->save && save_run(o, name, path, &info, pp, tg, sh) != 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
    goto done;
fail_run:
    fprintf(stderr, "tern bench: %s\n", err);
done:
    free(pp);
    free(tg);
out:
    fwd_single_free(&r.s);
    backend_close(r.be);
    model_close(m);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    static const char use[] =
        "usage: tern bench [OPTIONS]\n"
        "\n"
        "Measures prompt processing and generation speed (llama-bench terms), or serving\n"
        "load profiles with --profile.\n"
        "\n"
        "      --pp N               prompt tokens, one batch into an empty context\n"
        "                           (default 512; 0 = skip)\n"
        "      --tg N               generated tokens, one decode step each\n"
        "                           (default 128; 0 = skip)\n"
        "  -r, --repetitions N      runs of each test after one warm-up (default 5)\n"
        "  -d, --depth N            tokens already in the context before each test\n"
        "@threads physical cores\n"
        "      --json               one JSON object: pp_tok_s, tg_tok_s (medians), runs\n"
        "      --save               store the run and its environment in the history\n"
        "                           (--db PATH; see 'tern bench compare')\n"
        "@kv-type f16\n"
        "@backend auto\n"
        "      --scalar             CPU: portable scalar kernels\n"
        "      --synthetic NAME     generated model instead of -m (see --type)\n"
        "      --type T             weights of the synthetic model: q4_0 (default), q8_0,\n"
        "                           f16\n"
        "      --profile NAME       serving load profile (short, long-prompt, ..., all)\n"
        "      --resume N           reopening an N-token conversation from the disk\n"
        "                           prompt cache against a cold prefill (TTFT)\n"
        "      --contract FILE      run an acceptance contract (docs/CONTRACT.md)\n"
        "      --drill NAME         failure drill: bad-model, invalid-config, replica-killed,\n"
        "                           queue-saturation, stalled-dependency, client-disconnect,\n"
        "                           all (docs/PLAYBOOK.md)\n"
        "  compare RUN_A RUN_B      what changed between two stored runs\n";
    if (argc > 1 && !strcmp(argv[1], "compare")) {
        argv[1] = "bench compare"; /* messages say "tern bench compare: ..." */
        return bench_compare_main(argc - 1, argv + 1);
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--profile") || !strncmp(argv[i], "--profile=", 10))
            return bench_profiles_main(argc, argv);
        if (!strcmp(argv[i], "--contract") || !strncmp(argv[i], "--contract=", 11))
            return bench_contract_main(argc, argv);
        if (!strcmp(argv[i], "--drill") || !strncmp(argv[i], "--drill=", 8))
            return bench_drill_main(argc, argv);
        if (!strcmp(argv[i], "--resume") || !strncmp(argv[i], "--resume=", 9))
            return bench_resume_main(argc, argv);
    }
    static const struct option longopts[] = {
        { "pp", required_argument, 0, OPT_PP },
        { "tg", required_argument, 0, OPT_TG },
        { "repetitions", required_argument, 0, 'r' },
        { "depth", required_argument, 0, 'd' },
        CLI_SHARED(CLI_O_THREADS),
        { "json", no_argument, 0, OPT_JSON },
        { "save", no_argument, 0, OPT_SAVE },
        { "db", required_argument, 0, OPT_DB },
        CLI_SHARED(CLI_O_KV_TYPE),
        CLI_SHARED(CLI_O_PROMPT_ATTN),
        CLI_SHARED(CLI_O_PREFILL_INT8),
        CLI_SHARED(CLI_O_BACKEND),
        { "scalar", no_argument, 0, OPT_SCALAR },
        { "synthetic", required_argument, 0, OPT_SYNTH },
        { "type", required_argument, 0, OPT_TYPE },
        { 0, 0, 0, 0 },
    };
    struct cli cli;
    struct bench_opts o = { .pp = 512, .tg = 128, .reps = 5, .synth_type = QT_Q4_0 };
    o.cli = &cli;
    engine_config_default(&o.eng);
    /* --help shows the profile options as well */
    const char *pu = bench_profiles_usage(), *cu = bench_contract_usage(),
               *ru = bench_resume_usage();
    char *full = malloc(strlen(use) + strlen(pu) + strlen(cu) + strlen(ru) + 96);
    if (full)
        sprintf(full, "%s\nwith --profile:\n\n%s\nwith --contract:\n\n%s\nwith --resume:\n\n%s",
                use, pu, cu, ru);
    int rc = cli_parse(&cli, argc, argv, "r:d:", longopts, on_opt, &o, full ? full : use);
    free(full);
    if (rc >= 0) goto out;
    if (cli.argc > 0) {
        fprintf(stderr, "tern bench: unexpected argument '%s'\n", cli.argv[0]);
        rc = CLI_EXIT_USAGE;
        goto out;
    }
    if (cli.route) {
        fprintf(stderr, "tern bench: --route applies to --profile and --contract (the raw "
                        "pp/tg bench measures the local model)\n");
        rc = CLI_EXIT_USAGE;
        goto out;
    }
    if (!o.pp && !o.tg) {
        fprintf(stderr, "tern bench: --pp and --tg are both 0: nothing to measure\n");
        rc = CLI_EXIT_USAGE;
        goto out;
    }
    o.threads = o.eng.backend.threads ? o.eng.backend.threads : tp_physical_cores();
    rc = run_bench(&o, &cli);
out:
    cli_free(&cli);
    return rc;
}
