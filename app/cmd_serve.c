/* cmd_serve: 'tern serve' — the engine behind an OpenAI-compatible HTTP API
 * (ui/http). Listens at once (/health), loads the model, runs one warm-up
 * request (then /ready is 200), serves until SIGTERM/SIGINT, then drains:
 * running streams finish (up to --drain-timeout) or end with a final
 * "cancelled" chunk, and the history is flushed. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_opts.h"
#include "clock.h"
#include "commands.h"
#include "engine.h"
#include "http_server.h"
#include "store.h"

enum {
    OPT_HOST = CLI_OPT_CMD, OPT_PORT, OPT_KEYS, OPT_INSECURE, OPT_ACCESS_LOG, OPT_LOG_CONTENT,
    OPT_NO_HISTORY, OPT_DB, OPT_MAX_RUNNING, OPT_MAX_QUEUE, OPT_EVENT_LIMIT, OPT_QUEUE_TIMEOUT, OPT_DRAIN,
    OPT_MAX_BODY, OPT_MAX_CONNS, OPT_TIMEOUT, OPT_TRACE, OPT_KV_DISK, OPT_CACHE_TEXT
};

struct serve_opts {
    const struct cli *cli;
    struct http_config http;
    const char *db_path, *trace;
    bool no_history;
    struct engine_config eng;      /* the shared engine options (cli_engine_opt) */
    char draft_model[4096];        /* --draft-model, resolved */
    long max_running, max_queue, event_limit, max_conns, timeout, max_tokens, port;
    double queue_timeout, drain_timeout;
    unsigned long long max_body, kv_disk;
};

static int on_opt(int c, const char *arg, void *ud)
{
    struct serve_opts *o = ud;
    switch (c) {
    case OPT_HOST: o->http.host = arg; return 0;
    case OPT_PORT: return cli_int(o->cli, "--port", arg, 0, 65535, &o->port);
    case OPT_KEYS: o->http.api_key_file = arg; return 0;
    case OPT_INSECURE: o->http.insecure = true; return 0;
    case OPT_ACCESS_LOG: o->http.access_log = arg; return 0;
    case OPT_LOG_CONTENT: o->http.log_content = true; return 0;
    case OPT_NO_HISTORY: o->no_history = true; return 0;
    case OPT_DB: o->db_path = arg; return 0;
    case OPT_TRACE: o->trace = arg; return 0;
    case OPT_KV_DISK: return cli_size(o->cli, "--kv-disk", arg, &o->kv_disk);
    case OPT_CACHE_TEXT: o->http.cache_text = true; return 0;
    case OPT_MAX_RUNNING: return cli_int(o->cli, "--max-running", arg, 1, 4096, &o->max_running);
    case OPT_MAX_QUEUE: return cli_int(o->cli, "--max-queue", arg, 1, 1 << 20, &o->max_queue);
    case OPT_EVENT_LIMIT: return cli_int(o->cli, "--event-limit", arg, 8, 1 << 24, &o->event_limit);
    case OPT_MAX_CONNS: return cli_int(o->cli, "--max-conns", arg, 4, 65536, &o->max_conns);
    case OPT_TIMEOUT: return cli_int(o->cli, "--timeout", arg, 1, 3600, &o->timeout);
    case CLI_O_MAX_TOKENS: return cli_opt_long(o->cli, CLI_O_MAX_TOKENS, arg, &o->max_tokens);
    case OPT_QUEUE_TIMEOUT:
        return cli_double(o->cli, "--queue-timeout", arg, 0.001, 86400, &o->queue_timeout);
    case OPT_DRAIN: return cli_double(o->cli, "--drain-timeout", arg, 0, 86400, &o->drain_timeout);
    case OPT_MAX_BODY: return cli_size(o->cli, "--max-body", arg, &o->max_body);
    }
    /* the engine options every command shares; anything else is not serve's */
    int rc = cli_engine_opt(o->cli, c, arg, &o->eng, o->draft_model, sizeof o->draft_model);
    return rc == 0 ? 0 : -1;
}

