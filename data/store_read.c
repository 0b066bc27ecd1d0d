/* store_read: the store's read calls (session list, transcript, full-text
 * search, per-model statistics, runs). They run on the caller's thread on
 * the read connection, after this store's queued writes are committed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_impl.h"

static char *col_str(sqlite3_stmt *st, int i)
{
    const unsigned char *v = sqlite3_column_text(st, i);
    return v ? strdup((const char *)v) : NULL;
}

static double col_real(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? -1.0 : sqlite3_column_double(st, i);
}

static int64_t col_count(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, i);
}

/* Starts a read: waits for our queued writes, locks the read connection and
 * prepares sql. Returns the statement, or NULL with a message (unlocked). */
static sqlite3_stmt *read_begin(struct store *s, const char *sql, const char *what, char *err,
                                size_t errlen)
{
    if (store_wait_writes(s, err, errlen) != 0) return NULL;
    pthread_mutex_lock(&s->rmu);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->rdb, sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s: %s", s->path, what, sqlite3_errmsg(s->rdb));
        pthread_mutex_unlock(&s->rmu);
        return NULL;
    }
    return st;
}

static int read_end(struct store *s, sqlite3_stmt *st, int rc, const char *what, char *err,
                    size_t errlen)
{
    int ret = 0;
    if (rc != SQLITE_DONE) {
        snprintf(err, errlen, "%s: %s: %s", s->path, what, sqlite3_errmsg(s->rdb));
        ret = -1;
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->rmu);
    return ret;
}

/* Grows a vector of elements of size sz by one; NULL when out of memory. */
static void *grow(void **v, size_t *n, size_t *cap, size_t sz)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        void *p = realloc(*v, c * sz);
        if (!p) return NULL;
        *v = p;
        *cap = c;
    }
    void *e = (char *)*v + (*n)++ * sz;
    memset(e, 0, sz);
    return e;
}

/* ------------------------------------------------------------- sessions */

#define SESSION_COLS \
    "s.id, s.title, s.model, s.params, s.created_at, s.updated_at," \
    " (SELECT count(*) FROM messages m WHERE m.session_id = s.id), s.kind"

static void session_row(sqlite3_stmt *st, struct store_session_info *e)
{
    e->id = sqlite3_column_int64(st, 0);
    e->title = col_str(st, 1);
    e->model = col_str(st, 2);
    e->params_json = col_str(st, 3);
    e->created = sqlite3_column_double(st, 4);
    e->updated = sqlite3_column_double(st, 5);
    e->n_messages = sqlite3_column_int64(st, 6);
    e->kind = col_str(st, 7);
}

static void session_info_free(struct store_session_info *e)
{
    free(e->title);
    free(e->model);
    free(e->params_json);
    free(e->kind);
}

int store_sessions(struct store *s, struct store_session_list *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *what = "listing sessions";
    sqlite3_stmt *st = read_begin(
        s, "SELECT " SESSION_COLS " FROM sessions s ORDER BY s.updated_at DESC, s.id DESC", what,
        err, errlen);
    if (!st) return -1;
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_session_info *e = grow((void **)&out->v, &out->n, &cap, sizeof *e);
        if (!e) break;
        session_row(st, e);
    }
    if (read_end(s, st, rc, what, err, errlen) == 0) return 0;
    store_session_list_free(out);
    return -1;
}

