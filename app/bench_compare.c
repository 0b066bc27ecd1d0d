/* bench_compare: 'tern bench compare RUN_A RUN_B' — what changed between two
 * stored bench or contract runs: every environment entry that differs
 * (runs.env, bench_env.c) and every target or figure both have, side by
 * side with its change, better or worse; a bench run's profiles are each
 * their own rows, never averaged. Without ids: the stored runs. */
#include "bench_compare.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_contract.h"
#include "cli.h"
#include "store.h"

enum { OPT_DB = CLI_OPT_CMD + 0xC0, OPT_JSON };

struct cmp_opts {
    const char *db;
    bool json;
};

static int on_opt(int c, const char *arg, void *ud)
{
    struct cmp_opts *o = ud;
    switch (c) {
    case OPT_DB: o->db = arg; return 0;
    case OPT_JSON: o->json = true; return 0;
    }
    return -1;
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double jnum(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* Every leaf of o as "a.b.c" -> its JSON text, into the object flat. */
static void flatten(cJSON *flat, const cJSON *o, const char *prefix)
{
    const cJSON *it;
    char key[512];
    if (cJSON_IsObject(o) || cJSON_IsArray(o)) {
        int i = 0;
        cJSON_ArrayForEach(it, o) {
            if (it->string) snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", it->string);
            else snprintf(key, sizeof key, "%s[%d]", prefix, i);
            i++;
            flatten(flat, it, key);
        }
        return;
    }
    char *v = cJSON_PrintUnformatted(o);
    if (v) cJSON_AddStringToObject(flat, prefix, v);
    free(v);
}

static void add_metric(cJSON *m, const char *k, double v, int pass)
{
    cJSON *r = cJSON_CreateObject();
    if (isfinite(v)) cJSON_AddNumberToObject(r, "v", v);
    else cJSON_AddNullToObject(r, "v");
    if (pass >= 0) cJSON_AddBoolToObject(r, "pass", pass);
    cJSON_AddItemToObject(m, k, r);
}

static void latency_metrics(cJSON *m, const char *prefix, const cJSON *s)
{
    static const char *const lat[] = {"ttft", "tpot", "e2e"}, *const pk[] = {"p50", "p90", "p99"};
    char k[256];
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            snprintf(k, sizeof k, "%s%s.%s", prefix, lat[a], pk[b]);
            add_metric(m, k, jnum(cJSON_GetObjectItem(s, lat[a]), pk[b]), -1);
        }
    static const char *const more[] = {"goodput_rps", "output_tok_s", "request_throughput_rps"};
    for (int a = 0; a < 3; a++) {
        snprintf(k, sizeof k, "%s%s", prefix, more[a]);
        add_metric(m, k, jnum(s, more[a]), -1);
    }
}

/* The figures of a run, by name: a contract's targets and gate rows, then
 * its summary; a bench run's every profile (never averaged together). */
static cJSON *run_metrics(const struct store_run_info *r)
{
    cJSON *m = cJSON_CreateObject(), *s = r->summary_json ? cJSON_Parse(r->summary_json) : NULL;
    const cJSON *it;
    if (!strcmp(r->kind, "contract")) {
        static const char *const lists[] = {"targets", "quality"};
        for (int l = 0; l < 2; l++)
            cJSON_ArrayForEach(it, cJSON_GetObjectItem(s, lists[l]))
                if (jstr(it, "target") && !cJSON_GetObjectItem(m, jstr(it, "target")))
                    add_metric(m, jstr(it, "target"), jnum(it, "measured"),
                               cJSON_IsTrue(cJSON_GetObjectItem(it, "pass")));
        latency_metrics(m, "summary.", cJSON_GetObjectItem(s, "summary"));
        const cJSON *sw = cJSON_GetObjectItem(s, "sweep");
        if (sw) add_metric(m, "sweep.max_rate_passing", jnum(sw, "max_rate_passing"), -1);
        char prefix[128];
        cJSON_ArrayForEach(it, cJSON_GetObjectItem(cJSON_GetObjectItem(s, "summary"), "by_tenant")) {
            snprintf(prefix, sizeof prefix, "tenant.%s.", it->string);
            latency_metrics(m, prefix, it);
        }
    } else if (!strcmp(r->kind, "bench-raw")) {
        cJSON_ArrayForEach(it, s) add_metric(m, it->string, it->valuedouble, -1);
    } else {
        char prefix[128];
        cJSON_ArrayForEach(it, s) {
            snprintf(prefix, sizeof prefix, "%s.", it->string);
            latency_metrics(m, prefix, it);
        }
    }
    cJSON_Delete(s);
    return m;
}

static bool higher_is_better(const char *k)
{
    return strstr(k, "goodput") || strstr(k, "tok_s") || strstr(k, "throughput") ||
           strstr(k, "attainment") || strstr(k, "accuracy") || strstr(k, "availability") ||
           strstr(k, "max_rate");
}

/* The unit of a compared figure, from its name. */
static const char *metric_unit(const char *k)
{
    if (strstr(k, "goodput") || strstr(k, "throughput") || strstr(k, "max_rate")) return "req/s";
    if (strstr(k, "tok_s") || strstr(k, "perplexity")) return "";
    if (strstr(k, "rate") || strstr(k, "attainment") || strstr(k, "accuracy") ||
        strstr(k, "availability"))
        return "share";
    return "s";
}

static const struct store_run_info *find_run(const struct store_runs *rs, long long id)
{
    for (size_t i = 0; i < rs->n; i++)
        if (rs->v[i].id == id) return &rs->v[i];
    return NULL;
}

static cJSON *env_diff(const struct store_run_info *a, const struct store_run_info *b)
{
    cJSON *ea = a->env_json ? cJSON_Parse(a->env_json) : NULL;
    cJSON *eb = b->env_json ? cJSON_Parse(b->env_json) : NULL;
    cJSON *fa = cJSON_CreateObject(), *fb = cJSON_CreateObject(), *out = cJSON_CreateArray();
    flatten(fa, ea, "");
    flatten(fb, eb, "");
    const cJSON *it;
    cJSON_ArrayForEach(it, fa) {
        const char *vb = jstr(fb, it->string);
        if (vb && !strcmp(vb, it->valuestring)) continue;
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "key", it->string);
        cJSON_AddStringToObject(d, "a", it->valuestring);
        if (vb) cJSON_AddStringToObject(d, "b", vb);
        else cJSON_AddNullToObject(d, "b");
        cJSON_AddItemToArray(out, d);
    }
    cJSON_ArrayForEach(it, fb) {
        if (cJSON_GetObjectItemCaseSensitive(fa, it->string)) continue;
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "key", it->string);
        cJSON_AddNullToObject(d, "a");
        cJSON_AddStringToObject(d, "b", it->valuestring);
        cJSON_AddItemToArray(out, d);
    }
    cJSON_Delete(ea);
    cJSON_Delete(eb);
    cJSON_Delete(fa);
    cJSON_Delete(fb);
    return out;
}

