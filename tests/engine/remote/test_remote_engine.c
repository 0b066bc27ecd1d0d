/* test_remote_engine: the remote engine through the public engine API
 * against fault_server.py on loopback (started here): the event sequence of
 * a stream, cancel mid-stream (the stall case: CANCELLED at once, not after
 * the server's 30 s), 24 concurrent streams on the one worker thread, two
 * endpoints with round-robin and least-outstanding balance, and the /metrics
 * scraper end to end (vLLM fixtures served in two scrapes: the server view
 * shows the interval's percentiles, unknown fields are null in the JSON),
 * engine_pause (held requests are not sent, a held one cancels at once, the
 * rest go out on release), DNS failure (a name under .invalid, which never
 * resolves: at open and per request, after the bounded retries), the
 * connect-retry path (a port that starts listening after the first refused
 * attempts: retried with capped backoff, then served) and no retry once
 * bytes were streamed (a stream cut mid-way reaches the server once). */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "engine.h"
#include "remote_parse.h"
#include "tap.h"

static pid_t server_pid;
static int server_port;

/* fault_server.py on port (0: any); returns its pid, *port_out the port. */
static pid_t spawn_server(int port, int *port_out)
{
    int fd[2];
    if (pipe(fd) != 0) tap_bail("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        char py[1024], ps[16];
        snprintf(py, sizeof py, "%s/tests/engine/remote/fault_server.py", getenv("TERN_SRC"));
        snprintf(ps, sizeof ps, "%d", port);
        execlp("python3", "python3", py, ps, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    FILE *f = fdopen(fd[0], "r");
    if (!f || fscanf(f, "PORT %d", port_out) != 1) tap_bail("fault_server did not start");
    fclose(f);
    return pid;
}

static struct engine *open_at(const char *const *urls, int n, enum engine_balance bal)
{
    struct engine_config c;
    engine_config_default(&c);
    c.remote.urls = urls;
    c.remote.n_urls = n;
    c.remote.balance = bal;
    c.remote.read_timeout_s = 10;
    char err[512];
    struct engine *e = engine_open(&c, err, sizeof err);
    if (!e) tap_diag("engine_open: %s", err);
    return e;
}

/* Drains events of id until FINISHED (bounded); returns its status. */
static enum engine_status finish_of(struct engine *e, uint64_t id, struct engine_metrics *m,
                                    char *text, size_t n, int *types)
{
    size_t len = 0;
    for (int spins = 0; spins < 1200; spins++) { /* 60 s: loaded CI machines */
        engine_wait_events(e, id, 0.05);
        struct engine_event ev[16];
        int k = engine_poll_request(e, id, ev, 16);
        for (int i = 0; i < k; i++) {
            if (types) types[ev[i].type]++;
            if (ev[i].type == ENGINE_EV_TOKEN && ev[i].text && text) {
                size_t l = strlen(ev[i].text);
                if (len + l < n) { memcpy(text + len, ev[i].text, l); len += l; text[len] = 0; }
            }
            if (ev[i].type == ENGINE_EV_FINISHED) {
                enum engine_status st = ev[i].status;
                if (m) { *m = *ev[i].metrics; m->token_t = NULL; }
                for (int j = i; j < k; j++) engine_event_free(&ev[j]);
                return st;
            }
            engine_event_free(&ev[i]);
        }
    }
    return ENGINE_N_STATUS;
}

static uint64_t submit_hi(struct engine *e)
{
    struct engine_message msg = {"user", "hi"};
    struct engine_request r = {.messages = &msg, .n_messages = 1, .max_tokens = 16};
    engine_sampling_greedy(&r.sampling);
    enum engine_status why;
    char err[256];
    uint64_t id = engine_submit(e, &r, &why, err, sizeof err);
    if (!id) tap_diag("submit: %s", err);
    return id;
}

static void test_stream(const char *base)
{
    char url[256];
    snprintf(url, sizeof url, "%s/ok/v1", base);
    const char *urls[] = {url};
    struct engine *e = open_at(urls, 1, ENGINE_BALANCE_ROUND_ROBIN);
    tap_ok(e != NULL, "open against the ok endpoint");
    if (!e) return;
    struct engine_info info;
    engine_info(e, &info);
    tap_ok(!strcmp(info.backend.name, "remote") && strstr(info.backend.device, url),
           "info: backend 'remote', device names the URL (%s)", info.backend.device);
    tap_ok(!strcmp(info.model_name, "fault-model"), "info: model from /v1/models (%s)",
           info.model_name);
    int types[8] = {0};
    char text[256] = "";
    struct engine_metrics m;
    uint64_t id = submit_hi(e);
    enum engine_status st = finish_of(e, id, &m, text, sizeof text, types);
    tap_ok(st == ENGINE_STOP, "stream: finished stop (%s)", engine_status_name(st));
    tap_ok(!strcmp(text, "Hello world!"), "stream: text '%s'", text);
    tap_ok(types[ENGINE_EV_QUEUED] == 1 && types[ENGINE_EV_ADMITTED] == 1 &&
               types[ENGINE_EV_FIRST_TOKEN] == 1 && types[ENGINE_EV_TOKEN] == 3,
           "stream: queued, admitted, first token, 3 tokens (%d %d %d %d)",
           types[ENGINE_EV_QUEUED], types[ENGINE_EV_ADMITTED], types[ENGINE_EV_FIRST_TOKEN],
           types[ENGINE_EV_TOKEN]);
    tap_ok(m.remote && m.n_generated == 3 && m.n_prompt == 5 && m.n_cached == 2 &&
               m.http_status == 200,
           "metrics: usage counts 3/5/2, HTTP 200");
    tap_ok(m.ttft_s > 0 && m.headers_s > 0 && m.headers_s <= m.ttft_s && m.e2e_s >= m.ttft_s &&
               m.e2e_s >= 0.05 && m.tpot_s > 0,
           "metrics: headers %.4f <= ttft %.4f <= e2e %.4f (>= the server's 50 ms sleep), tpot %.4f",
           m.headers_s, m.ttft_s, m.e2e_s, m.tpot_s);
    cJSON *j = engine_metrics_json(&m);
    tap_ok(j && cJSON_IsNull(cJSON_GetObjectItem(j, "prefill_s")) &&
               cJSON_IsNull(cJSON_GetObjectItem(j, "server")),
           "metrics JSON: client cannot know prefill: null; no server block: null");
    cJSON_Delete(j);
    engine_close(e);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_cancel(const char *base)
{
    char url[256];
    snprintf(url, sizeof url, "%s/stall/v1", base);
    const char *urls[] = {url};
    struct engine *e = open_at(urls, 1, ENGINE_BALANCE_ROUND_ROBIN);
    if (!e) { tap_ok(0, "open stall"); return; }
    uint64_t id = submit_hi(e);
    /* Wait for the first token, then cancel. */
    double t0 = now_s();
    bool got = false;
    while (!got && now_s() - t0 < 5) {
        engine_wait_events(e, id, 0.05);
        struct engine_event ev[8];
        int k = engine_poll_request(e, id, ev, 8);
        for (int i = 0; i < k; i++) {
            if (ev[i].type == ENGINE_EV_TOKEN) got = true;
            engine_event_free(&ev[i]);
        }
    }
    tap_ok(got, "cancel: a token arrived first");
    double t1 = now_s();
    tap_ok(engine_cancel(e, id) == 0, "cancel: accepted");
    struct engine_metrics m;
    enum engine_status st = finish_of(e, id, &m, NULL, 0, NULL);
    tap_ok(st == ENGINE_CANCELLED && now_s() - t1 < 2.0,
           "cancel mid-stream: CANCELLED in %.3f s (the server would stall 30 s)", now_s() - t1);
    tap_ok(engine_cancel(e, id) == -1, "cancel: a finished id is refused");
    engine_close(e);
}

static void test_concurrent_and_balance(const char *base)
{
    char u1[256], u2[256];
    snprintf(u1, sizeof u1, "%s/ok/v1", base);
    snprintf(u2, sizeof u2, "%s/batch/v1", base);
    const char *urls[] = {u1, u2};
    for (int b = 0; b < 2; b++) {
        struct engine *e = open_at(urls, 2, b ? ENGINE_BALANCE_LEAST_OUTSTANDING
                                              : ENGINE_BALANCE_ROUND_ROBIN);
        if (!e) { tap_ok(0, "open two endpoints"); continue; }
        enum { N = 24 };
        uint64_t ids[N];
        for (int i = 0; i < N; i++) ids[i] = submit_hi(e);
        int ok = 0, per[2] = {0, 0};
        double t0 = now_s();
        for (int i = 0; i < N; i++) {
            struct engine_metrics m;
            if (finish_of(e, ids[i], &m, NULL, 0, NULL) == ENGINE_STOP && m.n_generated == 3) {
                ok++;
                if (m.endpoint >= 0 && m.endpoint < 2) per[m.endpoint]++;
            }
        }
        tap_ok(ok == N, "%s: %d/%d concurrent streams finished with 3 tokens in %.2f s",
               b ? "least-outstanding" : "round-robin", ok, N, now_s() - t0);
        if (b == 0)
            tap_ok(per[0] == N / 2 && per[1] == N / 2, "round-robin: %d + %d", per[0], per[1]);
        else
            tap_ok(per[0] > 0 && per[1] > 0, "least-outstanding: both used (%d + %d)", per[0],
                   per[1]);
        struct engine_stats s;
        engine_snapshot(e, &s);
        tap_ok(s.server.n_endpoints == 2 && s.server.endpoint[0].requests + s.server.endpoint[1].requests == N &&
                   s.server.endpoint[0].outstanding == 0 && s.server.endpoint[1].outstanding == 0,
               "snapshot: per-endpoint request counts add up to %d, none outstanding", N);
        tap_ok(s.finished[ENGINE_STOP] == N && s.ttft.count == N,
               "snapshot: the client's own histograms hold all %d requests", N);
        engine_close(e);
    }
}

static void test_scrape(const char *base)
{
    char url[256];
    snprintf(url, sizeof url, "%s/vllm/v1", base);
    const char *urls[] = {url};
    struct engine *e = open_at(urls, 1, ENGINE_BALANCE_ROUND_ROBIN);
    if (!e) { tap_ok(0, "open vllm"); return; }
    struct engine_stats s;
    double t0 = now_s();
    do {
        usleep(100000);
        engine_snapshot(e, &s);
    } while (s.server.scrapes < 2 && now_s() - t0 < 5);
    tap_ok(s.server.scrapes >= 2, "scraper: %llu scrapes in %.1f s (about 1 Hz)",
           (unsigned long long)s.server.scrapes, now_s() - t0);
    tap_ok(!strcmp(s.server.source, "vllm"), "scraper: source vllm (%s)", s.server.source);
    tap_ok(s.running == 4 && s.waiting == 2 && fabs(s.kv_usage - 0.5) < 1e-9,
           "scraper: running 4, waiting 2, KV 50 %% (%d, %d, %g)", s.running, s.waiting,
           s.kv_usage);
    tap_ok(fabs(s.server.ttft.p50 - 0.05) < 1e-9, "scraper: server TTFT p50 of the interval 0.05 (%g)",
           s.server.ttft.p50);
    cJSON *j = engine_snapshot_json(e);
    const cJSON *sv = j ? cJSON_GetObjectItem(j, "server") : NULL;
    tap_ok(j && cJSON_IsNull(cJSON_GetObjectItem(j, "kv")) && cJSON_IsNull(cJSON_GetObjectItem(j, "steps")) &&
               cJSON_IsNumber(cJSON_GetObjectItem(j, "running")) && sv,
           "snapshot JSON: KV blocks and steps null (unknown), running a number, server block");
    const cJSON *q = sv ? cJSON_GetObjectItem(sv, "queue_s") : NULL;
    tap_ok(q && cJSON_IsObject(q) && cJSON_IsObject(cJSON_GetObjectItem(sv, "ttft_s")),
           "snapshot JSON: the server's TTFT and queue histograms present (vLLM exports both)");
    cJSON_Delete(j);
    engine_close(e);

    snprintf(url, sizeof url, "%s/ok/v1", base); /* no /metrics there: 404 */
    e = open_at(urls, 1, ENGINE_BALANCE_ROUND_ROBIN);
    if (!e) return;
    t0 = now_s();
    do {
        usleep(100000);
        engine_snapshot(e, &s);
    } while (s.server.scrapes < 1 && now_s() - t0 < 5);
    tap_ok(!engine_stat_known(&s, ENGINE_STAT_RUNNING) && !engine_stat_known(&s, ENGINE_STAT_KV_USAGE) &&
               strstr(s.server.scrape_error, "HTTP 404"),
           "no /metrics: running and KV unknown, the error says why (%s)", s.server.scrape_error);
    j = engine_snapshot_json(e);
    sv = j ? cJSON_GetObjectItem(j, "server") : NULL;
    tap_ok(sv && cJSON_IsNull(cJSON_GetObjectItem(sv, "ttft_s")) &&
               cJSON_IsNull(cJSON_GetObjectItem(j, "running")),
           "no /metrics: the JSON has null for the server's TTFT and running, not 0");
    cJSON_Delete(j);
    engine_close(e);
}

static void start_server(void)
{
    server_pid = spawn_server(0, &server_port);
}

static struct engine *open_cfg(const char *const *urls, int n, int retries, char *err,
                               size_t errlen)
{
    struct engine_config c;
    engine_config_default(&c);
    c.remote.urls = urls;
    c.remote.n_urls = n;
    c.remote.read_timeout_s = 10;
    c.remote.max_retries = retries;
    c.remote.scrape_interval_s = -1;
    return engine_open(&c, err, errlen);
}

/* A tern server's /v1/tern/status (fault_server's "tern" mode): its KV
 * blocks, 8 of its 10 recent requests newest first, its tenants with counts,
 * tokens and median TTFT, a tenant name's escape bytes replaced; the JSON. */
static void test_tern_status(const char *base)
{
    char url[256];
    snprintf(url, sizeof url, "%s/tern/v1", base);
    const char *urls[] = {url};
    struct engine *e = open_at(urls, 1, ENGINE_BALANCE_ROUND_ROBIN);
    if (!e) { tap_ok(0, "open tern"); return; }
    struct engine_info in;
    engine_info(e, &in);
    tap_ok(in.n_ctx == 4096, "context length from /v1/models context_length (%d)", in.n_ctx);
    struct engine_stats s;
    double t0 = now_s();
    do {
        usleep(100000);
        engine_snapshot(e, &s);
    } while (s.server.n_recent == 0 && now_s() - t0 < 5);
    const struct engine_server_stats *v = &s.server;
    tap_ok(s.kv_total == 64 && s.kv_used == 3 && s.steps == 7,
           "status: the server's own KV blocks and steps (%d/%d, %llu)", s.kv_used, s.kv_total,
           (unsigned long long)s.steps);
    tap_ok(v->n_recent == ENGINE_SERVER_RECENT && !strcmp(v->recent[0].request_id, "r0") &&
               !strcmp(v->recent[7].request_id, "r7"),
           "status: %d recent requests, newest first (r0 .. r7 of 10)", v->n_recent);
    tap_ok(!strcmp(v->recent[0].route, "chat") && !strcmp(v->recent[1].route, "cmpl") &&
               !strcmp(v->recent[2].status, "cancelled") && v->recent[1].n_prompt == 11 &&
               v->recent[1].n_cached == 1 && v->recent[1].n_generated == 4 &&
               fabs(v->recent[1].ttft_s - 0.9) < 1e-9 && fabs(v->recent[1].e2e_s - 1.5) < 1e-9,
           "status: a recent row's kind, status, tokens and times");
    int ed = -1, ni = -1, ev = -1;
    for (int i = 0; i < v->n_tenants; i++) {
        if (!strcmp(v->tenants[i].name, "editor")) ed = i;
        if (!strcmp(v->tenants[i].name, "nightly")) ni = i;
        if (!strncmp(v->tenants[i].name, "ev", 2)) ev = i;
    }
    tap_ok(v->n_tenants == 3 && ed >= 0 && ni >= 0 && ev >= 0, "status: 3 tenants (%d)",
           v->n_tenants);
    if (ed >= 0 && ni >= 0 && ev >= 0) {
        tap_ok(v->tenants[ed].requests == 6 && v->tenants[ni].requests == 3 &&
                   v->tenants[ed].tokens == 6 * 10 + (0 + 2 + 4 + 6 + 8 + 9) + 6 * 4,
               "status: tenant counts over all 10 (editor 6, nightly 3), editor tokens %lld",
               (long long)v->tenants[ed].tokens);
        tap_ok(fabs(v->tenants[ed].ttft_p50_s - 0.4) < 1e-9 &&
                   fabs(v->tenants[ni].ttft_p50_s - 0.8) < 1e-9,
               "status: median TTFT per tenant (editor %.2f, nightly %.2f)",
               v->tenants[ed].ttft_p50_s, v->tenants[ni].ttft_p50_s);
        tap_ok(!strcmp(v->tenants[ev].name, "ev?[31mil") && !strchr(v->recent[3].tenant, 0x1b),
               "status: the escape byte in a tenant name is replaced (%s)", v->tenants[ev].name);
    }
    cJSON *j = engine_snapshot_json(e);
    const cJSON *sv = j ? cJSON_GetObjectItem(j, "server") : NULL;
    const cJSON *rec = sv ? cJSON_GetObjectItem(sv, "recent") : NULL;
    const cJSON *ten = sv ? cJSON_GetObjectItem(sv, "tenants") : NULL;
    tap_ok(cJSON_GetArraySize(rec) == ENGINE_SERVER_RECENT && cJSON_GetArraySize(ten) == 3 &&
               cJSON_IsNumber(cJSON_GetObjectItem(sv, "held")),
           "snapshot JSON: server.recent (8), server.tenants (3), server.held");
    cJSON_Delete(j);
    engine_close(e);
}

static void test_pause(const char *base)
{
    char url[256];
    snprintf(url, sizeof url, "%s/ok/v1", base);
    const char *urls[] = {url};
    struct engine *e = open_at(urls, 1, ENGINE_BALANCE_ROUND_ROBIN);
    if (!e) { tap_ok(0, "open ok"); return; }
    engine_pause(e, true);
    uint64_t ids[3];
    for (int i = 0; i < 3; i++) ids[i] = submit_hi(e);
    usleep(400000);
    struct engine_stats s;
    engine_snapshot(e, &s);
    tap_ok(s.paused && s.server.held == 3 && s.finished[ENGINE_STOP] == 0,
           "pause: 3 requests held, none sent or finished after 0.4 s (paused %d, held %d)",
           s.paused, s.server.held);
    cJSON *j = engine_snapshot_json(e);
    tap_ok(j && cJSON_IsTrue(cJSON_GetObjectItem(j, "paused")), "pause: the snapshot JSON says paused");
    cJSON_Delete(j);
    int types[8] = {0};
    double t0 = now_s();
    engine_cancel(e, ids[0]);
    enum engine_status st = finish_of(e, ids[0], NULL, NULL, 0, types);
    tap_ok(st == ENGINE_CANCELLED && types[ENGINE_EV_ADMITTED] == 0 && now_s() - t0 < 1.0,
           "pause: a held request cancels in %.3f s, never admitted (%s)", now_s() - t0,
           engine_status_name(st));
    engine_pause(e, false);
    int ok = 0;
    for (int i = 1; i < 3; i++) {
        struct engine_metrics m;
        ok += finish_of(e, ids[i], &m, NULL, 0, NULL) == ENGINE_STOP && m.n_generated == 3;
    }
    engine_snapshot(e, &s);
    tap_ok(ok == 2 && !s.paused && s.server.held == 0,
           "pause: released, the 2 others sent and finished (%d), nothing held", ok);
    engine_close(e);
    /* Closing while paused frees the held requests (ASan sees a leak otherwise). */
    e = open_at(urls, 1, ENGINE_BALANCE_ROUND_ROBIN);
    if (!e) return;
    engine_pause(e, true);
    uint64_t held = submit_hi(e);
    t0 = now_s();
    engine_close(e);
    tap_ok(held && now_s() - t0 < 2.0, "pause: close with a held request returns in %.3f s",
           now_s() - t0);
}

static void test_dns(const char *base)
{
    const char *bad = "http://no-such-host.invalid:8000/v1";
    char err[512] = "";
    const char *one[] = {bad};
    double t0 = now_s();
    struct engine *e = open_cfg(one, 1, 2, err, sizeof err);
    tap_ok(!e && strstr(err, "no-such-host.invalid") && strstr(err, "resolve"),
           "DNS: open of a .invalid name fails in %.2f s, naming it (%s)", now_s() - t0, err);
    if (e) engine_close(e);
    char ok_url[256];
    snprintf(ok_url, sizeof ok_url, "%s/ok/v1", base);
    const char *two[] = {ok_url, bad};
    e = open_cfg(two, 2, 2, err, sizeof err);
    tap_ok(e != NULL, "DNS: open with one good endpoint of two works");
    if (!e) return;
    uint64_t a = submit_hi(e), b = submit_hi(e); /* round-robin: a -> good, b -> .invalid */
    struct engine_metrics m;
    char msg[400] = "";
    tap_ok(finish_of(e, a, &m, NULL, 0, NULL) == ENGINE_STOP, "DNS: the good endpoint serves");
    t0 = now_s();
    enum engine_status st = ENGINE_N_STATUS;
    for (int spins = 0; spins < 400 && st == ENGINE_N_STATUS; spins++) {
        engine_wait_events(e, b, 0.05);
        struct engine_event ev[8];
        int k = engine_poll_request(e, b, ev, 8);
        for (int i = 0; i < k; i++) {
            if (ev[i].type == ENGINE_EV_FINISHED) {
                st = ev[i].status;
                snprintf(msg, sizeof msg, "%s", ev[i].message ? ev[i].message : "");
                m = *ev[i].metrics;
            }
            engine_event_free(&ev[i]);
        }
    }
    tap_ok(st == ENGINE_ERROR && strstr(msg, "resolve") && m.endpoint == 1 && !m.interrupted,
           "DNS: a request to the .invalid endpoint ends ERROR naming the failure (%s)", msg);
    tap_ok(m.e2e_s >= 0.55, "DNS: after 2 retries with backoff (0.2 + 0.4 s): e2e %.2f s", m.e2e_s);
    engine_close(e);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &n) != 0)
        tap_bail("no free port");
    close(fd);
    return ntohs(a.sin_port);
}

static int count_posts(const char *base, const char *mode)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "curl -sf %s/%s/count", base, mode);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "{\"posts\": %d}", &n) != 1) n = -1;
    if (p) pclose(p);
    return n;
}

