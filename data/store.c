/* store: opening the history database and the writer thread that performs
 * every write, so a slow disk never stalls the caller (a streaming UI).
 * Writes are jobs in a FIFO; the writer takes all queued jobs at once and
 * commits them in one transaction. Streamed replies live in memory and are
 * rewritten at most once a second (see store.h). Reads are in store_read.c. */
#include "store_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store_schema.h"

/* A streamed reply's text is written at most this often (seconds). */
#define REPLY_WRITE_PERIOD 1.0

enum job_kind {
    J_SESSION_NEW, J_SESSION_RENAME, J_SESSION_PARAMS, J_SESSION_DELETE, J_MESSAGE, J_REPLY_BEGIN,
    J_REPLY_FINISH, J_REQUEST, J_RUN, J_MESSAGE_DELETE,
};

/* String slots per kind: session new (title, model, params); rename (title);
 * message (role, text); finish (status, text, error); request (model, file, hash,
 * backend, params, status); run (kind, model, config, summary). */
struct store_job {
    struct store_job *next;
    enum job_kind kind;
    store_key key; /* row this job creates */
    store_key ref; /* row it refers to */
    char *str[7];
    double d[7];
    int64_t i[4];
    double t; /* unix time when queued */
};

struct store_reply {
    struct store_reply *next;
    store_key key;
    char *text;
    size_t len, cap;
    double last_write; /* monotonic seconds */
    bool dirty;
};

double store_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void store_default_path(char *buf, size_t n)
{
    const char *x = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    if (x && *x)
        snprintf(buf, n, "%s/tern/history.db", x);
    else
        snprintf(buf, n, "%s/.local/share/tern/history.db", home && *home ? home : ".");
}

const char *store_path(const struct store *s) { return s->path; }

/* ---------------------------------------------------------------- writer */

static void set_werr(struct store *s, const char *what)
{
    pthread_mutex_lock(&s->mu);
    if (!s->werr[0])
        snprintf(s->werr, sizeof s->werr, "%s: %s: %s", s->path, what, sqlite3_errmsg(s->wdb));
    pthread_mutex_unlock(&s->mu);
}

/* Writer side: the row id of a key, 0 if its insert failed. */
static int64_t row_of(struct store *s, store_key k)
{
    if (k >= 0) return k;
    pthread_mutex_lock(&s->mu);
    int64_t id = (size_t)(-k) <= s->n_ids ? s->ids[-k - 1] : 0; /* a key not from us: no row */
    pthread_mutex_unlock(&s->mu);
    return id > 0 ? id : 0;
}