/* One short greedy request through the whole path: /ready means the model answers. */
static int warm_up(struct engine *e, char *err, size_t errlen)
{
    struct engine_request q = {.prompt = "Hello", .max_tokens = 2,
                               .priority = ENGINE_PRIO_INTERACTIVE};
    engine_sampling_greedy(&q.sampling);
    enum engine_status why;
    uint64_t id = engine_submit(e, &q, &why, err, errlen);
    if (!id) return -1;
    struct engine_event evs[16];
    for (;;) {
        engine_wait_events(e, id, 1.0);
        int n = engine_poll_request(e, id, evs, 16);
        for (int i = 0; i < n; i++) {
            bool fin = evs[i].type == ENGINE_EV_FINISHED;
            enum engine_status st = evs[i].status;
            if (fin && st != ENGINE_OK && st != ENGINE_STOP && st != ENGINE_LENGTH)
                snprintf(err, errlen, "warm-up: %s", engine_status_name(st));
            engine_event_free(&evs[i]);
            if (fin) {
                for (int k = i + 1; k < n; k++) engine_event_free(&evs[k]);
                return (st == ENGINE_OK || st == ENGINE_STOP || st == ENGINE_LENGTH) ? 0 : -1;
            }
        }
    }
}

/* The id /v1/models lists: the file's name without folder and ".gguf". */
static void model_id(const char *path, char *out, size_t n)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t l = strlen(b);
    if (l >= n) l = n - 1;
    memcpy(out, b, l);
    out[l] = 0;
    if (l > 5 && strcmp(out + l - 5, ".gguf") == 0) out[l - 5] = 0;
}

/* Waits for SIGTERM/SIGINT, running the server's watchdog once a second. */
static int wait_signal(struct http_server *srv)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    struct timespec second = {1, 0};
    for (;;) {
        int sig = sigtimedwait(&set, NULL, &second);
        if (sig == SIGINT || sig == SIGTERM) return sig;
        http_server_tick(srv);
    }
}

static int serve(struct serve_opts *o, const char *model_path)
{
    char err[1024], id[256];
    struct store *db = NULL;
    struct http_server *srv = NULL;
    struct engine *e = NULL;
    int rc = CLI_EXIT_FAIL;
    /* Signals go to the main thread's sigwait only: every thread started
     * from here on inherits this mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (!o->no_history && store_open(&db, o->db_path, STORE_READWRITE, err, sizeof err) != 0) {
        fprintf(stderr, "tern serve: history off: %s\n", err);
        db = NULL;
    }
    o->http.store = db;
    o->http.model_path = model_path;
    model_id(model_path, id, sizeof id);
    o->http.model_id = id;
    o->http.port = (int)o->port;
    o->http.max_conns = (int)o->max_conns;
    o->http.conn_timeout_s = (int)o->timeout;
    o->http.queue_timeout_s = o->queue_timeout;
    o->http.max_body = (size_t)o->max_body;
    o->http.max_tokens_default = (int32_t)o->max_tokens;
    if (http_server_open(&srv, &o->http, err, sizeof err) != 0) {
        fprintf(stderr, "tern serve: %s\n", err);
        goto done;
    }
    const char *host = o->http.host ? o->http.host : "127.0.0.1";
    fprintf(stderr, "tern serve: listening on http://%s:%d\n", host, http_server_port(srv));
    if (!o->http.api_key_file)
        fprintf(stderr, "tern serve: no --api-key-file: no authentication%s\n",
                o->http.insecure ? " (--insecure)" : "; loopback only");
    struct engine_config cfg = o->eng;
    cfg.model_path = model_path;
    cfg.trace_path = o->trace;
    char kvdir[4200];
    cli_data_dir(kvdir, sizeof kvdir - 16);
    strcat(kvdir, "/kvcache");
    if (o->kv_disk) { /* the disk prompt cache: asked for (a server's clients' prompts
                         stay off the disk unless the operator says so) */
        cfg.kv_disk_dir = kvdir;
        cfg.kv_disk_cap = o->kv_disk;
        cfg.kv_disk_log = stderr;
    }
    if (o->max_running) cfg.max_running = (int32_t)o->max_running;
    if (o->max_queue) cfg.max_queue = (int32_t)o->max_queue;
    if (o->event_limit) cfg.event_limit = (int32_t)o->event_limit;
    double t0 = app_now_s();
    e = cli_engine_open(o->cli, &cfg, err, sizeof err);
    if (!e) {
        fprintf(stderr, "tern serve: %s\n", err);
        goto done;
    }
    struct engine_info info;
    engine_info(e, &info);
    cli_opt_warn_ctx(o->cli, o->eng.n_ctx, info.n_ctx_train);
    if (warm_up(e, err, sizeof err) != 0) {
        fprintf(stderr, "tern serve: %s\n", err);
        goto done;
    }
    http_server_set_engine(srv, e);
    fprintf(stderr, "tern serve: ready: model %s (loaded and warmed up in %.2f s)\n", id,
            app_now_s() - t0);
    int sig = wait_signal(srv);
    fprintf(stderr, "tern serve: %s: draining (up to %.0f s)\n",
            sig == SIGTERM ? "SIGTERM" : "SIGINT", o->drain_timeout);
    int n = http_server_drain(srv, o->drain_timeout);
    if (n) fprintf(stderr, "tern serve: cancelled %d request(s) still running\n", n);
    rc = 0;
