/* cmd_history: 'tern history' — list, show, search, export, remove stored
 * sessions and per-model latency statistics. Output suits pipes: colour only
 * on a terminal (and not with NO_COLOR), --json everywhere. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "model_name.h"
#include "textsafe.h"
#include "store.h"

enum { OPT_DB = CLI_OPT_CMD, OPT_JSON, OPT_MARKDOWN, OPT_TIMINGS, OPT_ALL, OPT_LIMIT };

struct hopts {
    const struct cli *cli;
    const char *db;
    bool json, markdown, timings, all, color;
    long limit;
};

struct style {
    const char *bold, *dim, *hl, *off;
};

static const struct style plain = {"", "", "", ""};
static const struct style ansi = {"\033[1m", "\033[2m", "\033[1;33m", "\033[0m"};

static int on_opt(int c, const char *arg, void *ud)
{
    struct hopts *o = ud;
    switch (c) {
    case OPT_DB: o->db = arg; return 0;
    case OPT_JSON: o->json = true; return 0;
    case OPT_MARKDOWN: o->markdown = true; return 0;
    case OPT_TIMINGS: o->timings = true; return 0;
    case OPT_ALL: o->all = true; return 0;
    case OPT_LIMIT: return cli_int(o->cli, "--limit", arg, 1, 100000, &o->limit);
    }
    return -1;
}

static void fmt_time(double t, char *buf, size_t n)
{
    time_t tt = (time_t)t;
    struct tm tm;
    localtime_r(&tt, &tm);
    strftime(buf, n, "%Y-%m-%d %H:%M", &tm);
}

/* Seconds as "12.3 ms" / "1.24 s"; "-" when not measured. */
static void fmt_dur(double s, char *buf, size_t n)
{
    if (!(s >= 0) || !isfinite(s))
        snprintf(buf, n, "-");
    else if (s < 1)
        snprintf(buf, n, "%.1f ms", s * 1e3);
    else
        snprintf(buf, n, "%.2f s", s);
}

/* Stored text as the terminal may see it (textsafe_term): ESC, OSC, BEL
 * and invalid UTF-8 never reach the terminal raw. The copies live in a
 * small ring, so a printf can take several; the last ones are freed at
 * exit by the OS (a command, not a library). */
static const char *safe(const char *s)
{
    static char *ring[8];
    static unsigned k;
    k = (k + 1) % 8;
    free(ring[k]);
    ring[k] = textsafe_term(s ? s : "");
    return ring[k] ? ring[k] : "(out of memory)";
}

/* Search snippets carry these around matches; they are replaced by the
 * output's own markers after the text is escaped, so a stored ESC cannot
 * pose as one and a marker is never mistaken for text. */
#define HL_OPEN "\x02"
#define HL_CLOSE "\x03"

/* The snippet with the matches between ho and hc, the text escaped. */
static char *mark_snippet(const char *s, const char *ho, const char *hc)
{
    size_t n = strlen(s), cap = n * 4 + 1 + 16 * (strlen(ho) + strlen(hc)), o = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    for (size_t i = 0; i < n && o + 1 < cap;) {
        size_t e = i;
        while (e < n && s[e] != HL_OPEN[0] && s[e] != HL_CLOSE[0]) e++;
        char *piece = textsafe_term_n(s + i, e - i);
        if (piece) {
            o += (size_t)snprintf(out + o, cap - o, "%s", piece);
            free(piece);
        }
        if (e < n) o += (size_t)snprintf(out + o, cap - o, "%s", s[e] == HL_OPEN[0] ? ho : hc);
        i = e + 1;
    }
    out[o < cap ? o : cap - 1] = 0;
    return out;
}

static int print_json(cJSON *j)
{
    if (j) textsafe_json(j); /* stored text may hold invalid UTF-8: strict decoders must accept it */
    char *txt = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (!txt) {
        fprintf(stderr, "tern history: out of memory\n");
        return CLI_EXIT_FAIL;
    }
    puts(txt);
    free(txt);
    return CLI_EXIT_OK;
}

