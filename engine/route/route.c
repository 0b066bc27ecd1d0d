/* route: the fallback-route engine (see route.h). One worker thread drains
 * every target's events, renames them to the route's request ids and
 * clocks, and decides the moves; callers submit, cancel and drain under mu.
 * Lock order: mu, then a target's own lock (engine_submit/cancel inside mu);
 * the worker never holds a target's lock when it takes mu. */
#include "route.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "engine_ops.h"
#include "evq.h"
#include "trace.h"

#define ROUTE_DONE_KEEP 1024         /* finished trails kept for route_trail */

struct rtarget {
    char name[256];
    struct engine *e;                /* NULL: did not open (set once, under mu) */
    double t_off;                    /* route time = target time + t_off */
    char open_err[256];
    bool local;
    char *key;                       /* a remote target's Bearer key (owned), NULL none */
    bool no_key;                     /* its #key-env variable is unset: never opens */
    double down_until;               /* route clock: skipped until then (no answer) */
    char down_err[128];
};

/* A remote target that gave no answer at all (connection refused or cut
 * before a status) is skipped this long, so the requests behind the first
 * do not each pay its connect retries; then one request tries it again. */
#define ROUTE_DOWN_S 2.0

/* A remote target that did not open is tried again this often (a replica
 * started after the route, a server back from a restart). */
#define ROUTE_REOPEN_S 3.0

/* A request's own copy, re-submitted on each move. */
struct rcopy {
    struct engine_request req;
    struct engine_message *msgs;
    char **strs;                     /* every string owned, freed together */
    int32_t n_strs;
    int32_t *tokens;
    const char **stop;
};

struct rreq {
    uint64_t id, tag;
    struct rcopy c;
    int32_t cur;                     /* target now serving it */
    uint64_t inner;                  /* its id there */
    double t_arrival, t_attempt;
    bool had_token, cancelled, queued_sent;
    struct route_trail trail;
    struct rreq *next;
};

struct route {
    struct engine base;
    struct rtarget t[ROUTE_MAX_TARGETS];
    int32_t n, primary;              /* primary: first open target */
    double ttft_s;
    double t0;
    pthread_mutex_t mu;
    pthread_cond_t ev_cond;
    struct evq evq;
    struct rreq *live;
    uint64_t next_id;
    struct { uint64_t id; struct route_trail trail; } done[ROUTE_DONE_KEEP];
    uint32_t n_done;
    uint64_t counts[ROUTE_MAX_TARGETS][ROUTE_MAX_TARGETS][ROUTE_N_REASON];
    struct trace trace;
    /* what a remote target is (re)opened with: the caller's settings, its
     * strings copied (they must outlive route_open) */
    struct engine_config remote_base;
    char *tokenizer_path, *remote_model, *chat_template;
    pthread_t thread, reopener;
    bool thread_started, reopener_started, stop;
    pthread_cond_t stop_cond;
};

static const struct engine_ops route_ops;

static double now_abs(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double route_now(const struct route *R) { return now_abs() - R->t0; }

/* ---- the request copy ------------------------------------------------------------- */

static const char *keep(struct rcopy *c, const char *s)
{
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) return NULL;
    c->strs[c->n_strs++] = d;
    return d;
}

static void rcopy_free(struct rcopy *c)
{
    for (int32_t i = 0; i < c->n_strs; i++) free(c->strs[i]);
    free(c->strs);
    free(c->msgs);
    free(c->tokens);
    free(c->stop);
    memset(c, 0, sizeof *c);
}

