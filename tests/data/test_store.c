/* test_store: the store's API end to end on a real database file: sessions,
 * messages, a streamed reply (written at most once a second), requests,
 * runs, transcript, rename, delete cascade, FTS search with highlights,
 * statistics percentiles. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store.h"
#include "tap.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* The text of message id as another connection (another process) sees it. */
static char *peek_text(const char *path, int64_t id)
{
    struct store *r;
    char err[512];
    if (store_open(&r, path, STORE_READONLY, err, sizeof err) != 0) return NULL;
    struct store_session_list l;
    char *text = NULL;
    if (store_sessions(r, &l, err, sizeof err) == 0 && l.n) {
        struct store_transcript t;
        if (store_transcript(r, l.v[0].id, &t, err, sizeof err) == 0) {
            for (size_t i = 0; i < t.n; i++)
                if (t.msgs[i].id == id) text = strdup(t.msgs[i].text);
            store_transcript_free(&t);
        }
        store_session_list_free(&l);
    }
    store_close(r);
    return text;
}

static void test_basic(const char *path)
{
    struct store *s;
    char err[512];
    ok(store_open(&s, path, STORE_READWRITE, err, sizeof err) == 0, "open creates %s", path);
    struct stat sb = {0};
    int st_rc = stat(path, &sb);
    ok(st_rc == 0 && (sb.st_mode & 0777) == 0600, "file mode is 0600 (got %o)",
       (unsigned)(sb.st_mode & 0777));

    store_key ses = store_session_new(s, "first chat", "smol.gguf", "{\"temp\":0.7}");
    ok(ses < 0, "session key is queued (negative) before the writer runs or resolves");
    store_message_add(s, ses, "system", "You are terse.", 4);
    store_key u = store_message_add(s, ses, "user", "Tell me about the quokka of Rottnest.", 9);
    store_key rep = store_reply_begin(s, ses);
    const char *parts[] = {"The quokka ", "is a small ", "marsupial."};
    for (int i = 0; i < 3; i++) store_reply_append(s, rep, parts[i], strlen(parts[i]));
    store_reply_finish(s, rep, "ok", 7);
    struct store_request q = {
        .model = "smol.gguf", .model_file = "/m/smol.gguf", .backend = "cpu",
        .params_json = "{\"temp\":0.7}", .status = "ok", .queue_s = 0.001, .prefill_s = 0.02,
        .ttft_s = 0.021, .tpot_s = 0.01, .decode_s = 0.06, .e2e_s = 0.081,
        .prompt_tokens = 20, .cached_tokens = 0, .generated_tokens = 7,
    };
    store_request_add(s, rep, &q);
    ok(store_flush(s, err, sizeof err) == 0, "flush: no write error (%s)", err);
    int64_t sid = store_resolve(s, ses);
    ok(sid > 0 && store_resolve(s, u) > 0, "keys resolve to row ids");

    struct store_transcript t;
    is_int(store_transcript(s, sid, &t, err, sizeof err), 0, "transcript loads");
    is_int(t.n, 3, "three messages");
    if (t.n == 3) {
        is_str(t.msgs[0].role, "system", "first is the system message");
        is_str(t.msgs[1].text, "Tell me about the quokka of Rottnest.", "user text kept");
        is_str(t.msgs[2].text, "The quokka is a small marsupial.", "streamed reply joined");
        is_str(t.msgs[2].status, "ok", "reply finished ok");
        is_int(t.msgs[2].n_tokens, 7, "reply token count");
        ok(t.msgs[2].req && t.msgs[2].req->ttft_s == 0.021 && t.msgs[2].req->cached_tokens == 0 &&
               strcmp(t.msgs[2].req->backend, "cpu") == 0,
           "reply carries its request's figures");
        ok(t.msgs[1].req == NULL, "user message has no request");
    }
    is_str(t.session.title, "first chat", "session title");
    is_str(t.session.params_json, "{\"temp\":0.7}", "session params");
    store_transcript_free(&t);
    is_int(store_transcript(s, 999999, &t, err, sizeof err), 1, "unknown session id: 1");

    store_session_rename(s, ses, "quokkas");
    store_session_set_params(s, ses, "{\"temp\":0.2}");
    store_key ses2 = store_session_new(s, "second", "gemma.gguf", NULL);
    store_message_add(s, ses2, "user", "What is a wombat's diet?", -1);
    store_key r2 = store_reply_begin(s, ses2);
    store_reply_append(s, r2, "Grasses and roots.", 18);
    store_reply_finish(s, r2, "cancelled", -1);
    store_message_add(s, ses2, "user", "And its teeth?", -1);
    store_key r3 = store_reply_begin(s, ses2);
    store_reply_fail(s, r3, "rejected", "context full: the conversation is 300 tokens", 0);
    {
        struct store_transcript t2;
        int64_t id2 = store_resolve(s, ses2);
        is_int(store_transcript(s, id2, &t2, err, sizeof err), 0, "read the second session");
        ok(t2.n == 4 && !strcmp(t2.msgs[3].status, "rejected") && t2.msgs[3].error &&
               !strcmp(t2.msgs[3].error, "context full: the conversation is 300 tokens") &&
               t2.msgs[1].error == NULL,
           "a failed reply keeps its status and message (%s: %s)", t2.n == 4 ? t2.msgs[3].status : "?",
           t2.n == 4 && t2.msgs[3].error ? t2.msgs[3].error : "NULL");
        store_transcript_free(&t2);
    }
    struct store_session_list l;
    is_int(store_sessions(s, &l, err, sizeof err), 0, "list sessions");
    is_int(l.n, 2, "two sessions");
    if (l.n == 2) {
        is_str(l.v[0].title, "second", "newest first");
        is_str(l.v[1].title, "quokkas", "rename applied");
        is_str(l.v[1].params_json, "{\"temp\":0.2}", "parameters replaced");
        is_int(l.v[1].n_messages, 3, "message count of the first");
        is_int(l.v[0].n_messages, 4, "message count of the second");
    }
    store_session_list_free(&l);

    struct store_hits h;
    is_int(store_search(s, "quokka", "[", "]", 10, &h, err, sizeof err), 0, "search runs");
    is_int(h.n, 2, "both quokka messages found");
    ok(h.n && strstr(h.v[0].snippet, "[quokka]") != NULL, "snippet highlights the match: %s",
       h.n ? h.v[0].snippet : "");
    store_hits_free(&h);
    is_int(store_search(s, "wombat's", "[", "]", 10, &h, err, sizeof err), 0,
           "text with FTS syntax characters searched as a phrase");
    is_int(h.n, 1, "one wombat hit");
    store_hits_free(&h);
    is_int(store_search(s, "marsupial NOT quokka", "[", "]", 10, &h, err, sizeof err), 0,
           "FTS5 operators work");
    is_int(h.n, 0, "NOT excludes");
    store_hits_free(&h);

    store_session_delete(s, ses);
    is_int(store_sessions(s, &l, err, sizeof err), 0, "list after delete");
    is_int(l.n, 1, "one session left");
    store_session_list_free(&l);
    is_int(store_search(s, "quokka", "[", "]", 10, &h, err, sizeof err), 0, "search after delete");
    is_int(h.n, 0, "deleted messages leave the index");
    store_hits_free(&h);

    store_key run = store_run_add(s, "bench", "smol.gguf", "{\"profile\":\"short\"}",
                                  "{\"short\":{\"requests\":4}}");
    struct store_runs runs;
    is_int(store_runs(s, "bench", &runs, err, sizeof err), 0, "runs listed");
    ok(runs.n == 1 && runs.v[0].id == store_resolve(s, run) &&
           strcmp(runs.v[0].summary_json, "{\"short\":{\"requests\":4}}") == 0,
       "run stored with its summary");
    ok(runs.n == 1 && !runs.v[0].env_json && !runs.v[0].verdict,
       "a run stored without an environment reads back env and verdict NULL");
    store_runs_free(&runs);
    store_key crun = store_run_add_env(s, "contract", "smol.gguf", "{}", "{\"targets\":[]}",
                                       "{\"tern\":{\"version\":\"0.1.0\"}}", "fail");
    is_int(store_runs(s, "contract", &runs, err, sizeof err), 0, "contract runs listed");
    ok(runs.n == 1 && runs.v[0].id == store_resolve(s, crun) && runs.v[0].env_json &&
           strcmp(runs.v[0].env_json, "{\"tern\":{\"version\":\"0.1.0\"}}") == 0 &&
           runs.v[0].verdict && strcmp(runs.v[0].verdict, "fail") == 0,
       "a contract run keeps its environment and verdict (schema v6)");
    store_runs_free(&runs);
    store_close(s);
}

