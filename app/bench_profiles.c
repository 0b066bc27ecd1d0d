/* bench_profiles: 'tern bench --profile P' — serving load profiles run
 * through the engine's scheduler, as a serving team tests before promising a
 * latency: short, long-prompt, long-reply, mixed-priority, cancel,
 * slow-consumer, multi-turn (or all). Prompts of controlled token lengths are
 * cut from real text. Each profile reports TTFT / TPOT / ITL / E2E p50, p90,
 * p99 and max (exact, over its requests), throughput, goodput under the SLO,
 * KV peak and preemptions; --json writes one object per profile, --save
 * stores the run in the history database. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_env.h"
#include "bench_profiles.h"
#include "cli.h"
#include "cli_opts.h"
#include "clock.h"
#include "engine.h"
#include "route.h"
#include "store.h"

#define N_PROFILES 7
#define TURNS 4           /* multi-turn: turns per conversation */
#define EVENT_LIMIT 16    /* undrained events before a consumer counts as stalled */
#define STALL_AFTER 4     /* slow-consumer: tokens read before a consumer walks away */

struct profile {
    const char *name, *what;
    int32_t prompt, reply;       /* tokens (before --scale) */
};

static const struct profile profiles[N_PROFILES] = {
    {"short", "short prompts, short replies", 32, 32},
    {"long-prompt", "long prompts, short replies", 1024, 16},
    {"long-reply", "short prompts, long replies", 32, 384},
    {"mixed-priority", "interactive requests while a batch backlog runs", 48, 32},
    {"cancel", "a third of the requests cancelled mid-stream", 64, 128},
    {"slow-consumer", "a third of the consumers stop reading", 32, 192},
    {"multi-turn", "conversations resending their history each turn", 64, 32},
};
enum { P_SHORT, P_LONG_PROMPT, P_LONG_REPLY, P_MIXED, P_CANCEL, P_SLOW, P_MULTI };

struct bopts {
    const struct cli *cli;
    unsigned mask;               /* profiles to run */
    long requests, concurrency;
    struct engine_config eng;    /* the shared engine options (cli_engine_opt) */
    char draft_model[4096];      /* --draft-model, resolved */
    double rate, slo_ttft, slo_tpot, scale;
    unsigned long long seed;
    const char *json, *trace, *texts, *db, *requests_out;
    bool save, quiet;
    bool custom;                 /* a bench_load plan: every request keeps its arrival */
    long cap;                    /* custom open loop: most requests in flight, 0 = none */
};

enum {
    OPT_PROFILE = CLI_OPT_CMD + 0x40, OPT_REQUESTS, OPT_CONCURRENCY, OPT_RATE,
    OPT_SLO_TTFT, OPT_SLO_TPOT, OPT_JSON, OPT_TRACE, OPT_SAVE, OPT_TEXTS, OPT_DB, OPT_SCALE,
    OPT_REQUESTS_OUT,
};

/* One request of a profile, and what came back. */
struct breq {
    int32_t prompt_tokens, max_tokens;
    enum engine_priority prio;
    int cancel_after, stall_after;   /* tokens; -1: never */
    int conv, turn;                  /* multi-turn; turn 0 otherwise */
    bool unstreamed;                 /* custom: measured as a non-streaming client */
    double submitted_at;             /* app clock of the (last) submit */
    double arrival;                  /* seconds after the profile starts (--rate) */
    uint64_t id;
    bool submitted, admitted, stalled, finished;
    int n_tokens;
    char *prompt;                    /* raw prompt, or this turn's user text */
    char *reply;                     /* multi-turn: the generated text */
    size_t reply_len;
    enum engine_status status;
    struct engine_metrics m;         /* token_t owned here */
    double not_before;               /* a 429's Retry-After: no resubmit before (app clock) */
    int retries;
    struct route_trail trail;        /* --route: where it went (served -1: no route) */
};
#define BENCH_MAX_RETRIES 3

struct bench {
    const struct bopts *o;
    struct engine *e;
    struct engine_info info;
    char *corpus;                    /* every text, joined */
    size_t corpus_len;
    uint64_t rng;
    bool progress;
    cJSON *results;
    FILE *requests_out;              /* --requests-out: one JSON line per request */
    double t0;                       /* start of the running profile (app clock) */
};

/* ------------------------------------------------------------ utilities */

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* splitmix64: seeded, so --seed reproduces prompts, arrivals and choices. */
static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rnd01(uint64_t *s) { return (double)(rnd(s) >> 11) * 0x1.0p-53; }

/* ---------------------------------------------------------------- texts */

static int append_file(struct bench *b, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = n > 0 ? realloc(b->corpus, b->corpus_len + (size_t)n + 3) : NULL;
    if (!p) {
        fclose(f);
        return -1;
    }
    b->corpus = p;
    size_t got = fread(p + b->corpus_len, 1, (size_t)n, f);
    fclose(f);
    b->corpus_len += got;
    memcpy(p + b->corpus_len, "\n\n", 3);
    b->corpus_len += 2;
    return 0;
}

/* The source tree holding this binary (build dirs live inside it): walks up
 * from the executable until data/bench-texts.txt is found. */
static int source_root(char *buf, size_t n)
{
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return -1;
    exe[k] = 0;
    char probe[PATH_MAX + 32];
    for (int up = 0; up < 5; up++) {
        char *slash = strrchr(exe, '/');
        if (!slash || slash == exe) return -1;
        *slash = 0;
        snprintf(probe, sizeof probe, "%s/data/bench-texts.txt", exe);
        if (access(probe, R_OK) == 0) {
            snprintf(buf, n, "%s", exe);
            return 0;
        }
    }
    return -1;
}

/* PREFIX/share/tern/bench-texts.txt of an installed binary (PREFIX/bin/tern). */
static int installed_texts(char *buf, size_t n)
{
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return -1;
    exe[k] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = 0; /* PREFIX/bin */
    snprintf(buf, n, "%s/../share/tern/bench-texts.txt", exe);
    return 0;
}

static int load_dir(struct bench *b, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *de;
    char path[PATH_MAX];
    int n = 0;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".txt") != 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (append_file(b, path) == 0) n++;
    }
    closedir(d);
    return n;
}

/* --texts DIR (or the source tree's ../shared/texts) plus data/bench-texts.txt. */
static int load_texts(struct bench *b, char *err, size_t errlen)
{
    char root[PATH_MAX], path[PATH_MAX + 64];
    bool have_root = source_root(root, sizeof root) == 0;
    int n = 0;
    if (b->o->texts) {
        n = load_dir(b, b->o->texts);
        if (n <= 0) {
            snprintf(err, errlen, "--texts %s: no readable .txt file there", b->o->texts);
            return -1;
        }
    } else if (have_root) {
        snprintf(path, sizeof path, "%s/../shared/texts", root);
        n = load_dir(b, path) > 0;
    }
    char installed[PATH_MAX + 64] = "";
    if (have_root) {
        snprintf(path, sizeof path, "%s/data/bench-texts.txt", root);
        n += append_file(b, path) == 0;
    } else if (installed_texts(installed, sizeof installed) == 0) {
        n += append_file(b, installed) == 0; /* an installed tern: PREFIX/share/tern */
    }
    if (n <= 0 || b->corpus_len < 1024) {
        snprintf(err, errlen,
                 "no prompt texts found (looked for %s): pass --texts DIR (a folder of .txt "
                 "files of real prose)",
                 installed[0] ? installed : "data/bench-texts.txt beside the source tree");
        return -1;
    }
    return 0;
}

