/* bench_contract: 'tern bench --contract FILE'.
 * A contract run: read the file (contract.c), open the engine (local, or
 * --url), record the environment (bench_env.c) and check the model against
 * the contract, run the planned workload through the profiles' driver
 * (bench_load_run), judge every target, run the quality gate through
 * 'tern eval' (a child process: the same code the user runs by hand, on
 * its own engine), print one row per target, store the run with its
 * environment and verdict, and exit 1 when anything failed. */
#include "bench_contract.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_env.h"
#include "bench_profiles.h"
#include "cli.h"
#include "cli_opts.h"
#include "contract.h"
#include "engine.h"
#include "store.h"

extern char **environ;

enum {
    OPT_CONTRACT = CLI_OPT_CMD + 0x80, OPT_JSON, OPT_DB, OPT_NO_SAVE, OPT_TEXTS,
    OPT_REQUESTS_OUT, OPT_SWEEP, OPT_SVG, OPT_SWEEP_STEPS, OPT_CHECK,
};

struct copts {
    const struct cli *cli;
    const char *contract, *json, *db, *texts, *requests_out, *svg, *backend;
    long threads, ctx, step_tokens, sweep_steps;
    bool no_save, quiet, sweep, check;
};

static int on_opt(int c, const char *arg, void *ud)
{
    struct copts *o = ud;
    switch (c) {
    case OPT_CONTRACT: o->contract = arg; return 0;
    case OPT_JSON: o->json = arg; return 0;
    case OPT_DB: o->db = arg; return 0;
    case OPT_NO_SAVE: o->no_save = true; return 0;
    case OPT_TEXTS: o->texts = arg; return 0;
    case OPT_REQUESTS_OUT: o->requests_out = arg; return 0;
    case OPT_SWEEP: o->sweep = true; return 0;
    case OPT_CHECK: o->check = true; return 0;
    case OPT_SVG: o->svg = arg; return 0;
    case OPT_SWEEP_STEPS: return cli_int(o->cli, "--sweep-steps", arg, 1, 32, &o->sweep_steps);
    case CLI_O_THREADS: return cli_opt_long(o->cli, CLI_O_THREADS, arg, &o->threads);
    case CLI_O_CTX: return cli_opt_long(o->cli, CLI_O_CTX, arg, &o->ctx);
    case CLI_O_STEP_TOKENS: return cli_opt_long(o->cli, CLI_O_STEP_TOKENS, arg, &o->step_tokens);
    case CLI_O_BACKEND: {
        enum backend_kind k;
        if (cli_backend(o->cli, arg, &k) != 0) return -1;
        o->backend = arg;
        return 0;
    }
    case 'q': o->quiet = true; return 0;
    }
    return -1;
}

static const char usage[] =
    "usage: tern bench --contract FILE [OPTIONS]\n"
    "\n"
    "Runs an acceptance contract (docs/CONTRACT.md): its model is checked against the\n"
    "one loaded, its workload is sent, every target is judged (one row each: target,\n"
    "measured, pass/fail, margin) and its quality gate run; the run is stored with\n"
    "its environment. Exit status 0 when every target and the gate pass, 1 when one\n"
    "fails, 2 for a bad contract file (the message names file, line and key).\n"
    "\n"
    "      --contract FILE   the contract\n"
    "      --check           only read and check the file (and its prompt set): no\n"
    "                        engine, no run (a CI lint)\n"
    "      --json FILE       the verdict as JSON\n"
    "      --db PATH         history database; --no-save: do not store the run\n"
    "      --texts DIR       folder of .txt files to cut prompts from\n"
    "      --requests-out FILE  every request's figures, one JSON object a line (every\n"
    "                        step of a sweep, in order)\n"
    "      --sweep           raise the arrival rate (x1.5 a step from the contract's)\n"
    "                        until a target fails; report the highest rate that holds\n"
    "      --sweep-steps N   at most N rates (default 6)\n"
    "      --svg FILE        --sweep: the curve (rate against TTFT p99 and goodput)\n"
    "@threads physical cores\n"
    "@ctx the model's\n"
    "@step-tokens the backend's\n"
    "@backend auto\n"
    "  -q, --quiet           only the verdict line\n"
    "\n"
    "tern bench compare RUN_A RUN_B [--db PATH] [--json]: what changed between two\n"
    "stored bench or contract runs, in the environment and in every target.\n"
    "\n" CLI_REMOTE_USAGE;

const char *bench_contract_usage(void)
{
    return usage;
}

/* ------------------------------------------------------------------ engine */

