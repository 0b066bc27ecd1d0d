/* http_stream: POST /v1/chat/completions and /v1/completions. Parses the
 * body (engine/wire), applies the tenant's limits, submits to the engine and
 * drives the reply from the engine's events: one JSON body, or SSE chunks
 * from a response callback that runs on the connection's own thread. A
 * client that hangs up is seen on its socket (POLLRDHUP) within 0.2 s and
 * its request cancelled at once; one that stops reading stops draining its
 * events, and the engine ends it as consumer-stalled. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "http_impl.h"
#include "route.h"
#include "http_lp.h"
#include "oai_response.h"
#include "store.h"

#define POLL_S 0.2
#define N_EVS 64

static bool client_gone(int fd)
{
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static void list_add(struct http_server *s, struct http_stream *st)
{
    pthread_mutex_lock(&s->mu);
    st->next = s->streams;
    s->streams = st;
    pthread_mutex_unlock(&s->mu);
}

static void list_remove(struct http_server *s, struct http_stream *st)
{
    pthread_mutex_lock(&s->mu);
    for (struct http_stream **p = &s->streams; *p; p = &(*p)->next)
        if (*p == st) {
            *p = st->next;
            break;
        }
    pthread_mutex_unlock(&s->mu);
}

int http_stream_cancel_all(struct http_server *s)
{
    int n = 0;
    struct engine *e = atomic_load(&s->engine);
    pthread_mutex_lock(&s->mu);
    for (struct http_stream *st = s->streams; st; st = st->next)
        if (e && engine_cancel(e, st->id) == 0) n++;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int http_stream_watchdog(struct http_server *s, double timeout_s)
{
    int n = 0;
    double now = http_now();
    pthread_mutex_lock(&s->mu);
    for (struct http_stream *st = s->streams; st; st = st->next) {
        if (!atomic_load(&st->streaming) || st->shut || st->fd < 0) continue;
        if (now - atomic_load(&st->t_progress) > timeout_s) {
            shutdown(st->fd, SHUT_RDWR); /* MHD sees the error and ends the connection */
            st->shut = true;
            n++;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* History row: the request's phases, with tenant and request id in its params. */
static void history_row(struct http_stream *st, const struct engine_metrics *m)
{
    struct http_server *s = st->srv;
    if (!s->cfg.store) return;
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "tenant", st->tenant);
    cJSON_AddStringToObject(p, "request_id", st->request_id);
    cJSON_AddStringToObject(p, "route", st->route);
    cJSON_AddBoolToObject(p, "client_disconnected", st->disconnected);
    cJSON_AddStringToObject(p, "source", "serve");
    char *pj = cJSON_PrintUnformatted(p);
    cJSON_Delete(p);
    struct store_request r = {.model = s->model_id, .model_file = s->cfg.model_path,
                              .backend = "cpu", .params_json = pj,
                              .status = engine_status_name(m->status), .queue_s = m->queue_s,
                              .prefill_s = m->prefill_s, .ttft_s = m->ttft_s,
                              .tpot_s = m->tpot_s, .decode_s = m->decode_s, .e2e_s = m->e2e_s,
                              .prompt_tokens = m->n_prompt, .cached_tokens = m->n_cached,
                              .generated_tokens = m->n_generated};
    struct engine *e = atomic_load(&s->engine);
    struct engine_info in;
    char *rj = NULL;
    if (e) {
        engine_info(e, &in);
        r.backend = in.backend.name;
        r.route_json = rj = route_trail_json(e, m->id);
    }
    store_request_add(s->cfg.store, 0, &r);
    free(rj);
    free(pj);
}

/* Once per admitted request: quota release, metrics, access log, history. */
static void account(struct http_stream *st, const char *error)
{
    if (st->accounted) return;
    st->accounted = true;
    struct engine_metrics zero = {.status = ENGINE_ERROR};
    const struct engine_metrics *m = st->fin.metrics ? st->fin.metrics : &zero;
    http_auth_release(st->srv->auth, st->t, m->n_generated);
    http_metrics_finish(st->srv->metrics, m, st->request_id, st->tenant, st->route,
                        st->disconnected);
    struct http_log_rec rec = {.request_id = st->request_id, .tenant = st->tenant,
                               .method = "POST", .route = st->route, .status = st->http_status,
                               .model = st->model, .finish = oai_finish_reason(m->status),
                               .error = error ? error : st->fin.message,
                               .disconnected = st->disconnected, .stream = st->stream,
                               .m = st->fin.metrics, .content = st->content,
                               .http_s = http_now() - st->t0};
    if (m->status == ENGINE_STOP || m->status == ENGINE_OK || m->status == ENGINE_LENGTH)
        rec.error = NULL;
    http_log_write(st->srv->log, &rec);
    history_row(st, m);
    atomic_fetch_sub(&st->srv->active, 1);
}