/* Cuts a prompt of exactly-or-just-under ntok tokens (as the engine counts
 * them) from the corpus at a seeded word boundary: binary search on length. */
static char *make_text(struct bench *b, int32_t ntok)
{
    size_t want = (size_t)ntok * 12 + 64, len = b->corpus_len;
    if (want > len / 2) want = len / 2;
    size_t start = (size_t)(rnd(&b->rng) % (len - want));
    while (start < len && b->corpus[start] != ' ' && b->corpus[start] != '\n') start++;
    while (start < len && (b->corpus[start] == ' ' || b->corpus[start] == '\n')) start++;
    const char *t = b->corpus + start;
    size_t lo = 1, hi = want < len - start ? want : len - start, best = 1;
    char err[256];
    while (lo <= hi) {
        size_t mid = (lo + hi) / 2, cut = mid;
        while (cut > 1 && ((unsigned char)t[cut] & 0xC0) == 0x80) cut--; /* whole characters */
        int64_t c = engine_count_tokens(b->e, t, cut, err, sizeof err);
        if (c < 0) break;
        if (c <= ntok) {
            best = cut;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return strndup(t, best);
}

/* --------------------------------------------------------------- driver */

static void take_event(struct bench *b, struct breq *r, struct engine_event *ev)
{
    if (ev->type == ENGINE_EV_TOKEN && ev->token != -1) r->n_tokens++; /* -2: remote token, id unknown */
    if (ev->type == ENGINE_EV_ADMITTED) r->admitted = true;
    if (ev->type == ENGINE_EV_TOKEN && ev->text && r->turn >= 0) { /* multi-turn history */
        size_t n = strlen(ev->text);
        char *p = realloc(r->reply, r->reply_len + n + 1);
        if (p) {
            memcpy(p + r->reply_len, ev->text, n + 1);
            r->reply = p;
            r->reply_len += n;
        }
    }
    if (ev->type == ENGINE_EV_FINISHED && ev->status == ENGINE_REJECTED && ev->metrics &&
        ev->metrics->retry_after_s > 0 && r->retries < BENCH_MAX_RETRIES && !r->n_tokens) {
        /* The server said when to come back (429/503 Retry-After): honour it
         * instead of counting a rejection the server asked us to retry. */
        r->retries++;
        r->not_before = app_now_s() + ev->metrics->retry_after_s;
        r->submitted = r->admitted = false;
        engine_event_free(ev);
        return;
    }
    if (ev->type == ENGINE_EV_FINISHED) {
        r->finished = true;
        r->status = ev->status;
        r->trail.served = -1;
        if (route_is(b->e)) route_trail(b->e, r->id, &r->trail);
        if (ev->metrics) {
            r->m = *ev->metrics;
            ev->metrics->token_t = NULL; /* keep the token times */
        }
    }
    if (!r->finished && r->cancel_after >= 0 && r->n_tokens >= r->cancel_after) {
        engine_cancel(b->e, r->id);
        r->cancel_after = -1;
    }
    if (!r->finished && r->stall_after >= 0 && r->n_tokens >= r->stall_after) r->stalled = true;
    engine_event_free(ev);
}

/* Returns the number of events taken. */
static int drain(struct bench *b, struct breq *r)
{
    struct engine_event ev[32];
    int total = 0, k;
    while (!r->finished && (k = engine_poll_request(b->e, r->id, ev, 32)) > 0) {
        for (int i = 0; i < k; i++) take_event(b, r, &ev[i]);
        total += k;
    }
    return total;
}

/* Multi-turn: the conversation so far (earlier turns with their replies),
 * then this turn's question. */
static int submit_chat(struct bench *b, struct breq *v, int i, struct engine_request *q)
{
    struct engine_message msgs[2 * TURNS + 1];
    int n = 0;
    msgs[n++] = (struct engine_message){"system", "You are a helpful assistant. Answer briefly."};
    for (int k = i - v[i].turn; k < i; k++) {
        msgs[n++] = (struct engine_message){"user", v[k].prompt};
        msgs[n++] = (struct engine_message){"assistant", v[k].reply ? v[k].reply : ""};
    }
    msgs[n++] = (struct engine_message){"user", v[i].prompt};
    q->messages = msgs;
    q->n_messages = n;
    enum engine_status why = ENGINE_OK;
    char err[512];
    v[i].id = engine_submit(b->e, q, &why, err, sizeof err);
    if (!v[i].id) {
        v[i].finished = true;
        v[i].status = why;
    }
    return 0;
}

static void submit(struct bench *b, struct breq *v, int i)
{
    struct engine_request q = {0};
    engine_sampling_default(&q.sampling);
    q.sampling.seed = b->o->seed + (uint64_t)i;
    q.max_tokens = v[i].max_tokens;
    q.priority = v[i].prio;
    q.ignore_eos = true; /* replies of the profile's length, whatever the model says */
    q.tag = (uint64_t)i;
    v[i].submitted = true;
    v[i].submitted_at = app_now_s();
    if (v[i].turn >= 0 && v[i].conv >= 0) {
        submit_chat(b, v, i, &q);
        return;
    }
    q.prompt = v[i].prompt;
    enum engine_status why = ENGINE_OK;
    char err[512];
    v[i].id = engine_submit(b->e, &q, &why, err, sizeof err);
    if (!v[i].id) {
        v[i].finished = true;
        v[i].status = why;
        if (!b->o->quiet) fprintf(stderr, "tern bench: request %d refused: %s\n", i, err);
    }
}

/* Whether request i may start now: arrivals (--rate) or a free slot
 * (--concurrency) among its class; a later turn waits for the one before. */
static bool ready(const struct bench *b, const struct breq *v, int i, double t, int active,
                  bool backlog_running)
{
    if (v[i].submitted) return false;
    if (v[i].not_before > 0 && app_now_s() < v[i].not_before) return false;
    if (v[i].turn > 0 && !v[i - 1].finished) return false;
    if (b->o->custom) /* a contract's plan: its arrivals, within its peak */
        return b->o->rate > 0 ? t >= v[i].arrival && (!b->o->cap || active < b->o->cap)
                              : active < b->o->concurrency;
    if (v[i].prio == ENGINE_PRIO_BATCH) return true; /* the backlog goes in at once */
    if (!backlog_running) return false;
    if (b->o->rate > 0) return t >= v[i].arrival;
    return active < b->o->concurrency;
}

static void progress(const struct bench *b, const char *name, int done, int n, double t)
{
    if (!b->progress) return;
    int w = 30, f = n ? done * w / n : w;
    fprintf(stderr, "\r%-15s [%.*s%*s] %d/%d  %.1f s ", name, f,
            "##############################", w - f, "", done, n, t);
    fflush(stderr);
}

/* Runs the requests of one profile to completion; returns its duration and
 * the KV peak (blocks in use). */
static double run_requests(struct bench *b, const char *name, struct breq *v, int n,
                           int32_t *kv_peak)
{
    double t0 = b->t0 = app_now_s(), last_draw = 0, last_kv = 0;
    int done = 0;
    *kv_peak = 0;
    while (done < n) {
        double t = app_now_s() - t0;
        int active = 0;
        /* Interactive work arrives once the batch backlog is in the engine. */
        bool has_batch = false, backlog = false;
        for (int i = 0; i < n; i++) {
            active += v[i].submitted && !v[i].finished && !v[i].stalled &&
                      (v[i].prio == ENGINE_PRIO_INTERACTIVE || b->o->custom);
            if (v[i].prio != ENGINE_PRIO_BATCH) continue;
            has_batch = true;
            backlog |= v[i].admitted || v[i].finished;
        }
        backlog |= !has_batch;
        for (int i = 0; i < n; i++)
            if (ready(b, v, i, t, active, backlog)) {
                submit(b, v, i);
                active += v[i].prio == ENGINE_PRIO_INTERACTIVE || b->o->custom;
            }
        int got = 0, live = 0;
        for (int i = 0; i < n; i++) {
            if (!v[i].submitted || v[i].finished) continue;
            /* A stalled consumer is read again only once nothing else is left:
             * by then the engine has ended it (or it finished by itself). */
            if (v[i].stalled) continue;
            live++;
            got += drain(b, &v[i]);
        }
        bool waiting = false;
        for (int i = 0; i < n; i++) waiting |= !v[i].submitted;
        /* KV occupancy is sampled (every 10 ms): the peak is a lower bound. */
        struct engine_stats st;
        bool only_stalled = !live && !waiting;
        if (only_stalled || t - last_kv >= 0.01) {
            engine_snapshot(b->e, &st);
            if (st.kv_used > *kv_peak) *kv_peak = st.kv_used;
            last_kv = t;
        }
        /* Only stalled consumers left: their events are read once the engine
         * has ended them (reading earlier would un-stall them). */
        if (only_stalled && !st.running && !st.waiting)
            for (int i = 0; i < n; i++)
                if (v[i].stalled && !v[i].finished) {
                    engine_wait_events(b->e, v[i].id, 0.05);
                    got += drain(b, &v[i]);
                }
        done = 0;
        for (int i = 0; i < n; i++) done += v[i].finished;
        if (t - last_draw >= 0.1) {
            progress(b, name, done, n, t);
            last_draw = t;
        }
        if (!got) sleep_s(0.001);
    }
    if (b->progress) fprintf(stderr, "\r%*s\r", 60, "");
    return app_now_s() - t0;
}

/* ------------------------------------------------------------- profiles */

static int32_t scaled(const struct bench *b, int32_t tokens)
{
    double v = tokens * b->o->scale;
    return v < 4 ? 4 : (int32_t)v;
}

/* Plans the requests of profile p (prompts cut, arrivals drawn). */
static struct breq *plan(struct bench *b, int p, int *n_out)
{
    const struct profile *pr = &profiles[p];
    int n = (int)b->o->requests;
    if (p == P_MULTI) n = (n + TURNS - 1) / TURNS * TURNS;
    struct breq *v = calloc((size_t)n, sizeof *v);
    if (!v) return NULL;
    int32_t ctx = b->info.n_ctx > 0 ? b->info.n_ctx : 2048;
    double arrival = 0;
    for (int i = 0; i < n; i++) {
        struct breq *r = &v[i];
        r->trail.served = -1;
        r->prompt_tokens = scaled(b, pr->prompt);
        r->max_tokens = scaled(b, pr->reply);
        r->prio = ENGINE_PRIO_INTERACTIVE;
        r->cancel_after = r->stall_after = -1;
        r->conv = r->turn = -1;
        if (p == P_MIXED && i % 2 == 0) { /* half the requests: a batch backlog */
            r->prio = ENGINE_PRIO_BATCH;
            r->prompt_tokens = scaled(b, 256);
            r->max_tokens = scaled(b, 96);
        }
        if (p == P_CANCEL && i % 3 == 1)
            r->cancel_after = 1 + (int)(rnd(&b->rng) % (uint64_t)(r->max_tokens / 2));
        if (p == P_SLOW && i % 3 == 1) { /* long enough to outrun the event limit */
            r->stall_after = STALL_AFTER;
            if (r->max_tokens < 2 * EVENT_LIMIT) r->max_tokens = 2 * EVENT_LIMIT;
        }
        if (p == P_MULTI) {
            r->conv = i / TURNS;
            r->turn = i % TURNS;
        }
        /* A small --ctx: replies take at most half of it, the prompt the rest. */
        if (r->max_tokens > ctx / 2) r->max_tokens = ctx / 2;
        if (r->prompt_tokens + r->max_tokens > ctx - 8) r->prompt_tokens = ctx - 8 - r->max_tokens;
        if (r->prompt_tokens < 2) r->prompt_tokens = 2;
        r->prompt = make_text(b, r->prompt_tokens);
        if (b->o->rate > 0 && r->prio == ENGINE_PRIO_INTERACTIVE && r->turn <= 0) {
            arrival += -log(1.0 - rnd01(&b->rng)) / b->o->rate; /* Poisson process */
            r->arrival = arrival;
        }
        if (!r->prompt) {
            free(v);
            return NULL;
        }
    }
    *n_out = n;
    return v;
}

static void free_plan(struct breq *v, int n)
{
    for (int i = 0; i < n; i++) {
        free(v[i].prompt);
        free(v[i].reply);
        free(v[i].m.token_t);
    }
    free(v);
}

/* ------------------------------------------------------------- summary */

struct series {
    double *v;
    size_t n;
};

static void series_add(struct series *s, double x)
{
    if (isfinite(x) && x >= 0) s->v[s->n++] = x;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static struct store_pcts pcts(struct series *s)
{
    struct store_pcts p = {NAN, NAN, NAN, NAN};
    if (!s->n) return p;
    qsort(s->v, s->n, sizeof *s->v, cmp_d);
    p.p50 = store_percentile(s->v, s->n, 50);
    p.p90 = store_percentile(s->v, s->n, 90);
    p.p99 = store_percentile(s->v, s->n, 99);
    p.max = s->v[s->n - 1];
    return p;
}

static bool completed(enum engine_status s)
{
    return s == ENGINE_OK || s == ENGINE_STOP || s == ENGINE_LENGTH;
}

/* The four latency objects over requests matching prio (-1: all). */
static void add_latencies(cJSON *o, const struct breq *v, int n, int prio)
{
    size_t ntok = 0;
    for (int i = 0; i < n; i++) ntok += (size_t)(v[i].m.n_generated > 0 ? v[i].m.n_generated : 0);
    struct series s[4];
    for (int k = 0; k < 4; k++) s[k].v = malloc((ntok + (size_t)n + 1) * sizeof(double));
    for (int k = 0; k < 4; k++) s[k].n = 0;
    for (int i = 0; i < n; i++) {
        const struct engine_metrics *m = &v[i].m;
        if (prio >= 0 && (int)v[i].prio != prio) continue;
        if (m->n_generated > 0) series_add(&s[0], m->ttft_s);
        if (m->n_generated > 1) series_add(&s[1], m->tpot_s);
        for (int k = 1; m->token_t && k < m->n_generated; k++)
            series_add(&s[2], m->token_t[k] - m->token_t[k - 1]);
        if (completed(v[i].status)) series_add(&s[3], m->e2e_s);
    }
    const char *names[4] = {"ttft", "tpot", "itl", "e2e"};
    for (int k = 0; k < 4; k++) {
        struct store_pcts p = pcts(&s[k]);
        cJSON_AddItemToObject(o, names[k], store_pcts_json(&p));
        free(s[k].v);
    }
}

/* multi-turn: how prefix reuse shows up turn by turn. */
static cJSON *by_turn(const struct breq *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int t = 0; t < TURNS; t++) {
        double ttft[256];
        struct series s = {ttft, 0};
        long long prompt = 0, cached = 0;
        for (int i = 0; i < n && s.n < 256; i++) {
            if (v[i].turn != t) continue;
            prompt += v[i].m.n_prompt;
            cached += v[i].m.n_cached;
            if (v[i].m.n_generated > 0) series_add(&s, v[i].m.ttft_s);
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "turn", t + 1);
        cJSON_AddNumberToObject(o, "prompt_tokens", (double)prompt);
        cJSON_AddNumberToObject(o, "cached_prompt_tokens", (double)cached);
        struct store_pcts p = pcts(&s);
        cJSON_AddItemToObject(o, "ttft", store_pcts_json(&p));
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

/* Several --url endpoints: every figure again per endpoint (the requests each
 * one served, from the metrics' endpoint index). */
static void add_by_endpoint(cJSON *o, const struct breq *v, int n, double dur)
{
    int32_t n_ep = 0;
    for (int i = 0; i < n; i++)
        if (v[i].m.remote && v[i].m.endpoint + 1 > n_ep) n_ep = v[i].m.endpoint + 1;
    if (n_ep < 2) return;
    struct breq *sub = malloc((size_t)n * sizeof *sub);
    cJSON *a = cJSON_AddArrayToObject(o, "by_endpoint");
    for (int32_t e = 0; sub && a && e < n_ep; e++) {
        int k = 0;
        long long gen = 0, ok = 0, err = 0;
        for (int i = 0; i < n; i++)
            if (v[i].m.endpoint == e) {
                sub[k++] = v[i];
                gen += v[i].m.n_generated;
                if (completed(v[i].status)) ok++;
                else err++;
            }
        cJSON *q = cJSON_CreateObject();
        cJSON_AddNumberToObject(q, "endpoint", e);
        cJSON_AddNumberToObject(q, "requests", k);
        cJSON_AddNumberToObject(q, "completed", (double)ok);
        cJSON_AddNumberToObject(q, "not_completed", (double)err);
        cJSON_AddNumberToObject(q, "output_tok_s", dur > 0 ? gen / dur : 0);
        add_latencies(q, sub, k, -1);
        cJSON_AddItemToArray(a, q);
    }
    free(sub);
}

/* --route: how many requests each target served, the moves and their cost
 * (time on a target before moving: the time to fall back). */
static void add_route(cJSON *o, struct engine *e, const struct breq *v, int n)
{
    cJSON *r = cJSON_AddObjectToObject(o, "route");
    cJSON *by = cJSON_AddObjectToObject(r, "served_by");
    int moved = 0, hops = 0;
    double worst = 0, sum = 0;
    for (int32_t t = 0; t < route_n_targets(e); t++) {
        int k = 0;
        for (int i = 0; i < n; i++) k += v[i].trail.served == t;
        cJSON_AddNumberToObject(by, route_target_name(e, t), k);
    }
    for (int i = 0; i < n; i++) {
        moved += v[i].trail.n_hops > 0;
        for (int32_t h = 0; h < v[i].trail.n_hops; h++) {
            double w = v[i].trail.hop[h].waited_s;
            hops++;
            sum += w;
            if (w > worst) worst = w;
        }
    }
    cJSON_AddNumberToObject(r, "moved_requests", moved);
    cJSON_AddNumberToObject(r, "fallbacks", hops);
    cJSON_AddNumberToObject(r, "fallback_mean_s", hops ? sum / hops : 0);
    cJSON_AddNumberToObject(r, "fallback_max_s", worst);
}

static cJSON *summarize(const struct bench *b, int p, const struct breq *v, int n, double dur,
                        int32_t kv_peak, int32_t kv_total)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "description", p < 0 ? "a contract's workload" : profiles[p].what);
    cJSON_AddNumberToObject(o, "requests", n);
    add_latencies(o, v, n, -1);
    cJSON *st = cJSON_AddObjectToObject(o, "statuses");
    long long prompt = 0, cached = 0, gen = 0, preempt = 0, good = 0, ok = 0;
    long long spec_steps = 0, drafted = 0, accepted = 0; /* --lookup */
    int count[ENGINE_N_STATUS] = {0};
    for (int i = 0; i < n; i++) {
        const struct engine_metrics *m = &v[i].m;
        if ((unsigned)v[i].status < ENGINE_N_STATUS) count[v[i].status]++;
        prompt += m->n_prompt;
        cached += m->n_cached;
        gen += m->n_generated;
        preempt += m->n_preempted;
        spec_steps += m->n_spec_steps;
        drafted += m->n_draft_tokens;
        accepted += m->n_accepted_tokens;
        if (!completed(v[i].status)) continue;
        ok++;
        if (m->ttft_s <= b->o->slo_ttft && (m->n_generated < 2 || m->tpot_s <= b->o->slo_tpot))
            good++;
    }
    for (int s = 0; s < ENGINE_N_STATUS; s++)
        if (count[s]) cJSON_AddNumberToObject(st, engine_status_name((enum engine_status)s), count[s]);
    if (route_is(b->e)) add_route(o, b->e, v, n);
    cJSON_AddNumberToObject(o, "prompt_tokens", (double)prompt);
    cJSON_AddNumberToObject(o, "cached_prompt_tokens", (double)cached);
    cJSON_AddNumberToObject(o, "generated_tokens", (double)gen);
    cJSON_AddNumberToObject(o, "duration_s", dur);
    cJSON_AddNumberToObject(o, "request_throughput_rps", dur > 0 ? ok / dur : 0);
    cJSON_AddNumberToObject(o, "output_tok_s", dur > 0 ? gen / dur : 0);
    cJSON_AddNumberToObject(o, "total_tok_s", dur > 0 ? (prompt - cached + gen) / dur : 0);
    cJSON_AddNumberToObject(o, "goodput_rps", dur > 0 ? good / dur : 0);
    cJSON_AddNumberToObject(o, "slo_met", (double)good);
    cJSON_AddNumberToObject(o, "slo_ttft_s", b->o->slo_ttft);
    cJSON_AddNumberToObject(o, "slo_tpot_s", b->o->slo_tpot);
    if (kv_total > 0) {
        cJSON_AddNumberToObject(o, "kv_peak_blocks", kv_peak);
        cJSON_AddNumberToObject(o, "kv_total_blocks", kv_total);
    } else { /* a remote server that does not export its KV blocks */
        cJSON_AddNullToObject(o, "kv_peak_blocks");
        cJSON_AddNullToObject(o, "kv_total_blocks");
    }
    cJSON_AddNumberToObject(o, "preemptions", (double)preempt);
    if (spec_steps > 0) { /* speculative decoding (vLLM's spec_decode counters) */
        cJSON_AddNumberToObject(o, "spec_decode_num_drafts", (double)spec_steps);
        cJSON_AddNumberToObject(o, "spec_decode_num_draft_tokens", (double)drafted);
        cJSON_AddNumberToObject(o, "spec_decode_num_accepted_tokens", (double)accepted);
        cJSON_AddNumberToObject(o, "spec_acceptance_rate",
                                drafted ? (double)accepted / (double)drafted : 0);
        cJSON_AddNumberToObject(o, "spec_tokens_per_step",
                                1.0 + (double)accepted / (double)spec_steps);
    }
    if (p == P_MIXED) {
        cJSON *by = cJSON_AddObjectToObject(o, "by_priority");
        add_latencies(cJSON_AddObjectToObject(by, "interactive"), v, n, ENGINE_PRIO_INTERACTIVE);
        add_latencies(cJSON_AddObjectToObject(by, "batch"), v, n, ENGINE_PRIO_BATCH);
    }
    if (p == P_MULTI) cJSON_AddItemToObject(o, "by_turn", by_turn(v, n));
    add_by_endpoint(o, v, n, dur);
    return o;
}

static void fmt_dur(double s, char *buf, size_t n)
{
    if (!isfinite(s) || s < 0)
        snprintf(buf, n, "-");
    else if (s < 1)
        snprintf(buf, n, "%.1f ms", s * 1e3);
    else
        snprintf(buf, n, "%.2f s", s);
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void print_profile(const char *name, const cJSON *o)
{
    printf("%s — %s\n", name, cJSON_GetObjectItem(o, "description")->valuestring);
    printf("  %d requests in %.2f s:", (int)num(o, "requests"), num(o, "duration_s"));
    const cJSON *st;
    cJSON_ArrayForEach(st, cJSON_GetObjectItem(o, "statuses"))
        printf(" %s %d", st->string, (int)st->valuedouble);
    printf("\n  %.2f req/s · %.1f tok/s out · %.1f tok/s total · goodput %.2f req/s "
           "(%d met TTFT ≤ %g s, TPOT ≤ %g s)\n",
           num(o, "request_throughput_rps"), num(o, "output_tok_s"), num(o, "total_tok_s"),
           num(o, "goodput_rps"), (int)num(o, "slo_met"), num(o, "slo_ttft_s"),
           num(o, "slo_tpot_s"));
    printf("  %-5s %10s %10s %10s %10s\n", "", "p50", "p90", "p99", "max");
    const char *keys[4] = {"ttft", "tpot", "itl", "e2e"}, *labels[4] = {"TTFT", "TPOT", "ITL", "E2E"};
    for (int k = 0; k < 4; k++) {
        const cJSON *l = cJSON_GetObjectItem(o, keys[k]);
        char a[4][24];
        const char *pk[4] = {"p50", "p90", "p99", "max"};
        for (int j = 0; j < 4; j++) fmt_dur(num(l, pk[j]), a[j], sizeof a[j]);
        printf("  %-5s %10s %10s %10s %10s\n", labels[k], a[0], a[1], a[2], a[3]);
    }
    char kvs[64] = "KV n/a from this server";
    if (isfinite(num(o, "kv_total_blocks")))
        snprintf(kvs, sizeof kvs, "KV peak %d/%d blocks", (int)num(o, "kv_peak_blocks"),
                 (int)num(o, "kv_total_blocks"));
    const cJSON *route = cJSON_GetObjectItem(o, "route"), *sb;
    if (route) {
        printf("  route: %d of %d requests moved (%d fallbacks, mean %.3f s, max %.3f s on a "
               "target before moving); served by",
               (int)num(route, "moved_requests"), (int)num(o, "requests"),
               (int)num(route, "fallbacks"), num(route, "fallback_mean_s"),
               num(route, "fallback_max_s"));
        cJSON_ArrayForEach(sb, cJSON_GetObjectItem(route, "served_by"))
            printf(" %s %d", sb->string, (int)sb->valuedouble);
        printf("\n");
    }
    printf("  prompt %d tokens (%d cached) · generated %d · %s · %d preemptions\n",
           (int)num(o, "prompt_tokens"), (int)num(o, "cached_prompt_tokens"),
           (int)num(o, "generated_tokens"), kvs, (int)num(o, "preemptions"));
    const cJSON *turns = cJSON_GetObjectItem(o, "by_turn"), *t;
    cJSON_ArrayForEach(t, turns) {
        char a[24];
        fmt_dur(num(cJSON_GetObjectItem(t, "ttft"), "p50"), a, sizeof a);
        printf("  turn %d: TTFT p50 %s, %d of %d prompt tokens cached\n", (int)num(t, "turn"), a,
               (int)num(t, "cached_prompt_tokens"), (int)num(t, "prompt_tokens"));
    }
    const cJSON *ep;
    cJSON_ArrayForEach(ep, cJSON_GetObjectItem(o, "by_endpoint")) {
        char a[24], c[24];
        fmt_dur(num(cJSON_GetObjectItem(ep, "ttft"), "p50"), a, sizeof a);
        fmt_dur(num(cJSON_GetObjectItem(ep, "tpot"), "p50"), c, sizeof c);
        printf("  endpoint %d: %d requests (%d not completed) · %.1f tok/s out · TTFT p50 %s · "
               "TPOT p50 %s\n",
               (int)num(ep, "endpoint"), (int)num(ep, "requests"), (int)num(ep, "not_completed"),
               num(ep, "output_tok_s"), a, c);
    }
    const cJSON *by = cJSON_GetObjectItem(o, "by_priority");
    if (by) {
        char a[24], c[24];
        fmt_dur(num(cJSON_GetObjectItem(cJSON_GetObjectItem(by, "interactive"), "ttft"), "p50"), a,
                sizeof a);
        fmt_dur(num(cJSON_GetObjectItem(cJSON_GetObjectItem(by, "batch"), "ttft"), "p50"), c,
                sizeof c);
        printf("  TTFT p50: interactive %s, batch %s\n", a, c);
    }
    printf("\n");
}

/* The raw figures behind a profile's summary, for the user's own analysis. */
static void write_requests(FILE *f, struct engine *e, const char *profile, const struct breq *v,
                           int n)
{
    for (int i = 0; i < n; i++) {
        const struct engine_metrics *m = &v[i].m;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "profile", profile);
        cJSON_AddNumberToObject(o, "index", i);
        cJSON_AddStringToObject(o, "priority",
                                v[i].prio == ENGINE_PRIO_BATCH ? "batch" : "interactive");
        if (v[i].turn >= 0) cJSON_AddNumberToObject(o, "turn", v[i].turn + 1);
        cJSON_AddStringToObject(o, "status", engine_status_name(v[i].status));
        cJSON_AddNumberToObject(o, "prompt_tokens", m->n_prompt);
        cJSON_AddNumberToObject(o, "cached_prompt_tokens", m->n_cached);
        cJSON_AddNumberToObject(o, "generated_tokens", m->n_generated);
        cJSON_AddNumberToObject(o, "preemptions", m->n_preempted);
        double d[6] = {m->queue_s, m->prefill_s, m->ttft_s, m->tpot_s, m->decode_s, m->e2e_s};
        const char *k[6] = {"queue_s", "prefill_s", "ttft_s", "tpot_s", "decode_s", "e2e_s"};
        for (int j = 0; j < 6; j++) cJSON_AddNumberToObject(o, k[j], d[j]);
        if (v[i].trail.served >= 0) {
            const struct route_trail *t = &v[i].trail;
            cJSON_AddStringToObject(o, "served_by", route_target_name(e, t->served));
            cJSON *hops = cJSON_AddArrayToObject(o, "fallbacks");
            for (int32_t h = 0; h < t->n_hops; h++) {
                cJSON *j = cJSON_CreateObject();
                cJSON_AddStringToObject(j, "from", route_target_name(e, t->hop[h].from));
                cJSON_AddStringToObject(j, "to", route_target_name(e, t->hop[h].to));
                cJSON_AddStringToObject(j, "reason", route_reason_name(t->hop[h].reason));
                cJSON_AddNumberToObject(j, "waited_s", t->hop[h].waited_s);
                cJSON_AddStringToObject(j, "detail", t->hop[h].detail);
                cJSON_AddItemToArray(hops, j);
            }
        }
        cJSON *itl = cJSON_AddArrayToObject(o, "itl_s");
        for (int j = 1; m->token_t && j < m->n_generated; j++)
            cJSON_AddItemToArray(itl, cJSON_CreateNumber(m->token_t[j] - m->token_t[j - 1]));
        char *txt = cJSON_PrintUnformatted(o);
        if (txt) fprintf(f, "%s\n", txt);
        free(txt);
        cJSON_Delete(o);
    }
}

static int run_profile(struct bench *b, int p)
{
    int n = 0;
    struct breq *v = plan(b, p, &n);
    if (!v) {
        fprintf(stderr, "tern bench: %s: could not build prompts\n", profiles[p].name);
        return -1;
    }
    int32_t kv_peak = 0;
    double dur = run_requests(b, profiles[p].name, v, n, &kv_peak);
    struct engine_stats st;
    engine_snapshot(b->e, &st);
    cJSON *o = summarize(b, p, v, n, dur, kv_peak, st.kv_total);
    if (b->requests_out) write_requests(b->requests_out, b->e, profiles[p].name, v, n);
    free_plan(v, n);
    if (!o) return -1;
    if (!b->o->quiet) print_profile(profiles[p].name, o);
    cJSON_AddItemToObject(b->results, profiles[p].name, o);
    return 0;
}

/* -------------------------------------------------------------- options */

static int parse_profiles(const struct cli *cli, const char *arg, unsigned *mask)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", arg);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (strcmp(t, "all") == 0) {
            *mask = (1u << N_PROFILES) - 1;
            continue;
        }
        int k = 0;
        while (k < N_PROFILES && strcmp(t, profiles[k].name) != 0) k++;
        if (k == N_PROFILES) {
            fprintf(stderr,
                    "tern %s: --profile: unknown '%s' (short, long-prompt, long-reply, "
                    "mixed-priority, cancel, slow-consumer, multi-turn, all)\n",
                    cli->cmd, t);
            return -1;
        }
        *mask |= 1u << k;
    }
    return 0;
}

