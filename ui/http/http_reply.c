/* http_reply: the answers every route sends (JSON bodies, OpenAI-shaped
 * errors, the common headers) and the one-line access log of a simple
 * answer. Below the server and its routes: http_server.c dispatches to
 * http_routes.c and http_stream.c, and all three reply through here, so no
 * file calls back into the one that called it. */
#include "http_impl.h"
#include "oai_response.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double http_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void http_add_common_headers(struct MHD_Response *resp, const struct http_req *r)
{
    MHD_add_response_header(resp, "X-Request-Id", r->request_id);
    MHD_add_response_header(resp, "Server", "tern");
    if (r->clamp_note[0]) MHD_add_response_header(resp, "X-Tern-Max-Tokens", r->clamp_note);
}

enum MHD_Result http_send_json(struct http_req *r, unsigned status, const char *json,
                               const char *retry_after)
{
    const char *body = json ? json : "{}";
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    http_add_common_headers(resp, r);
    MHD_add_response_header(resp, "Content-Type", "application/json");
    if (retry_after) MHD_add_response_header(resp, "Retry-After", retry_after);
    enum MHD_Result rc = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
    http_metrics_status(r->srv->metrics, (int)status);
    return rc;
}

static const char *error_type(unsigned status)
{
    switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    case 504: return "timeout";
    default: return "server_error";
    }
}

void http_log_simple(struct http_req *r, unsigned status, const char *error)
{
    struct http_log_rec rec = {.request_id = r->request_id,
                               .tenant = r->tenant ? r->tenant->name : NULL,
                               .method = r->method, .route = r->url, .status = (int)status,
                               .model = r->srv->model_id[0] ? r->srv->model_id : NULL,
                               .error = error, .http_s = http_now() - r->t0};
    http_log_write(r->srv->log, &rec);
}

enum MHD_Result http_send_error(struct http_req *r, unsigned status, const char *message,
                                const char *param, const char *code, const char *retry_after)
{
    char *json = oai_error_build(message, error_type(status), param, code);
    enum MHD_Result rc = http_send_json(r, status, json, retry_after);
    free(json);
    http_log_simple(r, status, message);
    return rc;
}
