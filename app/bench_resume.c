/* bench_resume: reopening a conversation from the disk prompt cache
 * (bench_resume.h). Each round takes a fresh conversation of N tokens
 * (random ids of the model's vocabulary, a new seed each round, so no
 * round finds another's prefix) and:
 *   1. answers it in an engine with the disk cache in a private temporary
 *      directory, whose close saves the prefix (a session that ends);
 *   2. cold: a fresh engine without the cache gets the conversation plus a
 *      new turn of TURN tokens; its TTFT is the cold prefill;
 *   3. restored: a fresh engine with the cache gets the same prompt; its
 *      prefix comes from disk (the file is in the page cache, as on a
 *      reopen soon after), the rest is prefilled.
 * Cold and restored alternate round by round (interleaved), TTFT is the
 * engine's (arrival to first token; the model load is not in it). */
#define _POSIX_C_SOURCE 200809L
#include "bench_resume.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "cli.h"
#include "cli_opts.h"
#include "commands.h"
#include "cpu/threadpool.h"
#include "engine.h"
#include "store.h"

#define RESUME_TURN 24

enum { OPT_RESUME = CLI_OPT_CMD + 0x80, OPT_JSON };

struct ropts {
    const struct cli *cli;
    long n, reps;
    long threads;               /* eng.backend.threads, 0 resolved to the physical cores */
    struct engine_config eng;   /* the shared engine options (cli_engine_opt) */
    bool json;
};

static const char usage[] =
    "usage: tern bench --resume N [OPTIONS]\n"
    "\n"
    "  --resume N               reopen an N-token conversation with a new turn: its\n"
    "                           TTFT restored from the disk prompt cache against a\n"
    "                           cold prefill of the same prompt (rounds interleaved)\n"
    "  -r, --repetitions N      rounds (default 5)\n"
    "@threads physical cores\n"
    "@kv-type f16\n"
    "@backend auto\n"
    "  --json                   one JSON object: cold_ttft, restored_ttft (p50, p90, p99,\n"
    "                           max, seconds), ratio_p50, restored_tokens, entry_bytes\n";

const char *bench_resume_usage(void) { return usage; }

static int on_opt(int c, const char *arg, void *ud)
{
    struct ropts *o = ud;
    switch (c) {
    case OPT_RESUME: return cli_int(o->cli, "--resume", arg, 128, 1 << 20, &o->n);
    case 'r': return cli_int(o->cli, "--repetitions", arg, 1, 1000, &o->reps);
    case OPT_JSON: o->json = true; return 0;
    }
    /* the engine options every command shares */
    return cli_engine_opt(o->cli, c, arg, &o->eng, NULL, 0) == 0 ? 0 : -1;
}

static struct engine *open_eng(const struct ropts *o, const char *path, const char *dir,
                               int32_t ctx)
{
    struct engine_config c = o->eng;
    c.model_path = path;
    c.backend.threads = (int)o->threads;
    c.n_ctx = ctx;
    c.kv_disk_dir = dir;
    c.kv_disk_log = stderr;
    char err[1024];
    struct engine *e = engine_open(&c, err, sizeof err);
    if (!e) fprintf(stderr, "tern bench: %s\n", err);
    return e;
}

/* Runs one greedy request of the given tokens to its first token; its
 * metrics in *m. Returns 0, or -1 (said). */
static int ask(struct engine *e, const int32_t *toks, int32_t n, struct engine_metrics *m)
{
    struct engine_request q;
    memset(&q, 0, sizeof q);
    q.prompt_tokens = toks;
    q.n_prompt_tokens = n;
    engine_sampling_greedy(&q.sampling);
    q.max_tokens = 1;
    q.ignore_eos = true;
    char err[512];
    enum engine_status why;
    uint64_t id = engine_submit(e, &q, &why, err, sizeof err);
    if (!id) {
        fprintf(stderr, "tern bench: %s\n", err);
        return -1;
    }
    struct engine_event ev[16];
    for (bool fin = false; !fin;) {
        engine_wait_events(e, id, 0.5);
        int k = engine_poll_request(e, id, ev, 16);
        for (int i = 0; i < k; i++) {
            if (ev[i].type == ENGINE_EV_FINISHED) {
                fin = true;
                if (ev[i].metrics) {
                    *m = *ev[i].metrics;
                    m->token_t = NULL;
                }
                if (ev[i].status != ENGINE_OK && ev[i].status != ENGINE_LENGTH &&
                    ev[i].status != ENGINE_STOP) {
                    fprintf(stderr, "tern bench: the request ended %s: %s\n",
                            engine_status_name(ev[i].status),
                            ev[i].message ? ev[i].message : "");
                    fin = false;
                    for (int j = i; j < k; j++) engine_event_free(&ev[j]);
                    return -1;
                }
            }
            engine_event_free(&ev[i]);
        }
    }
    return 0;
}

/* Removes dir and its files; with bytes, only adds up their sizes. */
static void walk_dir(const char *dir, uint64_t *bytes)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        char p[4400];
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.') continue;
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            struct stat st;
            if (!bytes) unlink(p);
            else if (stat(p, &st) == 0) *bytes += (uint64_t)st.st_size;
        }
        closedir(d);
    }
    if (!bytes) rmdir(dir);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static struct store_pcts pcts(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_d);
    struct store_pcts p = {store_percentile(v, n, 50), store_percentile(v, n, 90),
                           store_percentile(v, n, 99), v[n - 1]};
    return p;
}

static void print_row(const char *label, const struct store_pcts *p)
{
    printf("  %-9s %9.1f ms %9.1f ms %9.1f ms %9.1f ms\n", label, p->p50 * 1e3, p->p90 * 1e3,
           p->p99 * 1e3, p->max * 1e3);
}