static int parse_id(const char *arg, int64_t *id)
{
    char *end;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (errno || end == arg || *end || v <= 0) {
        fprintf(stderr, "tern history: '%s' is not a session id (see 'tern history list')\n", arg);
        return -1;
    }
    *id = v;
    return 0;
}

/* ------------------------------------------------------------------ list */

static int do_list(struct store *s, const struct hopts *o, const struct style *st)
{
    char err[1024];
    struct store_session_list l;
    if (store_sessions(s, &l, err, sizeof err) != 0) {
        fprintf(stderr, "tern history: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    /* --limit N: the N newest */
    if (o->limit > 0 && l.n > (size_t)o->limit) {
        for (size_t i = (size_t)o->limit; i < l.n; i++) {
            free(l.v[i].title);
            free(l.v[i].model);
            free(l.v[i].params_json);
            free(l.v[i].kind);
        }
        l.n = (size_t)o->limit;
    }
    if (o->json) {
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; a && i < l.n; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "id", (double)l.v[i].id);
            cJSON_AddStringToObject(e, "title", l.v[i].title ? l.v[i].title : "");
            cJSON_AddStringToObject(e, "kind", l.v[i].kind ? l.v[i].kind : "chat");
            if (l.v[i].model)
                cJSON_AddStringToObject(e, "model", l.v[i].model);
            else
                cJSON_AddNullToObject(e, "model");
            cJSON_AddNumberToObject(e, "messages", (double)l.v[i].n_messages);
            cJSON_AddNumberToObject(e, "created", l.v[i].created);
            cJSON_AddNumberToObject(e, "updated", l.v[i].updated);
            cJSON_AddItemToArray(a, e);
        }
        store_session_list_free(&l);
        return print_json(a);
    }
    if (!l.n) printf("no stored sessions (%s)\n", store_path(s));
    else printf("%s%6s  %-16s  %-4s  %5s  %-28s  %s%s\n", st->bold, "ID", "UPDATED", "KIND", "MSGS",
                "MODEL", "TITLE", st->off);
    for (size_t i = 0; i < l.n; i++) {
        char t[32];
        fmt_time(l.v[i].updated, t, sizeof t);
        char model[29]; /* the column: never cut inside the name's quant */
        model_name_short(l.v[i].model ? l.v[i].model : "-", model, sizeof model - 1);
        printf("%6lld  %-16s  %-4s  %5lld  %-28s  %s\n", (long long)l.v[i].id, t,
               l.v[i].kind ? safe(l.v[i].kind) : "chat", (long long)l.v[i].n_messages, safe(model),
               safe(l.v[i].title));
    }
    store_session_list_free(&l);
    return CLI_EXIT_OK;
}

/* ------------------------------------------------------------------ show */

static void print_timings(const struct store_request_info *q, const struct style *st)
{
    char a[6][24];
    double d[6] = {q->queue_s, q->prefill_s, q->ttft_s, q->tpot_s, q->decode_s, q->e2e_s};
    for (int i = 0; i < 6; i++) fmt_dur(d[i], a[i], sizeof a[i]);
    printf("%s  queue %s · prefill %s · TTFT %s · TPOT %s", st->dim, a[0], a[1], a[2], a[3]);
    if (q->tpot_s > 0) printf(" (%.1f tok/s)", 1.0 / q->tpot_s);
    printf(" · decode %s · e2e %s\n", a[4], a[5]);
    printf("  prompt %lld tokens (%lld cached) · generated %lld · %s on %s · %s%s\n",
           (long long)q->prompt_tokens, (long long)(q->cached_tokens > 0 ? q->cached_tokens : 0),
           (long long)q->generated_tokens, q->model ? q->model : "?",
           q->backend ? q->backend : "?", q->status ? q->status : "?", st->off);
}