static int rcopy_init(struct rcopy *c, const struct engine_request *r)
{
    memset(c, 0, sizeof *c);
    c->req = *r;
    int32_t nm = r->messages ? r->n_messages : 0, ns = r->stop ? r->n_stop : 0;
    c->strs = calloc((size_t)(2 * nm + ns + 4), sizeof *c->strs);
    if (!c->strs) return -1;
    if (nm > 0) {
        c->msgs = calloc((size_t)nm, sizeof *c->msgs);
        if (!c->msgs) goto oom;
        for (int32_t i = 0; i < nm; i++) {
            c->msgs[i].role = keep(c, r->messages[i].role);
            c->msgs[i].content = keep(c, r->messages[i].content);
            if ((r->messages[i].role && !c->msgs[i].role) ||
                (r->messages[i].content && !c->msgs[i].content))
                goto oom;
        }
        c->req.messages = c->msgs;
    }
    if (r->prompt_tokens && r->n_prompt_tokens > 0) {
        c->tokens = malloc((size_t)r->n_prompt_tokens * sizeof *c->tokens);
        if (!c->tokens) goto oom;
        memcpy(c->tokens, r->prompt_tokens, (size_t)r->n_prompt_tokens * sizeof *c->tokens);
        c->req.prompt_tokens = c->tokens;
    }
    if (ns > 0) {
        c->stop = calloc((size_t)ns, sizeof *c->stop);
        if (!c->stop) goto oom;
        for (int32_t i = 0; i < ns; i++)
            if (r->stop[i] && !(c->stop[i] = keep(c, r->stop[i]))) goto oom;
        c->req.stop = c->stop;
    }
    c->req.prompt = keep(c, r->prompt);
    c->req.json_schema = keep(c, r->json_schema);
    c->req.trace_request_id = keep(c, r->trace_request_id);
    c->req.trace_tenant = keep(c, r->trace_tenant);
    if ((r->prompt && !c->req.prompt) || (r->json_schema && !c->req.json_schema)) goto oom;
    return 0;
oom:
    rcopy_free(c);
    return -1;
}

/* ---- moves ------------------------------------------------------------------------ */

static void add_hop(struct route *R, struct rreq *q, int32_t from, int32_t to,
                    enum route_reason why, const char *detail)
{
    double now = route_now(R);
    struct route_trail *tr = &q->trail;
    if (tr->n_hops < ROUTE_MAX_TARGETS) {
        struct route_hop *h = &tr->hop[tr->n_hops++];
        h->from = from;
        h->to = to;
        h->reason = why;
        h->t = now;
        h->waited_s = now - q->t_attempt;
        snprintf(h->detail, sizeof h->detail, "%.127s", detail ? detail : "");
    }
    R->counts[from][to][why]++;
    if (R->trace.f) {
        char args[768];
        snprintf(args, sizeof args, "\"from\":\"%.250s\",\"to\":\"%.250s\",\"reason\":\"%s\"",
                 R->t[from].name, R->t[to].name, route_reason_name(why));
        trace_span(&R->trace, q->id, "fallback", q->t_attempt, now, args, NULL);
    }
}

/* Tries targets from `from` + 1 on (from < 0: the first), recording each
 * move; on success q serves there. Returns false when none took it, with
 * the last refusal in *why / err. */
static bool place(struct route *R, struct rreq *q, int32_t from, enum route_reason reason,
                  const char *detail, enum engine_status *why, char *err, size_t errlen)
{
    char msg[256];
    snprintf(msg, sizeof msg, "%s", detail ? detail : "");
    for (int32_t k = from + 1; k < R->n; k++) {
        if (from >= 0) add_hop(R, q, from, k, reason, msg);
        q->t_attempt = route_now(R);
        from = k;
        if (!R->t[k].e) {
            reason = ROUTE_R_UNAVAILABLE;
            snprintf(msg, sizeof msg, "%s", R->t[k].open_err);
            continue;
        }
        if (k + 1 < R->n && q->t_attempt < R->t[k].down_until) { /* the last is always tried */
            reason = ROUTE_R_UNAVAILABLE;
            snprintf(msg, sizeof msg, "no answer %.1f s ago: %s",
                     q->t_attempt - (R->t[k].down_until - ROUTE_DOWN_S), R->t[k].down_err);
            continue;
        }
        enum engine_status w = ENGINE_ERROR;
        uint64_t id = engine_submit(R->t[k].e, &q->c.req, &w, msg, sizeof msg);
        if (id) {
            q->cur = k;
            q->inner = id;
            q->trail.served = k;
            return true;
        }
        *why = w;
        snprintf(err, errlen, "%s", msg);
        reason = route_classify_submit(w);
        if (reason == ROUTE_R_NONE) return false;
    }
    if (from >= 0 && !R->t[from].e) {
        *why = ENGINE_ERROR;
        snprintf(err, errlen, "route: no target available (%s)", msg);
    }
    return false;
}

/* ---- the worker: events of every target ----------------------------------------------- */

static bool open_after(const struct route *R, int32_t k)
{
    for (int32_t i = k + 1; i < R->n; i++)
        if (R->t[i].e) return true;
    return false;
}

