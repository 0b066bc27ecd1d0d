/* bench_drill: the failure drills (see bench_drill.h). Each drill is a small
 * script over three helpers: replicas (child `tern serve` processes on
 * loopback, started, stopped, frozen, killed), requests through a route
 * engine (submitted, drained, their trails kept), and the history check
 * (each request written as a one-shot session, read back, statuses
 * compared). */
#include "bench_drill.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_opts.h"
#include "clock.h"
#include "engine.h"
#include "route.h"
#include "store.h"

extern char **environ;

#define DRILL_MAX_REQ 32

struct dopts {
    const struct cli *cli;
    const char *drill, *db, *json;
    long requests, threads;
};

struct replica {
    pid_t pid;
    int port;
    char url[64];
    char log[128];
};

struct dreq {
    uint64_t id;
    enum engine_status status;
    bool done, planned;              /* planned: cancelled by the drill on purpose */
    int cancel_after;                /* tokens; -1 never */
    int n_tokens;
    double t_end;                    /* app clock */
    struct route_trail trail;
    char *route_json;
    char text[512];
    size_t len;
};

struct drill {
    const struct dopts *o;
    const char *model;
    char dir[64];                    /* scratch folder: logs, the bad model */
    struct replica rep[2];
    int n_rep;
    struct dreq q[DRILL_MAX_REQ];
    int n;
    /* the report */
    double t_fault, recover_s;
    char note[256];
};

/* ---- replicas ------------------------------------------------------------------- */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &n) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

/* GET path on loopback port; the status code (0: no answer in timeout_s),
 * the body's start in body. */
static int http_get(int port, const char *path, char *body, size_t cap, double timeout_s)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int code = 0;
    size_t got = 0;
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) goto out;
    if (poll(&pf, 1, (int)(timeout_s * 1000)) != 1) goto out;
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr) goto out;
    char req[256];
    int k = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    if (write(fd, req, (size_t)k) != k) goto out;
    double end = app_now_s() + timeout_s;
    pf.events = POLLIN;
    for (;;) {
        double left = end - app_now_s();
        if (left <= 0 || poll(&pf, 1, (int)(left * 1000) + 1) != 1) break;
        ssize_t r = read(fd, body + got, cap - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
        if (got + 1 >= cap) break;
    }
    body[got] = 0;
    if (sscanf(body, "HTTP/%*s %d", &code) != 1) code = 0;
out:
    close(fd);
    return code;
}