static void print_transcript(const struct store_transcript *t, bool timings,
                             const struct style *st)
{
    char c[32];
    fmt_time(t->session.created, c, sizeof c);
    printf("%sSession %lld: %s%s\n", st->bold, (long long)t->session.id, safe(t->session.title),
           st->off);
    printf("%smodel %s · started %s · %zu messages%s\n\n", st->dim,
           t->session.model ? safe(t->session.model) : "-", c, t->n, st->off);
    for (size_t i = 0; i < t->n; i++) {
        const struct store_message_info *m = &t->msgs[i];
        printf("%s%s%s", st->bold, m->role, st->off);
        if (strcmp(m->status, "ok") != 0) printf(" %s(%s)%s", st->hl, safe(m->status), st->off);
        printf("\n%s\n", safe(m->text));
        if (m->error) printf("%s[%s]%s\n", st->hl, safe(m->error), st->off);
        if (timings && m->req) print_timings(m->req, st);
        printf("\n");
    }
}

static int load(struct store *s, const char *arg, struct store_transcript *t)
{
    int64_t id;
    char err[1024];
    if (parse_id(arg, &id) != 0) return CLI_EXIT_USAGE;
    int rc = store_transcript(s, id, t, err, sizeof err);
    if (rc != 0) fprintf(stderr, "tern history: %s\n", err);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

static int do_show(struct store *s, const struct hopts *o, const char *arg,
                   const struct style *st)
{
    struct store_transcript t;
    int rc = load(s, arg, &t);
    if (rc != CLI_EXIT_OK) return rc;
    if (o->json) {
        rc = print_json(store_transcript_json(&t));
    } else {
        print_transcript(&t, o->timings, st);
    }
    store_transcript_free(&t);
    return rc;
}

/* ---------------------------------------------------------------- export */

static void print_markdown(const struct store_transcript *t)
{
    char c[32];
    fmt_time(t->session.created, c, sizeof c);
    printf("# %s\n\n", t->session.title && *t->session.title ? safe(t->session.title) : "(untitled)");
    printf("*Session %lld · model %s · %s*\n\n", (long long)t->session.id,
           t->session.model ? safe(t->session.model) : "-", c);
    for (size_t i = 0; i < t->n; i++) {
        const struct store_message_info *m = &t->msgs[i];
        printf("## %s%s%s%s\n\n%s\n\n", m->role, strcmp(m->status, "ok") ? " (" : "",
               strcmp(m->status, "ok") ? safe(m->status) : "", strcmp(m->status, "ok") ? ")" : "",
               safe(m->text));
        if (m->error) printf("> %s\n\n", safe(m->error));
    }
}

static int export_one(struct store *s, int64_t id, const struct hopts *o, cJSON *all)
{
    struct store_transcript t;
    char err[1024];
    if (store_transcript(s, id, &t, err, sizeof err) != 0) {
        fprintf(stderr, "tern history: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    int rc = CLI_EXIT_OK;
    if (o->markdown)
        print_markdown(&t);
    else if (all)
        cJSON_AddItemToArray(all, store_transcript_json(&t));
    else
        rc = print_json(store_transcript_json(&t));
    store_transcript_free(&t);
    return rc;
}

static int do_export(struct store *s, const struct hopts *o, int argc, char **argv)
{
    if (o->json && o->markdown) {
        fprintf(stderr, "tern history export: choose --json or --markdown\n");
        return CLI_EXIT_USAGE;
    }
    if (!o->all) {
        int64_t id;
        if (argc != 1) {
            fprintf(stderr, "tern history export: give a session ID or --all\n");
            return CLI_EXIT_USAGE;
        }
        if (parse_id(argv[0], &id) != 0) return CLI_EXIT_USAGE;
        return export_one(s, id, o, NULL);
    }
    char err[1024];
    struct store_session_list l;
    if (store_sessions(s, &l, err, sizeof err) != 0) {
        fprintf(stderr, "tern history: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    cJSON *all = o->markdown ? NULL : cJSON_CreateArray();
    int rc = CLI_EXIT_OK;
    for (size_t i = l.n; i-- > 0 && rc == CLI_EXIT_OK;) /* oldest first */
        rc = export_one(s, l.v[i].id, o, all);
    store_session_list_free(&l);
    if (all) {
        if (rc == CLI_EXIT_OK) return print_json(all);
        cJSON_Delete(all);
    }
    return rc;
}

/* ---------------------------------------------------------------- search */

/* "snippet" with **markers**, "text" without, and "highlights": [start, end)
 * byte ranges of the matches in "text" (markers can then never be confused
 * with a "**" in code). */
static void add_snippet_json(cJSON *e, const char *s)
{
    size_t n = strlen(s), o = 0, t = 0;
    char *mk = malloc(n * 2 + 64), *bare = malloc(n + 1);
    cJSON *hl = cJSON_AddArrayToObject(e, "highlights");
    cJSON *cur = NULL;
    for (size_t i = 0; mk && bare && i < n; i++) {
        if (s[i] == HL_OPEN[0] || s[i] == HL_CLOSE[0]) {
            memcpy(mk + o, "**", 2), o += 2;
            if (s[i] == HL_OPEN[0]) {
                cur = cJSON_CreateArray();
                cJSON_AddItemToArray(cur, cJSON_CreateNumber((double)t));
            } else if (cur) {
                cJSON_AddItemToArray(cur, cJSON_CreateNumber((double)t));
                cJSON_AddItemToArray(hl, cur);
                cur = NULL;
            }
            continue;
        }
        mk[o++] = bare[t++] = s[i];
    }
    cJSON_Delete(cur);
    if (mk) mk[o] = 0;
    if (bare) bare[t] = 0;
    cJSON_AddStringToObject(e, "snippet", mk ? mk : "");
    cJSON_AddStringToObject(e, "text", bare ? bare : "");
    free(mk);
    free(bare);
}

static int do_search(struct store *s, const struct hopts *o, int argc, char **argv,
                     const struct style *st)
{
    char q[4096] = "", err[1024];
    for (int i = 0; i < argc; i++) {
        size_t n = strlen(q);
        snprintf(q + n, sizeof q - n, "%s%s", i ? " " : "", argv[i]);
    }
    if (!*q) {
        fprintf(stderr, "tern history search: give the text to search for\n");
        return CLI_EXIT_USAGE;
    }
    /* A terminal shows matches in colour; pipes and JSON get **markdown bold**
     * (JSON also has the plain "text" and the matches' byte ranges). */
    bool tty = !o->json && o->color;
    const char *ho = tty ? st->hl : "**", *hc = tty ? st->off : "**";
    struct store_hits h;
    if (store_search(s, q, HL_OPEN, HL_CLOSE, o->limit > 0 ? (size_t)o->limit : 50, &h, err,
                     sizeof err) != 0) {
        fprintf(stderr, "tern history: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    if (o->json) {
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; a && i < h.n; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "session", (double)h.v[i].session_id);
            cJSON_AddNumberToObject(e, "message", (double)h.v[i].message_id);
            cJSON_AddStringToObject(e, "title", h.v[i].session_title ? h.v[i].session_title : "");
            cJSON_AddStringToObject(e, "role", h.v[i].role);
            cJSON_AddNumberToObject(e, "created", h.v[i].created);
            add_snippet_json(e, h.v[i].snippet ? h.v[i].snippet : "");
            cJSON_AddItemToArray(a, e);
        }
        store_hits_free(&h);
        return print_json(a);
    }
    if (!h.n) printf("no match for '%s'\n", q);
    for (size_t i = 0; i < h.n; i++) {
        char t[32];
        fmt_time(h.v[i].created, t, sizeof t);
        char *sn = mark_snippet(h.v[i].snippet ? h.v[i].snippet : "", ho, hc);
        printf("%ssession %lld%s %s· %s · %s · %s%s\n  %s\n", st->bold,
               (long long)h.v[i].session_id, st->off, st->dim, safe(h.v[i].session_title),
               h.v[i].role, t, st->off, sn ? sn : "");
        free(sn);
    }
    store_hits_free(&h);
    return CLI_EXIT_OK;
}

/* ----------------------------------------------------------------- stats */

static int do_stats(struct store *s, const struct hopts *o, const struct style *st)
{
    char err[1024];
    struct store_stats sv;
    if (store_stats(s, &sv, err, sizeof err) != 0) {
        fprintf(stderr, "tern history: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    if (o->json) {
        cJSON *root = cJSON_CreateObject();
        for (size_t i = 0; root && i < sv.n; i++) {
            const struct store_model_stats *m = &sv.v[i];
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "requests", (double)m->n_requests);
            cJSON_AddNumberToObject(e, "ok", (double)m->n_ok);
            cJSON_AddNumberToObject(e, "prompt_tokens", (double)m->prompt_tokens);
            cJSON_AddNumberToObject(e, "cached_prompt_tokens", (double)m->cached_tokens);
            cJSON_AddNumberToObject(e, "generated_tokens", (double)m->generated_tokens);
            cJSON_AddItemToObject(e, "ttft", store_pcts_json(&m->ttft));
            cJSON_AddItemToObject(e, "tpot", store_pcts_json(&m->tpot));
            cJSON_AddItemToObject(e, "e2e", store_pcts_json(&m->e2e));
            cJSON_AddItemToObject(root, m->model, e);
        }
        store_stats_free(&sv);
        return print_json(root);
    }
    if (!sv.n) printf("no stored requests (%s)\n", store_path(s));
    for (size_t i = 0; i < sv.n; i++) {
        const struct store_model_stats *m = &sv.v[i];
        printf("%s%s%s  %lld requests (%lld ok) · %lld prompt tokens (%lld cached) · "
               "%lld generated\n",
               st->bold, safe(m->model), st->off, (long long)m->n_requests, (long long)m->n_ok,
               (long long)m->prompt_tokens, (long long)m->cached_tokens,
               (long long)m->generated_tokens);
        const struct store_pcts *p[3] = {&m->ttft, &m->tpot, &m->e2e};
        const char *name[3] = {"TTFT", "TPOT", "E2E"};
        printf("  %s%-5s %10s %10s %10s %10s%s\n", st->dim, "", "p50", "p90", "p99", "max",
               st->off);
        for (int k = 0; k < 3; k++) {
            char a[4][24];
            double v[4] = {p[k]->p50, p[k]->p90, p[k]->p99, p[k]->max};
            for (int j = 0; j < 4; j++) fmt_dur(v[j], a[j], sizeof a[j]);
            printf("  %-5s %10s %10s %10s %10s\n", name[k], a[0], a[1], a[2], a[3]);
        }
    }
    store_stats_free(&sv);
    return CLI_EXIT_OK;
}

/* -------------------------------------------------------------------- rm */

static int do_rm(struct store *s, const struct hopts *o, int argc, char **argv)
{
    char err[1024];
    cJSON *done = o->json ? cJSON_CreateArray() : NULL;
    int rc = CLI_EXIT_OK;
    for (int i = 0; i < argc && rc == CLI_EXIT_OK; i++) {
        int64_t id;
        struct store_transcript t;
        if (parse_id(argv[i], &id) != 0) {
            rc = CLI_EXIT_USAGE;
            break;
        }
        if (store_transcript(s, id, &t, err, sizeof err) != 0) {
            fprintf(stderr, "tern history: %s\n", err);
            rc = CLI_EXIT_FAIL;
            break;
        }
        store_transcript_free(&t);
        store_session_delete(s, id);
        if (store_flush(s, err, sizeof err) != 0) {
            fprintf(stderr, "tern history: %s\n", err);
            rc = CLI_EXIT_FAIL;
            break;
        }
        if (done)
            cJSON_AddItemToArray(done, cJSON_CreateNumber((double)id));
        else
            printf("removed session %lld\n", (long long)id);
    }
    if (!done) return rc;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(j, "removed", done);
    int prc = print_json(j);
    return rc != CLI_EXIT_OK ? rc : prc;
}

/* ------------------------------------------------------------- dispatch */

/* Reads need no write access: a read-only file still shows its history. */
static struct store *open_for(const struct hopts *o, bool write)
{
    char err[1024];
    struct store *s = NULL;
    if (store_open(&s, o->db, STORE_READWRITE, err, sizeof err) == 0) return s;
    if (!write) {
        char err2[1024];
        if (store_open(&s, o->db, STORE_READONLY, err2, sizeof err2) == 0) {
            fprintf(stderr, "tern history: %s; reading it read-only\n", err);
            return s;
        }
    }
    fprintf(stderr, "tern history: %s\n", err);
    return NULL;
}

static int run(const struct hopts *o, int argc, char **argv)
{
    const char *sub = argc ? argv[0] : "list";
    const struct style *st = o->color ? &ansi : &plain;
    argc = argc ? argc - 1 : 0;
    argv++;
    static const char *const subs[] = {"list", "show", "search", "export", "rm", "stats"};
    size_t k = 0;
    while (k < 6 && strcmp(sub, subs[k]) != 0) k++;
    if (k == 6) {
        fprintf(stderr, "tern history: unknown subcommand '%s' (see 'tern history --help')\n",
                sub);
        return CLI_EXIT_USAGE;
    }
    if ((k == 1 && argc != 1) || (k == 4 && argc < 1) || ((k == 0 || k == 5) && argc)) {
        fprintf(stderr, "tern history %s: wrong arguments (see 'tern history --help')\n", sub);
        return CLI_EXIT_USAGE;
    }
    struct store *s = open_for(o, k == 4);
    if (!s) return CLI_EXIT_FAIL;
    int rc;
    switch (k) {
    case 0: rc = do_list(s, o, st); break;
    case 1: rc = do_show(s, o, argv[0], st); break;
    case 2: rc = do_search(s, o, argc, argv, st); break;
    case 3: rc = do_export(s, o, argc, argv); break;
    case 4: rc = do_rm(s, o, argc, argv); break;
    default: rc = do_stats(s, o, st); break;
    }
    store_close(s);
    return rc;
}

int cmd_history(int argc, char **argv)
{
    static const char use[] =
        "usage: tern history [list]                 sessions with kind (chat, or run: one\n"
        "                                           tern run), message counts and dates\n"
        "       tern history show ID [--timings]    a transcript (--timings: each reply's phases)\n"
        "       tern history search TEXT            full-text search (FTS5: words, \"phrases\",\n"
        "                                           prefix*, AND/OR/NOT), matches highlighted\n"
        "       tern history export ID|--all [--json|--markdown]   (JSON by default)\n"
        "       tern history rm ID...               delete sessions\n"
        "       tern history stats                  TTFT/TPOT/E2E percentiles per model\n"
        "\n"
        "options:\n"
        "      --db PATH     history database (default\n"
        "                    ${XDG_DATA_HOME:-~/.local/share}/tern/history.db)\n"
        "      --json        machine-readable output (every subcommand)\n"
        "      --markdown    export as Markdown\n"
        "      --timings     show: each reply's queue/prefill/TTFT/TPOT/decode/e2e\n"
        "      --all         export: every session\n"
        "      --limit N     list: the N newest sessions (default all); search: at most\n"
        "                    N matches (default 50)\n";
    static const struct option longopts[] = {
        {"db", required_argument, 0, OPT_DB},
        {"json", no_argument, 0, OPT_JSON},
        {"markdown", no_argument, 0, OPT_MARKDOWN},
        {"timings", no_argument, 0, OPT_TIMINGS},
        {"all", no_argument, 0, OPT_ALL},
        {"limit", required_argument, 0, OPT_LIMIT},
        {0, 0, 0, 0},
    };
    struct cli cli;
    struct hopts o = {.cli = &cli, .limit = 0};
    int rc = cli_parse(&cli, argc, argv, "", longopts, on_opt, &o, use);
    if (rc < 0) {
        const char *nc = getenv("NO_COLOR");
        o.color = isatty(STDOUT_FILENO) && !(nc && *nc);
        rc = run(&o, cli.argc, cli.argv);
    }
    cli_free(&cli);
    return rc;
}