static struct rreq *find_inner(struct route *R, int32_t k, uint64_t inner)
{
    for (struct rreq *q = R->live; q; q = q->next)
        if (q->cur == k && q->inner == inner) return q;
    return NULL;
}

static void unlink_req(struct route *R, struct rreq *q)
{
    for (struct rreq **p = &R->live; *p; p = &(*p)->next)
        if (*p == q) {
            *p = q->next;
            break;
        }
    uint32_t slot = R->n_done++ % ROUTE_DONE_KEEP;
    R->done[slot].id = q->id;
    R->done[slot].trail = q->trail;
    rcopy_free(&q->c);
    free(q);
}

static void shift(double *t, double off)
{
    if (*t != 0) *t += off;
}

/* The target's metrics on the route's clock, counted from its arrival. */
static void fix_metrics(struct engine_metrics *m, const struct rreq *q, double off)
{
    m->id = q->id;
    m->tag = q->tag;
    shift(&m->t_admitted, off);
    shift(&m->t_first_sched, off);
    shift(&m->t_prefill_done, off);
    shift(&m->t_first_token, off);
    shift(&m->t_finished, off);
    for (int32_t i = 0; m->token_t && i < m->n_generated; i++) m->token_t[i] += off;
    m->t_arrival = q->t_arrival;
    m->queue_s = (m->t_admitted ? m->t_admitted : m->t_finished) - q->t_arrival;
    m->ttft_s = m->t_first_token ? m->t_first_token - q->t_arrival : 0;
    if (m->t_finished) m->e2e_s = m->t_finished - q->t_arrival;
}

static void push(struct route *R, struct engine_event *ev)
{
    evq_push(&R->evq, ev, NULL);
    pthread_cond_broadcast(&R->ev_cond);
}

static void on_finished(struct route *R, struct rreq *q, struct engine_event *ev)
{
    int32_t http = ev->metrics ? ev->metrics->http_status : 0;
    enum route_reason why = q->cancelled ? ROUTE_R_NONE
                                         : route_classify(ev->status, http, q->had_token);
    if (why == ROUTE_R_ERROR && http == 0 && !R->t[q->cur].local) {
        R->t[q->cur].down_until = route_now(R) + ROUTE_DOWN_S;
        snprintf(R->t[q->cur].down_err, sizeof R->t[q->cur].down_err, "%.120s",
                 ev->message ? ev->message : "");
    }
    if (why != ROUTE_R_NONE && open_after(R, q->cur)) {
        enum engine_status w;
        char err[256];
        if (place(R, q, q->cur, why, ev->message, &w, err, sizeof err)) {
            engine_event_free(ev);
            return;
        }
    }
    if (ev->metrics) fix_metrics(ev->metrics, q, R->t[q->cur].t_off);
    if (R->trace.f) {
        char args[300];
        snprintf(args, sizeof args, "\"target\":\"%.250s\",\"status\":\"%s\"", R->t[q->cur].name,
                 engine_status_name(ev->status));
        trace_span(&R->trace, q->id, "served", q->t_attempt, ev->t, args, NULL);
    }
    push(R, ev);
    unlink_req(R, q);
}

static void on_event(struct route *R, int32_t k, struct engine_event *ev)
{
    struct rreq *q = find_inner(R, k, ev->id);
    if (!q) { /* an attempt the route left (a missed deadline): its events end here */
        engine_event_free(ev);
        return;
    }
    ev->id = q->id;
    ev->tag = q->tag;
    ev->t += R->t[k].t_off;
    switch (ev->type) {
    case ENGINE_EV_QUEUED:
        if (q->queued_sent) {
            engine_event_free(ev);
            return;
        }
        q->queued_sent = true;
        break;
    case ENGINE_EV_FIRST_TOKEN:
    case ENGINE_EV_TOKEN: q->had_token = true; break;
    case ENGINE_EV_FINISHED: on_finished(R, q, ev); return;
    default: break;
    }
    push(R, ev);
}

/* A request with no token by the deadline leaves its target (cancelled
 * there; that attempt's events are dropped) for the next one. The last
 * target keeps it: a late reply beats none. */