void store_session_list_free(struct store_session_list *l)
{
    for (size_t i = 0; i < l->n; i++) session_info_free(&l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* ----------------------------------------------------------- transcript */

#define REQUEST_COLS \
    "r.id, r.message_id, r.created_at, r.model, r.model_file, r.model_hash, r.backend," \
    " r.params, r.status, r.queue_s, r.prefill_s, r.ttft_s, r.tpot_s, r.decode_s, r.e2e_s," \
    " r.prompt_tokens, r.cached_tokens, r.generated_tokens"
#define N_REQUEST_COLS 18

static void request_row(sqlite3_stmt *st, int c, struct store_request_info *q)
{
    q->id = sqlite3_column_int64(st, c);
    q->message_id = col_count(st, c + 1);
    q->created = sqlite3_column_double(st, c + 2);
    char **strs[6] = {&q->model, &q->model_file, &q->model_hash,
                      &q->backend, &q->params_json, &q->status};
    for (int k = 0; k < 6; k++) *strs[k] = col_str(st, c + 3 + k);
    double *d[6] = {&q->queue_s, &q->prefill_s, &q->ttft_s, &q->tpot_s, &q->decode_s, &q->e2e_s};
    for (int k = 0; k < 6; k++) *d[k] = col_real(st, c + 9 + k);
    q->prompt_tokens = col_count(st, c + 15);
    q->cached_tokens = col_count(st, c + 16);
    q->generated_tokens = col_count(st, c + 17);
}

static void request_info_free(struct store_request_info *q)
{
    if (!q) return;
    free(q->model);
    free(q->model_file);
    free(q->model_hash);
    free(q->backend);
    free(q->params_json);
    free(q->status);
}

static int load_session(struct store *s, int64_t id, struct store_session_info *e, char *err,
                        size_t errlen)
{
    const char *what = "reading a session";
    sqlite3_stmt *st = read_begin(s, "SELECT " SESSION_COLS " FROM sessions s WHERE s.id = ?1",
                                  what, err, errlen);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st), found = rc == SQLITE_ROW;
    if (found) {
        session_row(st, e);
        rc = SQLITE_DONE;
    }
    if (read_end(s, st, rc, what, err, errlen) != 0) return -1;
    if (!found) snprintf(err, errlen, "%s: no session with id %lld", s->path, (long long)id);
    return found ? 0 : 1;
}

/* The latest request of each message (a regenerated reply keeps its last). */
int store_transcript(struct store *s, int64_t session_id, struct store_transcript *out, char *err,
                     size_t errlen)
{
    memset(out, 0, sizeof *out);
    int found = load_session(s, session_id, &out->session, err, errlen);
    if (found != 0) return found;
    const char *what = "reading a transcript";
    sqlite3_stmt *st = read_begin(
        s,
        "SELECT m.id, m.role, m.text, m.status, m.n_tokens, m.created_at, m.updated_at, m.error, " REQUEST_COLS
        " FROM messages m LEFT JOIN requests r ON r.id ="
        " (SELECT max(id) FROM requests WHERE message_id = m.id)"
        " WHERE m.session_id = ?1 ORDER BY m.id",
        what, err, errlen);
    if (!st) goto fail;
    sqlite3_bind_int64(st, 1, session_id);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_message_info *m = grow((void **)&out->msgs, &out->n, &cap, sizeof *m);
        if (!m) break;
        m->id = sqlite3_column_int64(st, 0);
        m->role = col_str(st, 1);
        m->text = col_str(st, 2);
        m->status = col_str(st, 3);
        m->n_tokens = col_count(st, 4);
        m->created = sqlite3_column_double(st, 5);
        m->updated = sqlite3_column_double(st, 6);
        m->error = sqlite3_column_type(st, 7) != SQLITE_NULL ? col_str(st, 7) : NULL;
        if (sqlite3_column_type(st, 8) != SQLITE_NULL && (m->req = calloc(1, sizeof *m->req)))
            request_row(st, 8, m->req);
    }
    if (read_end(s, st, rc, what, err, errlen) == 0) return 0;
fail:
    store_transcript_free(out);
    return -1;
}

void store_transcript_free(struct store_transcript *t)
{
    session_info_free(&t->session);
    for (size_t i = 0; i < t->n; i++) {
        struct store_message_info *m = &t->msgs[i];
        free(m->role);
        free(m->text);
        free(m->status);
        free(m->error);
        request_info_free(m->req);
        free(m->req);
    }
    free(t->msgs);
    memset(t, 0, sizeof *t);
}

/* The columns both searches select first: session, message, title, role, time. */
static void hit_from_row(sqlite3_stmt *st, struct store_hit *h)
{
    h->session_id = sqlite3_column_int64(st, 0);
    h->message_id = sqlite3_column_int64(st, 1);
    h->session_title = col_str(st, 2);
    h->role = col_str(st, 3);
    h->created = sqlite3_column_double(st, 4);
}


/* --------------------------------------------------------------- search */

static int search_once(struct store *s, const char *q, const char *ho, const char *hc,
                       size_t limit, struct store_hits *out, char *err, size_t errlen)
{
    const char *what = "searching";
    sqlite3_stmt *st = read_begin(
        s,
        "SELECT m.session_id, m.id, s.title, m.role, m.created_at,"
        " snippet(messages_fts, 0, ?2, ?3, '…', 12)"
        " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
        " JOIN sessions s ON s.id = m.session_id"
        " WHERE messages_fts MATCH ?1 ORDER BY rank LIMIT ?4",
        what, err, errlen);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, q, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, ho, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, hc, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 4, (int64_t)limit);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_hit *h = grow((void **)&out->v, &out->n, &cap, sizeof *h);
        if (!h) break;
        hit_from_row(st, h);
        h->snippet = col_str(st, 5);
    }
    return read_end(s, st, rc, what, err, errlen);
}

/* "what's up?" is an FTS5 syntax error; as a phrase it means what the user
 * typed. Inner quotes are doubled, as FTS5 strings want. */