static int on_opt(int c, const char *arg, void *ud)
{
    struct bopts *o = ud;
    const struct cli *cli = o->cli;
    double d;
    switch (c) {
    case OPT_PROFILE: return parse_profiles(cli, arg, &o->mask);
    case OPT_REQUESTS: return cli_int(cli, "--requests", arg, 1, 100000, &o->requests);
    case OPT_CONCURRENCY: return cli_int(cli, "--concurrency", arg, 1, 4096, &o->concurrency);
    case OPT_RATE: return cli_double(cli, "--rate", arg, 1e-6, 1e6, &o->rate);
    case CLI_O_SEED: {
        long s;
        if (cli_opt_long(cli, CLI_O_SEED, arg, &s) != 0) return -1;
        o->seed = (unsigned long long)s;
        return 0;
    }
    case OPT_SLO_TTFT: return cli_double(cli, "--slo-ttft", arg, 1e-6, 1e6, &o->slo_ttft);
    case OPT_SLO_TPOT: return cli_double(cli, "--slo-tpot", arg, 1e-6, 1e6, &o->slo_tpot);
    case OPT_JSON: o->json = arg; return 0;
    case OPT_TRACE: o->trace = arg; return 0;
    case OPT_REQUESTS_OUT: o->requests_out = arg; return 0;
    case OPT_SAVE: o->save = true; return 0;
    case OPT_TEXTS: o->texts = arg; return 0;
    case OPT_DB: o->db = arg; return 0;
    case OPT_SCALE:
        if (cli_double(cli, "--scale", arg, 0.01, 16, &d) != 0) return -1;
        o->scale = d;
        return 0;
    case 'q': o->quiet = true; return 0;
    }
    /* the engine options every command shares */
    int rc = cli_engine_opt(cli, c, arg, &o->eng, o->draft_model, sizeof o->draft_model);
    return rc == 0 ? 0 : -1;
}