/* Percentiles: numpy.percentile(np.arange(1,101)/1000, [50,90,99]) gives
 * 0.0505 0.0901 0.09901 (numpy's default linear method). */
static void test_stats(const char *path)
{
    struct store *s;
    char err[512];
    if (store_open(&s, path, STORE_READWRITE, err, sizeof err) != 0) {
        ok(0, "open for stats: %s", err);
        return;
    }
    for (int i = 100; i >= 1; i--) {
        struct store_request q = {.model = "m-a", .status = i % 3 ? "ok" : i % 2 ? "stop" : "length",
                                  .ttft_s = i / 1000.0,
                                  .tpot_s = 0.01, .e2e_s = 1, .queue_s = -1, .prefill_s = -1,
                                  .decode_s = -1, .prompt_tokens = 10, .cached_tokens = 2,
                                  .generated_tokens = 5};
        store_request_add(s, 0, &q);
    }
    struct store_request bad = {.model = "m-a", .status = "error", .ttft_s = 9, .tpot_s = 9,
                                .e2e_s = 9, .prompt_tokens = 1, .cached_tokens = -1,
                                .generated_tokens = -1};
    store_request_add(s, 0, &bad);
    struct store_stats st;
    is_int(store_stats(s, &st, err, sizeof err), 0, "stats computed");
    struct store_model_stats *m = NULL;
    for (size_t i = 0; i < st.n; i++)
        if (strcmp(st.v[i].model, "m-a") == 0) m = &st.v[i];
    ok(m != NULL, "model m-a present");
    if (m) {
        is_int(m->n_requests, 101, "all requests counted");
        is_int(m->n_ok, 100, "completed requests (ok, stop, length)");
        is_near(m->ttft.p50, 0.0505, 1e-12, "ttft p50 (numpy)");
        is_near(m->ttft.p90, 0.0901, 1e-12, "ttft p90 (numpy)");
        is_near(m->ttft.p99, 0.09901, 1e-12, "ttft p99 (numpy)");
        is_near(m->ttft.max, 0.1, 1e-12, "ttft max excludes the failed request");
        is_int(m->prompt_tokens, 1001, "prompt tokens summed");
        is_int(m->cached_tokens, 200, "cached tokens summed");
    }
    store_stats_free(&st);
    store_close(s);
}

