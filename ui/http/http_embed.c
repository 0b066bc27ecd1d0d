/* http_embed: POST /v1/embeddings (OpenAI's shape). Each input becomes one
 * embedding request of the engine (engine.h: embed), so the inputs of a call
 * go through the same queue, admission, phases and batching as completions;
 * a bounded window of them is in flight at once, so a long list neither
 * fills the engine's queue nor waits behind itself one by one. The tenant's
 * quotas are charged the prompt tokens; /metrics counts each input as a
 * finished request; one access-log line and one history row per call. */
#include <cjson/cJSON.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_impl.h"
#include "oai_response.h"
#include "store.h"

#define EMBED_MAX_INPUTS 2048  /* OpenAI's limit per call */
#define EMBED_WINDOW 16        /* inputs in the engine at once per call */
#define EMBED_POLL_S 0.2
#define ROUTE "/v1/embeddings"

/* One input: its text or its token ids (borrowed from the parsed body). */
struct emb_in {
    const char *text;
    int32_t *ids;
    int32_t n_ids;
    uint64_t id;               /* engine request, 0 = not submitted */
    bool done;
    struct engine_event fin;
};

struct emb_call {
    struct emb_in *in;
    int32_t n;
    bool base64;
    int32_t dims;
    cJSON *body;
};

static void call_free(struct emb_call *c)
{
    for (int32_t i = 0; i < c->n; i++) {
        free(c->in[i].ids);
        engine_event_free(&c->in[i].fin);
    }
    free(c->in);
    cJSON_Delete(c->body);
}

static bool is_int(const cJSON *v)
{
    return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) &&
           fabs(v->valuedouble) < 2147483648.0;
}

/* An array of integers as token ids; -1 with msg when it is not one. */
static int take_ids(const cJSON *a, struct emb_in *in, char *msg, size_t n, const char *where)
{
    int32_t k = cJSON_GetArraySize(a);
    if (k == 0) return snprintf(msg, n, "%s is an empty list of tokens", where), -1;
    in->ids = malloc((size_t)k * sizeof *in->ids);
    if (!in->ids) return snprintf(msg, n, "out of memory"), -1;
    int32_t i = 0;
    for (const cJSON *v = a->child; v; v = v->next, i++) {
        if (!is_int(v)) return snprintf(msg, n, "%s[%d] is not a token id", where, i), -1;
        in->ids[i] = (int32_t)v->valuedouble;
    }
    in->n_ids = k;
    return 0;
}

/* input: a string, a list of strings, a list of token ids, or a list of such
 * lists. Returns 0, or -1 with msg and the offending parameter. */
static int parse_input(const cJSON *input, struct emb_call *c, char *msg, size_t n)
{
    if (cJSON_IsString(input)) {
        if (!input->valuestring[0]) return snprintf(msg, n, "input is an empty string"), -1;
        if (!oai_utf8_valid(input->valuestring, strlen(input->valuestring)))
            return snprintf(msg, n, "input is not valid UTF-8"), -1;
        c->in = calloc(1, sizeof *c->in);
        if (!c->in) return snprintf(msg, n, "out of memory"), -1;
        c->n = 1;
        c->in[0].text = input->valuestring;
        return 0;
    }
    if (!cJSON_IsArray(input))
        return snprintf(msg, n, "input must be a string, a list of strings, a list of token "
                                "ids or a list of lists of token ids"), -1;
    int32_t k = cJSON_GetArraySize(input);
    if (k == 0) return snprintf(msg, n, "input is an empty list"), -1;
    if (is_int(input->child)) { /* one input of token ids */
        c->in = calloc(1, sizeof *c->in);
        if (!c->in) return snprintf(msg, n, "out of memory"), -1;
        c->n = 1;
        return take_ids(input, &c->in[0], msg, n, "input");
    }
    if (k > EMBED_MAX_INPUTS)
        return snprintf(msg, n, "input has %d items; at most %d per request", k,
                        EMBED_MAX_INPUTS), -1;
    c->in = calloc((size_t)k, sizeof *c->in);
    if (!c->in) return snprintf(msg, n, "out of memory"), -1;
    c->n = k;
    int32_t i = 0;
    for (const cJSON *v = input->child; v; v = v->next, i++) {
        char where[32];
        snprintf(where, sizeof where, "input[%d]", i);
        if (cJSON_IsString(v)) {
            if (!v->valuestring[0]) return snprintf(msg, n, "%s is an empty string", where), -1;
            if (!oai_utf8_valid(v->valuestring, strlen(v->valuestring)))
                return snprintf(msg, n, "%s is not valid UTF-8", where), -1;
            c->in[i].text = v->valuestring;
        } else if (cJSON_IsArray(v)) {
            if (take_ids(v, &c->in[i], msg, n, where) != 0) return -1;
        } else {
            return snprintf(msg, n, "%s must be a string or a list of token ids", where), -1;
        }
    }
    return 0;
}