done:
    http_server_close(srv);
    if (db && store_flush(db, err, sizeof err) != 0)
        fprintf(stderr, "tern serve: history: %s\n", err);
    store_close(db);
    engine_close(e);
    return rc;
}

int cmd_serve(int argc, char **argv)
{
    static const char use[] =
        "usage: tern serve [OPTIONS]\n"
        "\n"
        "Serves the model over an OpenAI-compatible HTTP API: POST /v1/chat/completions,\n"
        "/v1/completions, /v1/embeddings; GET /v1/models, /health, /ready, /metrics,\n"
        "/v1/tern/status.\n"
        "\n"
        "      --host ADDR          bind address (default 127.0.0.1; others need keys or --insecure)\n"
        "      --port N             port (default 8080; 0 = any free port)\n"
        "      --api-key-file FILE  'KEY tenant=NAME [priority=interactive|batch]\n"
        "                           [rpm=N] [burst=N] [tpm=N] [max_tokens=N] [concurrency=N]' per line;\n"
        "                           KEY: at least 8 characters; '#' starts a comment\n"
        "      --insecure           allow a non-loopback address without keys\n"
        "      --access-log FILE    JSON lines (default ~/.local/state/tern/access.log; - = stderr)\n"
        "      --log-content        put prompts into the access log\n"
        "      --db PATH            history database (default ~/.local/share/tern/history.db)\n"
        "      --no-history         do not record requests in the history\n"
        "@max-tokens\n"
        "                           for a request that gives none (clamped to the\n"
        "                           tenant's max_tokens; asking more than that is a 400)\n"
        "      --queue-timeout S    admission wait before a 504 (default 60)\n"
        "      --drain-timeout S    on SIGTERM, wait this long for streams (default 30)\n"
        "      --max-body SIZE      request body limit (default 8M; over it: 413)\n"
        "      --max-conns N        concurrent connections (default 256)\n"
        "      --timeout S          drop a client idle this long (default 15)\n"
        "@threads physical cores\n"
        "@backend auto\n"
        "@ctx the model's\n"
        "@kv-mem planned\n"
        "@kv-type f16\n"
        "@step-tokens\n"
        "@lookup\n"
        "@lookup-k 6; 4 with --draft-model\n"
        "@draft-model\n"
        "      --max-running N      running sequences cap (default 64)\n"
        "      --max-queue N        waiting queue bound (default 256; over it: 429)\n"
        "      --event-limit N      undrained events before a stream is consumer-stalled\n"
        "      --trace FILE         Chrome trace-event JSON (spans tagged with request id, tenant)\n"
        "      --kv-disk SIZE       disk prompt cache: recent prefixes' KV kept at exit, and a\n"
        "                           prompt beginning with one loads it instead of prefilling;\n"
        "                           at most SIZE in $XDG_DATA_HOME/tern/kvcache (default off);\n"
        "                           GET /v1/tern/cache lists the cache (hashes and counts)\n"
        "      --cache-text         /v1/tern/cache also shows each prefix's opening text\n"
        "      --route T1,T2,...    serve through a fallback route (local and/or replica URLs)\n"
        "      --route-ttft MS      route: move on when no first token after MS ms\n";
    static const struct option longopts[] = {
        {"host", required_argument, 0, OPT_HOST},
        {"port", required_argument, 0, OPT_PORT},
        {"api-key-file", required_argument, 0, OPT_KEYS},
        {"insecure", no_argument, 0, OPT_INSECURE},
        {"access-log", required_argument, 0, OPT_ACCESS_LOG},
        {"log-content", no_argument, 0, OPT_LOG_CONTENT},
        {"db", required_argument, 0, OPT_DB},
        {"no-history", no_argument, 0, OPT_NO_HISTORY},
        CLI_SHARED(CLI_O_MAX_TOKENS),
        {"queue-timeout", required_argument, 0, OPT_QUEUE_TIMEOUT},
        {"drain-timeout", required_argument, 0, OPT_DRAIN},
        {"max-body", required_argument, 0, OPT_MAX_BODY},
        {"max-conns", required_argument, 0, OPT_MAX_CONNS},
        {"timeout", required_argument, 0, OPT_TIMEOUT},
        CLI_SHARED(CLI_O_THREADS),
        CLI_SHARED(CLI_O_BACKEND),
        CLI_SHARED(CLI_O_CTX),
        CLI_SHARED(CLI_O_KV_MEM),
        CLI_SHARED(CLI_O_KV_TYPE),
        CLI_SHARED(CLI_O_PROMPT_ATTN),
        CLI_SHARED(CLI_O_PREFILL_INT8),
        CLI_SHARED(CLI_O_STEP_TOKENS),
        CLI_SHARED(CLI_O_LOOKUP),
        CLI_SHARED(CLI_O_LOOKUP_K),
        CLI_SHARED(CLI_O_DRAFT_MODEL),
        {"max-running", required_argument, 0, OPT_MAX_RUNNING},
        {"max-queue", required_argument, 0, OPT_MAX_QUEUE},
        {"event-limit", required_argument, 0, OPT_EVENT_LIMIT},
        {"trace", required_argument, 0, OPT_TRACE},
        {"kv-disk", required_argument, 0, OPT_KV_DISK},
        {"cache-text", no_argument, 0, OPT_CACHE_TEXT},
        {0, 0, 0, 0},
    };
    struct cli cli;
    struct serve_opts o = {.cli = &cli, .port = 8080, .queue_timeout = 60, .drain_timeout = 30,
                           .timeout = 15, .max_conns = 256, .max_body = 8u << 20};
    engine_config_default(&o.eng);
    int rc = cli_parse(&cli, argc, argv, "", longopts, on_opt, &o, use);
    if (rc >= 0) goto done;
    rc = CLI_EXIT_USAGE;
    if (cli.argc > 0) {
        fprintf(stderr, "tern serve: unexpected argument '%s'\n", cli.argv[0]);
        goto done;
    }
    char model[4096], err[1024];
    if (cli_model_path(&cli, model, sizeof model, err, sizeof err) != 0) {
        fprintf(stderr, "tern serve: %s\n", err);
        rc = CLI_EXIT_FAIL;
        goto done;
    }
    rc = serve(&o, model);
done:
    cli_free(&cli);
    return rc;
}