static struct engine *open_engine(const struct cli *cli, const struct copts *o,
                                  const struct contract *c)
{
    char path[4096], err[1024];
    if (cli->n_urls == 0 && cli_model_path(cli, path, sizeof path, err, sizeof err) != 0) {
        fprintf(stderr, "tern bench: %s\n", err);
        return NULL;
    }
    struct engine_config ec;
    engine_config_default(&ec);
    ec.model_path = path;
    ec.backend.threads = (int)o->threads;
    ec.n_ctx = (int32_t)o->ctx;
    ec.step_tokens = (int32_t)o->step_tokens;
    ec.event_limit = 16; /* as the profiles: a slow reader outruns it and is stalled */
    ec.slo_ttft_s = c->slo_ttft;
    ec.slo_tpot_s = c->slo_tpot;
    if (o->backend)
        ec.backend.kind = strcmp(o->backend, "cpu") == 0    ? BACKEND_CPU
                          : strcmp(o->backend, "cuda") == 0 ? BACKEND_CUDA
                                                            : BACKEND_AUTO;
    /* Through --url, -m (if given) lends its tokenizer and is the file hashed. */
    if (cli_engine_remote(cli, &ec) && cli->model) {
        if (cli_model_path(cli, path, sizeof path, err, sizeof err) != 0) {
            fprintf(stderr, "tern bench: %s\n", err);
            return NULL;
        }
        ec.model_path = path;
    }
    /* the contract's fallback route, unless --route names another */
    struct cli rc = *cli;
    if (!rc.route && c->route) {
        rc.route = c->route;
        if (c->route_ttft > 0) rc.route_ttft_s = c->route_ttft;
    }
    struct engine *e = cli_engine_open(&rc, &ec, err, sizeof err);
    if (!e) fprintf(stderr, "tern bench: %s\n", err);
    return e;
}

/* --------------------------------------------------------------- the model */

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool same_name(const char *want, const char *have)
{
    if (!have) return false;
    const char *b = strrchr(have, '/');
    b = b ? b + 1 : have;
    size_t n = strlen(b);
    if (n > 5 && !strcasecmp(b + n - 5, ".gguf")) n -= 5;
    return !strcasecmp(want, have) || (strlen(want) == n && !strncasecmp(want, b, n));
}

/* The names the loaded model goes by: general.name, its file, and what each
 * server calls it (its /v1/models ids, llama-server's model_path). */
static bool name_matches(const char *want, const cJSON *env, char *seen, size_t n)
{
    const cJSON *m = cJSON_GetObjectItem(env, "model"), *srv, *id;
    const char *names[2] = {jstr(m, "name"), jstr(m, "file")};
    bool hit = false;
    seen[0] = 0;
    for (int i = 0; i < 2; i++) {
        hit |= names[i] && same_name(want, names[i]);
        if (names[i]) snprintf(seen + strlen(seen), n - strlen(seen), "%s'%s'", *seen ? ", " : "", names[i]);
    }
    cJSON_ArrayForEach(srv, cJSON_GetObjectItem(cJSON_GetObjectItem(env, "engine"), "servers")) {
        cJSON_ArrayForEach(id, cJSON_GetObjectItem(srv, "models")) {
            const char *s = jstr(id, "id");
            hit |= s && same_name(want, s);
            if (s) snprintf(seen + strlen(seen), n - strlen(seen), "%s'%s'", *seen ? ", " : "", s);
        }
        const char *mp = jstr(cJSON_GetObjectItem(srv, "props"), "model_path");
        hit |= mp && same_name(want, mp);
    }
    return hit;
}

/* 0: the model is the contract's (or could not be checked: notes added);
 * -1: it is not (message printed). */
static int check_model(const struct contract *c, const cJSON *env, cJSON *notes)
{
    const cJSON *m = cJSON_GetObjectItem(env, "model");
    char seen[1024];
    if (c->model_name && !name_matches(c->model_name, env, seen, sizeof seen)) {
        fprintf(stderr, "tern bench: %s:%d: model.name: the contract names '%s'; the engine's "
                        "model goes by %s\n", c->path, c->model_line[0], c->model_name,
                *seen ? seen : "no name");
        return -1;
    }
    const char *sha = jstr(m, "sha256"), *rev = jstr(m, "revision");
    if (c->model_sha256 && sha && strcmp(c->model_sha256, sha)) {
        fprintf(stderr, "tern bench: %s:%d: model.sha256: the contract names %s; the model file "
                        "%s has %s\n", c->path, c->model_line[1], c->model_sha256,
                jstr(m, "file") ? jstr(m, "file") : "?", sha);
        return -1;
    }
    if (c->model_sha256 && !sha)
        cJSON_AddItemToArray(notes, cJSON_CreateString(
            "model.sha256 not verified: the server's model file is not here (give -m FILE "
            "with --url to hash it)"));
    if (c->model_revision && rev && strcmp(c->model_revision, rev)) {
        fprintf(stderr, "tern bench: %s:%d: model.revision: the contract names '%s'; the model "
                        "file says '%s' (general.version)\n", c->path, c->model_line[2],
                c->model_revision, rev);
        return -1;
    }
    if (c->model_revision && !rev)
        cJSON_AddItemToArray(notes, cJSON_CreateString(
            "model.revision not verified: the model file has no general.version"));
    return 0;
}