static int parse_body(const struct http_req *r, struct emb_call *c, const char **param,
                      char *msg, size_t n)
{
    *param = NULL;
    c->body = cJSON_ParseWithLength(r->body.p ? r->body.p : "", r->body.len);
    if (!cJSON_IsObject(c->body)) return snprintf(msg, n, "the body is not a JSON object"), -1;
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(c->body, "input");
    *param = "input";
    if (!input) return snprintf(msg, n, "input is required"), -1;
    if (parse_input(input, c, msg, n) != 0) return -1;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(c->body, "encoding_format");
    *param = "encoding_format";
    if (f && !cJSON_IsNull(f)) {
        if (!cJSON_IsString(f) || (strcmp(f->valuestring, "float") != 0 &&
                                   strcmp(f->valuestring, "base64") != 0))
            return snprintf(msg, n, "encoding_format must be \"float\" or \"base64\""), -1;
        c->base64 = strcmp(f->valuestring, "base64") == 0;
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(c->body, "dimensions");
    *param = "dimensions";
    if (d && !cJSON_IsNull(d)) {
        if (!is_int(d) || d->valuedouble < 1)
            return snprintf(msg, n, "dimensions must be a positive integer"), -1;
        c->dims = (int32_t)d->valuedouble;
    }
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(c->body, "model");
    *param = "model";
    if (m && !cJSON_IsNull(m) && !cJSON_IsString(m))
        return snprintf(msg, n, "model must be a string"), -1;
    *param = NULL;
    return 0;
}

static bool model_ok(const struct http_server *s, const cJSON *m)
{
    const char *v = cJSON_IsString(m) ? m->valuestring : NULL;
    return !v || !v[0] || strcmp(v, s->model_id) == 0 || strcmp(v, "default") == 0 ||
           strcmp(v, "tern") == 0;
}

static bool client_gone(struct http_req *r)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci || ci->connect_fd < 0) return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* ---- running the inputs -------------------------------------------------------- */

struct emb_run {
    struct http_req *r;
    struct engine *e;
    struct emb_call *c;
    int32_t next, live;        /* next input to submit; submitted, not finished */
    int32_t bad;               /* input refused at submit, or -1 */
    enum engine_status why;
    char err[512];
    bool gone;
};

static void submit_more(struct emb_run *u)
{
    struct http_tenant *t = u->r->tenant;
    while (u->bad < 0 && !u->gone && u->live < EMBED_WINDOW && u->next < u->c->n) {
        struct emb_in *in = &u->c->in[u->next];
        struct engine_request q = {.prompt = in->text, .prompt_tokens = in->ids,
                                   .n_prompt_tokens = in->n_ids, .embed = true,
                                   .dimensions = u->c->dims, .priority = t->priority,
                                   .queue_timeout_s = u->r->srv->cfg.queue_timeout_s,
                                   .trace_request_id = u->r->request_id,
                                   .trace_tenant = t->name};
        in->id = engine_submit(u->e, &q, &u->why, u->err, sizeof u->err);
        if (!in->id) {
            u->bad = u->next;
            return;
        }
        u->next++;
        u->live++;
    }
}

/* Takes the finished events of the inputs in flight; true when any came. */
static bool collect(struct emb_run *u)
{
    struct engine_event evs[16];
    bool any = false;
    for (int32_t i = 0; i < u->next; i++) {
        struct emb_in *in = &u->c->in[i];
        if (!in->id || in->done) continue;
        int k = engine_poll_request(u->e, in->id, evs, 16);
        for (int j = 0; j < k; j++) {
            if (evs[j].type == ENGINE_EV_FINISHED && !in->done) {
                in->fin = evs[j];
                in->done = true;
                u->live--;
                any = true;
            } else {
                engine_event_free(&evs[j]);
            }
        }
    }
    return any;
}

static uint64_t oldest_live(const struct emb_run *u)
{
    for (int32_t i = 0; i < u->next; i++)
        if (u->c->in[i].id && !u->c->in[i].done) return u->c->in[i].id;
    return 0;
}