static void stream_free(struct http_stream *st)
{
    list_remove(st->srv, st);
    engine_event_free(&st->fin);
    sse_buf_free(&st->out);
    sse_buf_free(&st->text);
    free(st->content);
    http_lp_free(st->lp);
    oai_tools_free(st->tools);
    free(st->tools);
    free(st);
}

/* Waits (bounded) for the FINISHED event of a cancelled request so that its
 * figures are logged; drops its other events. */
static void drain_to_finish(struct http_stream *st, struct engine *e, double max_s)
{
    struct engine_event evs[N_EVS];
    double end = http_now() + max_s;
    while (!st->finished && http_now() < end) {
        engine_wait_events(e, st->id, POLL_S);
        int n = engine_poll_request(e, st->id, evs, N_EVS);
        for (int i = 0; i < n; i++) {
            if (evs[i].type == ENGINE_EV_FINISHED && !st->finished) {
                st->fin = evs[i];
                st->finished = true;
            } else {
                engine_event_free(&evs[i]);
            }
        }
    }
}

/* ---- SSE ------------------------------------------------------------------------- */

static void ctx_of(const struct http_stream *st, struct oai_resp_ctx *c, int64_t created)
{
    *c = (struct oai_resp_ctx){st->kind, st->resp_id, st->model, created, st->request_id};
}

static void sse_json(struct http_stream *st, char *json)
{
    if (json) sse_event(&st->out, NULL, json, strlen(json));
    free(json);
}

/* Tool call ids: "call_" + the response id's serial + "_" + the call's index. */
static void call_id_prefix(const struct http_stream *st, char *out, size_t cap)
{
    const char *dash = strchr(st->resp_id, '-');
    snprintf(out, cap, "call_%s_", dash ? dash + 1 : st->resp_id);
}

/* A forced call streams as it is decoded: a first tool_calls chunk with its
 * id and name once the name is complete, then its arguments' bytes as they
 * arrive (oai_tools_forced_progress). */
static void stream_forced(struct http_stream *st, const struct oai_resp_ctx *c)
{
    char *name = NULL, idp[64], id[80];
    size_t from, to;
    bool done;
    oai_tools_forced_progress(st->text.p, st->text.len, &name, &from, &to, &done);
    cJSON *calls = NULL;
    if (name && !st->call_open) {
        call_id_prefix(st, idp, sizeof idp);
        snprintf(id, sizeof id, "%s0", idp);
        cJSON *call = cJSON_CreateObject(), *fn = cJSON_CreateObject();
        cJSON_AddStringToObject(call, "id", id);
        cJSON_AddStringToObject(call, "type", "function");
        cJSON_AddStringToObject(fn, "name", name);
        cJSON_AddStringToObject(fn, "arguments", "");
        cJSON_AddItemToObject(call, "function", fn);
        calls = cJSON_CreateArray();
        cJSON_AddItemToArray(calls, call);
        st->call_open = true;
    }
    free(name);
    if (calls) {
        char *base = oai_chunk_build(c, false, NULL, NULL, NULL);
        sse_json(st, base ? oai_tools_chunk(base, calls) : (cJSON_Delete(calls), NULL));
        free(base);
    }
    if (!st->call_open || to <= from + st->args_sent) return;
    char *piece = strndup(st->text.p + from + st->args_sent, to - from - st->args_sent);
    st->args_sent = to - from;
    cJSON *call = cJSON_CreateObject(), *fn = cJSON_CreateObject();
    cJSON_AddStringToObject(fn, "arguments", piece ? piece : "");
    cJSON_AddItemToObject(call, "function", fn);
    calls = cJSON_CreateArray();
    cJSON_AddItemToArray(calls, call);
    free(piece);
    char *base = oai_chunk_build(c, false, NULL, NULL, NULL);
    sse_json(st, base ? oai_tools_chunk(base, calls) : (cJSON_Delete(calls), NULL));
    free(base);
}