/* ------------------------------------------------------------ quality gate */

/* Runs 'tern eval ARGS...' (this binary) with stdout into out_path and
 * stderr kept aside (shown when it fails); returns its exit status, or -1
 * when it could not be started. */
static int run_eval(char **args, const char *out_path)
{
    char log[] = "/tmp/tern-gate-log-XXXXXX";
    int fd = mkstemp(log);
    if (fd < 0) return -1;
    close(fd);
    fflush(stdout);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, log, O_WRONLY | O_TRUNC, 0600);
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, args, environ), st = 0;
    posix_spawn_file_actions_destroy(&fa);
    while (rc == 0 && waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) rc = -1;
    rc = rc == 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    FILE *f = rc != 0 ? fopen(log, "r") : NULL;
    char line[1024];
    while (f && fgets(line, sizeof line, f)) fprintf(stderr, "tern bench: quality gate: %s", line);
    if (f) fclose(f);
    unlink(log);
    return rc;
}

/* The engine options of this run, for the child eval. */
static int engine_args(const struct cli *cli, const struct copts *o, const struct engine_info *info,
                       char **a, int n, char buf[][32])
{
    for (int i = 0; i < cli->n_urls; i++) {
        a[n++] = "--url";
        a[n++] = (char *)cli->urls[i];
    }
    if (cli->api_key) {
        a[n++] = "--api-key";
        a[n++] = (char *)cli->api_key;
    }
    if (cli->insecure) a[n++] = "--insecure";
    if (info->model_path && *info->model_path) {
        a[n++] = "-m";
        a[n++] = (char *)info->model_path;
    }
    if (o->threads) {
        snprintf(buf[0], 32, "%ld", o->threads);
        a[n++] = "--threads";
        a[n++] = buf[0];
    }
    if (o->backend) {
        a[n++] = "--backend";
        a[n++] = (char *)o->backend;
    }
    return n;
}

static cJSON *read_json_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    int ch;
    while (m && (ch = fgetc(f)) != EOF) fputc(ch, m);
    fclose(f);
    if (m) fclose(m);
    cJSON *j = buf ? cJSON_Parse(buf) : NULL;
    free(buf);
    return j;
}

static void gate_row(cJSON *rows, const char *what, double limit, double got, bool lower, bool *pass)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "unit", lower ? "share" : "");
    bool ok = isfinite(got) && (lower ? got >= limit : got <= limit);
    cJSON_AddStringToObject(r, "target", what);
    cJSON_AddStringToObject(r, "bound", lower ? "min" : "max");
    cJSON_AddNumberToObject(r, "limit", limit);
    if (isfinite(got)) {
        cJSON_AddNumberToObject(r, "measured", got);
        cJSON_AddNumberToObject(r, "margin", lower ? got - limit : limit - got);
    } else {
        cJSON_AddNullToObject(r, "measured");
        cJSON_AddNullToObject(r, "margin");
    }
    cJSON_AddBoolToObject(r, "pass", ok);
    cJSON_AddItemToArray(rows, r);
    *pass &= ok;
}

static double perplexity_gate(const struct contract *c, const struct cli *cli, const struct copts *o,
                              const struct engine_info *info, const char *tmp)
{
    char ctx[32], chunks[32], nb[2][32];
    snprintf(ctx, sizeof ctx, "%ld", c->ppl_ctx);
    snprintf(chunks, sizeof chunks, "%ld", c->ppl_chunks);
    char *a[32] = {"tern", "eval", "--perplexity", c->quality_text, "--ctx", ctx, "--chunks",
                   chunks, "--json", "--no-save"};
    int n = engine_args(cli, o, info, a, 10, nb);
    a[n] = NULL;
    if (run_eval(a, tmp) != 0) return NAN;
    cJSON *j = read_json_file(tmp);
    const cJSON *p = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "result"), "perplexity");
    double v = cJSON_IsNumber(p) ? p->valuedouble : NAN;
    cJSON_Delete(j);
    return v;
}