static const char usage[] =
    "usage: tern bench --profile P[,P...] [OPTIONS]\n"
    "\n"
    "Serving load profiles through the scheduler (prompts cut from real text):\n"
    "  short           short prompts, short replies\n"
    "  long-prompt     long prompts, short replies\n"
    "  long-reply      short prompts, long replies\n"
    "  mixed-priority  interactive requests while a batch backlog runs\n"
    "  cancel          a third of the requests cancelled mid-stream\n"
    "  slow-consumer   a third of the consumers stop reading\n"
    "  multi-turn      conversations whose every turn resends the history\n"
    "  all             every profile\n"
    "\n"
    "options:\n"
    "      --requests N      requests per profile (default 16; multi-turn: rounded up to\n"
    "                        whole conversations of 4 turns)\n"
    "      --concurrency N   requests in flight (default 4), or\n"
    "      --rate R          Poisson arrivals, R requests/s (open loop)\n"
    "@seed 1; also seeds the prompts and arrivals\n"
    "      --slo-ttft S      goodput SLO on time to first token, seconds (default 1)\n"
    "      --slo-tpot S      goodput SLO on time per output token, seconds (default 0.2)\n"
    "      --scale F         multiply every prompt and reply length by F (default 1)\n"
    "      --json FILE       results, one object per profile\n"
    "      --trace FILE      Chrome trace of the engine (Perfetto, chrome://tracing)\n"
    "      --requests-out FILE  every request's figures, one JSON object a line\n"
    "      --save            store the run in the history database (--db PATH)\n"
    "      --texts DIR       folder of .txt files to cut prompts from\n"
    "                        (default: the source tree's ../shared/texts, plus data/)\n"
    "@threads physical cores\n"
    "@ctx the model's\n"
    "@backend auto\n"
    "@lookup\n"
    "@lookup-k 6; 4 with --draft-model\n"
        "@draft-model\n"
    "  -q, --quiet           no per-profile report (with --json)\n"
        "\n" CLI_REMOTE_USAGE;