static void set_row(struct store *s, store_key k, int64_t id)
{
    if (k >= 0) return;
    pthread_mutex_lock(&s->mu);
    if ((size_t)(-k) <= s->n_ids) s->ids[-k - 1] = id;
    pthread_mutex_unlock(&s->mu);
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

static void bind_real(sqlite3_stmt *st, int i, double v)
{
    if (v >= 0 && isfinite(v))
        sqlite3_bind_double(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

static void bind_count(sqlite3_stmt *st, int i, int64_t v)
{
    if (v >= 0)
        sqlite3_bind_int64(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

/* Runs one prepared statement to completion; the new row id or 0 (and the
 * first error noted for store_flush). */
static int64_t exec_stmt(struct store *s, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    int64_t id = rc == SQLITE_DONE ? sqlite3_last_insert_rowid(s->wdb) : 0;
    if (rc != SQLITE_DONE) set_werr(s, what);
    sqlite3_finalize(st);
    return id;
}

static sqlite3_stmt *prep(struct store *s, const char *sql, const char *what)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->wdb, sql, -1, &st, NULL) != SQLITE_OK) {
        set_werr(s, what);
        return NULL;
    }
    return st;
}

static void touch_session(struct store *s, int64_t session, double t)
{
    sqlite3_stmt *st = prep(s, "UPDATE sessions SET updated_at = ?2 WHERE id = ?1", "session time");
    if (!st) return;
    sqlite3_bind_int64(st, 1, session);
    sqlite3_bind_double(st, 2, t);
    exec_stmt(s, st, "updating a session's time");
}

static void job_session_new(struct store *s, struct store_job *j)
{
    sqlite3_stmt *st = prep(s,
                            "INSERT INTO sessions(title, model, params, created_at, updated_at, kind)"
                            " VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
                            "new session");
    if (!st) return;
    bind_text(st, 1, j->str[0] ? j->str[0] : "");
    bind_text(st, 2, j->str[1]);
    bind_text(st, 3, j->str[2]);
    sqlite3_bind_double(st, 4, j->t);
    bind_text(st, 5, j->str[3] ? j->str[3] : "chat");
    set_row(s, j->key, exec_stmt(s, st, "creating a session"));
}

static void job_session_rename(struct store *s, struct store_job *j)
{
    sqlite3_stmt *st = prep(s, "UPDATE sessions SET title = ?2, updated_at = ?3 WHERE id = ?1",
                            "rename session");
    if (!st) return;
    sqlite3_bind_int64(st, 1, row_of(s, j->ref));
    bind_text(st, 2, j->str[0] ? j->str[0] : "");
    sqlite3_bind_double(st, 3, j->t);
    exec_stmt(s, st, "renaming a session");
}

static void job_session_params(struct store *s, struct store_job *j)
{
    sqlite3_stmt *st = prep(s, "UPDATE sessions SET params = ?2, updated_at = ?3 WHERE id = ?1",
                            "set session params");
    if (!st) return;
    sqlite3_bind_int64(st, 1, row_of(s, j->ref));
    bind_text(st, 2, j->str[0]);
    sqlite3_bind_double(st, 3, j->t);
    exec_stmt(s, st, "setting a session's parameters");
}

static void job_session_delete(struct store *s, struct store_job *j)
{
    sqlite3_stmt *st = prep(s, "DELETE FROM sessions WHERE id = ?1", "delete session");
    if (!st) return;
    sqlite3_bind_int64(st, 1, row_of(s, j->ref));
    exec_stmt(s, st, "deleting a session");
}

static void job_message_delete(struct store *s, struct store_job *j)
{
    int64_t id = row_of(s, j->ref);
    if (!id) return;
    sqlite3_stmt *st = prep(s, "DELETE FROM messages WHERE id = ?1", "delete message");
    if (!st) return;
    sqlite3_bind_int64(st, 1, id);
    exec_stmt(s, st, "deleting a message");
}

/* Messages and reply starts: str[0] role, str[1] text, str[2] status. */
static void job_message(struct store *s, struct store_job *j)
{
    int64_t session = row_of(s, j->ref);
    sqlite3_stmt *st = prep(s,
                            "INSERT INTO messages(session_id, role, text, n_tokens, status,"
                            " created_at, updated_at, writer_pid)"
                            " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)",
                            "new message");
    if (!st) return;
    sqlite3_bind_int64(st, 1, session);
    bind_text(st, 2, j->str[0]);
    bind_text(st, 3, j->str[1] ? j->str[1] : "");
    bind_count(st, 4, j->i[0]);
    bind_text(st, 5, j->str[2]);
    sqlite3_bind_double(st, 6, j->t);
    if (j->kind == J_REPLY_BEGIN)
        sqlite3_bind_int64(st, 7, (int64_t)getpid());
    else
        sqlite3_bind_null(st, 7);
    set_row(s, j->key, exec_stmt(s, st, "adding a message"));
    touch_session(s, session, j->t);
}

static void write_reply_error(struct store *s, int64_t id, const char *error)
{
    sqlite3_stmt *st = prep(s, "UPDATE messages SET error = ?2 WHERE id = ?1", "reply error");
    if (!st) return;
    sqlite3_bind_int64(st, 1, id);
    bind_text(st, 2, error);
    exec_stmt(s, st, "recording why a reply failed");
}

static void write_reply_text(struct store *s, int64_t id, const char *text, const char *status,
                             int64_t n_tokens, double t)
{
    sqlite3_stmt *st;
    if (status)
        st = prep(s,
                  "UPDATE messages SET text = ?2, status = ?3, n_tokens = ?4, updated_at = ?5"
                  " WHERE id = ?1",
                  "finish reply");
    else
        st = prep(s, "UPDATE messages SET text = ?2, updated_at = ?5 WHERE id = ?1",
                  "update reply");
    if (!st) return;
    sqlite3_bind_int64(st, 1, id);
    bind_text(st, 2, text ? text : "");
    if (status) {
        bind_text(st, 3, status);
        bind_count(st, 4, n_tokens);
    }
    sqlite3_bind_double(st, 5, t);
    exec_stmt(s, st, status ? "finishing a reply" : "updating a streamed reply");
}

static void job_reply_finish(struct store *s, struct store_job *j)
{
    int64_t id = row_of(s, j->ref);
    if (!id) return;
    write_reply_text(s, id, j->str[1], j->str[0], j->i[0], j->t);
    if (j->str[2]) write_reply_error(s, id, j->str[2]);
    sqlite3_stmt *st = prep(s,
                            "UPDATE sessions SET updated_at = ?2 WHERE id ="
                            " (SELECT session_id FROM messages WHERE id = ?1)",
                            "session time");
    if (!st) return;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_double(st, 2, j->t);
    exec_stmt(s, st, "updating a session's time");
}

static void job_request(struct store *s, struct store_job *j)
{
    sqlite3_stmt *st = prep(s,
                            "INSERT INTO requests(message_id, created_at, model, model_file,"
                            " model_hash, backend, params, status, queue_s, prefill_s, ttft_s,"
                            " tpot_s, decode_s, e2e_s, prompt_tokens, cached_tokens,"
                            " generated_tokens, route, think_s, think_tokens) VALUES (?1, ?2, ?3,"
                            " ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,"
                            " ?19, ?20)",
                            "new request");
    if (!st) return;
    int64_t msg = j->ref ? row_of(s, j->ref) : 0;
    if (msg)
        sqlite3_bind_int64(st, 1, msg);
    else
        sqlite3_bind_null(st, 1);
    sqlite3_bind_double(st, 2, j->t);
    for (int k = 0; k < 5; k++) bind_text(st, 3 + k, j->str[k]);
    bind_text(st, 8, j->str[5] ? j->str[5] : "ok");
    for (int k = 0; k < 6; k++) bind_real(st, 9 + k, j->d[k]);
    for (int k = 0; k < 3; k++) bind_count(st, 15 + k, j->i[k]);
    bind_text(st, 18, j->str[6]);
    /* a reply without thinking: NULL, not 0 s */
    bind_real(st, 19, j->i[3] > 0 ? j->d[6] : -1);
    bind_count(st, 20, j->i[3] > 0 ? j->i[3] : -1);
    set_row(s, j->key, exec_stmt(s, st, "recording a request"));
}

static void job_run(struct store *s, struct store_job *j)
{
    sqlite3_stmt *st = prep(s,
                            "INSERT INTO runs(kind, model, created_at, config, summary, env,"
                            " verdict) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                            "new run");
    if (!st) return;
    bind_text(st, 1, j->str[0]);
    bind_text(st, 2, j->str[1]);
    sqlite3_bind_double(st, 3, j->t);
    bind_text(st, 4, j->str[2]);
    bind_text(st, 5, j->str[3]);
    bind_text(st, 6, j->str[4]);
    bind_text(st, 7, j->str[5]);
    set_row(s, j->key, exec_stmt(s, st, "recording a run"));
}

static void job_free(struct store_job *j)
{
    for (int k = 0; k < 7; k++) free(j->str[k]);
    free(j);
}

static void run_job(struct store *s, struct store_job *j)
{
    switch (j->kind) {
    case J_SESSION_NEW: job_session_new(s, j); break;
    case J_SESSION_RENAME: job_session_rename(s, j); break;
    case J_SESSION_PARAMS: job_session_params(s, j); break;
    case J_SESSION_DELETE: job_session_delete(s, j); break;
    case J_MESSAGE:
    case J_REPLY_BEGIN: job_message(s, j); break;
    case J_REPLY_FINISH: job_reply_finish(s, j); break;
    case J_REQUEST: job_request(s, j); break;
    case J_RUN: job_run(s, j); break;
    case J_MESSAGE_DELETE: job_message_delete(s, j); break;
    }
}

/* One transaction per batch: a burst of writes costs one commit. */
static void run_batch(struct store *s, struct store_job *j)
{
    bool tx = sqlite3_exec(s->wdb, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK;
    if (!tx) set_werr(s, "starting a write transaction");
    while (j) {
        struct store_job *next = j->next;
        run_job(s, j);
        job_free(j);
        j = next;
    }
    if (tx && sqlite3_exec(s->wdb, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        set_werr(s, "committing");
        sqlite3_exec(s->wdb, "ROLLBACK", NULL, NULL, NULL);
    }
}

/* Called with mu held: the reply whose text is due for a write, or NULL and
 * *wait_s set to when the next one will be (or -1: none dirty). */
static struct store_reply *due_reply(struct store *s, double now, double *wait_s)
{
    *wait_s = -1;
    for (struct store_reply *r = s->replies; r; r = r->next) {
        if (!r->dirty) continue;
        double left = r->last_write + REPLY_WRITE_PERIOD - now;
        if (left <= 0) return r;
        if (*wait_s < 0 || left < *wait_s) *wait_s = left;
    }
    return NULL;
}

static void wait_until(struct store *s, double wait_s)
{
    if (wait_s < 0) {
        pthread_cond_wait(&s->wake, &s->mu);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double t = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + wait_s;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    pthread_cond_timedwait(&s->wake, &s->mu, &ts);
}

static void *writer_main(void *arg)
{
    struct store *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (s->head) {
            struct store_job *batch = s->head;
            uint64_t upto = s->seq_queued;
            s->head = s->tail = NULL;
            pthread_mutex_unlock(&s->mu);
            run_batch(s, batch);
            pthread_mutex_lock(&s->mu);
            s->seq_done = upto;
            pthread_cond_broadcast(&s->done);
            continue;
        }
        double now = mono_now(), wait_s;
        struct store_reply *r = due_reply(s, now, &wait_s);
        if (r) {
            char *text = strndup(r->text ? r->text : "", r->len);
            store_key key = r->key;
            r->dirty = false;
            r->last_write = now;
            pthread_mutex_unlock(&s->mu);
            int64_t id = row_of(s, key);
            if (text && id) write_reply_text(s, id, text, NULL, -1, store_now());
            free(text);
            pthread_mutex_lock(&s->mu);
            continue;
        }
        if (s->stop) break;
        wait_until(s, wait_s);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ------------------------------------------------------------ job queue */

static store_key new_key(struct store *s)
{
    if (s->n_ids == s->cap_ids) {
        size_t cap = s->cap_ids ? s->cap_ids * 2 : 64;
        int64_t *v = realloc(s->ids, cap * sizeof *v);
        if (!v) return 0;
        s->ids = v;
        s->cap_ids = cap;
    }
    s->ids[s->n_ids++] = 0;
    return -(store_key)s->n_ids;
}

static struct store_job *job_new(enum job_kind kind, store_key ref)
{
    struct store_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->kind = kind;
    j->ref = ref;
    j->t = store_now();
    return j;
}

static char *dup_or_null(const char *v) { return v ? strdup(v) : NULL; }

/* Queues j (taking it). Returns the key of the row it creates, if `creates`. */
static store_key enqueue(struct store *s, struct store_job *j, bool creates)
{
    if (!s || !j || s->mode != STORE_READWRITE) {
        if (j) job_free(j);
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    store_key key = creates ? new_key(s) : 0;
    j->key = key;
    if (creates && !key) {
        pthread_mutex_unlock(&s->mu);
        job_free(j);
        return 0;
    }
    if (s->tail)
        s->tail->next = j;
    else
        s->head = j;
    s->tail = j;
    s->seq_queued++;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    return key;
}

store_key store_session_new_kind(struct store *s, const char *kind, const char *title,
                                 const char *model, const char *params_json)
{
    struct store_job *j = job_new(J_SESSION_NEW, 0);
    if (!j) return 0;
    j->str[0] = dup_or_null(title);
    j->str[1] = dup_or_null(model);
    j->str[2] = dup_or_null(params_json);
    j->str[3] = dup_or_null(kind);
    return enqueue(s, j, true);
}

store_key store_session_new(struct store *s, const char *title, const char *model,
                            const char *params_json)
{
    return store_session_new_kind(s, "chat", title, model, params_json);
}

void store_session_rename(struct store *s, store_key session, const char *title)
{
    struct store_job *j = job_new(J_SESSION_RENAME, session);
    if (j) j->str[0] = dup_or_null(title);
    enqueue(s, j, false);
}

void store_session_set_params(struct store *s, store_key session, const char *params_json)
{
    struct store_job *j = job_new(J_SESSION_PARAMS, session);
    if (j) j->str[0] = dup_or_null(params_json);
    enqueue(s, j, false);
}

void store_session_delete(struct store *s, store_key session)
{
    enqueue(s, job_new(J_SESSION_DELETE, session), false);
}

void store_message_delete(struct store *s, store_key message)
{
    if (!s || s->mode != STORE_READWRITE || !message) return;
    enqueue(s, job_new(J_MESSAGE_DELETE, message), false);
}

store_key store_message_add(struct store *s, store_key session, const char *role,
                            const char *text, int64_t n_tokens)
{
    struct store_job *j = job_new(J_MESSAGE, session);
    if (!j) return 0;
    j->str[0] = dup_or_null(role);
    j->str[1] = dup_or_null(text);
    j->str[2] = strdup("ok");
    j->i[0] = n_tokens;
    return enqueue(s, j, true);
}

store_key store_reply_begin(struct store *s, store_key session)
{
    struct store_job *j = job_new(J_REPLY_BEGIN, session);
    struct store_reply *r = calloc(1, sizeof *r);
    if (!j || !r || !s || s->mode != STORE_READWRITE) {
        free(r);
        if (j) job_free(j);
        return 0;
    }
    j->str[0] = strdup("assistant");
    j->str[2] = strdup("streaming");
    j->i[0] = -1;
    store_key key = enqueue(s, j, true);
    if (!key) {
        free(r);
        return 0;
    }
    r->key = key;
    r->last_write = mono_now();
    pthread_mutex_lock(&s->mu);
    r->next = s->replies;
    s->replies = r;
    pthread_mutex_unlock(&s->mu);
    return key;
}

static struct store_reply *find_reply(struct store *s, store_key key, bool detach)
{
    for (struct store_reply **p = &s->replies; *p; p = &(*p)->next) {
        struct store_reply *r = *p;
        if (r->key != key) continue;
        if (detach) *p = r->next;
        return r;
    }
    return NULL;
}

void store_reply_append(struct store *s, store_key reply, const char *text, size_t len)
{
    if (!s || !len) return;
    pthread_mutex_lock(&s->mu);
    struct store_reply *r = find_reply(s, reply, false);
    if (r && r->len + len + 1 > r->cap) {
        size_t cap = (r->len + len + 1) * 2;
        char *t = realloc(r->text, cap);
        if (t) {
            r->text = t;
            r->cap = cap;
        }
    }
    if (r && r->len + len + 1 <= r->cap) {
        memcpy(r->text + r->len, text, len);
        r->len += len;
        r->text[r->len] = 0;
        if (!r->dirty) pthread_cond_signal(&s->wake); /* the writer arms its timer */
        r->dirty = true;
    }
    pthread_mutex_unlock(&s->mu);
}

void store_reply_finish(struct store *s, store_key reply, const char *status, int64_t n_tokens)
{
    store_reply_fail(s, reply, status, NULL, n_tokens);
}

void store_reply_fail(struct store *s, store_key reply, const char *status, const char *error,
                      int64_t n_tokens)
{
    if (!s || s->mode != STORE_READWRITE) return;
    pthread_mutex_lock(&s->mu);
    struct store_reply *r = find_reply(s, reply, true);
    pthread_mutex_unlock(&s->mu);
    if (!r) return;
    struct store_job *j = job_new(J_REPLY_FINISH, reply);
    if (j) {
        j->str[0] = strdup(status ? status : "ok");
        j->str[1] = r->text ? r->text : strdup("");
        j->str[2] = dup_or_null(error);
        r->text = NULL;
        j->i[0] = n_tokens;
    }
    free(r->text);
    free(r);
    enqueue(s, j, false);
}

store_key store_request_add(struct store *s, store_key message, const struct store_request *q)
{
    struct store_job *j = job_new(J_REQUEST, message);
    if (!j) return 0;
    const char *strs[6] = {q->model,  q->model_file, q->model_hash,
                           q->backend, q->params_json, q->status};
    for (int k = 0; k < 6; k++) j->str[k] = dup_or_null(strs[k]);
    j->str[6] = dup_or_null(q->route_json);
    double d[6] = {q->queue_s, q->prefill_s, q->ttft_s, q->tpot_s, q->decode_s, q->e2e_s};
    memcpy(j->d, d, sizeof d);
    j->i[0] = q->prompt_tokens;
    j->i[1] = q->cached_tokens;
    j->i[2] = q->generated_tokens;
    j->d[6] = q->think_s;
    j->i[3] = q->think_tokens;
    return enqueue(s, j, true);
}

store_key store_run_add(struct store *s, const char *kind, const char *model,
                        const char *config_json, const char *summary_json)
{
    return store_run_add_env(s, kind, model, config_json, summary_json, NULL, NULL);
}

store_key store_run_add_env(struct store *s, const char *kind, const char *model,
                            const char *config_json, const char *summary_json,
                            const char *env_json, const char *verdict)
{
    struct store_job *j = job_new(J_RUN, 0);
    if (!j) return 0;
    j->str[0] = dup_or_null(kind);
    j->str[1] = dup_or_null(model);
    j->str[2] = dup_or_null(config_json);
    j->str[3] = dup_or_null(summary_json);
    j->str[4] = dup_or_null(env_json);
    j->str[5] = dup_or_null(verdict);
    return enqueue(s, j, true);
}

int store_wait_writes(struct store *s, char *err, size_t errlen)
{
    if (s->mode != STORE_READWRITE) return 0;
    pthread_mutex_lock(&s->mu);
    uint64_t want = s->seq_queued;
    while (s->seq_done < want) pthread_cond_wait(&s->done, &s->mu);
    int rc = 0;
    if (s->werr[0]) {
        snprintf(err, errlen, "%s", s->werr);
        s->werr[0] = 0;
        rc = -1;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int store_flush(struct store *s, char *err, size_t errlen)
{
    return s ? store_wait_writes(s, err, errlen) : 0;
}

int64_t store_resolve(struct store *s, store_key key)
{
    if (!s) return 0;
    if (key >= 0) return key;
    char err[8];
    store_wait_writes(s, err, 0);
    pthread_mutex_lock(&s->mu);
    int64_t id = (size_t)(-key) <= s->n_ids ? s->ids[-key - 1] : 0;
    pthread_mutex_unlock(&s->mu);
    return id > 0 ? id : 0;
}

/* ------------------------------------------------------------ open/close */

static int mkdirs(char *path, char *err, size_t errlen)
{
    /* Creates every folder above the file (the data folder is private). */
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int rc = mkdir(path, 0700);
        int e = errno;
        *p = '/';
        if (rc != 0 && e != EEXIST) {
            *p = 0;
            snprintf(err, errlen, "cannot create folder %s: %s", path, strerror(e));
            *p = '/';
            return -1;
        }
    }
    return 0;
}

/* Creates the file itself first so it is 0600 whatever the umask (SQLite
 * gives its -wal and -shm files the database file's mode). */
static int create_private(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "%s: cannot open for writing: %s%s", path, strerror(e),
                 e == EACCES || e == EROFS || e == EPERM ? " (the history database is read-only)"
                                                        : "");
        return -1;
    }
    close(fd);
    return 0;
}

static int conn_open(const char *path, int flags, sqlite3 **db, char *err, size_t errlen)
{
    int rc = sqlite3_open_v2(path, db, flags | SQLITE_OPEN_FULLMUTEX, NULL);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", path, *db ? sqlite3_errmsg(*db) : sqlite3_errstr(rc));
        return -1;
    }
    sqlite3_busy_timeout(*db, 5000); /* another process's transaction: wait, don't fail */
    sqlite3_extended_result_codes(*db, 1);
    return 0;
}

static int exec(sqlite3 *db, const char *path, const char *sql, char *err, size_t errlen)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK) return 0;
    snprintf(err, errlen, "%s: %s: %s", path, sql, msg ? msg : sqlite3_errmsg(db));
    sqlite3_free(msg);
    return -1;
}

/* Replies left "streaming" by a process that no longer runs are interrupted
 * (their text is the last once-a-second write). Live writers keep theirs. */
static int mark_interrupted(struct store *s, char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL, *up = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(s->wdb, "SELECT id, writer_pid FROM messages WHERE status = 'streaming'",
                           -1, &st, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->wdb, "UPDATE messages SET status = 'interrupted' WHERE id = ?1", -1,
                           &up, NULL) != SQLITE_OK)
        goto fail;
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t pid = sqlite3_column_type(st, 1) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 1);
        if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM)) continue;
        sqlite3_bind_int64(up, 1, sqlite3_column_int64(st, 0));
        if (sqlite3_step(up) != SQLITE_DONE) goto fail;
        sqlite3_reset(up);
    }
    if (r != SQLITE_DONE) goto fail;
    rc = 0;
    goto done;