/* Exact-match accuracy over the lines with an expected answer. */
static double prompts_gate(const struct contract *c, const struct cli *cli, const struct copts *o,
                           const struct engine_info *info, const char *tmp)
{
    char mt[32], nb[2][32];
    snprintf(mt, sizeof mt, "%ld", c->quality_max_tokens);
    char *a[32] = {"tern", "eval", "--prompts", c->quality_prompts, "--out", (char *)tmp,
                   "--max-tokens", mt, "--no-save"};
    int n = engine_args(cli, o, info, a, 9, nb);
    a[n] = NULL;
    char devnull[] = "/dev/null";
    if (run_eval(a, devnull) != 0) return NAN;
    FILE *f = fopen(tmp, "r");
    if (!f) return NAN;
    char *line = NULL;
    size_t cap = 0;
    int with = 0, hit = 0;
    while (getline(&line, &cap, f) > 0) {
        cJSON *j = cJSON_Parse(line);
        if (j && cJSON_GetObjectItem(j, "expected")) {
            with++;
            hit += cJSON_IsTrue(cJSON_GetObjectItem(j, "match"));
        }
        cJSON_Delete(j);
    }
    free(line);
    fclose(f);
    return with ? (double)hit / with : NAN;
}

static cJSON *quality_gate(const struct contract *c, const struct cli *cli, const struct copts *o,
                           const struct engine_info *info, bool *pass)
{
    cJSON *rows = cJSON_CreateArray();
    if (!c->quality_text && !c->quality_prompts) return rows;
    char tmp[] = "/tmp/tern-gate-XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0) {
        *pass = false;
        return rows;
    }
    close(fd);
    if (c->quality_text)
        gate_row(rows, "quality.max-perplexity", c->max_perplexity,
                 perplexity_gate(c, cli, o, info, tmp), false, pass);
    if (c->quality_prompts)
        gate_row(rows, "quality.min-accuracy", c->min_accuracy,
                 prompts_gate(c, cli, o, info, tmp), true, pass);
    unlink(tmp);
    return rows;
}

/* ----------------------------------------------------------------- verdict */

static double jnum(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

void bench_contract_fmt(double v, const char *unit, char *buf, size_t n)
{
    if (!isfinite(v)) snprintf(buf, n, "-");
    else if (!strcmp(unit, "s")) snprintf(buf, n, fabs(v) < 1 ? "%.1f ms" : "%.3f s", fabs(v) < 1 ? v * 1e3 : v);
    else if (!strcmp(unit, "share")) snprintf(buf, n, "%.1f%%", v * 100);
    else if (!strcmp(unit, "req/s")) snprintf(buf, n, "%.3f/s", v);
    else snprintf(buf, n, "%.4g", v);
}

static void print_rows(const cJSON *rows)
{
    const cJSON *r;
    cJSON_ArrayForEach(r, rows) {
        const char *unit = jstr(r, "unit") ? jstr(r, "unit") : "";
        const char *bound = jstr(r, "bound");
        char lim[32], got[32], mar[48];
        bench_contract_fmt(jnum(r, "limit"), unit, lim, sizeof lim);
        bench_contract_fmt(jnum(r, "measured"), unit, got, sizeof got);
        bench_contract_fmt(jnum(r, "margin"), unit, mar, sizeof mar);
        if (isfinite(jnum(r, "margin_pct")))
            snprintf(mar + strlen(mar), sizeof mar - strlen(mar), " (%+.0f%%)", jnum(r, "margin_pct"));
        const char *name = jstr(r, "target");
        printf("  %-24s %s %-10s %12s   %-4s  margin %s\n", name ? name : "?",
               bound && !strcmp(bound, "min") ? ">=" : "<=", lim, got,
               cJSON_IsTrue(cJSON_GetObjectItem(r, "pass")) ? "pass" : "FAIL", mar);
    }
}

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int rc = fputs(text, f) < 0 ? -1 : 0;
    return fclose(f) != 0 ? -1 : rc;
}

static int save(const struct copts *o, const char *model, const cJSON *config, const cJSON *verdict,
                const cJSON *env, bool pass)
{
    if (o->no_save) return 0;
    struct store *s;
    char err[1024];
    if (store_open(&s, o->db, STORE_READWRITE, err, sizeof err) != 0) {
        fprintf(stderr, "tern bench: %s (run not stored)\n", err);
        return -1;
    }
    char *c = cJSON_PrintUnformatted(config), *v = cJSON_PrintUnformatted(verdict),
         *e = cJSON_PrintUnformatted(env);
    store_key k = store_run_add_env(s, "contract", model, c, v, e, pass ? "pass" : "fail");
    int rc = store_flush(s, err, sizeof err);
    if (rc != 0) fprintf(stderr, "tern bench: %s (run not stored)\n", err);
    else fprintf(stderr, "tern bench: stored as run %lld in %s\n", (long long)store_resolve(s, k),
                 store_path(s));
    free(c);
    free(v);
    free(e);
    store_close(s);
    return rc;
}

/* One run of the workload at rate r (<= 0: the contract's): its verdict
 * object {rate, summary, targets, pass}; NULL on a failure (printed). */
