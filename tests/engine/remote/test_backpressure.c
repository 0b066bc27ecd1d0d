/* test_backpressure: the remote engine's flow control against fault_server.py
 * on loopback. At tern bench's event limit (16 undrained events per request):
 *   - 256 concurrent bursty streams (mode fast: 128 one-token events each, as
 *     fast as the server writes) drained by one bench-like loop all finish
 *     with every token and none ends consumer-stalled: a full queue pauses the
 *     transfer instead of ending it;
 *   - a consumer that reads slowly but keeps reading (8 events every 0.3 s,
 *     so the stream outlives the stall bound several times) is not stalled;
 *   - a consumer that stops reading a stream larger than the socket buffers
 *     (mode flood) is ended consumer-stalled after the stall bound (2 s of no
 *     read), not before; the server's writes blocked meanwhile (it met a slow
 *     reader through TCP) and it saw the connection closed (its write failed:
 *     the request cancelled), while a second stream on the engine went on. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "engine.h"
#include "tap.h"

#define EVENT_LIMIT 16 /* tern bench's (app/bench_profiles.c) */
#define STALL_S 2.0    /* REMOTE_STALL_S (engine/remote/remote_impl.h) */
#define FAST_TOKENS 128
#define N_STREAMS 256

static pid_t server_pid;
static int server_port;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static void start_server(void)
{
    int fd[2];
    if (pipe(fd) != 0) tap_bail("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        char py[1024];
        snprintf(py, sizeof py, "%s/tests/engine/remote/fault_server.py", getenv("TERN_SRC"));
        setenv("FAST_TOKENS", "128", 1);
        setenv("FLOOD_TOKENS", "40000", 1);
        execlp("python3", "python3", py, "0", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    FILE *f = fdopen(fd[0], "r");
    if (!f || fscanf(f, "PORT %d", &server_port) != 1) tap_bail("fault_server did not start");
    fclose(f);
    server_pid = pid;
}

static struct engine *open_mode(const char *mode)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/%s/v1", server_port, mode);
    const char *urls[1] = {url};
    struct engine_config c;
    engine_config_default(&c);
    c.remote.urls = urls;
    c.remote.n_urls = 1;
    c.remote.read_timeout_s = 30;
    c.event_limit = EVENT_LIMIT;
    char err[512];
    struct engine *e = engine_open(&c, err, sizeof err);
    if (!e) tap_diag("engine_open %s: %s", url, err);
    return e;
}

static uint64_t submit(struct engine *e)
{
    struct engine_request r = {.prompt = "hi", .max_tokens = FAST_TOKENS};
    engine_sampling_greedy(&r.sampling);
    enum engine_status why;
    char err[256];
    uint64_t id = engine_submit(e, &r, &why, err, sizeof err);
    if (!id) tap_diag("submit: %s", err);
    return id;
}

struct stream {
    uint64_t id;
    int tokens;
    bool finished;
    enum engine_status st;
    double t_finished;
};

/* Takes up to max events of s; returns how many. */
static int take(struct engine *e, struct stream *s, int max)
{
    struct engine_event ev[32];
    if (max > 32) max = 32;
    int k = engine_poll_request(e, s->id, ev, max);
    for (int i = 0; i < k; i++) {
        if (ev[i].type == ENGINE_EV_TOKEN) s->tokens++;
        if (ev[i].type == ENGINE_EV_FINISHED) {
            s->finished = true;
            s->st = ev[i].status;
            s->t_finished = now_s();
            if (ev[i].status != ENGINE_STOP && ev[i].message)
                tap_diag("stream %llu: %s: %s", (unsigned long long)s->id,
                         engine_status_name(ev[i].status), ev[i].message);
        }
        engine_event_free(&ev[i]);
    }
    return k;
}

/* As tern bench's loop: every live request drained in turn, 1 ms of sleep
 * when a pass found nothing. */
static void test_burst(void)
{
    struct engine *e = open_mode("fast");
    if (!e) { tap_ok(0, "open fast"); return; }
    static struct stream v[N_STREAMS];
    for (int i = 0; i < N_STREAMS; i++) v[i] = (struct stream){.id = submit(e)};
    double t0 = now_s();
    int done = 0;
    while (done < N_STREAMS && now_s() - t0 < 120) {
        int got = 0;
        done = 0;
        for (int i = 0; i < N_STREAMS; i++) {
            while (!v[i].finished) {
                int k = take(e, &v[i], 32);
                got += k;
                if (k < 32) break;
            }
            done += v[i].finished;
        }
        if (!got) sleep_s(0.001);
    }
    int stop = 0, stalled = 0, full = 0;
    for (int i = 0; i < N_STREAMS; i++) {
        stop += v[i].finished && v[i].st == ENGINE_STOP;
        stalled += v[i].finished && v[i].st == ENGINE_CONSUMER_STALLED;
        full += v[i].tokens == FAST_TOKENS;
    }
    double wall = now_s() - t0;
    tap_ok(done == N_STREAMS && stalled == 0 && stop == N_STREAMS,
           "burst: %d streams at event limit %d: %d finished stop, %d consumer-stalled, in "
           "%.1f s", N_STREAMS, EVENT_LIMIT, stop, stalled, wall);
    tap_ok(full == N_STREAMS, "burst: %d of %d streams got all %d tokens", full, N_STREAMS,
           FAST_TOKENS);
    struct engine_stats s;
    engine_snapshot(e, &s);
    tap_ok(s.finished[ENGINE_CONSUMER_STALLED] == 0 && s.finished[ENGINE_STOP] == N_STREAMS,
           "burst: the engine's counts agree (%llu stop, %llu stalled)",
           (unsigned long long)s.finished[ENGINE_STOP],
           (unsigned long long)s.finished[ENGINE_CONSUMER_STALLED]);
    engine_close(e);
}

/* A reader slower than the stream, but reading. */
static void test_slow_reader(void)
{
    struct engine *e = open_mode("fast");
    if (!e) { tap_ok(0, "open fast"); return; }
    struct stream s = {.id = submit(e)};
    double t0 = now_s();
    while (!s.finished && now_s() - t0 < 60) {
        take(e, &s, 8);
        sleep_s(0.3);
    }
    double wall = now_s() - t0;
    tap_ok(s.finished && s.st == ENGINE_STOP && s.tokens == FAST_TOKENS && wall > 2 * STALL_S,
           "slow reader: 8 events per 0.3 s: %s with %d tokens after %.1f s (over %.0f s of "
           "stall bound), not stalled", s.finished ? engine_status_name(s.st) : "unfinished",
           s.tokens, wall, STALL_S);
    engine_close(e);
}

static cJSON *flood_count(void)
{
    char cmd[256], buf[512];
    snprintf(cmd, sizeof cmd, "curl -sf http://127.0.0.1:%d/flood/count", server_port);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(buf, 1, sizeof buf - 1, p) : 0;
    if (p) pclose(p);
    buf[n] = 0;
    return cJSON_Parse(buf);
}

static double num(const cJSON *j, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(j, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* A consumer that walks away after 4 tokens, beside one that reads. */
static void test_stopped_reader(void)
{
    struct engine *e = open_mode("flood");
    if (!e) { tap_ok(0, "open flood"); return; }
    struct stream a = {.id = submit(e)}, b = {.id = submit(e)};
    double t0 = now_s(), last_read = 0;
    while (a.tokens < 4 && !a.finished && now_s() - t0 < 30) {
        engine_wait_events(e, a.id, 0.05);
        if (take(e, &a, 1) > 0) last_read = now_s();
    }
    tap_ok(a.tokens == 4 && !a.finished, "stopped reader: 4 tokens read, then no more");
    /* b is read to its end (40000 tokens) while a sits unread. */
    while (!b.finished && now_s() - t0 < 120) {
        engine_wait_events(e, b.id, 0.05);
        while (take(e, &b, 32) == 32) {}
    }
    tap_ok(b.finished && b.st == ENGINE_STOP && b.tokens == 40000,
           "stopped reader: the other stream went on: %s, %d tokens",
           b.finished ? engine_status_name(b.st) : "unfinished", b.tokens);
    /* a is looked at without reading its events until the engine has ended
     * it (its FINISHED event is the only way to know): engine_requests. */
    double t_end = 0;
    while (now_s() - t0 < 60) {
        struct engine_req_info info[4];
        int n = engine_requests(e, info, 4), live = 0;
        for (int i = 0; i < n; i++) live += info[i].id == a.id;
        if (!live) {
            t_end = now_s();
            break;
        }
        sleep_s(0.05);
    }
    while (!a.finished && take(e, &a, 32) > 0) {}
    double idle = t_end - last_read;
    tap_ok(a.finished && a.st == ENGINE_CONSUMER_STALLED,
           "stopped reader: ended %s", a.finished ? engine_status_name(a.st) : "unfinished");
    tap_ok(t_end > 0 && idle >= STALL_S && idle < STALL_S + 8,
           "stopped reader: ended %.2f s after its last read (bound %.0f s)", idle, STALL_S);
    cJSON *j = NULL;
    for (int i = 0; i < 100; i++) { /* the server's write fails once the socket closes */
        cJSON_Delete(j);
        j = flood_count();
        if (num(j, "aborted") >= 1) break;
        sleep_s(0.05);
    }
    tap_ok(num(j, "done") == 1 && num(j, "aborted") == 1,
           "stopped reader: of the server's 2 streams 1 was done, 1 closed by the client "
           "(%g, %g)", num(j, "done"), num(j, "aborted"));
    /* A write on loopback takes microseconds; one that waits half a second
     * waited for the reader. */
    tap_ok(num(j, "blocked_s") >= 0.5 && num(j, "aborted_written") >= 0 &&
           num(j, "aborted_written") < 40000,
           "stopped reader: the server met a slow reader: its longest write waited %.2f s, "
           "the cut stream had written %g of 40000 events", num(j, "blocked_s"),
           num(j, "aborted_written"));
    cJSON_Delete(j);
    engine_close(e);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    start_server();
    test_burst();
    test_slow_reader();
    test_stopped_reader();
    kill(server_pid, SIGTERM);
    waitpid(server_pid, NULL, 0);
    return tap_done();
}