/* Runs every input (or until one is refused, fails or the client goes);
 * what is still in flight then is cancelled and drained. */
static void run_inputs(struct emb_run *u)
{
    submit_more(u);
    while (u->live > 0) {
        if (!u->gone && client_gone(u->r)) u->gone = true;
        bool failed = false;
        for (int32_t i = 0; i < u->next; i++)
            failed |= u->c->in[i].done && u->c->in[i].fin.status != ENGINE_OK;
        if (u->gone || u->bad >= 0 || failed)
            for (int32_t i = 0; i < u->next; i++)
                if (u->c->in[i].id && !u->c->in[i].done) engine_cancel(u->e, u->c->in[i].id);
        if (!collect(u)) engine_wait_events(u->e, oldest_live(u), EMBED_POLL_S);
        if (!failed) submit_more(u);
    }
}

/* ---- the answer ------------------------------------------------------------------ */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The vector as little-endian float32 bytes in base64 (what the openai
 * client decodes), in quotes. */
static int put_base64(struct sse_buf *b, const float *v, int32_t n)
{
    size_t nb = (size_t)n * 4, o = 0;
    uint8_t *raw = malloc(nb + 3);
    char *s = malloc((nb + 2) / 3 * 4 + 3);
    int rc = -1;
    if (!raw || !s) goto out;
    for (int32_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], 4);
        for (int j = 0; j < 4; j++) raw[4 * (size_t)i + (size_t)j] = (uint8_t)(bits >> (8 * j));
    }
    raw[nb] = raw[nb + 1] = raw[nb + 2] = 0;
    s[o++] = '"';
    for (size_t i = 0; i < nb; i += 3) {
        size_t k = nb - i < 3 ? nb - i : 3;
        const uint8_t *t = raw + i;
        s[o++] = b64[t[0] >> 2];
        s[o++] = b64[((t[0] & 3) << 4) | (t[1] >> 4)];
        s[o++] = k > 1 ? b64[((t[1] & 15) << 2) | (t[2] >> 6)] : '=';
        s[o++] = k > 2 ? b64[t[2] & 63] : '=';
    }
    s[o++] = '"';
    rc = sse_buf_add(b, s, o);
out:
    free(raw);
    free(s);
    return rc;
}

static int put_floats(struct sse_buf *b, const float *v, int32_t n)
{
    char num[32];
    if (sse_buf_add(b, "[", 1)) return -1;
    for (int32_t i = 0; i < n; i++) {
        /* 9 significant digits: a float read back exactly */
        int k = snprintf(num, sizeof num, "%s%.9g", i ? "," : "", isfinite(v[i]) ? v[i] : 0.0f);
        if (sse_buf_add(b, num, (size_t)k)) return -1;
    }
    return sse_buf_add(b, "]", 1);
}

static char *build_reply(const struct http_server *s, const struct emb_call *c, int64_t n_prompt)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(j, "data");
    for (int32_t i = 0; i < c->n; i++) {
        const struct engine_event *f = &c->in[i].fin;
        struct sse_buf b = {0};
        int rc = c->base64 ? put_base64(&b, f->embedding, f->n_embedding)
                           : put_floats(&b, f->embedding, f->n_embedding);
        if (rc == 0) rc = sse_buf_add(&b, "", 1); /* NUL */
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "object", "embedding");
        cJSON_AddNumberToObject(o, "index", i);
        cJSON_AddItemToObject(o, "embedding", cJSON_CreateRaw(rc == 0 ? b.p : "[]"));
        cJSON_AddItemToArray(data, o);
        sse_buf_free(&b);
    }
    cJSON_AddStringToObject(j, "model", s->model_id);
    cJSON *usage = cJSON_AddObjectToObject(j, "usage");
    cJSON_AddNumberToObject(usage, "prompt_tokens", (double)n_prompt);
    cJSON_AddNumberToObject(usage, "total_tokens", (double)n_prompt);
    char *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return out;
}

static unsigned status_of(enum engine_status s)
{
    switch (s) {
    case ENGINE_OK: return 200;
    case ENGINE_TIMEOUT: return 504;
    case ENGINE_REJECTED: return 429;
    case ENGINE_CANCELLED: return 503;
    default: return 500;
    }
}

