/* remote_loop: the remote engine's worker thread. One libcurl multi handle
 * drives every request's stream and the background probes (Prometheus
 * /metrics about once a second, /health every few seconds), so the UI thread
 * never waits on the network. Each turn: take new requests and cancellations,
 * let curl move bytes, finish what ended, enforce the read timeout, start
 * probes that are due, then sleep in curl_multi_poll until a socket is ready,
 * 50 ms pass, or curl_multi_wakeup (submit, cancel, close) interrupts it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "prom.h"
#include "remote_impl.h"
#include "remote_parse.h"

#define REMOTE_HEALTH_INTERVAL_S 5.0

/* While paused: the held requests stay in the inbox, except the cancelled
 * ones, which move to the active list (where prune drops them) and end now. */
static void end_held_cancelled(struct remote *R)
{
    struct rreq *done = NULL;
    pthread_mutex_lock(&R->mu);
    for (struct rreq **pp = &R->inbox_head, *prev = NULL; *pp;) {
        struct rreq *q = *pp;
        if (!q->cancel) {
            prev = q;
            pp = &q->inbox_next;
            continue;
        }
        *pp = q->inbox_next;
        if (R->inbox_tail == q) R->inbox_tail = prev;
        q->inbox_next = done;
        done = q;
    }
    pthread_mutex_unlock(&R->mu);
    while (done) {
        struct rreq *q = done;
        done = q->inbox_next;
        q->inbox_next = NULL;
        q->act_next = R->active;
        R->active = q;
        remote_stream_finish(R, q, ENGINE_CANCELLED, "cancelled while held by engine_pause "
                                                     "(never sent)");
    }
}

static void start_new(struct remote *R)
{
    pthread_mutex_lock(&R->mu);
    bool paused = R->paused;
    struct rreq *q = paused ? NULL : R->inbox_head;
    if (!paused) R->inbox_head = R->inbox_tail = NULL;
    pthread_mutex_unlock(&R->mu);
    if (paused) {
        end_held_cancelled(R);
        return;
    }
    while (q) {
        struct rreq *next = q->inbox_next;
        q->inbox_next = NULL;
        q->act_next = R->active;
        R->active = q;
        char err[256];
        if (remote_stream_start(R, q, err, sizeof err) != 0) q->failed = true;
        pthread_mutex_lock(&R->mu);
        q->started = true;
        pthread_mutex_unlock(&R->mu);
        if (q->failed) remote_stream_finish(R, q, ENGINE_ERROR, err);
        q = next;
    }
}

/* Drops finished requests from the active list. */
static void prune(struct remote *R)
{
    struct rreq **pp = &R->active;
    while (*pp) {
        struct rreq *q = *pp;
        pthread_mutex_lock(&R->mu);
        bool fin = q->finished;
        pthread_mutex_unlock(&R->mu);
        if (fin) {
            *pp = q->act_next;
            pthread_mutex_lock(&R->mu);
            remote_req_unref(q); /* the worker's reference */
            pthread_mutex_unlock(&R->mu);
        } else {
            pp = &q->act_next;
        }
    }
}

/* A paused stream (REMOTE_STALL_S): resumed once drained to half the event
 * limit; returns true when its consumer has read none of it for the bound. */
static bool backpressure(struct remote *R, struct rreq *q, double now)
{
    pthread_mutex_lock(&R->mu);
    bool paused = q->recv_paused, resume = paused && q->n_events <= R->event_limit / 2;
    double since = q->last_read_t > q->paused_t ? q->last_read_t : q->paused_t;
    if (resume) q->recv_paused = false;
    pthread_mutex_unlock(&R->mu);
    if (!paused || !q->easy) return false;
    if (resume) {
        /* The read timeout counts from here: the server was not silent, we
         * were not reading. curl may call on_body before this returns. */
        q->last_byte_t = now;
        curl_easy_pause(q->easy, CURLPAUSE_CONT);
        return false;
    }
    return now - since > REMOTE_STALL_S;
}

/* Cancellations, backpressure and stalled consumers, read timeouts and due
 * retries. */