static cJSON *run_once(const struct contract *c, const struct copts *o, struct engine *e, double r,
                       FILE *req_out)
{
    char err[1024];
    struct contract_plan p;
    if (contract_plan(c, r, &p, err, sizeof err) != 0) {
        fprintf(stderr, "tern bench: %s\n", err);
        return NULL;
    }
    struct bench_load L = {.name = c->name ? c->name : "contract", .v = p.v, .n = p.n,
                           .open_loop = c->arrival != CA_CLOSED,
                           .concurrency = (int)c->concurrency, .peak = (int)c->peak,
                           .slo_ttft = c->slo_ttft, .slo_tpot = c->slo_tpot, .seed = c->seed,
                           .texts = o->texts, .progress = isatty(STDERR_FILENO) && !o->quiet,
                           .requests_out = req_out, .n_groups = c->n_tenants};
    const char *names[CONTRACT_MAX_TENANTS];
    for (int t = 0; t < c->n_tenants; t++) names[t] = c->tenants[t].name;
    if (c->n_tenants) {
        L.group = p.tenant;
        L.group_names = names;
    }
    cJSON *s = bench_load_run(e, &L, err, sizeof err);
    contract_plan_free(&p);
    if (!s) {
        fprintf(stderr, "tern bench: %s\n", err);
        return NULL;
    }
    bool pass;
    cJSON *v = cJSON_CreateObject();
    if (c->arrival != CA_CLOSED) cJSON_AddNumberToObject(v, "rate", r > 0 ? r : c->rate);
    cJSON_AddItemToObject(v, "targets", contract_judge(c, s, &pass));
    cJSON_AddItemToObject(v, "summary", s);
    cJSON_AddBoolToObject(v, "pass", pass);
    return v;
}

static cJSON *config_json(const struct contract *c)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "contract", c->path);
    if (c->name) cJSON_AddStringToObject(j, "name", c->name);
    const char *doc[4][2] = {{"model_licence", c->model_licence}, {"model_source", c->model_source},
                             {"retention", c->retention}, {"region", c->region}};
    for (int k = 0; k < 4; k++)
        if (doc[k][1]) cJSON_AddStringToObject(j, doc[k][0], doc[k][1]);
    static const char *const arr[] = {"closed", "constant", "poisson", "bursts"};
    cJSON_AddStringToObject(j, "arrival", arr[c->arrival]);
    cJSON_AddNumberToObject(j, "requests", (double)c->requests);
    if (c->arrival == CA_CLOSED) cJSON_AddNumberToObject(j, "concurrency", (double)c->concurrency);
    else cJSON_AddNumberToObject(j, "rate", c->rate);
    cJSON_AddNumberToObject(j, "seed", (double)c->seed);
    cJSON_AddNumberToObject(j, "slo_ttft_s", c->slo_ttft);
    cJSON_AddNumberToObject(j, "slo_tpot_s", c->slo_tpot);
    return j;
}

static void print_summary_line(const cJSON *s)
{
    const cJSON *st, *t;
    printf("  %d requests in %.2f s:", (int)jnum(s, "requests"), jnum(s, "duration_s"));
    cJSON_ArrayForEach(st, cJSON_GetObjectItem(s, "statuses"))
        printf(" %s %d", st->string, (int)st->valuedouble);
    printf(" · %.1f tok/s out · goodput %.3f req/s\n", jnum(s, "output_tok_s"),
           jnum(s, "goodput_rps"));
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(s, "by_tenant")) {
        char a[32], b[32], e[32];
        bench_contract_fmt(jnum(cJSON_GetObjectItem(t, "ttft"), "p99"), "s", a, sizeof a);
        bench_contract_fmt(jnum(cJSON_GetObjectItem(t, "tpot"), "p99"), "s", b, sizeof b);
        bench_contract_fmt(jnum(cJSON_GetObjectItem(t, "e2e"), "p99"), "s", e, sizeof e);
        printf("  tenant %-12s %d requests (%d completed) · TTFT p99 %s · TPOT p99 %s · E2E p99 %s\n",
               t->string, (int)jnum(t, "requests"), (int)jnum(t, "completed"), a, b, e);
    }
}

/* ------------------------------------------------------------------- sweep */

static double ttft_p99(const cJSON *step)
{
    return jnum(cJSON_GetObjectItem(cJSON_GetObjectItem(step, "summary"), "ttft"), "p99");
}

static double goodput(const cJSON *step)
{
    return jnum(cJSON_GetObjectItem(step, "summary"), "goodput_rps");
}