static const struct option longopts[] = {
    {"profile", required_argument, 0, OPT_PROFILE},
    {"requests", required_argument, 0, OPT_REQUESTS},
    {"concurrency", required_argument, 0, OPT_CONCURRENCY},
    {"rate", required_argument, 0, OPT_RATE},
    CLI_SHARED(CLI_O_SEED),
    {"slo-ttft", required_argument, 0, OPT_SLO_TTFT},
    {"slo-tpot", required_argument, 0, OPT_SLO_TPOT},
    {"json", required_argument, 0, OPT_JSON},
    {"trace", required_argument, 0, OPT_TRACE},
    {"requests-out", required_argument, 0, OPT_REQUESTS_OUT},
    {"save", no_argument, 0, OPT_SAVE},
    {"texts", required_argument, 0, OPT_TEXTS},
    {"db", required_argument, 0, OPT_DB},
    {"scale", required_argument, 0, OPT_SCALE},
    CLI_SHARED(CLI_O_THREADS),
    CLI_SHARED(CLI_O_CTX),
    CLI_SHARED(CLI_O_BACKEND),
    CLI_SHARED(CLI_O_LOOKUP),
    CLI_SHARED(CLI_O_LOOKUP_K),
    CLI_SHARED(CLI_O_DRAFT_MODEL),
    {"quiet", no_argument, 0, 'q'},
    {0, 0, 0, 0},
};