/* A reply streamed for ~2.6 s: another connection sees its text grow, at
 * most about one write a second, never more than ~1 s behind. */
static void test_stream_throttle(const char *path)
{
    struct store *s;
    char err[512];
    unlink(path);
    if (store_open(&s, path, STORE_READWRITE, err, sizeof err) != 0) {
        ok(0, "open for streaming: %s", err);
        return;
    }
    store_key ses = store_session_new(s, "stream", "m", NULL);
    store_key rep = store_reply_begin(s, ses);
    int64_t id = store_resolve(s, rep);
    double t0 = now_s();
    int n = 0, distinct = 0, max_behind = 0;
    char *last = NULL;
    while (now_s() - t0 < 2.6) {
        store_reply_append(s, rep, "x", 1);
        n++;
        if (n % 10 == 0) {
            char *seen = peek_text(path, id);
            if (seen && (!last || strcmp(seen, last) != 0)) distinct++;
            /* appended 20 ms apart: 1 s + 0.5 s slack for a loaded machine = 75 */
            if (seen && n - (int)strlen(seen) > max_behind) max_behind = n - (int)strlen(seen);
            free(last);
            last = seen;
        }
        sleep_s(0.02);
    }
    free(last);
    ok(distinct >= 2 && distinct <= 4,
       "stored text changed %d times in 2.6 s (begin + at most one write a second)", distinct);
    ok(max_behind <= 75, "stored text at most %d appends behind (limit 75, 1.5 s)", max_behind);
    store_reply_finish(s, rep, "ok", n);
    store_close(s);
    char *final = peek_text(path, id);
    ok(final && (int)strlen(final) == n, "final text complete (%d of %d)",
       final ? (int)strlen(final) : -1, n);
    free(final);
}

/* History off (the store could not be opened): every write is a no-op. */
static void test_null(void)
{
    struct store *s = NULL;
    char err[64];
    store_key k = store_session_new(s, "t", "m", NULL);
    store_key m = store_message_add(s, k, "user", "x", -1);
    store_key r = store_reply_begin(s, k);
    store_reply_append(s, r, "ab", 2);
    store_reply_finish(s, r, "ok", 1);
    struct store_request q = {.status = "ok"};
    store_key rq = store_request_add(s, r, &q);
    store_key run = store_run_add(s, "bench", NULL, NULL, NULL);
    store_session_rename(s, k, "x");
    store_session_delete(s, k);
    ok(!k && !m && !r && !rq && !run, "writes to a NULL store return key 0");
    ok(store_flush(s, err, sizeof err) == 0 && store_resolve(s, -1) == 0,
       "flush and resolve of a NULL store are no-ops");
    store_close(s);
}

int main(void)
{
    char dir[] = "/tmp/tern-store-XXXXXX";
    if (!mkdtemp(dir)) return tap_bail("mkdtemp failed");
    char path[256];
    snprintf(path, sizeof path, "%s/sub/history.db", dir);
    test_basic(path);
    test_stats(path);
    test_stream_throttle(path);
    test_null();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) tap_diag("could not remove %s", dir);
    return tap_done();
}