static char *as_phrase(const char *q)
{
    size_t n = strlen(q), k = 0;
    char *p = malloc(2 * n + 3);
    if (!p) return NULL;
    p[k++] = '"';
    for (size_t i = 0; i < n; i++) {
        if (q[i] == '"') p[k++] = '"';
        p[k++] = q[i];
    }
    p[k++] = '"';
    p[k] = 0;
    return p;
}

/* ASCII lower-case copy (SQLite's lower() does the same). */
static char *lower_ascii(const char *s)
{
    char *t = strdup(s);
    for (char *p = t; p && *p; p++)
        if (*p >= 'A' && *p <= 'Z') *p = (char)(*p + 32);
    return t;
}

/* Back from p to a character start, at most max characters. */
static size_t back_chars(const char *s, size_t p, int max)
{
    while (p > 0 && max > 0) {
        p--;
        while (p > 0 && ((unsigned char)s[p] & 0xC0) == 0x80) p--;
        if (s[p] == '\n') return p + 1;
        max--;
    }
    return p;
}

static size_t fwd_chars(const char *s, size_t n, size_t p, int max)
{
    while (p < n && max > 0 && s[p] != '\n') {
        p++;
        while (p < n && ((unsigned char)s[p] & 0xC0) == 0x80) p++;
        max--;
    }
    return p;
}

/* "…before ho match hc after…" around the first match of q in text. */
static char *substring_snippet(const char *text, const char *q, const char *ho, const char *hc)
{
    char *lt = lower_ascii(text), *lq = lower_ascii(q), *out = NULL;
    const char *m = lt && lq ? strstr(lt, lq) : NULL;
    if (m) {
        size_t n = strlen(text), at = (size_t)(m - lt), ql = strlen(q);
        size_t a = back_chars(text, at, 30), b = fwd_chars(text, n, at + ql, 40);
        size_t cap = (b - a) + strlen(ho) + strlen(hc) + 8;
        if ((out = malloc(cap)))
            snprintf(out, cap, "%s%.*s%s%.*s%s%.*s%s", a > 0 ? "…" : "", (int)(at - a), text + a, ho,
                     (int)ql, text + at, hc, (int)(b - at - ql), text + at + ql, b < n ? "…" : "");
    }
    free(lt);
    free(lq);
    return out;
}

/* Text the FTS5 tokenizer cannot split into words (Chinese, Japanese: no
 * spaces, so a run of characters is one token) is found as a substring: a
 * scan of the messages, newest first (the history of one user is small;
 * measured: tests/data/test_store.c). */
static int search_substring(struct store *s, const char *q, const char *ho, const char *hc,
                            size_t limit, struct store_hits *out, char *err, size_t errlen)
{
    const char *what = "searching (substring)";
    sqlite3_stmt *st = read_begin(s,
                                  "SELECT m.session_id, m.id, s.title, m.role, m.created_at,"
                                  " m.text FROM messages m JOIN sessions s ON s.id = m.session_id"
                                  " WHERE instr(lower(m.text), lower(?1)) > 0"
                                  " ORDER BY m.id DESC LIMIT ?2",
                                  what, err, errlen);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, q, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, (int64_t)limit);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_hit *h = grow((void **)&out->v, &out->n, &cap, sizeof *h);
        if (!h) break;
        hit_from_row(st, h);
        const char *text = (const char *)sqlite3_column_text(st, 5);
        h->snippet = substring_snippet(text ? text : "", q, ho, hc);
        if (!h->snippet) h->snippet = strdup("");
    }
    return read_end(s, st, rc, what, err, errlen);
}

int store_search(struct store *s, const char *query, const char *hl_open, const char *hl_close,
                 size_t limit, struct store_hits *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!limit) limit = 50;
    int rc = search_once(s, query, hl_open, hl_close, limit, out, err, errlen);
    if (rc != 0) {
        store_hits_free(out);
        char *p = as_phrase(query);
        rc = p ? search_once(s, p, hl_open, hl_close, limit, out, err, errlen) : -1;
        free(p);
    }
    if (rc == 0 && out->n > 0) return 0;
    store_hits_free(out);
    rc = search_substring(s, query, hl_open, hl_close, limit, out, err, errlen);
    if (rc != 0) store_hits_free(out);
    return rc;
}

void store_hits_free(struct store_hits *h)
{
    for (size_t i = 0; i < h->n; i++) {
        free(h->v[i].session_title);
        free(h->v[i].role);
        free(h->v[i].snippet);
    }
    free(h->v);
    memset(h, 0, sizeof *h);
}