/* Access log, metrics and history of a call that reached the engine. */
static void account(struct emb_run *u, unsigned code, const char *error)
{
    struct http_server *s = u->r->srv;
    struct engine_metrics sum = {.status = ENGINE_OK};
    const struct engine_metrics *last = NULL;
    for (int32_t i = 0; i < u->next; i++) {
        const struct engine_metrics *m = u->c->in[i].fin.metrics;
        if (!m) continue;
        http_metrics_finish(s->metrics, m, u->r->request_id, u->r->tenant->name, ROUTE, u->gone);
        if (!last || m->t_finished > last->t_finished) last = m;
        if (m->status != ENGINE_OK && sum.status == ENGINE_OK) sum.status = m->status;
        sum.n_prompt += m->n_prompt;
        sum.n_cached += m->n_cached;
        sum.n_computed += m->n_computed;
    }
    if (last) { /* the call's phases: its last input's, with every input's tokens */
        int32_t np = sum.n_prompt, nc = sum.n_cached, nk = sum.n_computed;
        enum engine_status st = sum.status;
        sum = *last;
        sum.token_t = NULL;
        sum.status = st;
        sum.n_prompt = np;
        sum.n_cached = nc;
        sum.n_computed = nk;
    }
    struct http_log_rec rec = {.request_id = u->r->request_id, .tenant = u->r->tenant->name,
                               .method = "POST", .route = ROUTE, .status = (int)code,
                               .model = s->model_id, .error = error,
                               .disconnected = u->gone, .m = last ? &sum : NULL,
                               .http_s = http_now() - u->r->t0};
    http_log_write(s->log, &rec);
    if (s->cfg.store && last) {
        char params[256];
        snprintf(params, sizeof params,
                 "{\"route\":\"%s\",\"inputs\":%d,\"source\":\"serve\",\"client_disconnected\":%s}",
                 ROUTE, u->c->n, u->gone ? "true" : "false");
        struct store_request h = {.model = s->model_id, .model_file = s->cfg.model_path,
                                  .backend = "cpu", .params_json = params,
                                  .status = engine_status_name(sum.status),
                                  .queue_s = sum.queue_s, .prefill_s = sum.prefill_s,
                                  .e2e_s = sum.e2e_s, .prompt_tokens = sum.n_prompt,
                                  .cached_tokens = sum.n_cached};
        struct engine_info in;
        engine_info(u->e, &in);
        h.backend = in.backend.name;
        store_request_add(s->cfg.store, 0, &h);
    }
}

/* An error after the engine ran: account() has logged it already. */
static enum MHD_Result send_error(struct http_req *r, unsigned code, const char *msg,
                                  const char *param, const char *type_code, const char *retry)
{
    const char *type = code == 400 ? "invalid_request_error" : code == 429 ? "rate_limit_error"
                     : code == 503 ? "service_unavailable" : code == 504 ? "timeout"
                                                                         : "server_error";
    char *json = oai_error_build(msg, type, param, type_code);
    enum MHD_Result rc = http_send_json(r, code, json, retry);
    free(json);
    return rc;
}

static enum MHD_Result answer(struct emb_run *u)
{
    struct http_req *r = u->r;
    struct emb_call *c = u->c;
    enum MHD_Result rc;
    if (u->bad >= 0) {
        char msg[600];
        if (c->n > 1) snprintf(msg, sizeof msg, "input[%d]: %s", u->bad, u->err);
        else snprintf(msg, sizeof msg, "input: %s", u->err);
        bool queue = u->why == ENGINE_REJECTED && strstr(u->err, "queue");
        http_metrics_reject(r->srv->metrics, queue                       ? "queue_full"
                                             : u->why == ENGINE_REJECTED ? "too_large"
                                                                         : "bad_request");
        account(u, queue ? 429 : 400, msg);
        if (queue) return send_error(r, 429, msg, NULL, "queue_full", "1");
        return send_error(r, 400, msg, "input",
                          u->why == ENGINE_REJECTED ? "context_length_exceeded"
                                                    : "invalid_request", NULL);
    }
    int64_t n_prompt = 0;
    const struct engine_event *failed = NULL;
    for (int32_t i = 0; i < c->n; i++) {
        const struct engine_event *f = &c->in[i].fin;
        if (!c->in[i].done || f->status != ENGINE_OK || !f->embedding) {
            if (!failed || (failed->status == ENGINE_CANCELLED && f->status != ENGINE_CANCELLED))
                failed = f;
            continue;
        }
        if (f->metrics) n_prompt += f->metrics->n_prompt;
    }
    if (u->gone) {
        account(u, 499, "client disconnected");
        return send_error(r, 400, "client disconnected", NULL, "cancelled", NULL);
    }
    if (failed) {
        unsigned code = status_of(failed->status);
        const char *msg = failed->message ? failed->message : engine_status_name(failed->status);
        account(u, code, msg);
        return send_error(r, code, msg, NULL, engine_status_name(failed->status),
                          code == 429 || code == 503 ? "1" : NULL);
    }
    char *json = build_reply(r->srv, c, n_prompt);
    if (!json) {
        account(u, 500, "out of memory");
        return send_error(r, 500, "out of memory", NULL, NULL, NULL);
    }
    account(u, 200, NULL);
    rc = http_send_json(r, 200, json, NULL);
    free(json);
    return rc;
}