fail:
    snprintf(err, errlen, "%s: marking interrupted replies: %s", s->path, sqlite3_errmsg(s->wdb));
done:
    sqlite3_finalize(st);
    sqlite3_finalize(up);
    return rc;
}

static int open_writer(struct store *s, char *err, size_t errlen)
{
    char *dir = strdup(s->path);
    if (!dir) return -1;
    int rc = mkdirs(dir, err, errlen);
    free(dir);
    if (rc != 0 || create_private(s->path, err, errlen) != 0) return -1;
    if (conn_open(s->path, SQLITE_OPEN_READWRITE, &s->wdb, err, errlen) != 0) return -1;
    if (sqlite3_db_readonly(s->wdb, "main") == 1) {
        snprintf(err, errlen, "%s: the database is read-only", s->path);
        return -1;
    }
    if (store_schema_version(s->wdb, s->path, err, errlen) < 0) return -1;
    /* WAL: readers (another tern) never block the writer or each other.
     * synchronous=NORMAL in WAL survives a killed process; a power cut may
     * lose the last commits, which is fine for a chat log. */
    if (exec(s->wdb, s->path, "PRAGMA journal_mode = WAL", err, errlen) != 0 ||
        exec(s->wdb, s->path, "PRAGMA synchronous = NORMAL", err, errlen) != 0 ||
        exec(s->wdb, s->path, "PRAGMA foreign_keys = ON", err, errlen) != 0)
        return -1;
    if (store_schema_migrate(s->wdb, STORE_SCHEMA_VERSION, s->path, err, errlen) != 0) return -1;
    return mark_interrupted(s, err, errlen);
}