static bool replica_ready(const struct replica *r, double timeout_s)
{
    char buf[512];
    double end = app_now_s() + timeout_s;
    while (app_now_s() < end) {
        if (http_get(r->port, "/ready", buf, sizeof buf, 1.0) == 200) return true;
        if (waitpid(r->pid, NULL, WNOHANG) == r->pid) return false; /* it died */
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* Starts `tern serve` on port (0: a free one) and waits until it is ready. */
static int replica_start(struct drill *d, struct replica *r, int port, char *err, size_t errlen)
{
    char ps[16], th[16];
    r->port = port ? port : free_port();
    snprintf(ps, sizeof ps, "%d", r->port);
    snprintf(th, sizeof th, "%ld", d->o->threads);
    snprintf(r->url, sizeof r->url, "http://127.0.0.1:%d/v1", r->port);
    snprintf(r->log, sizeof r->log, "%s/serve-%d.log", d->dir, r->port);
    char *args[] = {"tern", "serve", "--config", "/dev/null", "-m", (char *)d->model, "--port", ps,
                    "--threads", th, "--no-history", "--access-log", "/dev/null", NULL};
    int logfd = open(r->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (logfd < 0) {
        snprintf(err, errlen, "%s: %s", r->log, strerror(errno));
        return -1;
    }
    fflush(stdout);
    r->pid = fork();
    if (r->pid == 0) {
        /* a replica dies with the drill, even one interrupted by Ctrl-C */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int in = open("/dev/null", O_RDONLY);
        if (in < 0 || dup2(in, STDIN_FILENO) < 0 || dup2(logfd, STDOUT_FILENO) < 0 ||
            dup2(logfd, STDERR_FILENO) < 0)
            _exit(127);
        execve("/proc/self/exe", args, environ);
        _exit(127);
    }
    int fork_errno = errno;
    close(logfd);
    if (r->pid < 0) {
        r->pid = 0;
        snprintf(err, errlen, "cannot start tern serve: %s", strerror(fork_errno));
        return -1;
    }
    if (!replica_ready(r, 60)) {
        snprintf(err, errlen, "tern serve on port %d not ready in 60 s (log: %s)", r->port,
                 r->log);
        return -1;
    }
    return 0;
}

static void replica_kill(struct replica *r, int sig)
{
    if (r->pid <= 0) return;
    kill(r->pid, SIGCONT); /* a frozen one must be able to die */
    kill(r->pid, sig);
    double end = app_now_s() + 10;
    while (waitpid(r->pid, NULL, WNOHANG) == 0) {
        if (app_now_s() > end) {
            kill(r->pid, SIGKILL);
            waitpid(r->pid, NULL, 0);
            break;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    r->pid = 0;
}

/* ---- requests through a route ----------------------------------------------------------- */

static struct engine *open_route(struct drill *d, const char *spec, const struct engine_config *local,
                                 double ttft_s, char *err, size_t errlen)
{
    struct route_spec rs;
    if (route_parse(spec, &rs, err, errlen) != 0) return NULL;
    struct engine_config base;
    if (local) base = *local;
    else engine_config_default(&base);
    if (!local) base.model_path = d->model;
    base.backend.threads = (int)d->o->threads;
    struct route_config rc = {.spec = &rs, .base = &base, .ttft_deadline_s = ttft_s,
                              .tokenizer_path = d->model};
    return route_open(&rc, err, errlen);
}

static void take(struct engine *e, struct dreq *q, struct engine_event *ev)
{
    if (ev->type == ENGINE_EV_TOKEN && ev->text) {
        size_t k = strlen(ev->text);
        if (q->len + k < sizeof q->text) {
            memcpy(q->text + q->len, ev->text, k + 1);
            q->len += k;
        }
        if (++q->n_tokens == q->cancel_after) {
            engine_cancel(e, q->id);
            q->planned = true;
        }
    }
    if (ev->type == ENGINE_EV_FINISHED) {
        q->done = true;
        q->status = ev->status;
        q->t_end = app_now_s();
        route_trail(e, q->id, &q->trail);
        q->route_json = route_trail_json(e, q->id);
    }
    engine_event_free(ev);
}

/* Submits requests [from, to) together and drains them all (60 s at most). */
static void run_reqs(struct drill *d, struct engine *e, int from, int to, int max_tokens)
{
    static const char *const prompts[] = {"Say hi.", "Name a colour.", "Count to three.",
                                          "Name a fruit."};
    for (int i = from; i < to; i++) {
        struct dreq *q = &d->q[i];
        struct engine_message m = {"user", prompts[i % 4]};
        struct engine_request r = {.messages = &m, .n_messages = 1, .max_tokens = max_tokens,
                                   .ignore_eos = q->cancel_after > 0, .tag = (uint64_t)i};
        engine_sampling_greedy(&r.sampling);
        char err[256];
        enum engine_status why = ENGINE_ERROR;
        q->trail.served = -1;
        q->id = engine_submit(e, &r, &why, err, sizeof err);
        if (!q->id) { /* refused everywhere: lost, with no events to come */
            q->done = true;
            q->status = why;
            q->t_end = app_now_s();
        }
    }
    double end = app_now_s() + 60;
    for (;;) {
        int open = 0;
        for (int i = from; i < to; i++) open += !d->q[i].done;
        if (!open || app_now_s() > end) break;
        engine_wait_events(e, 0, 0.1);
        struct engine_event ev[32];
        int k = engine_poll_events(e, ev, 32);
        for (int j = 0; j < k; j++) {
            struct dreq *q = ev[j].tag < (uint64_t)DRILL_MAX_REQ ? &d->q[ev[j].tag] : NULL;
            if (q && q->id == ev[j].id) take(e, q, &ev[j]);
            else engine_event_free(&ev[j]);
        }
    }
    if (to > d->n) d->n = to;
}

/* One request after another until one is served by target t (the primary
 * back in service), at most `tries`; returns its index or -1. */
static int until_served_by(struct drill *d, struct engine *e, int32_t t, int tries)
{
    for (int k = 0; k < tries && d->n < DRILL_MAX_REQ; k++) {
        int i = d->n;
        d->q[i].cancel_after = -1;
        run_reqs(d, e, i, i + 1, 8);
        enum engine_status st = d->q[i].status;
        if (d->q[i].trail.served == t && (st == ENGINE_STOP || st == ENGINE_LENGTH)) return i;
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

/* ---- the history check ------------------------------------------------------------------ */

static const char *store_word(enum engine_status s)
{
    return s == ENGINE_OK || s == ENGINE_STOP || s == ENGINE_LENGTH ? "ok"
                                                                   : engine_status_name(s);
}

/* Writes each request as the history writes a reply, reads them back and
 * counts rows whose request status is the engine's. */
static int history_check(struct drill *d, const char *model_name, int *rows, char *err,
                         size_t errlen)
{
    struct store *s;
    *rows = 0;
    if (store_open(&s, d->o->db, STORE_READWRITE, err, errlen) != 0) return -1;
    char title[64];
    snprintf(title, sizeof title, "drill %s", d->o->drill);
    store_key sk = store_session_new_kind(s, "run", title, model_name, NULL);
    for (int i = 0; i < d->n; i++) {
        struct dreq *q = &d->q[i];
        store_message_add(s, sk, "user", "drill request", -1);
        store_key rk = store_reply_begin(s, sk);
        store_reply_append(s, rk, q->text, q->len);
        if (q->status == ENGINE_OK || q->status == ENGINE_STOP || q->status == ENGINE_LENGTH ||
            q->status == ENGINE_CANCELLED)
            store_reply_finish(s, rk, store_word(q->status), q->n_tokens);
        else
            store_reply_fail(s, rk, store_word(q->status), "drill", q->n_tokens);
        struct store_request r = {.model = model_name, .backend = "route",
                                  .status = engine_status_name(q->status), .queue_s = -1,
                                  .prefill_s = -1, .ttft_s = -1, .tpot_s = -1, .decode_s = -1,
                                  .e2e_s = -1, .prompt_tokens = -1, .cached_tokens = -1,
                                  .generated_tokens = q->n_tokens, .route_json = q->route_json};
        store_request_add(s, rk, &r);
    }
    int rc = store_flush(s, err, errlen);
    int64_t sid = rc == 0 ? store_resolve(s, sk) : 0;
    struct store_transcript t;
    if (sid > 0 && store_transcript(s, sid, &t, err, errlen) == 0) {
        int k = 0;
        for (size_t m = 0; m < t.n; m++) {
            if (strcmp(t.msgs[m].role, "assistant") != 0) continue;
            if (k < d->n && t.msgs[m].req &&
                !strcmp(t.msgs[m].req->status, engine_status_name(d->q[k].status)))
                (*rows)++;
            k++;
        }
        store_transcript_free(&t);
    } else {
        rc = -1;
    }
    store_close(s);
    return rc;
}

/* ---- the drills ------------------------------------------------------------------------- */

static void note(struct drill *d, const char *fmt, const char *a)
{
    snprintf(d->note, sizeof d->note, fmt, a);
}

/* The local engine with a model file that is not one: it never loads; the
 * route serves every request from the replica. */
static struct engine *drill_bad_model(struct drill *d, char *err, size_t errlen)
{
    char bad[128];
    snprintf(bad, sizeof bad, "%s/bad-model.gguf", d->dir);
    FILE *f = fopen(bad, "wb");
    if (!f) return NULL;
    static const char junk[] = "GGUF\x03\0\0\0\xff\xff\xff\xff\xff\xff\xff\x7f not a model";
    fwrite(junk, 1, sizeof junk - 1, f);
    fclose(f);
    if (replica_start(d, &d->rep[d->n_rep++], 0, err, errlen) != 0) return NULL;
    struct engine_config c;
    engine_config_default(&c);
    c.model_path = bad;
    char spec[128];
    snprintf(spec, sizeof spec, "local,%s", d->rep[0].url);
    d->t_fault = app_now_s();
    struct engine *e = open_route(d, spec, &c, 0, err, errlen);
    if (!e) return NULL;
    note(d, "local: %s", route_target_error(e, 0) ? route_target_error(e, 0) : "(opened?)");
    run_reqs(d, e, 0, (int)d->o->requests, 8);
    for (int i = 0; i < d->n; i++)
        if (d->q[i].done && d->q[i].trail.served >= 0) {
            d->recover_s = d->q[i].t_end - d->t_fault;
            break;
        }
    return e;
}

/* A local configuration the workload cannot run with (a 16-token context:
 * every prompt is longer): each request is refused locally at once and
 * moves to the replica. */
static struct engine *drill_invalid_config(struct drill *d, char *err, size_t errlen)
{
    if (replica_start(d, &d->rep[d->n_rep++], 0, err, errlen) != 0) return NULL;
    struct engine_config c;
    engine_config_default(&c);
    c.model_path = d->model;
    c.n_ctx = 16;
    char spec[128];
    snprintf(spec, sizeof spec, "local,%s", d->rep[0].url);
    d->t_fault = app_now_s();
    struct engine *e = open_route(d, spec, &c, 0, err, errlen);
    if (!e) return NULL;
    note(d, "%s", "local --ctx 16: prompts can never fit");
    run_reqs(d, e, 0, (int)d->o->requests, 8);
    for (int i = 0; i < d->n; i++)
        if (d->q[i].trail.served >= 0) {
            d->recover_s = d->q[i].t_end - d->t_fault;
            break;
        }
    return e;
}

/* Replicas A and B; A is killed after a third of the requests, the rest
 * move to B (connection refused); A restarts, and recovery is the time
 * from the kill to A serving again. */
static struct engine *drill_replica_killed(struct drill *d, char *err, size_t errlen)
{
    for (int i = 0; i < 2; i++)
        if (replica_start(d, &d->rep[d->n_rep++], 0, err, errlen) != 0) return NULL;
    char spec[160];
    snprintf(spec, sizeof spec, "%s,%s", d->rep[0].url, d->rep[1].url);
    struct engine *e = open_route(d, spec, NULL, 0, err, errlen);
    if (!e) return NULL;
    int n = (int)d->o->requests, third = n / 3 > 0 ? n / 3 : 1;
    for (int i = 0; i < third; i++) run_reqs(d, e, i, i + 1, 8);
    d->t_fault = app_now_s();
    int port = d->rep[0].port;
    replica_kill(&d->rep[0], SIGKILL);
    for (int i = third; i < n; i++) run_reqs(d, e, i, i + 1, 8);
    if (replica_start(d, &d->rep[0], port, err, errlen) != 0) return e;
    int k = until_served_by(d, e, 0, 10);
    if (k >= 0) d->recover_s = d->q[k].t_end - d->t_fault;
    note(d, "%s", "A killed (SIGKILL), then restarted on its port");
    return e;
}

/* The local engine with room for one running and one waiting request, a
 * burst of requests at once: what it cannot queue moves to the replica;
 * recovery is one request served locally after the burst. */
static struct engine *drill_queue_saturation(struct drill *d, char *err, size_t errlen)
{
    if (replica_start(d, &d->rep[d->n_rep++], 0, err, errlen) != 0) return NULL;
    struct engine_config c;
    engine_config_default(&c);
    c.model_path = d->model;
    c.max_running = 1;
    c.max_queue = 1;
    char spec[128];
    snprintf(spec, sizeof spec, "local,%s", d->rep[0].url);
    struct engine *e = open_route(d, spec, &c, 0, err, errlen);
    if (!e) return NULL;
    d->t_fault = app_now_s();
    run_reqs(d, e, 0, (int)d->o->requests, 16);
    double burst_end = app_now_s();
    int k = until_served_by(d, e, 0, 3);
    if (k >= 0) d->recover_s = d->q[k].t_end - burst_end;
    note(d, "%s", "local --max-running 1 --max-queue 1, the burst at once");
    return e;
}

/* Replicas A and B, a 1 s TTFT deadline; A frozen (SIGSTOP: it accepts
 * connections and answers nothing): each request waits out the deadline
 * and moves to B; A thawed, recovery is the time to A serving again. */
static struct engine *drill_stalled(struct drill *d, char *err, size_t errlen)
{
    for (int i = 0; i < 2; i++)
        if (replica_start(d, &d->rep[d->n_rep++], 0, err, errlen) != 0) return NULL;
    char spec[160];
    snprintf(spec, sizeof spec, "%s,%s", d->rep[0].url, d->rep[1].url);
    struct engine *e = open_route(d, spec, NULL, 1.0, err, errlen);
    if (!e) return NULL;
    int n = (int)d->o->requests;
    int stalled = n / 2 > 0 ? n / 2 : 1;
    d->t_fault = app_now_s();
    kill(d->rep[0].pid, SIGSTOP);
    for (int i = 0; i < stalled; i++) run_reqs(d, e, i, i + 1, 8);
    kill(d->rep[0].pid, SIGCONT);
    double thaw = app_now_s();
    int k = until_served_by(d, e, 0, 10);
    if (k >= 0) d->recover_s = d->q[k].t_end - thaw;
    note(d, "%s", "A frozen (SIGSTOP) under a 1 s TTFT deadline, then thawed");
    return e;
}

static double metric(int port, const char *name)
{
    static char buf[1 << 18];
    if (http_get(port, "/metrics", buf, sizeof buf, 2.0) != 200) return -1;
    const char *p = buf;
    size_t n = strlen(name);
    while ((p = strstr(p, name))) {
        if ((p == buf || p[-1] == '\n') && (p[n] == ' ' || p[n] == '{')) {
            const char *sp = strchr(p, ' ');
            return sp ? atof(sp + 1) : -1;
        }
        p += n;
    }
    return -1;
}

/* Clients that go away mid-stream: half the requests are cancelled after
 * two tokens (the stream is closed under the server). The server must count
 * each disconnect, free its slot and serve the next request normally. */
static struct engine *drill_client_disconnect(struct drill *d, char *err, size_t errlen)
{
    if (replica_start(d, &d->rep[d->n_rep++], 0, err, errlen) != 0) return NULL;
    struct engine *e = open_route(d, d->rep[0].url, NULL, 0, err, errlen);
    if (!e) return NULL;
    int n = (int)d->o->requests;
    for (int i = 0; i < n; i++) d->q[i].cancel_after = i % 2 ? 2 : -1;
    double before = metric(d->rep[0].port, "tern:client_disconnects_total");
    d->t_fault = app_now_s();
    run_reqs(d, e, 0, n, 200);
    double end = app_now_s();
    int k = until_served_by(d, e, 0, 3);
    if (k >= 0) d->recover_s = d->q[k].t_end - end;
    /* the server notices a closed stream at its next write */
    struct timespec ts = {0, 500 * 1000 * 1000};
    nanosleep(&ts, NULL);
    double after = metric(d->rep[0].port, "tern:client_disconnects_total");
    snprintf(d->note, sizeof d->note, "the server counted %.0f client disconnects",
             after >= 0 && before >= 0 ? after - before : -1);
    return e;
}

static const struct {
    const char *name;
    struct engine *(*run)(struct drill *d, char *err, size_t errlen);
    const char *what;
} drills[] = {
    {"bad-model", drill_bad_model, "the local model file is not a model"},
    {"invalid-config", drill_invalid_config, "a local configuration the workload cannot run on"},
    {"replica-killed", drill_replica_killed, "a replica killed mid-run, then restarted"},
    {"queue-saturation", drill_queue_saturation, "a burst past the local queue"},
    {"stalled-dependency", drill_stalled, "a replica that accepts and never answers"},
    {"client-disconnect", drill_client_disconnect, "clients closing streams mid-reply"},
};
#define N_DRILLS (int)(sizeof drills / sizeof drills[0])

/* ---- report ----------------------------------------------------------------------------- */

static cJSON *report(struct drill *d, int which, struct engine *e, int rows, bool hist_ok)
{
    int ok = 0, lost = 0, planned = 0, moves = 0;
    double fb_max = 0, fb_sum = 0;
    for (int i = 0; i < d->n; i++) {
        const struct dreq *q = &d->q[i];
        bool fine = q->status == ENGINE_STOP || q->status == ENGINE_LENGTH ||
                    q->status == ENGINE_OK;
        if (q->planned && q->status == ENGINE_CANCELLED) planned++;
        else if (fine) ok++;
        else lost++;
        for (int32_t h = 0; h < q->trail.n_hops; h++) {
            moves++;
            fb_sum += q->trail.hop[h].waited_s;
            if (q->trail.hop[h].waited_s > fb_max) fb_max = q->trail.hop[h].waited_s;
        }
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "drill", drills[which].name);
    cJSON_AddStringToObject(o, "what", drills[which].what);
    cJSON_AddStringToObject(o, "note", d->note);
    cJSON_AddNumberToObject(o, "requests", d->n);
    cJSON_AddNumberToObject(o, "served", ok);
    cJSON_AddNumberToObject(o, "cancelled_on_purpose", planned);
    cJSON_AddNumberToObject(o, "lost", lost);
    cJSON_AddNumberToObject(o, "fallbacks", moves);
    cJSON_AddNumberToObject(o, "time_to_fall_back_s", fb_max);
    cJSON_AddNumberToObject(o, "time_to_fall_back_mean_s", moves ? fb_sum / moves : 0);
    if (d->recover_s > 0) cJSON_AddNumberToObject(o, "time_to_recover_s", d->recover_s);
    else cJSON_AddNullToObject(o, "time_to_recover_s");
    cJSON_AddNumberToObject(o, "history_rows", rows);
    cJSON_AddBoolToObject(o, "history_ok", hist_ok);
    cJSON *by = cJSON_AddObjectToObject(o, "served_by");
    for (int32_t t = 0; e && t < route_n_targets(e); t++) {
        int k = 0;
        for (int i = 0; i < d->n; i++) k += d->q[i].trail.served == t && !d->q[i].planned;
        cJSON_AddNumberToObject(by, t == 0 ? "primary" : "fallback", k);
    }
    char rec[32] = "n/a";
    if (d->recover_s > 0) snprintf(rec, sizeof rec, "%.3f s", d->recover_s);
    printf("drill %-18s %d requests: %d served, %d lost · %d fallbacks (time to fall back "
           "%.3f s max, %.3f s mean) · time to recover %s · history %d/%d rows, status %s\n",
           drills[which].name, d->n, ok, lost, moves, fb_max, moves ? fb_sum / moves : 0, rec,
           rows, d->n, hist_ok ? "right" : "WRONG");
    if (planned) printf("  %d cancelled on purpose (not lost)\n", planned);
    printf("  %s\n", d->note);
    fflush(stdout);
    return o;
}

static int run_drill(const struct dopts *o, const char *model, int which, cJSON *all)
{
    struct drill *d = calloc(1, sizeof *d);
    if (!d) return -1;
    d->o = o;
    d->model = model;
    for (int i = 0; i < DRILL_MAX_REQ; i++) d->q[i].cancel_after = -1;
    snprintf(d->dir, sizeof d->dir, "/tmp/tern-drill-XXXXXX");
    char err[1024] = "";
    int rc = -1;
    struct engine *e = NULL;
    if (!mkdtemp(d->dir)) {
        fprintf(stderr, "tern bench: --drill: mkdtemp: %s\n", strerror(errno));
        free(d);
        return -1;
    }
    e = drills[which].run(d, err, sizeof err);
    if (!e) {
        fprintf(stderr, "tern bench: drill %s: %s\n", drills[which].name, err);
    } else {
        int rows = 0;
        char herr[512] = "";
        bool hist_ok = history_check(d, "drill", &rows, herr, sizeof herr) == 0 && rows == d->n;
        if (herr[0]) fprintf(stderr, "tern bench: drill %s: history: %s\n", drills[which].name, herr);
        cJSON *r = report(d, which, e, rows, hist_ok);
        bool lost = cJSON_GetObjectItem(r, "lost")->valueint > 0;
        cJSON_AddItemToArray(all, r);
        rc = lost || !hist_ok ? 1 : 0;
        engine_close(e);
    }
    for (int i = 0; i < 2; i++) replica_kill(&d->rep[i], SIGTERM);
    for (int i = 0; i < DRILL_MAX_REQ; i++) free(d->q[i].route_json);
    char path[160];
    for (int i = 0; i < 2; i++)
        if (d->rep[i].log[0] && rc == 0) unlink(d->rep[i].log);
    snprintf(path, sizeof path, "%s/bad-model.gguf", d->dir);
    unlink(path);
    if (rc == 0) rmdir(d->dir);
    else if (d->rep[0].log[0]) fprintf(stderr, "tern bench: drill logs kept in %s\n", d->dir);
    free(d);
    return rc;
}

/* ---- the command ------------------------------------------------------------------------ */

enum { OPT_DRILL = CLI_OPT_CMD + 0x40, OPT_REQUESTS, OPT_DB, OPT_JSON };

static int on_opt(int c, const char *arg, void *ud)
{
    struct dopts *o = ud;
    switch (c) {
    case OPT_DRILL: o->drill = arg; return 0;
    case OPT_REQUESTS: return cli_int(o->cli, "--requests", arg, 2, DRILL_MAX_REQ - 12,
                                      &o->requests);
    case OPT_DB: o->db = arg; return 0;
    case OPT_JSON: o->json = arg; return 0;
    case CLI_O_THREADS: return cli_opt_long(o->cli, CLI_O_THREADS, arg, &o->threads);
    default: return -1;
    }
}

const char *bench_drill_usage(void)
{
    return "usage: tern bench --drill NAME [OPTIONS]\n"
           "\n"
           "Failure drills on loopback (each starts its own tern serve replicas):\n"
           "  bad-model           the local model file is not a model\n"
           "  invalid-config      a local configuration the workload cannot run on\n"
           "  replica-killed      a replica killed mid-run, then restarted\n"
           "  queue-saturation    a burst past the local queue\n"
           "  stalled-dependency  a replica that accepts and never answers\n"
           "  client-disconnect   clients closing streams mid-reply\n"
           "  all                 every drill\n"
           "Each reports requests lost, the time to fall back, the time to recover and\n"
           "whether every request has a history row with the right status; the exit\n"
           "status is 1 when a request was lost or a row is missing.\n"
           "\n"
           "options:\n"
           "      --requests N      requests per drill (default 6)\n"
           "      --db PATH         history database the rows go to (default: the history)\n"
           "      --json FILE       the reports, one object per drill\n"
           "@threads 1\n";
}

int bench_drill_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"drill", required_argument, 0, OPT_DRILL},
        {"requests", required_argument, 0, OPT_REQUESTS},
        {"db", required_argument, 0, OPT_DB},
        {"json", required_argument, 0, OPT_JSON},
        CLI_SHARED(CLI_O_THREADS),
        {0, 0, 0, 0},
    };
    struct cli cli;
    struct dopts o = {.cli = &cli, .requests = 6, .threads = 1};
    int rc = cli_parse(&cli, argc, argv, "", longopts, on_opt, &o, bench_drill_usage());
    if (rc >= 0) goto out;
    rc = CLI_EXIT_USAGE;
    if (cli.route || cli.n_urls) {
        fprintf(stderr, "tern bench: --drill builds its own routes over its own replicas: "
                        "no --route or --url\n");
        goto out;
    }
    int which = -1;
    for (int i = 0; i < N_DRILLS; i++)
        if (!strcmp(o.drill, drills[i].name)) which = i;
    if (which < 0 && strcmp(o.drill, "all") != 0) {
        fprintf(stderr, "tern bench: --drill: '%s' is not a drill (see 'tern bench --drill "
                        "all --help')\n", o.drill);
        goto out;
    }
    char model[4096], err[1024];
    if (cli_model_path(&cli, model, sizeof model, err, sizeof err) != 0) {
        fprintf(stderr, "tern bench: %s\n", err);
        rc = CLI_EXIT_FAIL;
        goto out;
    }
    signal(SIGPIPE, SIG_IGN);
    cJSON *all = cJSON_CreateArray();
    rc = 0;
    for (int i = 0; i < N_DRILLS; i++)
        if (which < 0 || which == i)
            if (run_drill(&o, model, i, all) != 0) rc = CLI_EXIT_FAIL;
    if (o.json) {
        char *txt = cJSON_Print(all);
        FILE *f = fopen(o.json, "w");
        if (!f || !txt || fprintf(f, "%s\n", txt) < 0) rc = CLI_EXIT_FAIL;
        if (f) fclose(f);
        free(txt);
    }
    cJSON_Delete(all);
out:
    cli_free(&cli);
    return rc;
}