/* One tool_calls chunk of a call at index k: its head (id, name, empty
 * arguments) when name is set, else a piece of its arguments. */
static void call_chunk(struct http_stream *st, const struct oai_resp_ctx *c, int k,
                       const char *name, const char *args, size_t args_len)
{
    cJSON *call = cJSON_CreateObject(), *fn = cJSON_CreateObject(), *calls = cJSON_CreateArray();
    if (name) {
        char idp[64], id[80];
        call_id_prefix(st, idp, sizeof idp);
        snprintf(id, sizeof id, "%s%d", idp, k);
        cJSON_AddStringToObject(call, "id", id);
        cJSON_AddStringToObject(call, "type", "function");
        cJSON_AddStringToObject(fn, "name", name);
    }
    char *piece = strndup(args, args_len);
    cJSON_AddStringToObject(fn, "arguments", piece ? piece : "");
    free(piece);
    cJSON_AddItemToObject(call, "function", fn);
    cJSON_AddItemToArray(calls, call);
    char *base = oai_chunk_build(c, false, NULL, NULL, NULL);
    sse_json(st, base ? oai_tools_chunk_from(base, calls, k) : (cJSON_Delete(calls), NULL));
    free(base);
}

#define STREAM_MAX_CALLS 64

/* Auto mode: calls stream as they are written, each head once its name is
 * complete and a tool's, then its arguments' bytes as they arrive
 * (oai_tools_stream_progress). Returns the calls begun so far; *end gets
 * where the last of them ends, 0 while it is open. */
static int stream_auto(struct http_stream *st, const struct oai_resp_ctx *c, size_t *end)
{
    struct oai_call_progress p[STREAM_MAX_CALLS];
    int n = oai_tools_stream_progress(st->tools, st->text.p, st->text.len, p, STREAM_MAX_CALLS);
    *end = 0;
    for (int k = st->auto_calls > 0 ? st->auto_calls - 1 : 0; k < n; k++) {
        if (k >= st->auto_calls) {
            call_chunk(st, c, k, p[k].name, "", 0);
            st->auto_calls = k + 1;
            st->auto_sent = 0;
        }
        size_t have = p[k].args_to - p[k].args_from;
        if (have > st->auto_sent) {
            call_chunk(st, c, k, NULL, st->text.p + p[k].args_from + st->auto_sent,
                       have - st->auto_sent);
            st->auto_sent = have;
        }
    }
    if (n > 0) *end = p[n - 1].end;
    oai_tools_progress_free(p, n);
    return n;
}

/* Answer text of a stream: out as it comes, or held while it may be a call. */
static void emit_content(struct http_stream *st, const char *text)
{
    struct oai_resp_ctx c;
    ctx_of(st, &c, (int64_t)time(NULL));
    if (st->holding) {
        /* With tools, text that may begin a call waits for the end, where it
         * becomes tool_calls; text that cannot goes out as it comes. */
        sse_buf_add(&st->text, text, strlen(text));
        if (st->tools->choice >= OAI_TOOLS_REQUIRED) {
            stream_forced(st, &c);
            return;
        }
        if (st->tools->choice != OAI_TOOLS_AUTO) return;
        size_t end;
        if (st->auto_calls == 0 && !oai_tools_maybe_call(st->text.p, st->text.len)) {
            st->holding = false;
            sse_json(st, oai_chunk_build_lp(&c, false, st->text.p, NULL, NULL,
                                            http_lp_chunk(st->lp)));
        } else {
            stream_auto(st, &c, &end);
        }
        return;
    }
    sse_json(st, oai_chunk_build_lp(&c, false, text, NULL, NULL, http_lp_chunk(st->lp)));
}

/* Thinking of a stream, as delta.reasoning_content. */
static void emit_reasoning(struct http_stream *st, const char *text)
{
    struct oai_resp_ctx c;
    ctx_of(st, &c, (int64_t)time(NULL));
    char *base = oai_chunk_build_lp(&c, false, "", NULL, NULL, http_lp_chunk(st->lp));
    sse_json(st, base ? oai_think_chunk(base, text) : NULL);
    free(base);
}