/* The curve in the terminal: one line a rate, TTFT p99 and goodput as bars. */
static void sweep_chart(const cJSON *steps)
{
    double tmax = 0, gmax = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, steps) {
        if (ttft_p99(s) > tmax) tmax = ttft_p99(s);
        if (goodput(s) > gmax) gmax = goodput(s);
    }
    printf("\n  %9s  %-32s %s\n", "rate/s", "TTFT p99", "goodput req/s");
    cJSON_ArrayForEach(s, steps) {
        int a = tmax > 0 && isfinite(ttft_p99(s)) ? (int)(20 * ttft_p99(s) / tmax + 0.5) : 0;
        int b = gmax > 0 && isfinite(goodput(s)) ? (int)(16 * goodput(s) / gmax + 0.5) : 0;
        char t[24];
        bench_contract_fmt(ttft_p99(s), "s", t, sizeof t);
        printf("  %9.3f  %-20.*s %-11s %-16.*s %-8.3f %s\n", jnum(s, "rate"), a,
               "####################", t, b, "################", goodput(s),
               cJSON_IsTrue(cJSON_GetObjectItem(s, "pass")) ? "pass" : "FAIL");
    }
}

/* The same curve as an SVG: rate on x, TTFT p99 (left axis, red) and
 * goodput (right axis, blue); failing rates marked with a cross. */
static int sweep_svg(const char *path, const cJSON *steps, const char *title)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    double rmax = 0, tmax = 0, gmax = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, steps) {
        rmax = fmax(rmax, jnum(s, "rate"));
        if (isfinite(ttft_p99(s))) tmax = fmax(tmax, ttft_p99(s));
        if (isfinite(goodput(s))) gmax = fmax(gmax, goodput(s));
    }
    if (rmax <= 0) rmax = 1;
    if (tmax <= 0) tmax = 1;
    if (gmax <= 0) gmax = 1;
    const double W = 640, H = 360, L = 70, R = 70, T = 40, B = 50;
#define X(r) (L + (r) / rmax * (W - L - R))
#define Y(v, m) (H - B - (v) / (m) * (H - T - B))
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"22\" font-size=\"14\">capacity sweep: %s</text>\n", L, title);
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", L,
            H - B, W - R, H - B);
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", L, T, L,
            H - B);
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", W - R,
            T, W - R, H - B);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">arrival rate (requests/s), "
               "max %.3g</text>\n", (L + W - R) / 2, H - 15, rmax);
    fprintf(f, "<text x=\"10\" y=\"%.0f\" fill=\"#c0392b\">TTFT p99 (max %.3g s)</text>\n", T - 8, tmax);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#2e6bd1\" text-anchor=\"end\">goodput "
               "(max %.3g req/s)</text>\n", W - 5, T - 8, gmax);
    for (int k = 0; k < 2; k++) {
        fprintf(f, "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"%s\" points=\"",
                k ? "#2e6bd1" : "#c0392b");
        cJSON_ArrayForEach(s, steps) {
            double v = k ? goodput(s) : ttft_p99(s);
            if (isfinite(v)) fprintf(f, "%.1f,%.1f ", X(jnum(s, "rate")), Y(v, k ? gmax : tmax));
        }
        fprintf(f, "\"/>\n");
    }
    cJSON_ArrayForEach(s, steps) {
        bool ok = cJSON_IsTrue(cJSON_GetObjectItem(s, "pass"));
        double x = X(jnum(s, "rate"));
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"%s\">%s %.3g</text>\n",
                x, H - B + 16, ok ? "black" : "#c0392b", ok ? "" : "x", jnum(s, "rate"));
    }
#undef X
#undef Y
    fprintf(f, "</svg>\n");
    return fclose(f) != 0 ? -1 : 0;
}

/* Raises the rate x1.5 a step until a target fails (or the steps run out);
 * returns {steps: [...], max_rate_passing}. */
static cJSON *sweep(const struct contract *c, const struct copts *o, struct engine *e, FILE *req_out)
{
    cJSON *out = cJSON_CreateObject(), *steps = cJSON_AddArrayToObject(out, "steps");
    double r = c->rate, best = NAN;
    for (long k = 0; k < o->sweep_steps; k++, r *= 1.5) {
        if (!o->quiet) fprintf(stderr, "tern bench: sweep: %.3f requests/s\n", r);
        cJSON *v = run_once(c, o, e, r, req_out);
        if (!v) break;
        bool pass = cJSON_IsTrue(cJSON_GetObjectItem(v, "pass"));
        cJSON_AddItemToArray(steps, v);
        if (!pass) break;
        best = r;
    }
    if (isfinite(best)) cJSON_AddNumberToObject(out, "max_rate_passing", best);
    else cJSON_AddNullToObject(out, "max_rate_passing");
    return out;
}

/* -------------------------------------------------------------------- main */