static void test_retry(const char *base)
{
    int port = free_port();
    char late[256], ok_url[256], err[512] = "";
    snprintf(ok_url, sizeof ok_url, "%s/ok/v1", base);
    snprintf(late, sizeof late, "http://127.0.0.1:%d/ok/v1", port);
    const char *urls[] = {ok_url, late};
    struct engine *e = open_cfg(urls, 2, 6, err, sizeof err);
    if (!e) { tap_ok(0, "open for retry: %s", err); return; }
    uint64_t a = submit_hi(e), b = submit_hi(e); /* b -> the port nobody listens on yet */
    finish_of(e, a, NULL, NULL, 0, NULL);
    usleep(700000); /* refused at 0, 0.2, 0.6 s: then the server comes up */
    int got_port = 0;
    pid_t late_pid = spawn_server(port, &got_port);
    struct engine_metrics m;
    enum engine_status st = finish_of(e, b, &m, NULL, 0, NULL);
    tap_ok(st == ENGINE_STOP && m.n_generated == 3 && m.endpoint == 1,
           "retry: refused while the port was closed, then served once it listened (%s)",
           engine_status_name(st));
    tap_ok(m.e2e_s > 0.7 && m.e2e_s < 6.0,
           "retry: e2e %.2f s (after the server came up at 0.7 s; backoff capped)", m.e2e_s);
    char late_base[64];
    snprintf(late_base, sizeof late_base, "http://127.0.0.1:%d", port);
    tap_ok(count_posts(late_base, "ok") == 1, "retry: the late server got the request once (%d)",
           count_posts(late_base, "ok"));
    kill(late_pid, SIGTERM);
    waitpid(late_pid, NULL, 0);
    engine_close(e);
    /* Refused forever: ends after max_retries, with the connection error. */
    const char *dead[] = {ok_url, late};
    e = open_cfg(dead, 2, 3, err, sizeof err);
    if (!e) return;
    a = submit_hi(e);
    b = submit_hi(e);
    finish_of(e, a, NULL, NULL, 0, NULL);
    st = finish_of(e, b, &m, NULL, 0, NULL);
    tap_ok(st == ENGINE_ERROR && m.e2e_s >= 1.3 && m.e2e_s < 5,
           "retry: a port that never listens: ERROR after 3 retries (0.2+0.4+0.8 s): %.2f s",
           m.e2e_s);
    engine_close(e);
    /* Bytes were streamed: a stream cut mid-way is never sent again. */
    char cut[256];
    snprintf(cut, sizeof cut, "%s/close/v1", base);
    const char *cu[] = {cut};
    e = open_cfg(cu, 1, 6, err, sizeof err);
    if (!e) return;
    int before = count_posts(base, "close");
    char text[64] = "";
    st = finish_of(e, submit_hi(e), &m, text, sizeof text, NULL);
    tap_ok(st == ENGINE_ERROR && m.interrupted && !strcmp(text, "Hello world") &&
               count_posts(base, "close") == before + 1,
           "no retry after bytes: cut mid-stream -> ERROR, interrupted, partial '%s', one POST",
           text);
    engine_close(e);
}