/* ----------------------------------------------------------------- main */

static cJSON *config_json(const struct bopts *o, const struct engine_info *info)
{
    cJSON *c = cJSON_CreateObject();
    cJSON *pl = cJSON_AddArrayToObject(c, "profiles");
    for (int p = 0; p < N_PROFILES; p++)
        if (o->mask & (1u << p)) cJSON_AddItemToArray(pl, cJSON_CreateString(profiles[p].name));
    cJSON_AddNumberToObject(c, "requests", (double)o->requests);
    if (o->rate > 0)
        cJSON_AddNumberToObject(c, "rate", o->rate);
    else
        cJSON_AddNumberToObject(c, "concurrency", (double)o->concurrency);
    cJSON_AddNumberToObject(c, "seed", (double)o->seed);
    cJSON_AddNumberToObject(c, "scale", o->scale);
    cJSON_AddStringToObject(c, "model_file", info->model_path ? info->model_path : "");
    cJSON_AddStringToObject(c, "backend", info->backend.name ? info->backend.name : "");
    cJSON_AddStringToObject(c, "device", info->backend.device);
    cJSON_AddNumberToObject(c, "n_ctx", info->n_ctx);
    return c;
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int rc = fputs(text, f) < 0 ? -1 : 0;
    if (fclose(f) != 0) rc = -1;
    return rc;
}

