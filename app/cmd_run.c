/* cmd_run: 'tern run' — one reply to one prompt, streamed to stdout as it is
 * generated, through the engine API (the same path as chat, bench, eval).
 * --verbose prints the phase timings to stderr, like `ollama run --verbose`. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "route.h"
#include "cli_opts.h"
#include "clock.h"
#include "commands.h"
#include "engine.h"
#include "store.h"
#include "textsafe.h"

enum {
    OPT_RAW = CLI_OPT_CMD, OPT_VERBOSE, OPT_STOP, OPT_TRACE, OPT_IGNORE_EOS, OPT_NO_HISTORY, OPT_DB, OPT_CONTINUE, OPT_JSON,
    OPT_JSON_SCHEMA, OPT_KV_DISK
};

#define RUN_MAX_STOP 16

struct run_opts {
    const struct cli *cli;
    const char *prompt, *system, *trace, *db_path;
    const char *json_schema;      /* --json-schema FILE */
    char *schema;                 /* its text (read before the model loads) */
    bool raw, verbose, ignore_eos, no_history, cont, json;
    long max_tokens;
    struct engine_config eng;     /* the shared engine options (cli_engine_opt) */
    char draft_model[4096];       /* --draft-model, resolved */
    unsigned long long kv_disk;   /* --kv-disk: the disk prompt cache's cap; 0 = off */
    struct engine_sampling sp;
    const char *stop[RUN_MAX_STOP];
    int n_stop;
};

static volatile sig_atomic_t run_interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    run_interrupted = 1;
}

static int on_opt(int c, const char *arg, void *ud)
{
    struct run_opts *o = ud;
    long v;
    switch (c) {
    case 'p': o->prompt = arg; return 0;
    case OPT_RAW: o->raw = true; return 0;
    case 'v':
    case OPT_VERBOSE: o->verbose = true; return 0;
    case OPT_IGNORE_EOS: o->ignore_eos = true; return 0;
    case OPT_NO_HISTORY: o->no_history = true; return 0;
    case OPT_JSON: o->json = true; return 0;
    case OPT_JSON_SCHEMA: o->json_schema = arg; return 0;
    case 'c':
    case OPT_CONTINUE: o->cont = true; return 0;
    case OPT_DB: o->db_path = arg; return 0;
    case CLI_O_MAX_TOKENS: return cli_opt_long(o->cli, CLI_O_MAX_TOKENS, arg, &o->max_tokens);
    case CLI_O_TEMP: return cli_opt_float(o->cli, CLI_O_TEMP, arg, &o->sp.temp);
    case CLI_O_TOP_P: return cli_opt_float(o->cli, CLI_O_TOP_P, arg, &o->sp.top_p);
    case CLI_O_MIN_P: return cli_opt_float(o->cli, CLI_O_MIN_P, arg, &o->sp.min_p);
    case CLI_O_REPEAT_PENALTY:
        return cli_opt_float(o->cli, CLI_O_REPEAT_PENALTY, arg, &o->sp.repeat_penalty);
    case CLI_O_TOP_K:
        if (cli_opt_long(o->cli, CLI_O_TOP_K, arg, &v) != 0) return -1;
        o->sp.top_k = (int32_t)v;
        return 0;
    case CLI_O_SEED:
        if (cli_opt_long(o->cli, CLI_O_SEED, arg, &v) != 0) return -1;
        o->sp.seed = (uint64_t)v;
        return 0;
    case OPT_STOP:
        if (o->n_stop == RUN_MAX_STOP) {
            fprintf(stderr, "tern run: --stop: at most %d stop strings\n", RUN_MAX_STOP);
            return -1;
        }
        o->stop[o->n_stop++] = arg;
        return 0;
    case CLI_O_SYSTEM: o->system = arg; return 0;
    case OPT_TRACE: o->trace = arg; return 0;
    case OPT_KV_DISK: return cli_size(o->cli, "--kv-disk", arg, &o->kv_disk);
    }
    /* the engine options every command shares; anything else is not run's */
    int rc = cli_engine_opt(o->cli, c, arg, &o->eng, o->draft_model, sizeof o->draft_model);
    return rc == 0 ? 0 : -1;
}

/* --json-schema FILE: the schema's text (at most 4 MiB), or NULL (said).
 * The engine compiles it at submit and names what it cannot enforce. */