/* ---------------------------------------------------------------- stats */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double store_percentile(const double *v, size_t n, double pct)
{
    if (!n) return NAN;
    double pos = pct / 100.0 * (double)(n - 1);
    size_t lo = (size_t)pos;
    if (lo + 1 >= n) return v[n - 1];
    return v[lo] + (v[lo + 1] - v[lo]) * (pos - (double)lo);
}

static void pcts_of(double *v, size_t n, struct store_pcts *p)
{
    qsort(v, n, sizeof *v, cmp_double);
    p->p50 = store_percentile(v, n, 50);
    p->p90 = store_percentile(v, n, 90);
    p->p99 = store_percentile(v, n, 99);
    p->max = n ? v[n - 1] : NAN;
}

struct series {
    double *v;
    size_t n, cap;
};

static void series_add(struct series *x, double v)
{
    double *e;
    if (v >= 0 && (e = grow((void **)&x->v, &x->n, &x->cap, sizeof *e))) *e = v;
}

/* Rows come ordered by model: each run of one model is summarised. */
static void stats_close(struct store_model_stats *m, struct series *sr)
{
    pcts_of(sr[0].v, sr[0].n, &m->ttft);
    pcts_of(sr[1].v, sr[1].n, &m->tpot);
    pcts_of(sr[2].v, sr[2].n, &m->e2e);
    for (int k = 0; k < 3; k++) sr[k].n = 0;
}

int store_stats(struct store *s, struct store_stats *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *what = "reading request statistics";
    sqlite3_stmt *st = read_begin(s,
                                  "SELECT coalesce(model, '?'), status, ttft_s, tpot_s, e2e_s,"
                                  " prompt_tokens, cached_tokens, generated_tokens"
                                  " FROM requests ORDER BY 1",
                                  what, err, errlen);
    if (!st) return -1;
    struct series sr[3] = {{0}};
    struct store_model_stats *m = NULL;
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *model = (const char *)sqlite3_column_text(st, 0);
        if (!m || strcmp(m->model, model) != 0) {
            if (m) stats_close(m, sr);
            m = grow((void **)&out->v, &out->n, &cap, sizeof *m);
            if (!m || !(m->model = strdup(model))) break;
        }
        m->n_requests++;
        for (int k = 0; k < 3; k++) {
            int64_t c = col_count(st, 5 + k);
            int64_t *dst[3] = {&m->prompt_tokens, &m->cached_tokens, &m->generated_tokens};
            if (c > 0) *dst[k] += c;
        }
        /* Completed generations: "ok", or the engine's own "stop"/"length". */
        const char *status = (const char *)sqlite3_column_text(st, 1);
        if (!status || (strcmp(status, "ok") && strcmp(status, "stop") && strcmp(status, "length")))
            continue;
        m->n_ok++;
        for (int k = 0; k < 3; k++) series_add(&sr[k], col_real(st, 2 + k));
    }
    if (m && m->model) stats_close(m, sr);
    for (int k = 0; k < 3; k++) free(sr[k].v);
    if (read_end(s, st, rc, what, err, errlen) == 0) return 0;
    store_stats_free(out);
    return -1;
}

void store_stats_free(struct store_stats *st)
{
    for (size_t i = 0; i < st->n; i++) free(st->v[i].model);
    free(st->v);
    memset(st, 0, sizeof *st);
}

/* ----------------------------------------------------------------- runs */

int store_runs(struct store *s, const char *kind, struct store_runs *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *what = "listing runs";
    sqlite3_stmt *st = read_begin(s,
                                  "SELECT id, kind, model, config, summary, created_at, env, verdict"
                                  " FROM runs"
                                  " WHERE ?1 IS NULL OR kind = ?1 ORDER BY id DESC",
                                  what, err, errlen);
    if (!st) return -1;
    if (kind) sqlite3_bind_text(st, 1, kind, -1, SQLITE_TRANSIENT);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_run_info *r = grow((void **)&out->v, &out->n, &cap, sizeof *r);
        if (!r) break;
        r->id = sqlite3_column_int64(st, 0);
        r->kind = col_str(st, 1);
        r->model = col_str(st, 2);
        r->config_json = col_str(st, 3);
        r->summary_json = col_str(st, 4);
        r->created = sqlite3_column_double(st, 5);
        r->env_json = col_str(st, 6);
        r->verdict = col_str(st, 7);
    }
    if (read_end(s, st, rc, what, err, errlen) == 0) return 0;
    store_runs_free(out);
    return -1;
}

void store_runs_free(struct store_runs *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].kind);
        free(r->v[i].model);
        free(r->v[i].config_json);
        free(r->v[i].summary_json);
        free(r->v[i].env_json);
        free(r->v[i].verdict);
    }
    free(r->v);
    memset(r, 0, sizeof *r);
}