/* Prompt tokens of the call, for the tenant's token quota. */
static int64_t count_tokens(struct engine *e, const struct emb_call *c)
{
    int64_t n = 0;
    char err[256];
    for (int32_t i = 0; i < c->n; i++) {
        int64_t k = c->in[i].text ? engine_count_tokens(e, c->in[i].text,
                                                       strlen(c->in[i].text), err, sizeof err)
                                  : c->in[i].n_ids;
        n += k > 0 ? k : 0;
    }
    return n;
}

enum MHD_Result http_route_embeddings(struct http_req *r)
{
    struct http_server *s = r->srv;
    struct engine *e = atomic_load(&s->engine);
    if (atomic_load(&s->draining))
        return http_send_error(r, 503, "the server is shutting down", NULL, "shutting_down", "5");
    if (!e) return http_send_error(r, 503, "the model is loading", NULL, "not_ready", "1");
    struct emb_call c = {0};
    const char *param;
    char msg[400];
    if (parse_body(r, &c, &param, msg, sizeof msg) != 0) {
        call_free(&c);
        http_metrics_reject(s->metrics, "bad_request");
        return http_send_error(r, 400, msg, param, "invalid_request", NULL);
    }
    enum MHD_Result rc;
    struct engine_info in;
    engine_info(e, &in);
    struct http_tenant *t = r->tenant;
    if (!model_ok(s, cJSON_GetObjectItemCaseSensitive(c.body, "model"))) {
        snprintf(msg, sizeof msg, "model '%.150s' is not served here; this server has '%.150s'",
                 cJSON_GetObjectItemCaseSensitive(c.body, "model")->valuestring, s->model_id);
        http_metrics_reject(s->metrics, "unknown_model");
        rc = http_send_error(r, 404, msg, "model", "model_not_found", NULL);
    } else if (in.n_embd == 0) {
        snprintf(msg, sizeof msg, "this server cannot compute embeddings: %s",
                 in.embd_why && in.embd_why[0] ? in.embd_why : "not supported");
        http_metrics_reject(s->metrics, "bad_request");
        rc = http_send_error(r, 400, msg, "model", "embeddings_not_supported", NULL);
    } else if (in.n_embd > 0 && c.dims > in.n_embd) {
        snprintf(msg, sizeof msg, "dimensions %d is over the model's embedding size %d",
                 c.dims, in.n_embd);
        http_metrics_reject(s->metrics, "bad_request");
        rc = http_send_error(r, 400, msg, "dimensions", "invalid_request", NULL);
    } else {
        int64_t np = t->tpm ? count_tokens(e, &c) : 0;
        const char *limit;
        double retry;
        if (t->tpm && np > t->tpm) {
            snprintf(msg, sizeof msg, "the input (%lld tokens) is over the %lld tokens per "
                     "minute of tenant '%s': this request can never be admitted",
                     (long long)np, (long long)t->tpm, t->name);
            http_auth_count_reject(s->auth, t);
            http_metrics_reject(s->metrics, "tpm");
            rc = http_send_error(r, 400, msg, "input", "over_tenant_cap", NULL);
        } else if (http_auth_admit(s->auth, t, np, 0, &limit, &retry) != 0) {
            char ra[32];
            snprintf(msg, sizeof msg, "tenant '%s' is over its %s limit; retry in %.0f s",
                     t->name, limit, ceil(retry));
            snprintf(ra, sizeof ra, "%.0f", ceil(retry) < 1 ? 1 : ceil(retry));
            http_metrics_reject(s->metrics, limit);
            rc = http_send_error(r, 429, msg, NULL, "rate_limit_exceeded", ra);
        } else {
            atomic_fetch_add(&s->active, 1);
            struct emb_run u = {.r = r, .e = e, .c = &c, .bad = -1};
            run_inputs(&u);
            rc = answer(&u);
            http_auth_release(s->auth, t, 0);
            atomic_fetch_sub(&s->active, 1);
        }
    }
    call_free(&c);
    return rc;
}
