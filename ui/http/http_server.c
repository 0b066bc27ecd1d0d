/* http_server: the libmicrohttpd daemon, request dispatch, body intake with
 * its size bound, authentication before any body is read, and drain. */
#include "http_impl.h"
#include "oai_response.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_MAX_BODY (8u << 20)

static bool is_v1(const char *url) { return strncmp(url, "/v1/", 4) == 0; }

/* First call for a request: headers are in, no body yet. Auth and the body
 * bound are checked here so that nothing is read for a refused request. */
static enum MHD_Result on_headers(struct http_req *r)
{
    struct http_server *s = r->srv;
    const char *rid = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Request-Id");
    http_reqid_take(rid, r->request_id);
    if (is_v1(r->url)) {
        const char *authz =
            MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        r->tenant = http_auth_check(s->auth, authz);
        if (!r->tenant) {
            http_metrics_reject(s->metrics, "auth");
            return http_send_error(r, 401,
                                   authz ? "invalid API key" : "missing API key (Authorization: Bearer KEY)",
                                   NULL, "invalid_api_key", NULL);
        }
    }
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > s->cfg.max_body) {
        char msg[160];
        snprintf(msg, sizeof msg, "request body of %s bytes is over the limit of %zu", cl,
                 s->cfg.max_body);
        http_metrics_reject(s->metrics, "too_large_body");
        return http_send_error(r, 413, msg, NULL, "request_too_large", NULL);
    }
    return MHD_YES;
}

static enum MHD_Result dispatch(struct http_req *r)
{
    bool post = strcmp(r->method, "POST") == 0;
    bool get = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
    if (r->too_big) {
        char msg[128];
        snprintf(msg, sizeof msg, "request body is over the limit of %zu bytes",
                 r->srv->cfg.max_body);
        http_metrics_reject(r->srv->metrics, "too_large_body");
        return http_send_error(r, 413, msg, NULL, "request_too_large", NULL);
    }
    if (strcmp(r->url, "/v1/chat/completions") == 0 || strcmp(r->url, "/v1/completions") == 0) {
        if (!post) return http_send_error(r, 405, "use POST", NULL, "method_not_allowed", NULL);
        return http_route_completion(r, r->url[4] == 'c' && r->url[5] == 'h' ? OAI_CHAT
                                                                             : OAI_COMPLETION);
    }
    if (strcmp(r->url, "/v1/embeddings") == 0) {
        if (!post) return http_send_error(r, 405, "use POST", NULL, "method_not_allowed", NULL);
        return http_route_embeddings(r);
    }
    if (strcmp(r->url, "/v1/tern/cache/save") == 0) {
        if (!post) return http_send_error(r, 405, "use POST", NULL, "method_not_allowed", NULL);
        return http_route_cache_save(r);
    }
    if (get) return http_route_get(r);
    return http_send_error(r, 404, "unknown route", NULL, "not_found", NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    struct http_req *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        r->srv = cls;
        r->conn = conn;
        r->method = method;
        r->url = url;
        r->t0 = http_now();
        *con_cls = r;
        return on_headers(r);
    }
    if (*upload_data_size) {
        if (!r->too_big && r->body.len + *upload_data_size > r->srv->cfg.max_body) {
            r->too_big = true;
            sse_buf_free(&r->body);
        }
        if (!r->too_big && sse_buf_add(&r->body, upload_data, *upload_data_size) != 0)
            r->too_big = true; /* out of memory reads as too large: never a 500 */
        *upload_data_size = 0;
        return MHD_YES;
    }
    /* The work after the body may outlast the idle timeout (a long reply):
     * the timeout is for slow clients, so it is lifted until the reply is out. */
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    return dispatch(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct http_server *s = cls;
    struct http_req *r = *con_cls;
    if (!r) return;
    sse_buf_free(&r->body);
    free(r);
    *con_cls = NULL;
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT,
                              (unsigned)s->cfg.conn_timeout_s);
}