/* A chat stream's text through the <think> splitter; flush at the end. */
static void split_out(struct http_stream *st, const char *text, bool flush)
{
    struct sse_buf r = {0}, a = {0};
    if (flush) oai_think_flush(&st->think, &r, &a);
    else oai_think_push(&st->think, text, strlen(text), &r, &a);
    if (r.len) emit_reasoning(st, r.p);
    if (a.len) emit_content(st, a.p);
    sse_buf_free(&r);
    sse_buf_free(&a);
}

static void on_token(struct http_stream *st, const struct engine_event *ev)
{
    const char *text = ev->text;
    http_lp_token(st->lp, ev);
    if (!text || !text[0]) return;
    if (!st->stream) {
        sse_buf_add(&st->text, text, strlen(text));
        return;
    }
    if (st->kind == OAI_CHAT) split_out(st, text, false);
    else emit_content(st, text);
}

/* The held text of a tools stream at its end: tool_calls chunks when it
 * makes calls (their finish reason then "tool_calls"), else the text. */
static const char *flush_held(struct http_stream *st, const struct oai_resp_ctx *c,
                              enum engine_status s)
{
    if (!st->holding) return oai_finish_reason(s);
    st->holding = false;
    if (st->call_open) { /* a forced call already streaming: its last bytes, then the end */
        char *name = NULL;
        size_t from, to;
        bool done;
        stream_forced(st, c);
        oai_tools_forced_progress(st->text.p, st->text.len, &name, &from, &to, &done);
        free(name);
        return done && s != ENGINE_LENGTH ? "tool_calls" : oai_finish_reason(s);
    }
    if (st->auto_calls > 0) { /* calls streamed: their last bytes, then any text after them */
        size_t end;
        stream_auto(st, c, &end);
        const char *rest = end ? st->text.p + end : "";
        while (*rest == ' ' || *rest == '\n' || *rest == '\t' || *rest == '\r') rest++;
        if (*rest) sse_json(st, oai_chunk_build(c, false, rest, NULL, NULL));
        /* a call cut by max_tokens ends as "length", as a cut forced call does */
        return end == 0 && s == ENGINE_LENGTH ? oai_finish_reason(s) : "tool_calls";
    }
    const char *text = st->text.p ? st->text.p : "";
    char *content = NULL;
    char idp[64];
    call_id_prefix(st, idp, sizeof idp);
    cJSON *calls = s == ENGINE_STOP || s == ENGINE_OK || s == ENGINE_LENGTH
                       ? oai_tools_parse_reply(st->tools, text, idp, &content)
                       : NULL;
    if (!calls) {
        if (text[0]) sse_json(st, oai_chunk_build(c, false, text, NULL, NULL));
        return oai_finish_reason(s);
    }
    if (content) sse_json(st, oai_chunk_build(c, false, content, NULL, NULL));
    free(content);
    char *base = oai_chunk_build(c, false, NULL, NULL, NULL);
    sse_json(st, base ? oai_tools_chunk(base, calls) : (cJSON_Delete(calls), NULL));
    free(base);
    return "tool_calls";
}

/* The stream's end: the finish chunk (with the tern block), the usage chunk
 * when asked, then [DONE]; an engine failure is an OpenAI error event. */
static void on_finished(struct http_stream *st)
{
    struct oai_resp_ctx c;
    ctx_of(st, &c, (int64_t)time(NULL));
    const struct engine_metrics *m = st->fin.metrics;
    enum engine_status s = st->fin.status;
    if (s == ENGINE_ERROR || s == ENGINE_TIMEOUT || s == ENGINE_REJECTED) {
        sse_json(st, oai_error_build(st->fin.message ? st->fin.message : engine_status_name(s),
                                     s == ENGINE_TIMEOUT ? "timeout" : "server_error", NULL,
                                     engine_status_name(s)));
    } else {
        if (st->kind == OAI_CHAT) split_out(st, NULL, true);
        const char *finish = flush_held(st, &c, s);
        sse_json(st, oai_chunk_build_lp(&c, false, NULL, finish, m, http_lp_chunk(st->lp)));
        if (st->include_usage && m) sse_json(st, oai_chunk_build(&c, false, NULL, NULL, m));
    }
    sse_event(&st->out, NULL, "[DONE]", 6);
}