static cJSON *target_diff(const struct store_run_info *a, const struct store_run_info *b)
{
    cJSON *ma = run_metrics(a), *mb = run_metrics(b), *out = cJSON_CreateArray();
    const cJSON *it;
    cJSON_ArrayForEach(it, ma) {
        const cJSON *ib = cJSON_GetObjectItemCaseSensitive(mb, it->string);
        if (!ib) continue;
        double va = jnum(it, "v"), vb = jnum(ib, "v");
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "target", it->string);
        cJSON_AddItemToObject(d, "a", cJSON_Duplicate(cJSON_GetObjectItem(it, "v"), 1));
        cJSON_AddItemToObject(d, "b", cJSON_Duplicate(cJSON_GetObjectItem(ib, "v"), 1));
        const cJSON *pa = cJSON_GetObjectItem(it, "pass"), *pb = cJSON_GetObjectItem(ib, "pass");
        if (pa) cJSON_AddBoolToObject(d, "a_pass", cJSON_IsTrue(pa));
        if (pb) cJSON_AddBoolToObject(d, "b_pass", cJSON_IsTrue(pb));
        if (isfinite(va) && isfinite(vb) && va != 0) {
            double ch = 100 * (vb - va) / fabs(va);
            cJSON_AddNumberToObject(d, "change_pct", ch);
            bool better = higher_is_better(it->string) ? vb > va : vb < va;
            cJSON_AddStringToObject(d, "direction", vb == va ? "same" : better ? "better" : "worse");
        }
        cJSON_AddItemToArray(out, d);
    }
    cJSON_Delete(ma);
    cJSON_Delete(mb);
    return out;
}

static void print_compare(const struct store_run_info *a, const struct store_run_info *b,
                          const cJSON *envd, const cJSON *tgt)
{
    printf("run %lld (%s, %s%s%s) against run %lld (%s, %s%s%s)\n", (long long)a->id, a->kind,
           a->model ? a->model : "?", a->verdict ? ", " : "", a->verdict ? a->verdict : "",
           (long long)b->id, b->kind, b->model ? b->model : "?", b->verdict ? ", " : "",
           b->verdict ? b->verdict : "");
    const cJSON *d;
    if (!a->env_json || !b->env_json)
        printf("\nenvironment: not recorded for run %lld (stored before tern recorded it)\n",
               (long long)(!a->env_json ? a->id : b->id));
    else
        printf("\nenvironment: %d change%s\n", cJSON_GetArraySize(envd),
               cJSON_GetArraySize(envd) == 1 ? "" : "s");
    cJSON_ArrayForEach(d, envd) {
        const char *va = jstr(d, "a"), *vb = jstr(d, "b");
        const char *k = jstr(d, "key");
        printf("  %-36s %s -> %s\n", k ? k : "?", va ? va : "(absent)", vb ? vb : "(absent)");
    }
    if (!cJSON_GetArraySize(tgt)) {
        printf("\nno target or figure in common (%s run against %s run)\n", a->kind, b->kind);
        return;
    }
    printf("\n  %-36s %12s %12s %9s\n", "target", "A", "B", "change");
    cJSON_ArrayForEach(d, tgt) {
        const char *k = jstr(d, "target");
        const char *unit = metric_unit(k);
        char sa[32], sb[32], ch[48] = "";
        bench_contract_fmt(jnum(d, "a"), unit, sa, sizeof sa);
        bench_contract_fmt(jnum(d, "b"), unit, sb, sizeof sb);
        if (cJSON_GetObjectItem(d, "a_pass")) strcat(sa, cJSON_IsTrue(cJSON_GetObjectItem(d, "a_pass")) ? " ok" : " FAIL");
        if (cJSON_GetObjectItem(d, "b_pass")) strcat(sb, cJSON_IsTrue(cJSON_GetObjectItem(d, "b_pass")) ? " ok" : " FAIL");
        if (isfinite(jnum(d, "change_pct")))
            snprintf(ch, sizeof ch, "%+.1f%% %s", jnum(d, "change_pct"), jstr(d, "direction"));
        printf("  %-36s %12s %12s  %s\n", k, sa, sb, ch);
    }
}