/* file: URI of path with ?opts; URI-special characters escaped. */
static char *file_uri(const char *path, const char *opts)
{
    size_t n = strlen(path), k = 0;
    char *u = malloc(3 * n + strlen(opts) + 8);
    if (!u) return NULL;
    k += (size_t)sprintf(u, "file:");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)path[i];
        if (c == '%' || c == '?' || c == '#' || c < 0x20)
            k += (size_t)sprintf(u + k, "%%%02X", c);
        else
            u[k++] = (char)c;
    }
    sprintf(u + k, "?%s", opts);
    return u;
}

/* A WAL database in a folder we cannot write needs its -shm file; when that
 * cannot be made, the file is read as immutable (what a clean close left). */
static int open_readonly(struct store *s, char *err, size_t errlen)
{
    static const char *const opts[] = {"mode=ro", "immutable=1"};
    int v = -1;
    for (int i = 0; i < 2 && v < 0; i++) {
        char *uri = file_uri(s->path, opts[i]);
        if (!uri) return -1;
        if (s->rdb) sqlite3_close_v2(s->rdb);
        s->rdb = NULL;
        int rc = conn_open(uri, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, &s->rdb, err, errlen);
        free(uri);
        if (rc == 0) v = store_schema_version(s->rdb, s->path, err, errlen);
    }
    return v;
}