static bool is_loopback(const char *host)
{
    struct in_addr a;
    return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

static void defaults(struct http_config *c)
{
    if (!c->host) c->host = "127.0.0.1";
    if (!c->max_body) c->max_body = DEFAULT_MAX_BODY;
    if (c->max_conns <= 0) c->max_conns = 256;
    if (c->conn_timeout_s <= 0) c->conn_timeout_s = 15;
    if (c->queue_timeout_s <= 0) c->queue_timeout_s = 60;
}

static int start_mhd(struct http_server *s, char *err, size_t errlen)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->cfg.port)};
    if (inet_pton(AF_INET, s->cfg.host, &sa.sin_addr) != 1)
        return snprintf(err, errlen, "--host %s: not an IPv4 address", s->cfg.host), -1;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL;
    s->mhd = MHD_start_daemon(
        flags, (uint16_t)s->cfg.port, NULL, NULL, on_request, s,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.max_conns,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->cfg.conn_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u,
        MHD_OPTION_END);
    if (!s->mhd)
        return snprintf(err, errlen, "cannot listen on %s:%d (in use, or no permission)",
                        s->cfg.host, s->cfg.port), -1;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : s->cfg.port;
    return 0;
}

int http_server_open(struct http_server **out, const struct http_config *c, char *err,
                     size_t errlen)
{
    struct http_server *s = calloc(1, sizeof *s);
    char path[4096];
    *out = NULL;
    if (!s) return snprintf(err, errlen, "out of memory"), -1;
    s->cfg = *c;
    defaults(&s->cfg);
    snprintf(s->host, sizeof s->host, "%s", s->cfg.host);
    snprintf(s->model_id, sizeof s->model_id, "%s", s->cfg.model_id ? s->cfg.model_id : "default");
    s->cfg.host = s->host;
    pthread_mutex_init(&s->mu, NULL);
    if (!s->cfg.api_key_file && !is_loopback(s->cfg.host) && !s->cfg.insecure) {
        snprintf(err, errlen,
                 "refusing to listen on %s without --api-key-file (anyone could use the model); "
                 "give keys, bind 127.0.0.1, or pass --insecure",
                 s->cfg.host);
        goto fail;
    }
    if (http_auth_open(&s->auth, s->cfg.api_key_file, err, errlen) != 0) goto fail;
    if (http_metrics_open(&s->metrics) != 0) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (!s->cfg.access_log) http_log_default_path(path, sizeof path);
    if (http_log_open(&s->log, s->cfg.access_log ? s->cfg.access_log : path, err, errlen) != 0)
        goto fail;
    if (start_mhd(s, err, errlen) != 0) goto fail;
    *out = s;
    return 0;
fail:
    http_server_close(s);
    return -1;
}

int http_server_port(const struct http_server *s) { return s->port; }

void http_server_set_engine(struct http_server *s, struct engine *e)
{
    atomic_store(&s->engine, e);
}

int http_server_active(struct http_server *s) { return atomic_load(&s->active); }

int http_server_tick(struct http_server *s)
{
    return http_stream_watchdog(s, s->cfg.conn_timeout_s);
}

int http_server_drain(struct http_server *s, double timeout_s)
{
    atomic_store(&s->draining, true);
    double end = http_now() + timeout_s;
    while (atomic_load(&s->active) > 0 && http_now() < end) usleep(20000);
    int n = http_stream_cancel_all(s);
    end = http_now() + 10; /* cancelled streams send their last chunk and end */
    while (atomic_load(&s->active) > 0 && http_now() < end) usleep(20000);
    return n;
}

void http_server_close(struct http_server *s)
{
    if (!s) return;
    if (s->mhd) MHD_stop_daemon(s->mhd);
    http_log_close(s->log);
    http_metrics_close(s->metrics);
    http_auth_close(s->auth);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