static void check_deadlines(struct route *R)
{
    if (R->ttft_s <= 0) return;
    double now = route_now(R);
    for (struct rreq *q = R->live; q; q = q->next) {
        if (q->had_token || q->cancelled || !open_after(R, q->cur)) continue;
        if (now - q->t_attempt < R->ttft_s) continue;
        int32_t from = q->cur;
        uint64_t inner = q->inner;
        char msg[96];
        snprintf(msg, sizeof msg, "no first token in %.3f s", R->ttft_s);
        enum engine_status w;
        char err[256];
        if (place(R, q, from, ROUTE_R_TTFT, msg, &w, err, sizeof err))
            engine_cancel(R->t[from].e, inner);
        else
            q->t_attempt = now; /* every later target refused: wait here, look again later */
    }
}

static void *route_main(void *arg)
{
    struct route *R = arg;
    struct pollfd pf[ROUTE_MAX_TARGETS];
    int32_t who[ROUTE_MAX_TARGETS];
    for (;;) {
        struct engine *te[ROUTE_MAX_TARGETS];
        pthread_mutex_lock(&R->mu); /* a target may open late (reopen_main) */
        bool stop = R->stop;
        for (int32_t k = 0; k < R->n; k++) te[k] = R->t[k].e;
        pthread_mutex_unlock(&R->mu);
        if (stop) break;
        int n = 0;
        for (int32_t k = 0; k < R->n; k++)
            if (te[k]) {
                pf[n].fd = engine_event_fd(te[k]);
                pf[n].events = POLLIN;
                who[n++] = k;
            }
        poll(pf, (nfds_t)n, 20); /* the timeout also paces the deadline checks */
        for (int i = 0; i < n; i++) {
            struct engine_event evs[64];
            int got;
            while ((got = engine_poll_events(te[who[i]], evs, 64)) > 0) {
                pthread_mutex_lock(&R->mu);
                for (int j = 0; j < got; j++) on_event(R, who[i], &evs[j]);
                pthread_mutex_unlock(&R->mu);
            }
        }
        pthread_mutex_lock(&R->mu);
        check_deadlines(R);
        pthread_mutex_unlock(&R->mu);
    }
    return NULL;
}

/* ---- open / close ------------------------------------------------------------------- */

static void route_close(struct engine *e);

/* Opens target k (not under mu: an open probes its server). Returns the
 * engine and its clock offset, or NULL with err. */
static struct engine *open_one(struct route *R, int32_t k, const char *local_trace,
                               const struct engine_config *local_base, double *t_off,
                               char *err, size_t errlen)
{
    struct engine_config ec;
    const char *url = R->t[k].name;
    if (R->t[k].local) {
        ec = *local_base;
        ec.remote.n_urls = 0;
        ec.remote.urls = NULL;
        ec.trace_path = local_trace;
    } else {
        ec = R->remote_base;
        ec.remote.urls = &url;
        ec.remote.n_urls = 1;
        ec.remote.api_key = R->t[k].key;
    }
    struct engine *e = engine_open(&ec, err, errlen);
    if (!e) return NULL;
    /* the target's clock starts inside its open: its uptime tells where */
    struct engine_stats st;
    engine_snapshot(e, &st);
    *t_off = route_now(R) - st.uptime_s;
    return e;
}

static void open_target(struct route *R, int32_t k, const struct route_target *t,
                        const struct route_config *c)
{
    struct rtarget *T = &R->t[k];
    char trace[1100], err[512] = "";
    T->local = t->local;
    snprintf(T->name, sizeof T->name, "%s", t->local ? "local" : t->url);
    if (c->base->trace_path) snprintf(trace, sizeof trace, "%s.local.json", c->base->trace_path);
    if (!t->local) {
        const char *key = t->key_env[0] ? getenv(t->key_env) : c->api_key;
        T->no_key = t->key_env[0] && !key;
        if (T->no_key) {
            snprintf(T->open_err, sizeof T->open_err, "%s: $%s (its key) is not set", t->url,
                     t->key_env);
            return;
        }
        T->key = key ? strdup(key) : NULL;
    }
    struct engine *e = open_one(R, k, c->base->trace_path ? trace : NULL, c->base, &T->t_off,
                                err, sizeof err);
    if (!e) snprintf(T->open_err, sizeof T->open_err, "%.250s", err);
    T->e = e;
}

/* The remote targets that did not open, tried again every ROUTE_REOPEN_S;
 * a target that opens takes requests from then on (the primary stays the
 * first that opened at route_open: its figures are the route's). */