static void sweep(struct remote *R, double now)
{
    for (struct rreq *q = R->active; q; q = q->act_next) {
        pthread_mutex_lock(&R->mu);
        bool fin = q->finished, cancel = q->cancel;
        pthread_mutex_unlock(&R->mu);
        if (fin) continue;
        bool stalled = !cancel && backpressure(R, q, now);
        pthread_mutex_lock(&R->mu);
        bool paused = q->recv_paused;
        pthread_mutex_unlock(&R->mu);
        if (stalled) {
            /* As the local engine does: a consumer that stopped reading ends
             * its own request (the connection closes, which cancels it on the
             * server), others go on. */
            char msg[240];
            snprintf(msg, sizeof msg, "consumer stalled: %d events not read for %.1f s (the "
                     "stream was paused); the connection was closed", R->event_limit,
                     REMOTE_STALL_S);
            remote_stream_finish(R, q, ENGINE_CONSUMER_STALLED, msg);
        } else if (cancel) {
            q->m.interrupted = false;
            remote_stream_finish(R, q, ENGINE_CANCELLED,
                                 "cancelled: the connection was closed, which cancels the "
                                 "request on the server");
        } else if (q->easy && !paused && now - q->last_byte_t > R->read_timeout_s) {
            char msg[400];
            q->m.interrupted = q->any_text;
            snprintf(msg, sizeof msg,
                     "read timeout: no data from %s for %.1f s (connection closed, which "
                     "cancels the request on the server)%s",
                     R->ep[q->ep].base, R->read_timeout_s,
                     q->any_text ? "; partial reply kept, marked interrupted" : "");
            remote_stream_finish(R, q, ENGINE_ERROR, msg);
        } else if (!q->easy && q->retry_at > 0 && now >= q->retry_at) {
            char err[256];
            q->retry_at = 0;
            if (remote_stream_start(R, q, err, sizeof err) != 0)
                remote_stream_finish(R, q, ENGINE_ERROR, err);
        }
    }
    prune(R);
}

/* ---- probes: /metrics and /health ------------------------------------------------------ */

static size_t probe_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct rprobe *p = ud;
    size_t n = size * nmemb;
    return rbuf_add(&p->body, ptr, n) == 0 ? n : 0;
}

static void probe_start(struct remote *R, struct rprobe *p, int32_t ep, int what, double now)
{
    if (p->easy) return; /* the previous one is still running */
    static const char *const path[] = {"metrics", "health", "v1/tern/status"};
    char url[1024];
    snprintf(url, sizeof url, "%s/%s", R->ep[ep].root, path[what]);
    p->kind = REMOTE_XFER_PROBE;
    p->ep = ep;
    p->what = what;
    p->t0 = now;
    p->body.len = 0;
    p->body.max = 8u << 20; /* an exposition larger than this is not a metrics page */
    p->easy = curl_easy_init();
    if (!p->easy) return;
    struct curl_slist *h = NULL;
    curl_easy_setopt(p->easy, CURLOPT_URL, url);
    remote_easy_common(R, p->easy, &h, false);
    curl_slist_free_all(h); /* probes send only the key, set below */
    if (R->api_key) {
        curl_easy_setopt(p->easy, CURLOPT_XOAUTH2_BEARER, R->api_key);
        curl_easy_setopt(p->easy, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
    }
    curl_easy_setopt(p->easy, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(p->easy, CURLOPT_WRITEFUNCTION, probe_body);
    curl_easy_setopt(p->easy, CURLOPT_WRITEDATA, p);
    curl_easy_setopt(p->easy, CURLOPT_PRIVATE, p);
    curl_multi_add_handle(R->multi, p->easy);
}

static void scrape_result(struct remote *R, struct rprobe *p, long code, CURLcode rc, double now)
{
    struct rendpoint *ep = &R->ep[p->ep];
    char err[160] = "";
    struct prom_doc d = {0};
    struct engine_stats s = {0};
    if (rc != CURLE_OK) {
        snprintf(err, sizeof err, "GET %s/metrics: %s", ep->root, curl_easy_strerror(rc));
    } else if (code != 200) {
        snprintf(err, sizeof err, "GET %s/metrics: HTTP %ld%s", ep->root, code,
                 code == 404 ? " (no metrics: llama-server needs --metrics, SGLang "
                               "--enable-metrics)" : "");
    } else if (prom_parse(p->body.p ? p->body.p : "", p->body.len, &d, err, sizeof err) == 0) {
        prom_map_apply(&d, &ep->pm, now, &s);
        if (!s.server.source[0]) snprintf(err, sizeof err, "GET %s/metrics: no known metrics",
                                          ep->root);
    }
    prom_free(&d);
    pthread_mutex_lock(&R->mu);
    ep->scrapes++;
    if (err[0]) {
        ep->scrape_errors++;
        snprintf(ep->scrape_error, sizeof ep->scrape_error, "%s", err);
    } else {
        ep->srv = s;
        ep->srv_ok = true;
        ep->srv_t = now;
        ep->scrape_error[0] = 0;
        snprintf(ep->server_kind, sizeof ep->server_kind, "%s", s.server.source);
    }
    pthread_mutex_unlock(&R->mu);
}

/* tern serve's /v1/tern/status: "engine" is its engine_snapshot_json, so the
 * KV blocks and step figures shown are exactly the server's own. */
static void status_result(struct remote *R, struct rprobe *p, long code, CURLcode rc)
{
    if (rc != CURLE_OK || code != 200) return;
    struct engine_stats t;
    if (remote_parse_status(p->body.p, p->body.len, &t) != 0) return;
    struct rendpoint *ep = &R->ep[p->ep];
    pthread_mutex_lock(&R->mu);
    ep->tstat = t;
    ep->tstat_ok = true;
    pthread_mutex_unlock(&R->mu);
}

static void probe_done(struct remote *R, struct rprobe *p, CURLcode rc)
{
    long code = 0;
    curl_easy_getinfo(p->easy, CURLINFO_RESPONSE_CODE, &code);
    double now = remote_now(R);
    curl_multi_remove_handle(R->multi, p->easy);
    curl_easy_cleanup(p->easy);
    p->easy = NULL;
    if (p->what == REMOTE_PROBE_METRICS) {
        scrape_result(R, p, code, rc, now);
        return;
    }
    if (p->what == REMOTE_PROBE_STATUS) {
        status_result(R, p, code, rc);
        return;
    }
    struct rendpoint *ep = &R->ep[p->ep];
    pthread_mutex_lock(&R->mu);
    ep->pub.healthy = rc == CURLE_OK && code >= 200 && code < 300;
    ep->pub.health_latency_s = now - p->t0;
    if (!ep->pub.healthy)
        snprintf(ep->pub.last_error, sizeof ep->pub.last_error, "GET %s/health: %s", ep->root,
                 rc != CURLE_OK ? curl_easy_strerror(rc) : "not 2xx");
    pthread_mutex_unlock(&R->mu);
}

static void probes(struct remote *R, double now)
{
    for (int32_t i = 0; i < R->n_ep; i++) {
        struct rendpoint *ep = &R->ep[i];
        if (R->scrape_interval_s > 0 && now >= ep->next_scrape) {
            probe_start(R, &ep->scrape, i, REMOTE_PROBE_METRICS, now);
            if (!strcmp(ep->server_kind, "tern"))
                probe_start(R, &ep->status, i, REMOTE_PROBE_STATUS, now);
            ep->next_scrape = now + R->scrape_interval_s;
        }
        if (now >= ep->next_health) {
            probe_start(R, &ep->health, i, REMOTE_PROBE_HEALTH, now);
            ep->next_health = now + REMOTE_HEALTH_INTERVAL_S;
        }
    }
}

static void reap(struct remote *R)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(R->multi, &left))) {
        if (msg->msg != CURLMSG_DONE) continue;
        void *priv = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&priv);
        CURLcode rc = msg->data.result;
        if (!priv) continue;
        if (*(int *)priv == REMOTE_XFER_REQ) remote_stream_done(R, priv, rc);
        else probe_done(R, priv, rc);
    }
}