static int save_run(const struct bench *b, const char *config, const char *summary)
{
    struct store *s;
    char err[1024];
    if (store_open(&s, b->o->db, STORE_READWRITE, err, sizeof err) != 0) {
        fprintf(stderr, "tern bench: --save: %s (results not stored)\n", err);
        return -1;
    }
    /* the baseline record: what this run ran on, for 'tern bench compare' */
    cJSON *env = bench_env_collect(b->e, b->o->cli, b->o->eng.backend.threads);
    char *env_txt = env ? cJSON_PrintUnformatted(env) : NULL;
    cJSON_Delete(env);
    store_key k = store_run_add_env(s, "bench", b->info.model_name, config, summary, env_txt, NULL);
    free(env_txt);
    int rc = store_flush(s, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "tern bench: --save: %s\n", err);
    else
        fprintf(stderr, "tern bench: saved as run %lld in %s\n", (long long)store_resolve(s, k),
                store_path(s));
    store_close(s);
    return rc;
}

static int finish(struct bench *b)
{
    int rc = CLI_EXIT_OK;
    cJSON *cfg = config_json(b->o, &b->info);
    char *summary = cJSON_PrintUnformatted(b->results), *config = cJSON_PrintUnformatted(cfg);
    if (b->o->json) {
        char *pretty = cJSON_Print(b->results);
        if (!pretty || write_file(b->o->json, pretty) != 0) {
            fprintf(stderr, "tern bench: --json %s: %s\n", b->o->json, strerror(errno));
            rc = CLI_EXIT_FAIL;
        }
        free(pretty);
    }
    if (b->o->save && (!summary || !config || save_run(b, config, summary) != 0))
        rc = CLI_EXIT_FAIL;
    free(summary);
    free(config);
    cJSON_Delete(cfg);
    return rc;
}

static struct engine *open_engine(const struct cli *cli, const struct bopts *o)
{
    char path[4096], err[1024];
    if (cli->n_urls == 0 && cli_model_path(cli, path, sizeof path, err, sizeof err) != 0) {
        fprintf(stderr, "tern bench: %s\n", err);
        return NULL;
    }
    struct engine_config c = o->eng;
    c.model_path = path;
    c.event_limit = EVENT_LIMIT;
    c.slo_ttft_s = o->slo_ttft;
    c.slo_tpot_s = o->slo_tpot;
    c.trace_path = o->trace;
    cli_engine_remote(cli, &c);
    struct engine *e = cli_engine_open(cli, &c, err, sizeof err);
    if (!e) fprintf(stderr, "tern bench: %s\n", err);
    return e;
}

int bench_profiles_main(int argc, char **argv)
{
    struct cli cli;
    struct bopts o = {.cli = &cli, .requests = 16, .concurrency = 4, .seed = 1,
                      .slo_ttft = 1.0, .slo_tpot = 0.2, .scale = 1.0};
    engine_config_default(&o.eng);
    struct bench b = {.o = &o};
    char err[512];
    int rc = cli_parse(&cli, argc, argv, "q", longopts, on_opt, &o, usage);
    if (rc >= 0) goto out;
    rc = CLI_EXIT_USAGE;
    if (!o.mask || cli.argc) {
        fprintf(stderr, "tern %s: give --profile (see 'tern %s --help')\n", cli.cmd, cli.cmd);
        goto out;
    }
    b.rng = o.seed * 0x2545f4914f6cdd1dull + 1;
    b.progress = isatty(STDERR_FILENO);
    rc = CLI_EXIT_FAIL;
    if (!(b.e = open_engine(&cli, &o))) goto out;
    engine_info(b.e, &b.info);
    cli_opt_warn_ctx(&cli, o.eng.n_ctx, b.info.n_ctx_train);
    if (load_texts(&b, err, sizeof err) != 0) {
        fprintf(stderr, "tern %s: %s\n", cli.cmd, err);
        goto close;
    }
    if (!o.quiet)
        printf("model %s · %s (%s) · %s\n\n", b.info.model_name, b.info.backend.name,
               b.info.backend.device,
               o.rate > 0 ? "Poisson arrivals" : "closed loop");
    if (o.requests_out && !(b.requests_out = fopen(o.requests_out, "w"))) {
        fprintf(stderr, "tern %s: --requests-out %s: %s\n", cli.cmd, o.requests_out,
                strerror(errno));
        goto close;
    }
    b.results = cJSON_CreateObject();
    rc = CLI_EXIT_OK;
    for (int p = 0; p < N_PROFILES && rc == CLI_EXIT_OK; p++)
        if (o.mask & (1u << p) && run_profile(&b, p) != 0) rc = CLI_EXIT_FAIL;
    if (rc == CLI_EXIT_OK) rc = finish(&b);
    cJSON_Delete(b.results);
close:
    if (b.requests_out && fclose(b.requests_out) != 0) rc = CLI_EXIT_FAIL;
    engine_close(b.e); /* writes the trace */
    free(b.corpus);
out:
    cli_free(&cli);
    return rc;
}