static const struct option longopts[] = {
    {"contract", required_argument, 0, OPT_CONTRACT},
    {"json", required_argument, 0, OPT_JSON},
    {"db", required_argument, 0, OPT_DB},
    {"no-save", no_argument, 0, OPT_NO_SAVE},
    {"texts", required_argument, 0, OPT_TEXTS},
    {"requests-out", required_argument, 0, OPT_REQUESTS_OUT},
    {"sweep", no_argument, 0, OPT_SWEEP},
    {"check", no_argument, 0, OPT_CHECK},
    {"sweep-steps", required_argument, 0, OPT_SWEEP_STEPS},
    {"svg", required_argument, 0, OPT_SVG},
    CLI_SHARED(CLI_O_THREADS),
    CLI_SHARED(CLI_O_CTX),
    CLI_SHARED(CLI_O_STEP_TOKENS),
    CLI_SHARED(CLI_O_BACKEND),
    {"quiet", no_argument, 0, 'q'},
    {0, 0, 0, 0},
};

/* The step of a sweep whose verdict stands: the highest rate that held, or
 * the first (failing) one. */
static const cJSON *standing_step(const cJSON *sweep_run)
{
    const cJSON *steps = cJSON_GetObjectItem(sweep_run, "steps"), *s;
    const cJSON *best = cJSON_GetArrayItem(steps, 0);
    cJSON_ArrayForEach(s, steps) if (cJSON_IsTrue(cJSON_GetObjectItem(s, "pass"))) best = s;
    return best;
}

/* The verdict object: the standing run's targets and summary, the gate,
 * the sweep (taken over), the notes (taken over) and the overall pass. */
static cJSON *assemble(const struct contract *c, const cJSON *main_run, cJSON *gate,
                       cJSON *sweep_run, cJSON *notes, bool pass)
{
    cJSON *v = cJSON_CreateObject();
    cJSON_AddStringToObject(v, "contract", c->path);
    if (c->name) cJSON_AddStringToObject(v, "name", c->name);
    cJSON_AddItemToObject(v, "targets", cJSON_Duplicate(cJSON_GetObjectItem(main_run, "targets"), 1));
    cJSON_AddItemToObject(v, "quality", gate);
    cJSON_AddItemToObject(v, "summary", cJSON_Duplicate(cJSON_GetObjectItem(main_run, "summary"), 1));
    if (sweep_run) cJSON_AddItemToObject(v, "sweep", sweep_run);
    cJSON_AddItemToObject(v, "notes", notes);
    cJSON_AddBoolToObject(v, "pass", pass);
    return v;
}

static void print_verdict(const struct contract *c, const cJSON *v)
{
    const cJSON *sw = cJSON_GetObjectItem(v, "sweep"), *nt;
    print_summary_line(cJSON_GetObjectItem(v, "summary"));
    printf("\n  %-24s    %-10s %12s\n", "target", "limit", "measured");
    print_rows(cJSON_GetObjectItem(v, "targets"));
    print_rows(cJSON_GetObjectItem(v, "quality"));
    if (sw) {
        sweep_chart(cJSON_GetObjectItem(sw, "steps"));
        double best = jnum(sw, "max_rate_passing");
        if (isfinite(best)) printf("\n  highest rate that holds: %.3f requests/s\n", best);
        else printf("\n  no rate holds: the first (%.3f requests/s) already fails\n", c->rate);
    }
    cJSON_ArrayForEach(nt, cJSON_GetObjectItem(v, "notes")) printf("  note: %s\n", nt->valuestring);
}

/* --svg, --json (with the environment) and the history; rc is kept unless
 * one of them fails. */
static int write_outputs(const struct contract *c, const struct copts *o, const char *model,
                         cJSON *v, const cJSON *env, int rc)
{
    if (o->sweep && o->svg &&
        sweep_svg(o->svg, cJSON_GetObjectItem(cJSON_GetObjectItem(v, "sweep"), "steps"),
                  c->name ? c->name : c->path) != 0) {
        fprintf(stderr, "tern bench: --svg %s: %s\n", o->svg, strerror(errno));
        rc = CLI_EXIT_FAIL;
    }
    if (o->json) {
        cJSON_AddItemToObject(v, "environment", cJSON_Duplicate(env, 1));
        char *txt = cJSON_Print(v);
        if (!txt || write_text(o->json, txt) != 0) {
            fprintf(stderr, "tern bench: --json %s: %s\n", o->json, strerror(errno));
            rc = CLI_EXIT_FAIL;
        }
        free(txt);
        cJSON_DeleteItemFromObject(v, "environment"); /* stored in its own column */
    }
    cJSON *cfg = config_json(c);
    bool pass = cJSON_IsTrue(cJSON_GetObjectItem(v, "pass"));
    if (save(o, model, cfg, v, env, pass) != 0 && rc == CLI_EXIT_OK) rc = CLI_EXIT_FAIL;
    cJSON_Delete(cfg);
    return rc;
}