void *remote_main(void *arg)
{
    struct remote *R = arg;
    for (;;) {
        pthread_mutex_lock(&R->mu);
        bool stop = R->stop;
        pthread_mutex_unlock(&R->mu);
        if (stop) break;
        start_new(R);
        int running = 0;
        curl_multi_perform(R->multi, &running);
        reap(R);
        double now = remote_now(R);
        sweep(R, now);
        probes(R, now);
        curl_multi_poll(R->multi, NULL, 0, 50, NULL);
    }
    /* Close: cancel what is left (closing each connection); requests never
     * sent (the inbox, held or not) end without a connection. */
    pthread_mutex_lock(&R->mu);
    struct rreq *in = R->inbox_head;
    R->inbox_head = R->inbox_tail = NULL;
    pthread_mutex_unlock(&R->mu);
    while (in) {
        struct rreq *next = in->inbox_next;
        in->inbox_next = NULL;
        in->act_next = R->active;
        R->active = in;
        in = next;
    }
    for (struct rreq *q = R->active; q; q = q->act_next) {
        pthread_mutex_lock(&R->mu);
        bool fin = q->finished;
        pthread_mutex_unlock(&R->mu);
        if (!fin) remote_stream_finish(R, q, ENGINE_CANCELLED, "cancelled: engine closed");
    }
    prune(R);
    for (int32_t i = 0; i < R->n_ep; i++) {
        struct rprobe *ps[3] = {&R->ep[i].scrape, &R->ep[i].health, &R->ep[i].status};
        for (int k = 0; k < 3; k++)
            if (ps[k]->easy) {
                curl_multi_remove_handle(R->multi, ps[k]->easy);
                curl_easy_cleanup(ps[k]->easy);
                ps[k]->easy = NULL;
            }
    }
    return NULL;
}