static char *read_schema(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tern run: --json-schema %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4u << 20, n;
    char *buf = malloc(cap + 1);
    n = buf ? fread(buf, 1, cap + 1, f) : 0;
    fclose(f);
    if (!buf || n > cap) {
        fprintf(stderr, "tern run: --json-schema %s: %s\n", path,
                buf ? "larger than 4 MiB" : "out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

/* Reads all of stdin (the prompt when -p is absent). On a terminal one
 * Ctrl-D ends it: a read that returns a line without its newline can only
 * be Ctrl-D pressed after text (a second one is not needed). */
static char *read_stdin(void)
{
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    bool tty = isatty(STDIN_FILENO);
    while (buf) {
        ssize_t r = read(STDIN_FILENO, buf + len, cap - len - 1);
        if (r < 0 && errno == EINTR) continue;
        size_t got = r > 0 ? (size_t)r : 0;
        len += got;
        if (got == 0) break;
        if (tty && buf[len - 1] != '\n') break;
        if (cap - len - 1 == 0) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (buf) buf[len] = 0;
    return buf;
}

/* History of one `tern run` exchange, as `llm` logs every prompt: a session
 * of its own, the user turn, and the reply written while it streams (so a
 * killed run keeps all but the last second), then the request's phases.
 * db == NULL means history is off: every store call accepts it. */
struct run_history {
    struct store *db;
    store_key reply;
    int64_t cont;                 /* -c: the session continued (0: a new one) */
    struct store_transcript prev; /* its messages so far */
};

/* -c: the newest session and its transcript. Returns 0, or -1 (said). */
static int history_continue(struct run_history *h)
{
    char err[512];
    struct store_session_list l;
    if (store_sessions(h->db, &l, err, sizeof err) != 0 || l.n == 0) {
        fprintf(stderr, "tern run: -c: %s\n", l.n == 0 ? "no stored session to continue" : err);
        return -1;
    }
    h->cont = l.v[0].id;
    store_session_list_free(&l);
    if (store_transcript(h->db, h->cont, &h->prev, err, sizeof err) != 0) {
        fprintf(stderr, "tern run: -c: %s\n", err);
        return -1;
    }
    return 0;
}

static int history_open(struct run_history *h, const struct run_opts *o)
{
    char err[512];
    memset(h, 0, sizeof *h);
    if (o->no_history) {
        if (!o->cont) return 0;
        fprintf(stderr, "tern run: -c continues a stored session: it needs the history\n");
        return -1;
    }
    if (store_open(&h->db, o->db_path, STORE_READWRITE, err, sizeof err) != 0) {
        fprintf(stderr, "tern run: history %s: %s\n", o->cont ? "needed by -c" : "off", err);
        h->db = NULL;
        return o->cont ? -1 : 0;
    }
    return o->cont ? history_continue(h) : 0;
}

static void history_begin(struct run_history *h, const struct run_opts *o,
                          const char *model_name, const char *prompt)
{
    char title[80];
    if (!h->db) return;
    size_t n = strcspn(prompt, "\n");
    if (n >= sizeof title) n = sizeof title - 1;
    memcpy(title, prompt, n);
    title[n] = 0;
    /* a one-shot run: its own kind, left out of the chat's session list */
    store_key ses = h->cont ? h->cont : store_session_new_kind(h->db, "run", title, model_name, NULL);
    if (o->system && !h->cont) store_message_add(h->db, ses, "system", o->system, -1);
    store_message_add(h->db, ses, "user", prompt, -1);
    h->reply = store_reply_begin(h->db, ses);
}

static bool failed_status(const char *s)
{
    return !strcmp(s, "error") || !strcmp(s, "rejected") || !strcmp(s, "timeout") ||
           !strcmp(s, "consumer-stalled");
}

/* The request's messages: the continued session's turns (failed replies
 * and their user turns left out), the system prompt, then the prompt.
 * Returns the count; *out is malloc'd. */
static int32_t build_messages(const struct run_history *h, const struct run_opts *o,
                              const char *prompt, struct engine_message **out)
{
    size_t n = h->prev.n;
    struct engine_message *v = malloc((n + 2) * sizeof *v);
    int32_t k = 0;
    *out = v;
    if (!v) return -1;
    if (o->system) v[k++] = (struct engine_message){"system", o->system};
    for (size_t i = 0; i < n; i++) {
        const struct store_message_info *m = &h->prev.msgs[i];
        bool failed = failed_status(m->status);
        bool answer_failed =
            i + 1 < n && !strcmp(m->role, "user") && failed_status(h->prev.msgs[i + 1].status);
        if (!m->text[0] || failed || answer_failed) continue;
        if (!strcmp(m->role, "system") && o->system) continue;
        v[k++] = (struct engine_message){m->role, m->text};
    }
    v[k++] = (struct engine_message){"user", prompt};
    return k;
}

static void history_finish(struct run_history *h, struct engine *e,
                           const struct engine_info *info, const char *model_path,
                           const struct engine_metrics *m)
{
    if (!h->db) return;
    /* A stream that broke (remote server gone) keeps its partial text, marked
     * interrupted as after a crash. */
    const char *status = m->interrupted ? "interrupted" : engine_status_name(m->status);
    store_reply_finish(h->db, h->reply, status, m->n_generated);
    struct store_request r = {.model = info->model_name, .model_file = model_path,
                              .backend = info->backend.name, .status = status,
                              .queue_s = m->queue_s, .prefill_s = m->prefill_s,
                              .ttft_s = m->ttft_s, .tpot_s = m->tpot_s,
                              .decode_s = m->decode_s, .e2e_s = m->e2e_s,
                              .prompt_tokens = m->n_prompt, .cached_tokens = m->n_cached,
                              .generated_tokens = m->n_generated};
    char *rj = route_trail_json(e, m->id); /* --route: where it went; NULL otherwise */
    r.route_json = rj;
    store_request_add(h->db, h->reply, &r);
    free(rj);
}

/* -v with --route: each move before the first token, then where it ran. */
static void print_route(struct engine *e, uint64_t id)
{
    struct route_trail t;
    if (route_trail(e, id, &t) != 0) return;
    for (int32_t i = 0; i < t.n_hops; i++)
        fprintf(stderr, "%-22s %s -> %s (%s after %.3f s)\n", "fallback:",
                route_target_name(e, t.hop[i].from), route_target_name(e, t.hop[i].to),
                route_reason_name(t.hop[i].reason), t.hop[i].waited_s);
    fprintf(stderr, "%-22s %s\n", "served by:", t.served >= 0 ? route_target_name(e, t.served)
                                                              : "none");
}

static void print_ms(const char *what, double s)
{
    if (s < 1) fprintf(stderr, "%-22s %.2f ms\n", what, s * 1e3);
    else fprintf(stderr, "%-22s %.3f s\n", what, s);
}

/* Figures measured over HTTP (client side) beside what the server said of
 * its own phases (server side), each labelled so. */
static void print_remote(const struct engine_metrics *m)
{
    print_ms("connect (client):", m->connect_s);
    print_ms("headers (client):", m->headers_s);
    if (m->server.known) {
        print_ms("queue (server):", m->server.queue_s);
        print_ms("prefill (server):", m->server.prefill_s);
        print_ms("decode (server):", m->server.decode_s);
    } else {
        fprintf(stderr, "%-22s n/a from this server\n", "server phases:");
    }
    if (m->counts_estimated)
        fprintf(stderr, "%-22s counted from stream events (no usage from the server)\n",
                "token counts:");
}

/* The serving side as the engine's snapshot has it, when it describes a
 * server (Prometheus /metrics of a remote one): each figure or "n/a". */
static void print_server_view(struct engine *e)
{
    struct engine_stats s;
    engine_snapshot(e, &s);
    if (!s.server.remote) return;
    if (!s.server.source[0]) {
        fprintf(stderr, "%-22s n/a from this server (%s)\n", "server metrics:",
                s.server.scrape_error[0] ? s.server.scrape_error : "not scraped yet");
        return;
    }
    char run[24] = "n/a", wait[24] = "n/a", kv[32] = "n/a", gen[32] = "n/a";
    if (engine_stat_known(&s, ENGINE_STAT_RUNNING)) snprintf(run, sizeof run, "%d", s.running);
    if (engine_stat_known(&s, ENGINE_STAT_WAITING)) snprintf(wait, sizeof wait, "%d", s.waiting);
    if (engine_stat_known(&s, ENGINE_STAT_KV_USAGE))
        snprintf(kv, sizeof kv, "%.1f %%", 100 * s.kv_usage);
    if (engine_stat_known(&s, ENGINE_STAT_SRV_GEN))
        snprintf(gen, sizeof gen, "%.1f tok/s", s.server.gen_tok_s);
    fprintf(stderr, "%-22s %s (n/a = not exported by this server)\n", "server metrics:",
            s.server.source);
    fprintf(stderr, "%-22s running %s, waiting %s, KV %s, generation %s\n", "", run, wait, kv,
            gen);
}

static void print_verbose(struct engine *e, const struct engine_info *info, double load_s,
                          double tok_s, const struct engine_metrics *m)
{
    if (m->remote) /* the server's URL and kind: its model's architecture is not known here */
        fprintf(stderr, "\n%-22s %s\n%-22s %s\n", "model", info->model_name, "server:",
                info->backend.device);
    else
        fprintf(stderr, "\n%-22s %s (%s, %s)\n", "model", info->model_name, info->arch,
                info->backend.device);
    if (!m->remote && info->kv_bytes_per_token)
        /* the pool's real capacity: --kv-mem / the KV type's bytes per token */
        fprintf(stderr, "%-22s %lld tokens, %.1f MiB, %llu bytes per token\n", "KV cache:",
                (long long)info->kv_blocks * info->kv_block_tokens,
                (double)info->kv_bytes_per_token * info->kv_blocks * info->kv_block_tokens /
                    (1024.0 * 1024.0),
                (unsigned long long)info->kv_bytes_per_token);
    print_ms("load duration:", load_s);
    print_ms("tokenize duration:", tok_s);
    if (m->n_restored > 0)
        fprintf(stderr, "%-22s %d token(s) (%d reused from cache, %d restored from disk)\n",
                "prompt eval count:", m->n_prompt, m->n_cached, m->n_restored);
    else
        fprintf(stderr, "%-22s %d token(s) (%d reused from cache)\n", "prompt eval count:",
                m->n_prompt, m->n_cached);
    if (m->remote) {
        print_remote(m);
    } else {
        print_ms("prompt eval duration:", m->prefill_s);
        if (m->prefill_s > 0)
            fprintf(stderr, "%-22s %.2f tokens/s\n", "prompt eval rate:",
                    m->n_computed / m->prefill_s);
        print_ms("queue:", m->queue_s);
    }
    print_ms("time to first token:", m->ttft_s);
    fprintf(stderr, "%-22s %d token(s)\n", "eval count:", m->n_generated);
    print_ms("eval duration:", m->decode_s);
    if (m->n_generated > 1) {
        print_ms("time per token:", m->tpot_s);
        fprintf(stderr, "%-22s %.2f tokens/s\n", "eval rate:", 1.0 / m->tpot_s);
    }
    if (info->draft.name) {
        struct engine_stats s;
        engine_snapshot(e, &s);
        fprintf(stderr, "%-22s %s (%.1f MiB weights, %.1f MiB KV), %.2f ms in its passes\n",
                "draft model:", info->draft.name, info->draft.weight_bytes / 1048576.0,
                info->draft.kv_bytes / 1048576.0, s.draft_s * 1e3);
    }
    if (m->n_spec_steps > 0)
        fprintf(stderr, "%-22s %d of %d guessed tokens accepted (%.0f %%), %.2f tokens/step\n",
                m->spec_from_draft ? "draft:" : "lookup:", m->n_accepted_tokens, m->n_draft_tokens,
                m->n_draft_tokens ? 100.0 * m->n_accepted_tokens / m->n_draft_tokens : 0.0,
                1.0 + (double)m->n_accepted_tokens / m->n_spec_steps);
    print_ms("total duration:", load_s + m->e2e_s);
    fprintf(stderr, "%-22s %s\n", "finish:", engine_status_name(m->status));
}

static void num_or_null(cJSON *o, const char *k, bool known, double v)
{
    if (known) cJSON_AddNumberToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

/* What --json says of a run. */
struct run_result {
    const struct engine_info *info;
    const char *reply;
    int32_t max_tokens;
    bool templated;
    double load_s, tok_s;
    enum engine_status status;
    const char *error;                  /* NULL when it ran to its end */
    const struct engine_metrics *m;     /* NULL when it never ran */
    const char *route_json;             /* --route: route_trail_json; NULL otherwise */
};

/* --json: the run as one object on stdout, as tern bench --json: the
 * reply, usage in OpenAI's terms, the phases of the -v block (null where a
 * server did not say) and the request's full metrics (engine_metrics_json:
 * every timestamp, the inter-token latencies). */
static void print_json(const struct run_result *r)
{
    const struct engine_info *in = r->info;
    const struct engine_metrics *m = r->m;
    cJSON *o = cJSON_CreateObject();
    if (!o) return;
    cJSON_AddStringToObject(o, "model", in->model_name ? in->model_name : "");
    cJSON_AddStringToObject(o, "arch", in->arch ? in->arch : "");
    cJSON_AddStringToObject(o, "backend", in->backend.name ? in->backend.name : "");
    cJSON_AddStringToObject(o, "device", in->backend.device);
    if (in->remote_url) cJSON_AddStringToObject(o, "url", in->remote_url);
    if (in->draft.name) cJSON_AddStringToObject(o, "draft_model", in->draft.name);
    cJSON_AddBoolToObject(o, "chat_template", r->templated);
    cJSON_AddNumberToObject(o, "max_tokens", r->max_tokens);
    cJSON_AddStringToObject(o, "reply", r->reply ? r->reply : "");
    cJSON_AddStringToObject(o, "status", engine_status_name(r->status));
    bool stop = r->status == ENGINE_OK || r->status == ENGINE_STOP;
    cJSON_AddStringToObject(o, "finish_reason", stop ? "stop"
                                                : r->status == ENGINE_LENGTH
                                                    ? "length"
                                                    : engine_status_name(r->status));
    if (r->error) cJSON_AddStringToObject(o, "error", r->error);
    if (m) {
        cJSON *u = cJSON_AddObjectToObject(o, "usage");
        cJSON_AddNumberToObject(u, "prompt_tokens", m->n_prompt);
        cJSON_AddNumberToObject(u, "completion_tokens", m->n_generated);
        cJSON_AddNumberToObject(u, "total_tokens", (double)m->n_prompt + m->n_generated);
        cJSON_AddNumberToObject(u, "cached_tokens", m->n_cached);
        cJSON *p = cJSON_AddObjectToObject(o, "phases");
        cJSON_AddNumberToObject(p, "load_s", r->load_s);
        cJSON_AddNumberToObject(p, "tokenize_s", r->tok_s);
        /* remote: the server's own queue and prefill, when it reported them */
        bool srv = !m->remote || m->server.known;
        num_or_null(p, "queue_s", srv, m->remote ? m->server.queue_s : m->queue_s);
        num_or_null(p, "prefill_s", srv, m->remote ? m->server.prefill_s : m->prefill_s);
        if (m->remote) {
            cJSON_AddNumberToObject(p, "connect_s", m->connect_s);
            cJSON_AddNumberToObject(p, "headers_s", m->headers_s);
        }
        cJSON_AddNumberToObject(p, "ttft_s", m->ttft_s);
        cJSON_AddNumberToObject(p, "tpot_s", m->tpot_s);
        cJSON_AddNumberToObject(p, "decode_s", m->decode_s);
        cJSON_AddNumberToObject(p, "e2e_s", m->e2e_s);
        cJSON_AddNumberToObject(p, "total_s", r->load_s + m->e2e_s);
        num_or_null(p, "prompt_tok_s", !m->remote && m->prefill_s > 0,
                    m->prefill_s > 0 ? m->n_computed / m->prefill_s : 0);
        num_or_null(p, "gen_tok_s", m->n_generated > 1 && m->tpot_s > 0,
                    m->tpot_s > 0 ? 1.0 / m->tpot_s : 0);
        cJSON *mj = engine_metrics_json(m);
        if (mj) cJSON_AddItemToObject(o, "metrics", mj);
    }
    cJSON *route = r->route_json ? cJSON_Parse(r->route_json) : NULL;
    if (route) cJSON_AddItemToObject(o, "route", route);
    textsafe_json(o); /* the reply may hold invalid UTF-8 */
    char *txt = cJSON_PrintUnformatted(o);
    if (txt) printf("%s\n", txt);
    fflush(stdout);
    free(txt);
    cJSON_Delete(o);
}

/* Prefill progress on stderr (a terminal, with -v): one line rewritten per
 * chunk, "prefill 1536/3072 tok  50%  ETA 2.1 s", erased at the first token,
 * so a long prompt never looks frozen. */
struct run_progress {
    bool on, shown;
    double t_admit;
    int32_t cached;
};

static void progress_event(struct run_progress *p, const struct engine_event *ev)
{
    if (!p->on) return;
    if (ev->type == ENGINE_EV_ADMITTED) {
        p->t_admit = ev->t;
        p->cached = ev->done;
    } else if (ev->type == ENGINE_EV_PREFILL && ev->done < ev->total) {
        double spent = ev->t - p->t_admit, eta = -1;
        if (ev->done > p->cached && spent > 0)
            eta = (ev->total - ev->done) * spent / (ev->done - p->cached);
        fprintf(stderr, "\rprefill %d/%d tok  %3.0f%%", ev->done, ev->total,
                100.0 * ev->done / (ev->total > 0 ? ev->total : 1));
        if (eta >= 0) fprintf(stderr, "  ETA %.1f s", eta);
        fputs("\033[K", stderr);
        p->shown = true;
    } else if (p->shown && (ev->type == ENGINE_EV_TOKEN || ev->type == ENGINE_EV_FINISHED)) {
        fputs("\r\033[K", stderr);
        p->shown = false;
    }
}

/* Streams the reply of request id to stdout (not with quiet: --json prints
 * it whole at the end); returns the final event's metrics (caller frees)
 * and the whole reply in *reply. */
static int stream_reply(struct engine *e, uint64_t id, struct run_history *hist, char **reply,
                        struct engine_event *fin, struct run_progress *prog, bool quiet)
{
    size_t len = 0, cap = 256;
    char *buf = malloc(cap);
    bool cancelled = false, tty = isatty(STDOUT_FILENO);
    struct engine_event evs[32];
    if (!buf) return -1;
    buf[0] = 0;
    for (;;) {
        if (run_interrupted && !cancelled) {
            engine_cancel(e, id);
            cancelled = true;
        }
        engine_wait_events(e, id, 0.1);
        int n = engine_poll_request(e, id, evs, 32);
        for (int i = 0; i < n; i++) {
            struct engine_event *ev = &evs[i];
            progress_event(prog, ev);
            if (ev->type == ENGINE_EV_TOKEN && ev->text && ev->text[0]) {
                size_t tl = strlen(ev->text);
                /* a terminal never gets the model's control sequences raw;
                 * a pipe gets the text as it came (and the history stores it) */
                if (!quiet) {
                    char *shown = tty ? textsafe_term(ev->text) : NULL;
                    fputs(shown ? shown : ev->text, stdout);
                    free(shown);
                    fflush(stdout);
                }
                store_reply_append(hist->db, hist->reply, ev->text, tl);
                if (len + tl + 1 > cap) {
                    while (len + tl + 1 > cap) cap *= 2;
                    char *nb = realloc(buf, cap);
                    if (nb) buf = nb;
                }
                if (len + tl + 1 <= cap) {
                    memcpy(buf + len, ev->text, tl + 1);
                    len += tl;
                }
            }
            if (ev->type == ENGINE_EV_FINISHED) {
                *fin = *ev;
                for (int k = i + 1; k < n; k++) engine_event_free(&evs[k]);
                if (!quiet && len > 0 && buf[len - 1] != '\n') fputc('\n', stdout);
                fflush(stdout);
                *reply = buf;
                return 0;
            }
            engine_event_free(ev);
        }
    }
}

/* engine_open with run's options; *load_s is how long the load took. */
static struct engine *run_engine_open(const struct run_opts *o, const struct cli *cli,
                                      const char *model_path, double *load_s)
{
    char err[1024];
    struct engine_config cfg = o->eng;
    cfg.model_path = model_path;
    cfg.trace_path = o->trace;
    char kvdir[4200];
    if (o->kv_disk) { /* the disk prompt cache (opt-in for run): chat's directory */
        cli_data_dir(kvdir, sizeof kvdir - 16);
        strcat(kvdir, "/kvcache");
        cfg.kv_disk_dir = kvdir;
        cfg.kv_disk_cap = o->kv_disk;
        cfg.kv_disk_log = stderr;
    }
    cli_engine_remote(cli, &cfg);
    double t0 = app_now_s();
    struct engine *e = cli_engine_open(cli, &cfg, err, sizeof err); /* --route: a route */
    if (!e) fprintf(stderr, "tern run: %s\n", err);
    *load_s = app_now_s() - t0;
    return e;
}

/* The reply limit: -n as asked, or a sane default (a base model would
 * otherwise fill the context). A server's cap per request (a tenant's
 * max_tokens) bounds the default, which the user did not ask for; an
 * explicit -n is sent as asked, for the server to refuse naming its cap. */
static int32_t reply_limit(const struct run_opts *o, const struct engine_info *info)
{
    int32_t max_tokens = (int32_t)o->max_tokens;
    if (max_tokens > 0) return max_tokens;
    max_tokens = info->n_ctx / 4 < 1024 ? info->n_ctx / 4 : 1024;
    if (info->max_tokens_cap > 0 && (max_tokens <= 0 || max_tokens > info->max_tokens_cap)) {
        max_tokens = info->max_tokens_cap;
        if (o->verbose)
            fprintf(stderr, "tern run: reply limit %d tokens (the server's cap per request)\n",
                    (int)max_tokens);
    }
    return max_tokens;
}

/* Builds the request (the chat template's messages, or the plain prompt of
 * --raw and base models) and submits it; fills r's max_tokens, templated and
 * tok_s. Returns the request's id, or 0 after saying why (and, with --json,
 * printing the refusal as the run's object). */
static uint64_t run_submit(struct engine *e, const struct run_opts *o,
                           const struct run_history *hist, const char *prompt,
                           struct run_result *r)
{
    char err[1024];
    const struct engine_info *info = r->info;
    struct engine_message *msgs = NULL;
    int32_t n_msgs = build_messages(hist, o, prompt, &msgs);
    r->max_tokens = reply_limit(o, info);
    bool base = !info->has_chat_template || info->chat_template_from_vocab;
    char *plain = NULL;
    if (base && !o->raw) {
        fprintf(stderr,
                "tern run: warning: %s is a base model (the file has no chat template): the "
                "prompt is continued as plain text, as with --raw\n",
                info->model_name);
        if (o->system && asprintf(&plain, "%s\n%s", o->system, prompt) < 0) plain = NULL;
    }
    struct engine_request q = {.sampling = o->sp, .max_tokens = r->max_tokens,
                               .stop = o->stop, .n_stop = o->n_stop,
                               .priority = ENGINE_PRIO_INTERACTIVE,
                               .ignore_eos = o->ignore_eos, .json_schema = o->schema};
    r->templated = !(o->raw || base);
    if (r->templated) {
        q.messages = msgs;
        q.n_messages = n_msgs;
    } else {
        q.prompt = plain ? plain : prompt;
    }
    enum engine_status why;
    double t0 = app_now_s();
    uint64_t id = engine_submit(e, &q, &why, err, sizeof err);
    r->tok_s = app_now_s() - t0;
    free(plain);
    free(msgs);
    if (!id) {
        fprintf(stderr, "tern run: %s: %s\n", engine_status_name(why), err);
        r->reply = "";
        r->status = why;
        r->error = err;
        if (o->json) print_json(r);
        r->error = NULL;
    }
    return id;
}

/* Streams request id to its end (Ctrl-C cancels it), records it in the
 * history, prints -v's block and --json's object; returns the exit code. */
static int run_stream(struct engine *e, uint64_t id, const struct run_opts *o,
                      struct run_history *hist, const char *model_path, const char *prompt,
                      struct run_result *r)
{
    struct sigaction sa = {.sa_handler = on_sigint}, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    char *reply = NULL;
    struct engine_event fin = {0};
    history_begin(hist, o, r->info->model_name, prompt);
    struct run_progress prog = {.on = o->verbose && isatty(STDERR_FILENO)};
    int rc = stream_reply(e, id, hist, &reply, &fin, &prog, o->json);
    sigaction(SIGINT, &old, NULL);
    if (rc != 0) {
        fprintf(stderr, "tern run: out of memory\n");
        return CLI_EXIT_FAIL;
    }
    enum engine_status st = fin.status;
    if (fin.metrics) {
        history_finish(hist, e, r->info, model_path, fin.metrics);
        if (o->verbose) print_verbose(e, r->info, r->load_s, r->tok_s, fin.metrics);
        if (o->verbose) print_route(e, fin.metrics->id);
        if (o->verbose) print_server_view(e);
    }
    bool failed = st != ENGINE_OK && st != ENGINE_STOP && st != ENGINE_LENGTH;
    if (st == ENGINE_CANCELLED && run_interrupted) rc = 130;
    else if (failed) {
        fprintf(stderr, "tern run: %s%s%s\n", engine_status_name(st), fin.message ? ": " : "",
                fin.message ? fin.message : "");
        rc = CLI_EXIT_FAIL;
    }
    if (o->json) {
        r->reply = reply;
        r->status = st;
        r->error = failed ? (fin.message ? fin.message : engine_status_name(st)) : NULL;
        r->m = fin.metrics;
        char *rj = fin.metrics ? route_trail_json(e, fin.metrics->id) : NULL;
        r->route_json = rj;
        print_json(r);
        free(rj);
    }
    engine_event_free(&fin);
    free(reply);
    return rc;
}

static int run(struct run_opts *o, const struct cli *cli, const char *model_path,
               const char *prompt)
{
    struct run_result r = {0};
    struct engine *e = run_engine_open(o, cli, model_path, &r.load_s);
    if (!e) return CLI_EXIT_FAIL;
    struct engine_info info;
    engine_info(e, &info);
    r.info = &info;
    cli_opt_warn_ctx(cli, o->eng.n_ctx, info.n_ctx_train);
    /* A fallback ("no usable GPU: ...; running on CPU") is said with -v, or
     * when a backend was asked for: auto on a CPU-only machine is not news. */
    if (info.backend.note[0] && (o->verbose || o->eng.backend.kind != BACKEND_AUTO))
        fprintf(stderr, "tern run: %s\n", info.backend.note);
    struct run_history hist;
    if (history_open(&hist, o) != 0) {
        engine_close(e);
        return CLI_EXIT_FAIL;
    }
    uint64_t id = run_submit(e, o, &hist, prompt, &r);
    int rc = id ? run_stream(e, id, o, &hist, model_path, prompt, &r) : CLI_EXIT_FAIL;
    store_transcript_free(&hist.prev);
    store_close(hist.db);
    engine_close(e);
    return rc;
}

static const char run_usage[] =
    "usage: tern run [OPTIONS] [PROMPT...]\n"
    "\n"
    "Generates one reply to a prompt and streams it to stdout. The prompt is the\n"
    "words after the options, or -p, or else stdin (one Ctrl-D ends it). The chat template is applied unless --raw; a base\n"
    "model (no chat template in the file) continues the prompt as plain text.\n"
    "\n"
    "  -p, --prompt TEXT        the prompt (default: the arguments, or stdin)\n"
    "  -c, --continue           continue the newest stored session (as llm -c)\n"
    "@system\n"
    "      --raw                send the prompt as is, without the chat template\n"
    "@max-tokens 1024 or a quarter of the context, whichever is less, within a server's cap per request with --url\n"
    "      --stop S             stop string (repeatable; never printed)\n"
    "      --json-schema FILE   reply with JSON that validates against the JSON Schema\n"
    "                           in FILE (decoding under its grammar; docs/SERVING.md)\n"
    "@temp 0.8\n"
    "@top-k 40\n"
    "@top-p 0.95\n"
    "@min-p 0.05\n"
    "@repeat-penalty 1\n"
    "@seed\n"
    "      --ignore-eos         keep generating past end-of-generation tokens\n"
    "@threads physical cores\n"
    "@backend auto\n"
    "@ctx the model's\n"
    "@kv-mem planned\n"
    "@kv-type f16\n"
    "      --kv-disk SIZE       disk prompt cache (off unless given): the prompt's KV is kept\n"
    "                           at exit, capped at SIZE (least recently used evicted), and a\n"
    "                           later run whose prompt begins the same restores it instead\n"
    "                           of prefilling (chat's cache, ~/.local/share/tern/kvcache)\n"
    "@step-tokens\n"
    "@lookup\n"
    "@lookup-k 6; 4 with --draft-model\n"
        "@draft-model\n"
    "      --trace FILE         write a Chrome trace-event JSON of the run\n"
    "      --db PATH            history database (default ~/.local/share/tern/history.db)\n"
    "      --no-history         do not record this exchange in the history\n"
    "  -v, --verbose            print load, prefill and decode timings to stderr\n"
    "                           (and, on a terminal, the prefill's progress)\n"
    "      --json               print the reply at the end as one JSON object: reply,\n"
    "                           status, finish_reason, usage, phases (load, queue,\n"
    "                           prefill, TTFT, TPOT, decode, end to end) and metrics\n"
    "\n" CLI_REMOTE_USAGE;
static const struct option run_longopts[] = {
    {"prompt", required_argument, 0, 'p'},
    CLI_SHARED(CLI_O_SYSTEM),
    {"raw", no_argument, 0, OPT_RAW},
    CLI_SHARED(CLI_O_MAX_TOKENS),
    {"stop", required_argument, 0, OPT_STOP},
    {"json-schema", required_argument, 0, OPT_JSON_SCHEMA},
    CLI_SHARED(CLI_O_TEMP),
    CLI_SHARED(CLI_O_TOP_K),
    CLI_SHARED(CLI_O_TOP_P),
    CLI_SHARED(CLI_O_MIN_P),
    CLI_SHARED(CLI_O_REPEAT_PENALTY),
    CLI_SHARED(CLI_O_SEED),
    {"ignore-eos", no_argument, 0, OPT_IGNORE_EOS},
    CLI_SHARED(CLI_O_THREADS),
    CLI_SHARED(CLI_O_BACKEND),
    CLI_SHARED(CLI_O_CTX),
    CLI_SHARED(CLI_O_KV_MEM),
    CLI_SHARED(CLI_O_KV_TYPE),
    CLI_SHARED(CLI_O_PROMPT_ATTN),
    CLI_SHARED(CLI_O_PREFILL_INT8),
    {"kv-disk", required_argument, 0, OPT_KV_DISK},
    CLI_SHARED(CLI_O_STEP_TOKENS),
    CLI_SHARED(CLI_O_LOOKUP),
    CLI_SHARED(CLI_O_LOOKUP_K),
    CLI_SHARED(CLI_O_DRAFT_MODEL),
    {"trace", required_argument, 0, OPT_TRACE},
    {"db", required_argument, 0, OPT_DB},
    {"no-history", no_argument, 0, OPT_NO_HISTORY},
    {"continue", no_argument, 0, OPT_CONTINUE},
    {"verbose", no_argument, 0, 'v'},
    {"json", no_argument, 0, OPT_JSON},
    {0, 0, 0, 0},
};

/* The words after the options, joined by spaces (malloc'd), or NULL. */
static char *join_args(const struct cli *cli)
{
    size_t len = 1;
    for (int i = 0; i < cli->argc; i++) len += strlen(cli->argv[i]) + 1;
    char *s = malloc(len);
    if (!s) return NULL;
    s[0] = 0;
    for (int i = 0; i < cli->argc; i++) {
        if (i) strcat(s, " ");
        strcat(s, cli->argv[i]);
    }
    return s;
}

/* The options that can be judged before the model loads: the prompt given
 * once, a trace file that can be written (an error now, not at the end),
 * --system with the template, the schema's file read. Sets o->prompt to
 * the joined words (*joined, the caller frees). Returns 0 or an exit code. */
static int check_opts(struct run_opts *o, const struct cli *cli, char **joined)
{
    if (cli->argc > 0 && o->prompt) {
        fprintf(stderr, "tern run: a prompt with -p and another one '%s'\n", cli->argv[0]);
        return CLI_EXIT_USAGE;
    }
    if (cli->argc > 0) {
        if (!(*joined = join_args(cli))) return CLI_EXIT_USAGE;
        o->prompt = *joined;
    }
    if (o->trace) {
        FILE *tf = fopen(o->trace, "a");
        if (!tf) {
            fprintf(stderr, "tern run: --trace %s: %s\n", o->trace, strerror(errno));
            return CLI_EXIT_FAIL;
        }
        fclose(tf);
    }
    if (o->raw && o->system) {
        fprintf(stderr, "tern run: --system needs the chat template (drop --raw)\n");
        return CLI_EXIT_USAGE;
    }
    if (o->json_schema && !(o->schema = read_schema(o->json_schema))) return CLI_EXIT_FAIL;
    return 0;
}

int cmd_run(int argc, char **argv)
{
    struct cli cli;
    struct run_opts o = {.cli = &cli};
    engine_config_default(&o.eng);
    engine_sampling_default(&o.sp);
    char *joined = NULL, *in = NULL;
    int rc = cli_parse(&cli, argc, argv, "p:vc", run_longopts, on_opt, &o, run_usage);
    if (rc >= 0) goto done;
    if ((rc = check_opts(&o, &cli, &joined)) != 0) goto done;
    char model[4096], err[1024];
    if (cli.n_urls == 0 && cli_model_path(&cli, model, sizeof model, err, sizeof err) != 0) {
        fprintf(stderr, "tern run: %s\n", err);
        rc = CLI_EXIT_FAIL;
        goto done;
    }
    const char *prompt = o.prompt;
    if (!prompt) {
        if (isatty(STDIN_FILENO)) fprintf(stderr, "tern run: reading the prompt from stdin...\n");
        if (!(in = read_stdin())) {
            fprintf(stderr, "tern run: out of memory reading stdin\n");
            rc = CLI_EXIT_FAIL;
            goto done;
        }
        prompt = in;
    }
    if (!prompt[0]) {
        fprintf(stderr, "tern run: empty prompt\n");
        rc = CLI_EXIT_FAIL;
    } else {
        rc = run(&o, &cli, model, prompt);
    }
done:
    free(in);
    free(joined);
    free(o.schema);
    cli_free(&cli);
    return rc;
}