/* One short request first, not counted (as llama-bench's warm-up): the
 * first request of a fresh engine pays for first-touch of the weights. */
static void warm_up(const struct contract *c, const struct copts *o, struct engine *e)
{
    struct bench_load_req q = {.prompt_tokens = 8, .max_tokens = 4, .cancel_after = -1,
                               .stall_after = -1};
    struct bench_load L = {.name = "warm-up", .v = &q, .n = 1, .concurrency = 1,
                           .slo_ttft = c->slo_ttft, .slo_tpot = c->slo_tpot, .seed = c->seed,
                           .texts = o->texts};
    char err[512];
    cJSON_Delete(bench_load_run(e, &L, err, sizeof err));
}

/* Checks the model, runs (or sweeps), gates, prints and stores; returns
 * the exit status. */
static int contract_run(const struct contract *c, const struct copts *o, const struct cli *cli,
                        struct engine *e)
{
    struct engine_info info;
    engine_info(e, &info);
    cJSON *notes = cJSON_CreateArray(), *env = bench_env_collect(e, cli, o->threads), *run = NULL;
    FILE *req_out = NULL;
    int rc = CLI_EXIT_FAIL;
    if (check_model(c, env, notes) != 0) goto fail;
    if (o->requests_out && !(req_out = fopen(o->requests_out, "w"))) {
        fprintf(stderr, "tern bench: --requests-out %s: %s\n", o->requests_out, strerror(errno));
        goto fail;
    }
    if (!o->quiet)
        printf("contract %s · model %s · %s (%s)\n", c->name ? c->name : c->path, info.model_name,
               info.backend.name, info.backend.device);
    warm_up(c, o, e);
    run = o->sweep ? sweep(c, o, e, req_out) : run_once(c, o, e, 0, req_out);
    if (req_out) fclose(req_out);
    const cJSON *main_run = o->sweep ? standing_step(run) : run;
    if (!main_run) goto fail;
    bool pass = cJSON_IsTrue(cJSON_GetObjectItem(main_run, "pass"));
    cJSON *gate = quality_gate(c, cli, o, &info, &pass);
    cJSON *v = assemble(c, main_run, gate, o->sweep ? run : NULL, notes, pass);
    if (!o->sweep) cJSON_Delete(run);
    if (!o->quiet) print_verdict(c, v);
    printf("verdict: %s\n", pass ? "PASS" : "FAIL");
    rc = write_outputs(c, o, info.model_name, v, env, pass ? CLI_EXIT_OK : CLI_EXIT_FAIL);
    cJSON_Delete(v);
    cJSON_Delete(env);
    return rc;
fail:
    cJSON_Delete(run);
    cJSON_Delete(notes);
    cJSON_Delete(env);
    return rc;
}

int bench_contract_main(int argc, char **argv)
{
    struct cli cli;
    struct copts o = {.cli = &cli, .sweep_steps = 6};
    int rc = cli_parse(&cli, argc, argv, "q", longopts, on_opt, &o, usage);
    if (rc >= 0) goto done;
    rc = CLI_EXIT_USAGE;
    if (!o.contract || cli.argc) {
        fprintf(stderr, "tern %s: give --contract FILE (see 'tern %s --help')\n", cli.cmd, cli.cmd);
        goto done;
    }
    struct contract c;
    char err[1024];
    if (contract_load(&c, o.contract, err, sizeof err) != 0) {
        fprintf(stderr, "tern %s: %s\n", cli.cmd, err);
        contract_free(&c);
        goto done;
    }
    struct contract_plan dry; /* a bad prompt-set line is the file's fault too: say so now */
    if (contract_plan(&c, 0, &dry, err, sizeof err) != 0) {
        fprintf(stderr, "tern %s: %s\n", cli.cmd, err);
        contract_free(&c);
        goto done;
    }
    contract_plan_free(&dry);
    if (o.sweep && c.arrival == CA_CLOSED) {
        fprintf(stderr, "tern %s: --sweep raises the arrival rate: %s has a closed loop "
                        "(workload.arrival = closed)\n", cli.cmd, c.path);
        contract_free(&c);
        goto done;
    }
    if (o.check) {
        printf("%s: ok: %ld requests, %d targets%s\n", c.path, c.requests, c.n_targets,
               c.quality_text || c.quality_prompts ? ", a quality gate" : "");
        contract_free(&c);
        rc = CLI_EXIT_OK;
        goto done;
    }
    rc = CLI_EXIT_FAIL;
    struct engine *e = open_engine(&cli, &o, &c);
    if (e) {
        rc = contract_run(&c, &o, &cli, e);
        engine_close(e);
    }
    contract_free(&c);
done:
    cli_free(&cli);
    return rc;
}
