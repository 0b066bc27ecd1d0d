/* http_impl: the server's state and the helpers its files share (not an API). */
#ifndef TERN_HTTP_IMPL_H
#define TERN_HTTP_IMPL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

#include "engine.h"
#include "http_auth.h"
#include "http_log.h"
#include "http_metrics.h"
#include "http_reqid.h"
#include "http_server.h"
#include "oai_request.h"
#include "oai_think.h"
#include "sse.h"

struct http_server {
    struct http_config cfg;
    char host[64];
    struct MHD_Daemon *mhd;
    int port;
    _Atomic(struct engine *) engine;  /* NULL until loaded and warmed up */
    char model_id[256];
    atomic_bool draining;
    atomic_int active;                /* completions in flight */
    struct http_auth *auth;
    struct http_log *log;
    struct http_metrics *metrics;
    pthread_mutex_t mu;               /* the list of live streams (drain cancels them) */
    struct http_stream *streams;
    uint64_t next_id;
};

/* One HTTP request (MHD's per-request pointer). */
struct http_req {
    struct http_server *srv;
    struct MHD_Connection *conn;
    const char *method, *url;
    char request_id[HTTP_REQID_MAX + 1];
    struct http_tenant *tenant;
    struct sse_buf body;
    bool too_big, started;
    double t0;
    /* The max_tokens a request that gave none was clamped to, said in the
     * X-Tern-Max-Tokens header ("" when not clamped). */
    char clamp_note[96];
};

/* A completion being streamed (or waited for). */
struct http_lp;

struct http_stream {
    struct http_server *srv;
    struct http_req *hr;              /* NULL once MHD finished the request */
    struct http_stream *next;
    uint64_t id;                      /* engine request */
    enum oai_kind kind;
    bool stream, include_usage;
    char resp_id[48], model[256], request_id[HTTP_REQID_MAX + 1], tenant[64];
    const char *route;
    struct http_tenant *t;
    int fd;                           /* the client's socket, to see it hang up */
    struct sse_buf out;               /* bytes not yet handed to MHD */
    struct sse_buf text;              /* the whole reply (non-stream) */
    char *content;                    /* prompt text for --log-content */
    struct http_lp *lp;               /* log-probabilities asked (http_lp.h), or NULL */
    struct oai_tools *tools;          /* chat with tools: the reply is read back for calls */
    bool holding;                     /* streaming with tools: text held until it is known
                                         whether it is a call */
    struct oai_think think;           /* chat streams: <think>...</think> as reasoning_content */
    bool call_open;                   /* a forced call's name went out; its arguments stream */
    size_t args_sent;                 /* bytes of its arguments sent so far */
    int auto_calls;                   /* auto mode: calls whose head went out (streaming) */
    size_t auto_sent;                 /* bytes of the last one's arguments sent so far */
    bool sent_role, finished, done, accounted, disconnected;
    struct engine_event fin;          /* the FINISHED event */
    double t0, t_keepalive;
    int http_status;
    /* Read by the watchdog (http_server_tick) under the server lock. */
    atomic_bool streaming;            /* the response is queued */
    _Atomic double t_progress;        /* last time MHD took bytes */
    bool shut;                        /* the watchdog shut the socket (server lock) */
};

/* http_reply.c: answers and the access log of a simple one */
double http_now(void);
/* The headers every answer to r carries (X-Request-Id, Server, X-Tern-Max-Tokens). */
void http_add_common_headers(struct MHD_Response *resp, const struct http_req *r);
/* Queues a JSON body with status and the X-Request-Id header; counts the status. */
enum MHD_Result http_send_json(struct http_req *r, unsigned status, const char *json,
                               const char *retry_after);
/* The OpenAI error shape; type chosen from the status. Logs the request. */
enum MHD_Result http_send_error(struct http_req *r, unsigned status, const char *message,
                                const char *param, const char *code, const char *retry_after);
void http_log_simple(struct http_req *r, unsigned status, const char *error);

/* http_routes.c */
/* POST /v1/tern/cache/save: the prompt cache's recent prefixes to disk now. */
enum MHD_Result http_route_cache_save(struct http_req *r);
enum MHD_Result http_route_get(struct http_req *r);
/* http_stream.c: the completion routes (body complete). */
enum MHD_Result http_route_completion(struct http_req *r, enum oai_kind kind);
/* http_embed.c: POST /v1/embeddings (body complete). */
enum MHD_Result http_route_embeddings(struct http_req *r);
/* Ends the streams still running (drain). */
int http_stream_cancel_all(struct http_server *s);
/* Shuts the sockets of streams whose client has taken no bytes for timeout_s. */
int http_stream_watchdog(struct http_server *s, double timeout_s);

#endif