static int open_reader(struct store *s, char *err, size_t errlen)
{
    int v;
    if (s->mode == STORE_READONLY) {
        v = open_readonly(s, err, errlen);
    } else {
        if (conn_open(s->path, SQLITE_OPEN_READWRITE, &s->rdb, err, errlen) != 0) return -1;
        v = store_schema_version(s->rdb, s->path, err, errlen);
    }
    if (v < 0) return -1;
    if (v != STORE_SCHEMA_VERSION) {
        snprintf(err, errlen,
                 "%s: schema version %d, this tern reads version %d (open it once read-write "
                 "to upgrade it)",
                 s->path, v, STORE_SCHEMA_VERSION);
        return -1;
    }
    return exec(s->rdb, s->path, "PRAGMA foreign_keys = ON", err, errlen);
}

static void store_free(struct store *s)
{
    if (s->rdb) sqlite3_close_v2(s->rdb);
    if (s->wdb) sqlite3_close_v2(s->wdb);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->rmu);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->done);
    free(s->ids);
    free(s->path);
    free(s);
}

int store_open(struct store **out, const char *path, enum store_mode mode, char *err,
               size_t errlen)
{
    char def[4096];
    *out = NULL;
    if (!path) {
        store_default_path(def, sizeof def);
        path = def;
    }
    struct store *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    s->mode = mode;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->rmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&s->done, NULL);

    if (mode == STORE_READONLY && access(path, F_OK) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        goto fail;
    }
    if (mode == STORE_READWRITE && open_writer(s, err, errlen) != 0) goto fail;
    if (open_reader(s, err, errlen) != 0) goto fail;
    if (mode == STORE_READWRITE) {
        if (pthread_create(&s->writer, NULL, writer_main, s) != 0) {
            snprintf(err, errlen, "%s: cannot start the writer thread", path);
            goto fail;
        }
        s->writer_started = true;
    }
    *out = s;
    return 0;
fail:
    store_free(s);
    return -1;
}

void store_close(struct store *s)
{
    if (!s) return;
    if (s->writer_started) {
        /* Replies never finished (the caller is quitting mid-stream) keep
         * their text and say so. */
        for (;;) {
            pthread_mutex_lock(&s->mu);
            store_key k = s->replies ? s->replies->key : 0;
            pthread_mutex_unlock(&s->mu);
            if (!k) break;
            store_reply_finish(s, k, "interrupted", -1);
        }
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->writer, NULL);
    }
    store_free(s);
}