const char *bench_profiles_usage(void)
{
    return usage;
}

/* ---------------------------------------------------------- custom load */

/* Each tenant's own figures: a tenant that got worse is never hidden in
 * the average of one that got better. The keys of the whole run's summary
 * that a contract judges (statuses, goodput_rps, slo_met,
 * planned_incomplete), so a tenant's error rate and goodput are judged too. */
static void add_by_tenant(cJSON *o, const struct bench_load *L, const struct breq *v, double dur)
{
    struct breq *sub = malloc((size_t)L->n * sizeof *sub);
    cJSON *by = cJSON_AddObjectToObject(o, "by_tenant");
    for (int g = 0; sub && by && g < L->n_groups; g++) {
        int k = 0, count[ENGINE_N_STATUS] = {0};
        long long ok = 0, gen = 0, good = 0, planned = 0;
        for (int i = 0; i < L->n; i++) {
            if (L->group[i] != g) continue;
            const struct engine_metrics *m = &v[i].m;
            sub[k++] = v[i];
            if ((unsigned)v[i].status < ENGINE_N_STATUS) count[v[i].status]++;
            gen += m->n_generated;
            planned += L->v[i].cancel_after >= 0 || L->v[i].stall_after >= 0;
            if (!completed(v[i].status)) continue;
            ok++;
            good += m->ttft_s <= L->slo_ttft && (m->n_generated < 2 || m->tpot_s <= L->slo_tpot);
        }
        cJSON *t = cJSON_AddObjectToObject(by, L->group_names[g]);
        cJSON_AddNumberToObject(t, "requests", k);
        cJSON_AddNumberToObject(t, "completed", (double)ok);
        cJSON_AddNumberToObject(t, "output_tok_s", dur > 0 ? gen / dur : 0);
        cJSON *st = cJSON_AddObjectToObject(t, "statuses");
        for (int s = 0; s < ENGINE_N_STATUS; s++)
            if (count[s])
                cJSON_AddNumberToObject(st, engine_status_name((enum engine_status)s), count[s]);
        cJSON_AddNumberToObject(t, "goodput_rps", dur > 0 ? good / dur : 0);
        cJSON_AddNumberToObject(t, "slo_met", (double)good);
        cJSON_AddNumberToObject(t, "planned_incomplete", (double)planned);
        add_latencies(t, sub, k, -1);
    }
    free(sub);
}

/* A contract's workload through the same driver as the profiles: prompts
 * cut from the texts (or given), arrivals as planned, the same summary. */
cJSON *bench_load_run(struct engine *e, const struct bench_load *L, char *err, size_t errlen)
{
    struct bopts o = {.requests = L->n, .concurrency = L->concurrency > 0 ? L->concurrency : 1,
                      .rate = L->open_loop ? 1 : 0, .slo_ttft = L->slo_ttft,
                      .slo_tpot = L->slo_tpot, .seed = L->seed, .texts = L->texts,
                      .quiet = true, .custom = true, .cap = L->peak, .scale = 1.0};
    struct bench b = {.o = &o, .e = e, .progress = L->progress};
    b.rng = L->seed * 0x2545f4914f6cdd1dull + 1;
    engine_info(e, &b.info);
    bool need_texts = false;
    for (int i = 0; i < L->n; i++) need_texts |= !L->v[i].prompt;
    if (need_texts && load_texts(&b, err, errlen) != 0) return NULL;
    struct breq *v = calloc((size_t)L->n + 1, sizeof *v);
    if (!v) {
        snprintf(err, errlen, "out of memory");
        free(b.corpus);
        return NULL;
    }
    for (int i = 0; i < L->n; i++) {
        const struct bench_load_req *q = &L->v[i];
        v[i] = (struct breq){.prompt_tokens = q->prompt_tokens, .max_tokens = q->max_tokens,
                             .prio = q->batch ? ENGINE_PRIO_BATCH : ENGINE_PRIO_INTERACTIVE,
                             .cancel_after = q->cancel_after, .stall_after = q->stall_after,
                             .conv = -1, .turn = -1, .arrival = q->arrival, .trail.served = -1,
                             .unstreamed = q->unstreamed};
        v[i].prompt = q->prompt ? strdup(q->prompt) : make_text(&b, q->prompt_tokens);
        if (!v[i].prompt) {
            snprintf(err, errlen, "request %d: could not build its prompt", i);
            free_plan(v, L->n);
            free(b.corpus);
            return NULL;
        }
    }
    int32_t kv_peak = 0;
    double dur = run_requests(&b, L->name ? L->name : "contract", v, L->n, &kv_peak);
    for (int i = 0; i < L->n; i++) {
        /* An open loop's user arrived at the planned time: a wait in the
         * client (the peak concurrency, a Retry-After) is part of what they
         * see, as it would be in a front end's queue. */
        double lag = L->open_loop ? v[i].submitted_at - (b.t0 + v[i].arrival) : 0;
        if (lag > 0 && v[i].submitted) {
            v[i].m.queue_s += lag;
            v[i].m.ttft_s += v[i].m.n_generated > 0 ? lag : 0;
            v[i].m.e2e_s += lag;
        }
        /* A client that does not stream sees its first token with the whole reply. */
        if (v[i].unstreamed && v[i].m.n_generated > 0) v[i].m.ttft_s = v[i].m.e2e_s;
    }
    struct engine_stats st;
    engine_snapshot(e, &st);
    cJSON *s = summarize(&b, -1, v, L->n, dur, kv_peak, st.kv_total);
    int planned = 0; /* cancelled or walked away by design: not errors, not goodput */
    for (int i = 0; i < L->n; i++) planned += L->v[i].cancel_after >= 0 || L->v[i].stall_after >= 0;
    if (s) cJSON_AddNumberToObject(s, "planned_incomplete", planned);
    if (s && L->group) add_by_tenant(s, L, v, dur);
    if (s && L->requests_out) write_requests(L->requests_out, e, "contract", v, L->n);
    free_plan(v, L->n);
    free(b.corpus);
    if (!s) snprintf(err, errlen, "out of memory");
    return s;
}
