/* remote_impl: the remote engine's state, shared by remote.c (the engine
 * API: submit, cancel, events, snapshot, tokens), remote_loop.c (the worker
 * thread: one libcurl multi handle driving every stream, the timeouts and the
 * metrics scraper) and remote_stream.c (one request's HTTP exchange: the SSE
 * stream of OpenAI chunks turned into engine events). Not a public header.
 *
 * Threads: callers (UI, bench threads) submit, cancel and drain events under
 * mu; the worker thread alone touches curl handles. */
#ifndef TERN_REMOTE_IMPL_H
#define TERN_REMOTE_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <curl/curl.h>

#include "engine_ops.h"
#include "evq.h"
#include "metrics.h"
#include "prom_map.h"
#include "sse.h"
#include "oai_response.h"
#include "template.h"

struct model;
struct tok;

enum { REMOTE_XFER_REQ = 1, REMOTE_XFER_PROBE = 2 };
enum { REMOTE_PROBE_METRICS, REMOTE_PROBE_HEALTH, REMOTE_PROBE_STATUS };
#define REMOTE_ERRBODY_MAX 8192  /* bytes of an error body kept for its message */
/* Backpressure: a stream whose undrained events reach event_limit is paused
 * (curl stops reading its socket, so the server meets a slow reader through
 * TCP) and resumed once the consumer has read it down to half the limit. It
 * ends consumer-stalled only when, paused, the consumer has read none of its
 * events for this long: the local engine's "event_limit events not drained"
 * with the wait a network reader is owed (a burst of events faster than the
 * consumer loop is not a stalled consumer). */
#define REMOTE_STALL_S 2.0

/* A growable byte buffer, bounded by max. */
struct rbuf {
    char *p;
    size_t len, cap, max;
};
int rbuf_add(struct rbuf *b, const char *s, size_t n); /* 0, or -1 past max / OOM */
void rbuf_free(struct rbuf *b);

/* A background GET of one endpoint (/metrics or /health). */
struct rprobe {
    int kind;                      /* REMOTE_XFER_PROBE (first member: CURLOPT_PRIVATE) */
    int32_t ep;
    int what;                      /* REMOTE_PROBE_METRICS / _HEALTH / _STATUS */
    CURL *easy;
    struct rbuf body;
    double t0;
};

struct rendpoint {
    char *base;                    /* API base, ends in /v1 */
    char *root;                    /* server root (for /metrics, /health, /tokenize) */
    struct prom_map_state pm;      /* worker only */
    struct rprobe scrape, health, status; /* worker only */
    double next_scrape, next_health;
    /* under mu */
    struct engine_endpoint pub;
    struct engine_stats srv;       /* the server view of the last good scrape */
    bool srv_ok;
    double srv_t;
    uint64_t scrapes, scrape_errors;
    char scrape_error[160];
    char server_kind[16];
    int32_t n_ctx;                 /* the server's context per sequence; 0 = unknown */
    int32_t max_tokens_cap;        /* the key's cap per request (tern serve); 0 = none */
    /* tern serve's GET /v1/tern/status: its engine's own snapshot (KV
     * blocks, steps), beside what /metrics says */
    struct engine_stats tstat;     /* server.recent / tenants are filled too */
    bool tstat_ok;
};

struct rreq {
    int kind;                      /* REMOTE_XFER_REQ (first member: CURLOPT_PRIVATE) */
    struct remote *R;
    uint64_t id, tag;
    enum engine_priority prio;
    int32_t ep;
    bool chat;
    char *body;                    /* JSON request body */
    /* score requests (eval perplexity): one non-streamed completions call
     * with echo + logprobs + max_tokens 0; the prompt's ids to find each
     * token's entry, and the whole JSON body */
    bool score;
    int32_t score_from, n_ids;
    int32_t *ids;
    struct rbuf whole;
    /* embedding requests: one non-streamed POST to /v1/embeddings; the
     * vector read from its answer goes out with FINISHED (owned until then) */
    bool embed;
    float *embedding;
    int32_t n_embedding;
    /* worker only */
    CURL *easy;
    struct curl_slist *hdrs;
    struct sse_reader sse;
    struct rbuf errbody;
    char curl_err[CURL_ERROR_SIZE];
    long http_status;
    double retry_after_s;
    bool headers_seen, admitted, any_text, done_seen, got_bytes, failed;
    enum engine_status fin_status;
    bool has_fin;
    char *fin_message;
    double last_byte_t, retry_at;
    int retries;
    bool has_usage, has_timings;
    struct oai_usage usage;
    int32_t token_cap;
    struct engine_metrics m;
    struct rreq *act_next;         /* the worker's active list */
    /* shared, under mu */
    bool cancel, finished, started;
    int refs;                      /* engine + queued events */
    int32_t n_events;              /* undrained events (event_limit: the transfer pauses) */
    bool recv_paused;              /* curl reads nothing of it until drained */
    double paused_t, last_read_t;  /* when it paused; the consumer's last read of it */
    struct rreq *inbox_next, *live_prev, *live_next;
};