static void *reopen_main(void *arg)
{
    struct route *R = arg;
    pthread_mutex_lock(&R->mu);
    while (!R->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += (time_t)ROUTE_REOPEN_S;
        pthread_cond_timedwait(&R->stop_cond, &R->mu, &ts);
        for (int32_t k = 0; k < R->n && !R->stop; k++) {
            if (R->t[k].e || R->t[k].local || R->t[k].no_key) continue;
            pthread_mutex_unlock(&R->mu);
            char err[512];
            double off = 0;
            struct engine *e = open_one(R, k, NULL, NULL, &off, err, sizeof err);
            pthread_mutex_lock(&R->mu);
            if (e) {
                R->t[k].t_off = off;
                R->t[k].e = e;
                R->t[k].open_err[0] = 0;
            }
        }
    }
    pthread_mutex_unlock(&R->mu);
    return NULL;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

struct engine *route_open(const struct route_config *c, char *err, size_t errlen)
{
    struct route *R = calloc(1, sizeof *R);
    if (!R) {
        snprintf(err, errlen, "route: out of memory");
        return NULL;
    }
    R->base.ops = &route_ops;
    R->t0 = now_abs();
    R->evq.fd = -1;
    R->ttft_s = c->ttft_deadline_s;
    R->primary = -1;
    R->next_id = 1;
    pthread_mutex_init(&R->mu, NULL);
    pthread_cond_init(&R->ev_cond, NULL);
    pthread_cond_init(&R->stop_cond, NULL);
    R->remote_base = *c->base;
    memset(&R->remote_base.parts, 0, sizeof R->remote_base.parts);
    R->remote_base.trace_path = NULL;
    R->remote_base.model_path = R->tokenizer_path = dup_or_null(c->tokenizer_path);
    R->remote_base.remote.model = R->remote_model = dup_or_null(c->base->remote.model);
    R->remote_base.chat_template = R->chat_template = dup_or_null(c->base->chat_template);
    if (evq_init(&R->evq, engine_event_free, err, errlen) != 0) goto fail;
    if (c->base->trace_path && trace_open(&R->trace, c->base->trace_path, err, errlen) != 0)
        goto fail;
    R->n = c->spec->n;
    size_t used = 0;
    err[0] = 0;
    for (int32_t k = 0; k < R->n; k++) {
        open_target(R, k, &c->spec->t[k], c);
        if (R->t[k].e && R->primary < 0) R->primary = k;
        if (!R->t[k].e && used < errlen)
            used += (size_t)snprintf(err + used, errlen - used, "%s%s: %s", used ? "; " : "",
                                     R->t[k].name, R->t[k].open_err);
    }
    if (R->primary < 0) goto fail;
    if (pthread_create(&R->thread, NULL, route_main, R) != 0) {
        snprintf(err, errlen, "route: cannot start the worker thread");
        goto fail;
    }
    R->thread_started = true;
    if (pthread_create(&R->reopener, NULL, reopen_main, R) == 0) R->reopener_started = true;
    return &R->base;
fail:
    if (R->primary < 0 && err[0]) {
        char tmp[1024];
        snprintf(tmp, sizeof tmp, "route: no target opened: %s", err);
        snprintf(err, errlen, "%s", tmp);
    }
    route_close(&R->base);
    return NULL;
}

static void route_close(struct engine *e)
{
    struct route *R = (struct route *)e;
    pthread_mutex_lock(&R->mu);
    R->stop = true;
    pthread_cond_broadcast(&R->stop_cond);
    pthread_mutex_unlock(&R->mu);
    if (R->reopener_started) pthread_join(R->reopener, NULL);
    if (R->thread_started) pthread_join(R->thread, NULL);
    for (int32_t k = 0; k < R->n; k++) {
        engine_close(R->t[k].e);
        free(R->t[k].key);
    }
    free(R->tokenizer_path);
    free(R->remote_model);
    free(R->chat_template);
    pthread_cond_destroy(&R->stop_cond);
    while (R->live) unlink_req(R, R->live);
    if (R->evq.fd >= 0) evq_free(&R->evq, NULL);
    trace_close(&R->trace);
    pthread_cond_destroy(&R->ev_cond);
    pthread_mutex_destroy(&R->mu);
    free(R);
}

/* ---- the engine API ----------------------------------------------------------------- */

static uint64_t route_submit(struct engine *e, const struct engine_request *r,
                             enum engine_status *why, char *err, size_t errlen)
{
    struct route *R = (struct route *)e;
    enum engine_status dummy;
    if (!why) why = &dummy;
    struct rreq *q = calloc(1, sizeof *q);
    if (!q || rcopy_init(&q->c, r) != 0) {
        free(q);
        *why = ENGINE_ERROR;
        snprintf(err, errlen, "route: out of memory");
        return 0;
    }
    q->tag = r->tag;
    q->trail.served = -1;
    pthread_mutex_lock(&R->mu);
    q->id = R->next_id++;
    q->t_arrival = q->t_attempt = route_now(R);
    if (R->trace.f) {
        char name[64];
        snprintf(name, sizeof name, "route req %llu", (unsigned long long)q->id);
        trace_track(&R->trace, q->id, name);
    }
    /* linked first: the worker may see the target's first event before
     * engine_submit returns here, and waits for mu to look it up */
    q->next = R->live;
    R->live = q;
    uint64_t id = q->id;
    if (!place(R, q, -1, ROUTE_R_NONE, NULL, why, err, errlen)) {
        unlink_req(R, q);
        id = 0;
    }
    pthread_mutex_unlock(&R->mu);
    return id;
}

static struct rreq *find_live(struct route *R, uint64_t id)
{
    for (struct rreq *q = R->live; q; q = q->next)
        if (q->id == id) return q;
    return NULL;
}

static int route_cancel(struct engine *e, uint64_t id)
{
    struct route *R = (struct route *)e;
    pthread_mutex_lock(&R->mu);
    struct rreq *q = find_live(R, id);
    int rc = -1;
    if (q && !q->cancelled) {
        q->cancelled = true;
        rc = engine_cancel(R->t[q->cur].e, q->inner);
    }
    pthread_mutex_unlock(&R->mu);
    return rc;
}

static void route_pause(struct engine *e, bool paused)
{
    struct route *R = (struct route *)e;
    for (int32_t k = 0; k < R->n; k++)
        if (R->t[k].e) engine_pause(R->t[k].e, paused);
}

static int route_poll_request(struct engine *e, uint64_t id, struct engine_event *out, int max)
{
    struct route *R = (struct route *)e;
    pthread_mutex_lock(&R->mu);
    int n = evq_pop(&R->evq, id, out, max, NULL);
    pthread_mutex_unlock(&R->mu);
    return n;
}

static int route_poll_events(struct engine *e, struct engine_event *out, int max)
{
    return route_poll_request(e, 0, out, max);
}

static int route_event_fd(const struct engine *e) { return ((const struct route *)e)->evq.fd; }

static bool route_wait_events(struct engine *e, uint64_t id, double timeout_s)
{
    struct route *R = (struct route *)e;
    return evq_wait(&R->evq, &R->mu, &R->ev_cond, id, timeout_s);
}

/* The figures are the primary target's (the one that takes the traffic
 * while the route is healthy); its uptime is the route's. */
static void route_snapshot(struct engine *e, struct engine_stats *out)
{
    struct route *R = (struct route *)e;
    engine_snapshot(R->t[R->primary].e, out);
    out->uptime_s = route_now(R);
}

static int route_requests(struct engine *e, struct engine_req_info *out, int max)
{
    struct route *R = (struct route *)e;
    int n = engine_requests(R->t[R->primary].e, out, max);
    pthread_mutex_lock(&R->mu);
    for (int i = 0; i < n && i < max; i++) {
        struct rreq *q = find_inner(R, R->primary, out[i].id);
        if (q) {
            out[i].id = q->id;
            out[i].tag = q->tag;
            out[i].t_arrival = q->t_arrival;
        }
    }
    pthread_mutex_unlock(&R->mu);
    return n;
}

static void route_info(const struct engine *e, struct engine_info *out)
{
    const struct route *R = (const struct route *)e;
    engine_info(R->t[R->primary].e, out);
}

static int64_t route_count_tokens(const struct engine *e, const char *text, size_t len,
                                  char *err, size_t errlen)
{
    const struct route *R = (const struct route *)e;
    return engine_count_tokens(R->t[R->primary].e, text, len, err, errlen);
}

static int64_t route_count_chat_tokens(const struct engine *e, const struct engine_message *msgs,
                                       int32_t n, char *err, size_t errlen)
{
    const struct route *R = (const struct route *)e;
    return engine_count_chat_tokens(R->t[R->primary].e, msgs, n, err, errlen);
}

static int route_token_bytes(const struct engine *e, int32_t id, char *out, size_t cap)
{
    const struct route *R = (const struct route *)e;
    return engine_token_bytes(R->t[R->primary].e, id, out, cap);
}

static const struct engine_ops route_ops = {
    .name = "route",
    .submit = route_submit,
    .cancel = route_cancel,
    .pause = route_pause,
    .poll_events = route_poll_events,
    .poll_request = route_poll_request,
    .event_fd = route_event_fd,
    .wait_events = route_wait_events,
    .snapshot = route_snapshot,
    .requests = route_requests,
    .info = route_info,
    .count_tokens = route_count_tokens,
    .count_chat_tokens = route_count_chat_tokens,
    .token_bytes = route_token_bytes,
    .close = route_close,
};

/* ---- route queries ------------------------------------------------------------------ */

bool route_is(const struct engine *e) { return e && e->ops == &route_ops; }

int32_t route_n_targets(const struct engine *e)
{
    return route_is(e) ? ((const struct route *)e)->n : 0;
}

const char *route_target_name(const struct engine *e, int32_t i)
{
    if (!route_is(e) || i < 0 || i >= ((const struct route *)e)->n) return "";
    return ((const struct route *)e)->t[i].name;
}

const char *route_target_error(const struct engine *e, int32_t i)
{
    if (!route_is(e) || i < 0 || i >= ((const struct route *)e)->n) return NULL;
    const struct rtarget *t = &((const struct route *)e)->t[i];
    return t->e ? NULL : t->open_err;
}

int route_trail(struct engine *e, uint64_t id, struct route_trail *out)
{
    if (!route_is(e)) return -1;
    struct route *R = (struct route *)e;
    int rc = -1;
    pthread_mutex_lock(&R->mu);
    struct rreq *q = find_live(R, id);
    if (q) {
        *out = q->trail;
        rc = 0;
    }
    uint32_t have = R->n_done < ROUTE_DONE_KEEP ? R->n_done : ROUTE_DONE_KEEP;
    for (uint32_t i = 0; rc != 0 && i < have; i++) {
        uint32_t slot = (R->n_done - 1 - i) % ROUTE_DONE_KEEP; /* newest first */
        if (R->done[slot].id == id) {
            *out = R->done[slot].trail;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&R->mu);
    return rc;
}

void route_trail_text(const struct engine *e, const struct route_trail *t, char *buf, size_t n)
{
    size_t used = 0;
    if (n) buf[0] = 0;
    for (int32_t i = 0; i < t->n_hops && used < n; i++) {
        const struct route_hop *h = &t->hop[i];
        used += (size_t)snprintf(buf + used, n - used, "%s%s -> %s (%s after %.3f s)",
                                 i ? "; " : "", route_target_name(e, h->from),
                                 route_target_name(e, h->to), route_reason_name(h->reason),
                                 h->waited_s);
    }
}

int route_counts(struct engine *e, struct route_count *out, int max)
{
    if (!route_is(e)) return 0;
    struct route *R = (struct route *)e;
    int n = 0;
    pthread_mutex_lock(&R->mu);
    for (int32_t f = 0; f < R->n; f++)
        for (int32_t t = 0; t < R->n; t++)
            for (int r = 1; r < ROUTE_N_REASON; r++)
                if (R->counts[f][t][r] && n < max)
                    out[n++] = (struct route_count){f, t, (enum route_reason)r,
                                                    R->counts[f][t][r]};
    pthread_mutex_unlock(&R->mu);
    return n;
}

char *route_trail_json(struct engine *e, uint64_t id)
{
    struct route_trail t;
    if (route_trail(e, id, &t) != 0) return NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "served_by", t.served >= 0 ? route_target_name(e, t.served) : "");
    cJSON *a = cJSON_AddArrayToObject(o, "fallbacks");
    for (int32_t i = 0; a && i < t.n_hops; i++) {
        const struct route_hop *h = &t.hop[i];
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(a, j)) {
            cJSON_Delete(j);
            break;
        }
        cJSON_AddStringToObject(j, "from", route_target_name(e, h->from));
        cJSON_AddStringToObject(j, "to", route_target_name(e, h->to));
        cJSON_AddStringToObject(j, "reason", route_reason_name(h->reason));
        cJSON_AddNumberToObject(j, "waited_s", h->waited_s);
        cJSON_AddStringToObject(j, "detail", h->detail);
    }
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return txt;
}