/* /v1/models' per-key cap (tern.max_tokens_cap) comes from the server: a
 * value that is not a positive count in range reads as "no cap", never as a
 * negative, wrapped or huge limit the client would then send. */
static void test_models_cap(void)
{
    static const struct { const char *body; int32_t want; } cases[] = {
        { "{\"data\":[{\"id\":\"m\",\"tern\":{\"max_tokens_cap\":16}}]}", 16 },
        { "{\"data\":[{\"id\":\"m\",\"tern\":{\"max_tokens_cap\":-5}}]}", 0 },
        { "{\"data\":[{\"id\":\"m\",\"tern\":{\"max_tokens_cap\":1e30}}]}", 0 },
        { "{\"data\":[{\"id\":\"m\",\"tern\":{\"max_tokens_cap\":\"16\"}}]}", 0 },
        { "{\"data\":[{\"id\":\"m\",\"tern\":{\"max_tokens_cap\":null}}]}", 0 },
        { "{\"data\":[{\"id\":\"m\",\"tern\":7}]}", 0 },
        { "{\"data\":[{\"id\":\"m\",\"tern\":[16]}]}", 0 },
        { "{\"data\":[{\"id\":\"m\"}]}", 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct remote_models mo;
        memset(&mo, 0, sizeof mo);
        const int rc = remote_parse_models(cases[i].body, strlen(cases[i].body), &mo);
        ok(rc == 0 && mo.max_tokens_cap == cases[i].want, "models cap from %s: %d (want %d)",
           cases[i].body, mo.max_tokens_cap, cases[i].want);
        free(mo.id);
    }
    struct remote_models mo;
    memset(&mo, 0, sizeof mo);
    ok(remote_parse_models("{\"data\":[", 10, &mo) == -1, "truncated /v1/models body refused");
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    test_models_cap();
    start_server();
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", server_port);
    test_stream(base);
    test_cancel(base);
    test_concurrent_and_balance(base);
    test_scrape(base);
    test_tern_status(base);
    test_pause(base);
    test_dns(base);
    test_retry(base);
    kill(server_pid, SIGTERM);
    waitpid(server_pid, NULL, 0);
    return tap_done();
}