int bench_resume_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"resume", required_argument, 0, OPT_RESUME},
        {"repetitions", required_argument, 0, 'r'},
        CLI_SHARED(CLI_O_THREADS),
        CLI_SHARED(CLI_O_KV_TYPE),
        CLI_SHARED(CLI_O_BACKEND),
        {"json", no_argument, 0, OPT_JSON},
        {0, 0, 0, 0},
    };
    struct cli cli;
    struct ropts o = {.cli = &cli, .reps = 5};
    engine_config_default(&o.eng);
    int rc = cli_parse(&cli, argc, argv, "r:", longopts, on_opt, &o, usage);
    if (rc >= 0) goto out;
    rc = CLI_EXIT_USAGE;
    if (cli.argc > 0) {
        fprintf(stderr, "tern bench: unexpected argument '%s'\n", cli.argv[0]);
        goto out;
    }
    if (cli.n_urls > 0 || cli.route) {
        fprintf(stderr, "tern bench: --resume measures the local model's disk cache "
                        "(no --url or --route)\n");
        goto out;
    }
    o.threads = o.eng.backend.threads ? o.eng.backend.threads : tp_physical_cores();
    rc = CLI_EXIT_FAIL;
    char path[4096], err[1024], dir[4096];
    if (cli_model_path(&cli, path, sizeof path, err, sizeof err) != 0) {
        fprintf(stderr, "tern bench: %s\n", err);
        goto out;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tern-bench-resume-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "tern bench: cannot make a directory in %s\n", tmp ? tmp : "/tmp");
        goto out;
    }
    const int32_t n = (int32_t)o.n, n2 = n + RESUME_TURN, ctx = n2 + 64;
    int32_t *toks = malloc((size_t)n2 * sizeof *toks);
    double *cold = calloc((size_t)o.reps, sizeof *cold);
    double *warm = calloc((size_t)o.reps, sizeof *warm);
    int32_t restored = 0, computed = 0;
    uint64_t entry_bytes = 0;
    if (!toks || !cold || !warm) {
        fprintf(stderr, "tern bench: out of memory\n");
        goto done;
    }
    for (long r = 0; r < o.reps; r++) {
        /* 1. the session: its prefix saved at close */
        struct engine *e = open_eng(&o, path, dir, ctx);
        if (!e) goto done;
        struct engine_info info;
        engine_info(e, &info);
        uint64_t s = 0x9e3779b97f4a7c15ULL * (uint64_t)(r + 1);
        const uint32_t lo = 100, span = (uint32_t)(info.n_vocab > 20000 ? 20000 : info.n_vocab - lo);
        for (int32_t i = 0; i < n2; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            toks[i] = (int32_t)(lo + (uint32_t)(s % span));
        }
        struct engine_metrics m;
        int bad = ask(e, toks, n, &m);
        engine_close(e);
        if (bad) goto done;
        if (r == 0) walk_dir(dir, &entry_bytes); /* one conversation's entry */
        /* 2 and 3, in alternating order round by round */
        for (int k = 0; k < 2; k++) {
            bool w = (k + (int)r) % 2 == 1;
            e = open_eng(&o, path, w ? dir : NULL, ctx);
            if (!e) goto done;
            bad = ask(e, toks, n2, &m);
            engine_close(e);
            if (bad) goto done;
            (w ? warm : cold)[r] = m.ttft_s;
            if (w) {
                restored = m.n_restored;
                computed = m.n_computed;
            }
            if (!o.json)
                fprintf(stderr, "round %ld %-8s TTFT %8.1f ms (%d prompt tokens, %d restored)\n",
                        r + 1, w ? "restored" : "cold", m.ttft_s * 1e3, n2, m.n_restored);
        }
    }
    struct store_pcts pc = pcts(cold, (size_t)o.reps), pw = pcts(warm, (size_t)o.reps);
    double ratio = pc.p50 > 0 ? pw.p50 / pc.p50 : NAN;
    if (o.json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "resume_tokens", n);
        cJSON_AddNumberToObject(j, "turn_tokens", RESUME_TURN);
        cJSON_AddNumberToObject(j, "rounds", (double)o.reps);
        cJSON_AddNumberToObject(j, "threads", (double)o.threads);
        cJSON_AddItemToObject(j, "cold_ttft", store_pcts_json(&pc));
        cJSON_AddItemToObject(j, "restored_ttft", store_pcts_json(&pw));
        cJSON_AddNumberToObject(j, "ratio_p50", ratio);
        cJSON_AddNumberToObject(j, "restored_tokens", restored);
        cJSON_AddNumberToObject(j, "restored_prefilled_tokens", computed);
        cJSON_AddNumberToObject(j, "entry_bytes", (double)entry_bytes);
        char *t = cJSON_Print(j);
        if (t) printf("%s\n", t);
        free(t);
        cJSON_Delete(j);
    } else {
        printf("resume — a %d-token conversation reopened with a %d-token turn "
               "(%ld rounds, %ld thread%s)\n", n, RESUME_TURN, o.reps, o.threads,
               o.threads > 1 ? "s" : "");
        printf("  %-9s %12s %12s %12s %12s\n", "TTFT", "p50", "p90", "p99", "max");
        print_row("cold", &pc);
        print_row("restored", &pw);
        printf("  %d of %d prompt tokens restored from disk (%.1f MiB a conversation), %d "
               "prefilled; restored TTFT %.1f %% of cold (p50)\n", restored, n2,
               (double)entry_bytes / 1048576.0, computed, 100.0 * ratio);
    }
    rc = restored > 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    if (!restored) fprintf(stderr, "tern bench: nothing was restored from the disk cache\n");
done:
    walk_dir(dir, NULL);
    free(toks);
    free(cold);
    free(warm);
out:
    cli_free(&cli);
    return rc;
}