/* The bench and contract runs, newest first: what compare takes. */
static void list_runs(const struct store_runs *rs)
{
    printf("%6s  %-19s  %-9s  %-7s  %-3s  %s\n", "run", "when (UTC)", "kind", "verdict", "env",
           "model");
    for (size_t i = 0; i < rs->n; i++) {
        const struct store_run_info *r = &rs->v[i];
        if (strcmp(r->kind, "bench") && strcmp(r->kind, "bench-raw") && strcmp(r->kind, "contract"))
            continue;
        char when[32] = "?";
        time_t t = (time_t)r->created;
        struct tm tm;
        if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
        printf("%6lld  %-19s  %-9s  %-7s  %-3s  %s\n", (long long)r->id, when, r->kind,
               r->verdict ? r->verdict : "-", r->env_json ? "yes" : "no", r->model ? r->model : "");
    }
}

int bench_compare_main(int argc, char **argv)
{
    static const char use[] =
        "usage: tern bench compare RUN_A RUN_B [--db PATH] [--json]\n"
        "       tern bench compare [--db PATH]     (lists the stored runs)\n"
        "\n"
        "What changed between two stored bench or contract runs (ids from the list,\n"
        "or a run's 'stored as run N'): every environment entry that differs (tern,\n"
        "engine, model hashes, batching policy, threads, ISA, GPU), and every target or\n"
        "figure of both, side by side with its change (better or worse; profiles never\n"
        "averaged).\n";
    static const struct option lo[] = {
        {"db", required_argument, 0, OPT_DB}, {"json", no_argument, 0, OPT_JSON}, {0, 0, 0, 0}};
    struct cmp_opts o = {0};
    struct cli cli;
    int rc = cli_parse(&cli, argc, argv, "", lo, on_opt, &o, use);
    bool json = o.json;
    if (rc >= 0) goto done;
    rc = CLI_EXIT_USAGE;
    long long id[2] = {0, 0};
    char *end;
    if (cli.argc != 2 && cli.argc != 0) {
        fprintf(stderr, "tern bench compare: give two run ids (none: list the runs)\n");
        goto done;
    }
    for (int k = 0; k < cli.argc; k++) {
        id[k] = strtoll(cli.argv[k], &end, 10);
        if (*end || id[k] <= 0) {
            fprintf(stderr, "tern bench compare: '%s' is not a run id\n", cli.argv[k]);
            goto done;
        }
    }
    rc = CLI_EXIT_FAIL;
    struct store *s;
    char err[1024];
    if (store_open(&s, o.db, STORE_READONLY, err, sizeof err) != 0) {
        fprintf(stderr, "tern bench compare: %s\n", err);
        goto done;
    }
    struct store_runs rs;
    if (store_runs(s, NULL, &rs, err, sizeof err) != 0) {
        fprintf(stderr, "tern bench compare: %s\n", err);
        store_close(s);
        goto done;
    }
    const struct store_run_info *a = find_run(&rs, id[0]), *b = find_run(&rs, id[1]);
    if (cli.argc == 0) {
        list_runs(&rs);
        rc = CLI_EXIT_OK;
    } else if (!a || !b) {
        fprintf(stderr, "tern bench compare: no run %lld in %s\n", !a ? id[0] : id[1], store_path(s));
    } else {
        cJSON *envd = env_diff(a, b), *tgt = target_diff(a, b);
        if (json) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddNumberToObject(j, "a", (double)a->id);
            cJSON_AddNumberToObject(j, "b", (double)b->id);
            cJSON_AddItemToObject(j, "environment", envd);
            cJSON_AddItemToObject(j, "targets", tgt);
            char *t = cJSON_Print(j);
            if (t) puts(t);
            free(t);
            cJSON_Delete(j);
        } else {
            print_compare(a, b, envd, tgt);
            cJSON_Delete(envd);
            cJSON_Delete(tgt);
        }
        rc = CLI_EXIT_OK;
    }
    store_runs_free(&rs);
    store_close(s);
done:
    cli_free(&cli);
    return rc;
}