struct remote {
    struct engine base;            /* ops = remote_ops (first member) */
    double t0;
    char *model;                   /* "model" sent */
    char *api_key;
    bool insecure;
    enum engine_balance balance;
    double connect_timeout_s, read_timeout_s, scrape_interval_s;
    int32_t max_retries, event_limit;
    int32_t n_ep;
    struct rendpoint ep[ENGINE_MAX_ENDPOINTS];
    char device[128];              /* "URL (kind)" */
    char *model_path;
    /* optional local tokenizer (model file given) */
    struct model *tmodel;
    struct tok *tok;
    struct tmpl tmpl;
    bool has_tmpl;
    bool server_tokenize;          /* the server answered POST /tokenize at open */
    /* worker */
    CURLM *multi;
    pthread_t thread;
    bool thread_started;
    struct rreq *active;
    /* shared, under mu */
    pthread_mutex_t mu;
    pthread_cond_t ev_cond;
    bool stop;
    bool paused;                   /* engine_pause: inbox requests are held, not sent */
    bool resume_due;               /* a paused stream was drained: wake the worker */
    struct rreq *inbox_head, *inbox_tail;
    struct rreq *live;
    struct evq evq;
    struct metrics mx;             /* the client's view of finished requests */
    uint64_t next_id, rr;
    int32_t n_live, n_running;
};

/* Seconds since the remote engine opened (every remote file stamps with it;
 * inline here so none of them calls back into remote.c for it). */
static inline double remote_now(const struct remote *R)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 - R->t0;
}
/* Queues an event of q (lock held). */
void remote_emit(struct remote *R, struct rreq *q, struct engine_event *ev);
void remote_req_unref(struct rreq *q);   /* lock held */
/* A GET/POST on the caller's thread (open, tokenize): returns the HTTP status
 * (0 when no answer, err filled) with the body in out. */
long remote_http_sync(const struct remote *R, const char *url, const char *post, struct rbuf *out,
                      double timeout_s, char *err, size_t errlen);
void remote_easy_common(const struct remote *R, CURL *h, struct curl_slist **hdrs, bool json);

/* remote_view.c: the ops that describe the engine */
void remote_snapshot(struct engine *e, struct engine_stats *out);
int remote_requests(struct engine *e, struct engine_req_info *out, int max);
void remote_info(const struct engine *e, struct engine_info *out);
int64_t remote_count_tokens(const struct engine *e, const char *text, size_t len, char *err,
                            size_t errlen);
int64_t remote_count_chat_tokens(const struct engine *e, const struct engine_message *msgs,
                                 int32_t n, char *err, size_t errlen);
int remote_token_bytes(const struct engine *e, int32_t id, char *out, size_t cap);
/* POST ROOT/tokenize (bounded wait); -1 when the server has none. */
int64_t remote_server_tokenize(const struct remote *R, const char *text, size_t len);

/* remote_loop.c */
void *remote_main(void *arg);

/* remote_stream.c (worker thread) */
int remote_stream_start(struct remote *R, struct rreq *q, char *err, size_t errlen);
/* The transfer ended (curl result rc). */
void remote_stream_done(struct remote *R, struct rreq *q, CURLcode rc);
/* Ends q with status/message (removes its transfer: closes the connection
 * when it was still streaming) and emits FINISHED. */
void remote_stream_finish(struct remote *R, struct rreq *q, enum engine_status st,
                          const char *msg);

#endif