/* Moves this request's waiting events into the output; true when any came. */
static bool pump(struct http_stream *st, struct engine *e)
{
    struct engine_event evs[N_EVS];
    int n = engine_poll_request(e, st->id, evs, N_EVS);
    for (int i = 0; i < n; i++) {
        struct engine_event *ev = &evs[i];
        if (ev->type == ENGINE_EV_TOKEN) on_token(st, ev);
        if (ev->type == ENGINE_EV_FINISHED && !st->finished) {
            st->fin = *ev;
            st->finished = true;
            if (st->stream) on_finished(st);
            continue;
        }
        engine_event_free(ev);
    }
    return n > 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct http_stream *st = cls;
    struct engine *e = atomic_load(&st->srv->engine);
    for (;;) {
        if (st->out.len) {
            size_t n = st->out.len < max ? st->out.len : max;
            memcpy(buf, st->out.p, n);
            sse_buf_consume(&st->out, n);
            atomic_store(&st->t_progress, http_now());
            return (ssize_t)n;
        }
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        if (client_gone(st->fd)) {
            st->disconnected = true;
            engine_cancel(e, st->id);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        engine_wait_events(e, st->id, POLL_S);
        /* Keep-alives while nothing comes (a long prefill): a client that
         * reads them shows progress to the watchdog, one that is gone fails
         * the write. */
        double every = st->srv->cfg.conn_timeout_s / 3.0;
        if (!pump(st, e) && http_now() - st->t_keepalive > (every < 5 ? every : 5)) {
            sse_comment(&st->out, "keep-alive");
            st->t_keepalive = http_now();
        }
    }
}

/* MHD is done with the response (sent, or the client went away). */
static void stream_done(void *cls)
{
    struct http_stream *st = cls;
    struct engine *e = atomic_load(&st->srv->engine);
    if (!st->finished) {
        st->disconnected = true;
        engine_cancel(e, st->id);
        drain_to_finish(st, e, 5);
    }
    account(st, st->disconnected ? "client disconnected" : NULL);
    stream_free(st);
}

/* ---- admission ------------------------------------------------------------------- */

static bool model_ok(struct http_server *s, const char *m)
{
    return !m || !m[0] || strcmp(m, s->model_id) == 0 || strcmp(m, "default") == 0 ||
           strcmp(m, "tern") == 0;
}

static int64_t prompt_tokens(struct engine *e, const struct oai_request *q)
{
    char err[256];
    if (q->req.prompt_tokens) return q->req.n_prompt_tokens;
    if (q->req.prompt) return engine_count_tokens(e, q->req.prompt, strlen(q->req.prompt), err,
                                                 sizeof err);
    return engine_count_chat_tokens(e, q->req.messages, q->req.n_messages, err, sizeof err);
}

static enum MHD_Result quota_429(struct http_req *r, const char *limit, double retry_s)
{
    char msg[160], ra[32];
    snprintf(msg, sizeof msg, "tenant '%s' is over its %s limit; retry in %.0f s", r->tenant->name,
             limit, ceil(retry_s));
    snprintf(ra, sizeof ra, "%.0f", ceil(retry_s) < 1 ? 1 : ceil(retry_s));
    http_metrics_reject(r->srv->metrics, limit);
    return http_send_error(r, 429, msg, NULL, "rate_limit_exceeded", ra);
}

/* A request over a per-request cap of the tenant: it can never pass, so it
 * is a 400 naming the cap (a 429 would be retried forever by clients). */
static enum MHD_Result over_cap(struct http_req *r, const char *limit, const char *param,
                                const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static enum MHD_Result over_cap(struct http_req *r, const char *limit, const char *param,
                                const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    http_auth_count_reject(r->srv->auth, r->tenant);
    http_metrics_reject(r->srv->metrics, limit);
    return http_send_error(r, 400, msg, param, "over_tenant_cap", NULL);
}

/* Maps a refused submit to its HTTP status. */
static enum MHD_Result submit_refused(struct http_req *r, enum engine_status why,
                                      const char *err)
{
    if (why == ENGINE_REJECTED && strstr(err, "queue")) {
        http_metrics_reject(r->srv->metrics, "queue_full");
        return http_send_error(r, 429, err, NULL, "queue_full", "1");
    }
    http_metrics_reject(r->srv->metrics, why == ENGINE_REJECTED ? "too_large" : "bad_request");
    return http_send_error(r, 400, err, "messages",
                           why == ENGINE_REJECTED ? "context_length_exceeded" : "invalid_request",
                           NULL);
}

static struct http_stream *stream_new(struct http_req *r, const struct oai_request *q,
                                      enum oai_kind kind)
{
    struct http_server *s = r->srv;
    struct http_stream *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->srv = s;
    st->kind = kind;
    st->stream = q->stream;
    st->include_usage = q->include_usage;
    st->t = r->tenant;
    st->t0 = r->t0;
    st->t_keepalive = http_now();
    st->route = kind == OAI_CHAT ? "/v1/chat/completions" : "/v1/completions";
    struct engine *e = atomic_load(&s->engine);
    if (kind == OAI_CHAT && e && !q->req.no_think) {
        /* a template that opened <think> in the prompt: the reply starts inside it */
        struct engine_info in;
        engine_info(e, &in);
        if (in.chat_template_opens_think) oai_think_init_open(&st->think);
    }
    snprintf(st->model, sizeof st->model, "%s", s->model_id);
    snprintf(st->request_id, sizeof st->request_id, "%s", r->request_id);
    snprintf(st->tenant, sizeof st->tenant, "%s", r->tenant->name);
    pthread_mutex_lock(&s->mu);
    uint64_t n = ++s->next_id;
    pthread_mutex_unlock(&s->mu);
    snprintf(st->resp_id, sizeof st->resp_id, "%s-%" PRIx64 "%08" PRIx64,
             kind == OAI_CHAT ? "chatcmpl" : "cmpl", (uint64_t)time(NULL), n);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    st->fd = ci ? ci->connect_fd : -1;
    /* A small send buffer bounds what a client that stops reading can leave
     * queued in the kernel (16 KiB: ~70 chunks), so its events back up into
     * the engine, which ends it as consumer-stalled, instead of into MBs of
     * socket buffers. */
    int sndbuf = 16 * 1024;
    if (q->stream && st->fd >= 0)
        setsockopt(st->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    if (s->cfg.log_content) {
        struct sse_buf b = {0};
        for (int32_t i = 0; i < q->req.n_messages; i++) {
            sse_buf_add(&b, q->req.messages[i].role, strlen(q->req.messages[i].role));
            sse_buf_add(&b, ": ", 2);
            sse_buf_add(&b, q->req.messages[i].content, strlen(q->req.messages[i].content));
            sse_buf_add(&b, "\n", 1);
        }
        if (q->req.prompt) sse_buf_add(&b, q->req.prompt, strlen(q->req.prompt));
        st->content = b.p;
    }
    return st;
}

/* Waits until the request is admitted (streams) or finished; watches the client. */
static void wait_phase(struct http_stream *st, struct engine *e, bool until_finish)
{
    struct engine_event evs[N_EVS];
    while (!st->finished) {
        if (client_gone(st->fd)) {
            st->disconnected = true;
            engine_cancel(e, st->id);
            drain_to_finish(st, e, 5);
            return;
        }
        engine_wait_events(e, st->id, POLL_S);
        if (until_finish) {
            pump(st, e);
            continue;
        }
        /* Streams: look for ADMITTED/TOKEN without consuming what the stream sends. */
        int n = engine_poll_request(e, st->id, evs, N_EVS);
        bool started = false;
        for (int i = 0; i < n; i++) {
            struct engine_event *ev = &evs[i];
            if (ev->type == ENGINE_EV_ADMITTED || ev->type == ENGINE_EV_TOKEN) started = true;
            if (ev->type == ENGINE_EV_TOKEN) on_token(st, ev);
            if (ev->type == ENGINE_EV_FINISHED) {
                st->fin = *ev;
                st->finished = true;
                on_finished(st);
                continue;
            }
            engine_event_free(ev);
        }
        if (started) return;
    }
}

static unsigned finish_status(enum engine_status s)
{
    switch (s) {
    case ENGINE_OK:
    case ENGINE_STOP:
    case ENGINE_LENGTH: return 200;
    case ENGINE_TIMEOUT: return 504;
    case ENGINE_REJECTED: return 429;
    case ENGINE_CANCELLED: return 503;
    default: return 500;
    }
}

/* The request ended before its stream started, or it is not a stream: one JSON body. */
static enum MHD_Result reply_whole(struct http_req *r, struct http_stream *st)
{
    enum MHD_Result rc;
    enum engine_status s = st->fin.status;
    unsigned code = finish_status(s);
    if (st->disconnected) code = 499; /* nobody reads it; logged as such */
    st->http_status = (int)code;
    if (code == 200) {
        struct oai_resp_ctx c;
        ctx_of(st, &c, (int64_t)time(NULL));
        const char *text = st->text.p ? st->text.p : "";
        struct sse_buf think = {0}, answer = {0};
        if (st->kind == OAI_CHAT) {
            oai_think_push(&st->think, text, strlen(text), &think, &answer);
            oai_think_flush(&st->think, &think, &answer);
            if (think.len) text = answer.p ? answer.p : "";
        }
        char *json = st->lp ? http_lp_response(st->lp, &c, text, &st->fin)
                            : oai_response_build(&c, text, st->fin.metrics);
        if (think.len && json) {
            char *tj = oai_think_response(json, think.p, text);
            if (tj) {
                free(json);
                json = tj;
            }
        }
        char *content = NULL, idp[64];
        call_id_prefix(st, idp, sizeof idp);
        cJSON *calls = st->tools && json ? oai_tools_parse_reply(st->tools, text, idp, &content)
                                         : NULL;
        if (calls) {
            char *tj = oai_tools_response(json, content, calls);
            if (tj) {
                free(json);
                json = tj;
            }
        }
        free(content);
        sse_buf_free(&think);
        sse_buf_free(&answer);
        rc = http_send_json(r, 200, json, NULL);
        free(json);
    } else {
        const char *msg = st->fin.message ? st->fin.message : engine_status_name(s);
        char *json = oai_error_build(msg, code == 504 ? "timeout" : "server_error", NULL,
                                     engine_status_name(s));
        rc = http_send_json(r, code == 499 ? 400 : code, json, code == 429 ? "1" : NULL);
        free(json);
    }
    account(st, NULL);
    stream_free(st);
    return rc;
}

static enum MHD_Result reply_stream(struct http_req *r, struct http_stream *st)
{
    struct oai_resp_ctx c;
    ctx_of(st, &c, (int64_t)time(NULL));
    /* The role chunk goes first; tokens already drained follow it. */
    struct sse_buf early = st->out;
    st->out = (struct sse_buf){0};
    if (st->kind == OAI_CHAT) sse_json(st, oai_chunk_build(&c, true, NULL, NULL, NULL));
    if (http_lp_echo(st->lp)[0]) /* completions echo: the prompt's text first */
        sse_json(st, oai_chunk_build(&c, false, http_lp_echo(st->lp), NULL, NULL));
    if (early.len) sse_buf_add(&st->out, early.p, early.len);
    sse_buf_free(&early);
    st->http_status = 200;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, st,
                                          stream_done);
    if (!resp) {
        account(st, "out of memory");
        stream_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    http_add_common_headers(resp, r);
    atomic_store(&st->t_progress, http_now());
    atomic_store(&st->streaming, true);
    http_metrics_status(r->srv->metrics, 200);
    enum MHD_Result rc = MHD_queue_response(r->conn, 200, resp);
    /* MHD holds the response; stream_done frees st when it is released
     * (at once here if queueing failed), so st is not touched after this. */
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result run(struct http_req *r, struct engine *e, struct oai_request *q,
                           enum oai_kind kind)
{
    struct http_server *s = r->srv;
    struct http_tenant *t = r->tenant;
    if (!q->has_max_tokens) {
        /* No number asked: the server's default, within the tenant's cap. */
        int32_t def = s->cfg.max_tokens_default;
        if (t->max_tokens && (def <= 0 || def > t->max_tokens)) {
            def = t->max_tokens;
            snprintf(r->clamp_note, sizeof r->clamp_note,
                     "%d (clamped to the tenant's cap per request)", (int)def);
        }
        q->req.max_tokens = def;
    } else if (t->max_tokens && q->req.max_tokens > t->max_tokens) {
        return over_cap(r, "max_tokens", "max_tokens",
                        "max_tokens %d is over the cap of %d tokens per request of tenant "
                        "'%s'; ask for at most %d, or leave max_tokens out to get %d",
                        (int)q->req.max_tokens, (int)t->max_tokens, t->name,
                        (int)t->max_tokens, (int)t->max_tokens);
    }
    q->req.priority = t->priority;
    q->req.queue_timeout_s = s->cfg.queue_timeout_s;
    q->req.trace_request_id = r->request_id;   /* copied by the engine */
    q->req.trace_tenant = t->name;
    char lerr[160];
    struct http_lp *lp = http_lp_new(e, q, lerr, sizeof lerr);
    if (!lp && lerr[0]) return http_send_error(r, 400, lerr, "stream", "invalid_request", NULL);
    int64_t np = t->tpm ? prompt_tokens(e, q) : 0;
    if (np < 0) np = 0;
    if (t->tpm && np + q->req.max_tokens > t->tpm) {
        /* More than a whole minute's budget: no wait makes it fit. */
        if (!q->has_max_tokens && t->tpm - np >= 1) {
            q->req.max_tokens = (int32_t)(t->tpm - np);
            snprintf(r->clamp_note, sizeof r->clamp_note,
                     "%d (clamped to fit the tenant's tpm with the prompt)",
                     (int)q->req.max_tokens);
        } else {
            http_lp_free(lp);
            return over_cap(r, "tpm", q->has_max_tokens   ? "max_tokens"
                                      : kind == OAI_CHAT ? "messages"
                                                         : "prompt",
                            "the prompt (%lld tokens) and max_tokens (%d) are over the %lld "
                            "tokens per minute of tenant '%s': this request can never be "
                            "admitted; ask for fewer tokens",
                            (long long)np, (int)q->req.max_tokens, (long long)t->tpm, t->name);
        }
    }
    const char *limit;
    double retry;
    if (http_auth_admit(s->auth, t, np, q->req.max_tokens, &limit, &retry) != 0) {
        http_lp_free(lp);
        return quota_429(r, limit, retry);
    }
    struct http_stream *st = stream_new(r, q, kind);
    if (!st) {
        http_lp_free(lp);
        http_auth_release(s->auth, t, 0);
        return http_send_error(r, 503, "out of memory", NULL, NULL, "1");
    }
    st->lp = lp;
    if (q->tools.choice != OAI_TOOLS_NONE) {
        st->tools = oai_tools_dup(&q->tools);
        if (!st->tools) {
            http_auth_release(s->auth, t, 0);
            stream_free(st);
            return http_send_error(r, 503, "out of memory", NULL, NULL, "1");
        }
        st->holding = st->stream;
    }
    char err[512] = "";
    enum engine_status why = ENGINE_ERROR;
    atomic_fetch_add(&s->active, 1);
    st->id = engine_submit(e, &q->req, &why, err, sizeof err);
    if (!st->id) {
        atomic_fetch_sub(&s->active, 1);
        http_auth_release(s->auth, t, 0);
        stream_free(st);
        return submit_refused(r, why, err);
    }
    list_add(s, st); /* after the id is set: the drain cancels by id under the lock */
    wait_phase(st, e, !st->stream);
    /* A stream that ended before it started (queue timeout, rejected, client
     * gone) gets its status as one JSON error; one that ran is a stream. */
    if (!st->stream || st->disconnected ||
        (st->finished && finish_status(st->fin.status) != 200))
        return reply_whole(r, st);
    return reply_stream(r, st);
}

enum MHD_Result http_route_completion(struct http_req *r, enum oai_kind kind)
{
    struct http_server *s = r->srv;
    struct engine *e = atomic_load(&s->engine);
    if (atomic_load(&s->draining))
        return http_send_error(r, 503, "the server is shutting down", NULL, "shutting_down",
                               "5");
    if (!e) return http_send_error(r, 503, "the model is loading", NULL, "not_ready", "1");
    struct oai_request q;
    struct oai_error oe;
    struct oai_limits lim = {.max_body = s->cfg.max_body};
    if (oai_request_parse(r->body.p ? r->body.p : "", r->body.len, kind, &lim, &q, &oe) != 0) {
        http_metrics_reject(s->metrics, "bad_request");
        return http_send_error(r, 400, oe.message, oe.param, "invalid_request", NULL);
    }
    enum MHD_Result rc;
    if (!model_ok(s, q.model)) {
        char msg[400];
        snprintf(msg, sizeof msg, "model '%.200s' is not served here; this server has '%.150s'",
                 q.model, s->model_id);
        http_metrics_reject(s->metrics, "unknown_model");
        rc = http_send_error(r, 404, msg, "model", "model_not_found", NULL);
    } else {
        rc = run(r, e, &q, kind);
    }
    oai_request_free(&q);
    return rc;
}
