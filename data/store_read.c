/* store_read: the store's read calls (session list, transcript, full-text
 * search, per-model statistics, runs). They run on the caller's thread on
 * the read connection, after this store's queued writes are committed. */
#include <math.h>
#include <stddef.h>
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

/* How a column is read into its field: what SQL NULL becomes differs. */
enum col_kind {
    COL_INT,   /* int64_t, NULL as 0 */
    COL_COUNT, /* int64_t, NULL as -1 (unknown) */
    COL_TIME,  /* double, NULL as 0 */
    COL_REAL,  /* double, NULL as -1 (not measured) */
    COL_TEXT,  /* char *, a copy; NULL as NULL */
};

/* One column of a row struct, in the order the query selects them. */
struct col {
    enum col_kind kind;
    size_t off;
};
#define COL(kind, type, field) {kind, offsetof(type, field)}
#define N_COLS(t) (sizeof(t) / sizeof *(t))

/* Reads columns first.. of the current row into the struct at e, as the
 * table c says: every row struct is read by this one loop. */
static void cols_read(sqlite3_stmt *st, int first, void *e, const struct col *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *f = (char *)e + c[i].off;
        int k = first + (int)i;
        switch (c[i].kind) {
        case COL_INT: *(int64_t *)f = sqlite3_column_int64(st, k); break;
        case COL_COUNT: *(int64_t *)f = col_count(st, k); break;
        case COL_TIME: *(double *)f = sqlite3_column_double(st, k); break;
        case COL_REAL: *(double *)f = col_real(st, k); break;
        case COL_TEXT: *(char **)f = col_str(st, k); break;
        }
    }
}

/* Frees the text fields cols_read copied. */
static void cols_free(void *e, const struct col *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (c[i].kind == COL_TEXT) free(*(char **)((char *)e + c[i].off));
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

/* Fills one element (zeroed) from the current row; ctx is the caller's. */
typedef void (*row_fn)(sqlite3_stmt *st, void *e, const void *ctx);

/* The row loop of every list read: steps st to its end, one element of size
 * sz appended to *v (*n of them) per row, filled by fill; then ends the read
 * (read_end). Out of memory stops the loop before SQLITE_DONE, so the read
 * fails with a message. 0, or -1; the caller frees what was read. */
static int read_rows(struct store *s, sqlite3_stmt *st, const char *what, void **v, size_t *n,
                     size_t sz, row_fn fill, const void *ctx, char *err, size_t errlen)
{
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        void *e = grow(v, n, &cap, sz);
        if (!e) break;
        fill(st, e, ctx);
    }
    return read_end(s, st, rc, what, err, errlen);
}

/* ------------------------------------------------------------- sessions */

#define SESSION_COLS \
    "s.id, s.title, s.model, s.params, s.created_at, s.updated_at," \
    " (SELECT count(*) FROM messages m WHERE m.session_id = s.id), s.kind"

static const struct col session_cols[] = {
    COL(COL_INT, struct store_session_info, id),
    COL(COL_TEXT, struct store_session_info, title),
    COL(COL_TEXT, struct store_session_info, model),
    COL(COL_TEXT, struct store_session_info, params_json),
    COL(COL_TIME, struct store_session_info, created),
    COL(COL_TIME, struct store_session_info, updated),
    COL(COL_INT, struct store_session_info, n_messages),
    COL(COL_TEXT, struct store_session_info, kind),
};

static void session_row(sqlite3_stmt *st, void *row, const void *ctx)
{
    cols_read(st, 0, row, session_cols, N_COLS(session_cols));
}

static void session_info_free(struct store_session_info *e)
{
    cols_free(e, session_cols, N_COLS(session_cols));
}

int store_sessions(struct store *s, struct store_session_list *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *what = "listing sessions";
    sqlite3_stmt *st = read_begin(
        s, "SELECT " SESSION_COLS " FROM sessions s ORDER BY s.updated_at DESC, s.id DESC", what,
        err, errlen);
    if (!st) return -1;
    if (read_rows(s, st, what, (void **)&out->v, &out->n, sizeof *out->v, session_row, NULL, err,
                  errlen) == 0)
        return 0;
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
    " r.prompt_tokens, r.cached_tokens, r.generated_tokens, r.think_s, r.think_tokens"

static const struct col request_cols[] = {
    COL(COL_INT, struct store_request_info, id),
    COL(COL_COUNT, struct store_request_info, message_id),
    COL(COL_TIME, struct store_request_info, created),
    COL(COL_TEXT, struct store_request_info, model),
    COL(COL_TEXT, struct store_request_info, model_file),
    COL(COL_TEXT, struct store_request_info, model_hash),
    COL(COL_TEXT, struct store_request_info, backend),
    COL(COL_TEXT, struct store_request_info, params_json),
    COL(COL_TEXT, struct store_request_info, status),
    COL(COL_REAL, struct store_request_info, queue_s),
    COL(COL_REAL, struct store_request_info, prefill_s),
    COL(COL_REAL, struct store_request_info, ttft_s),
    COL(COL_REAL, struct store_request_info, tpot_s),
    COL(COL_REAL, struct store_request_info, decode_s),
    COL(COL_REAL, struct store_request_info, e2e_s),
    COL(COL_COUNT, struct store_request_info, prompt_tokens),
    COL(COL_COUNT, struct store_request_info, cached_tokens),
    COL(COL_COUNT, struct store_request_info, generated_tokens),
    COL(COL_REAL, struct store_request_info, think_s),
    COL(COL_COUNT, struct store_request_info, think_tokens),
};

static void request_info_free(struct store_request_info *q)
{
    if (q) cols_free(q, request_cols, N_COLS(request_cols));
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
        session_row(st, e, NULL);
        rc = SQLITE_DONE;
    }
    if (read_end(s, st, rc, what, err, errlen) != 0) return -1;
    if (!found) snprintf(err, errlen, "%s: no session with id %lld", s->path, (long long)id);
    return found ? 0 : 1;
}

/* A message, then its latest request's columns (all NULL when it has none). */
static const struct col message_cols[] = {
    COL(COL_INT, struct store_message_info, id),
    COL(COL_TEXT, struct store_message_info, role),
    COL(COL_TEXT, struct store_message_info, text),
    COL(COL_TEXT, struct store_message_info, status),
    COL(COL_COUNT, struct store_message_info, n_tokens),
    COL(COL_TIME, struct store_message_info, created),
    COL(COL_TIME, struct store_message_info, updated),
    COL(COL_TEXT, struct store_message_info, error),
};

static void message_row(sqlite3_stmt *st, void *row, const void *ctx)
{
    struct store_message_info *m = row;
    const int rq = (int)N_COLS(message_cols);
    cols_read(st, 0, m, message_cols, N_COLS(message_cols));
    if (sqlite3_column_type(st, rq) != SQLITE_NULL && (m->req = calloc(1, sizeof *m->req)))
        cols_read(st, rq, m->req, request_cols, N_COLS(request_cols));
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
    if (read_rows(s, st, what, (void **)&out->msgs, &out->n, sizeof *out->msgs, message_row, NULL,
                  err, errlen) == 0)
        return 0;
fail:
    store_transcript_free(out);
    return -1;
}

void store_transcript_free(struct store_transcript *t)
{
    session_info_free(&t->session);
    for (size_t i = 0; i < t->n; i++) {
        struct store_message_info *m = &t->msgs[i];
        cols_free(m, message_cols, N_COLS(message_cols));
        request_info_free(m->req);
        free(m->req);
    }
    free(t->msgs);
    memset(t, 0, sizeof *t);
}

/* The columns both searches select first: session, message, title, role,
 * time; then the snippet's source (column 5). */
static const struct col hit_cols[] = {
    COL(COL_INT, struct store_hit, session_id),
    COL(COL_INT, struct store_hit, message_id),
    COL(COL_TEXT, struct store_hit, session_title),
    COL(COL_TEXT, struct store_hit, role),
    COL(COL_TIME, struct store_hit, created),
};

static void hit_from_row(sqlite3_stmt *st, struct store_hit *h)
{
    cols_read(st, 0, h, hit_cols, N_COLS(hit_cols));
}

/* A full-text hit: FTS5 made the snippet (column 5). */
static void fts_hit_row(sqlite3_stmt *st, void *row, const void *ctx)
{
    struct store_hit *h = row;
    hit_from_row(st, h);
    h->snippet = col_str(st, 5);
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
    return read_rows(s, st, what, (void **)&out->v, &out->n, sizeof *out->v, fts_hit_row, NULL, err,
                     errlen);
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

/* The query and highlight marks a substring hit's snippet is made with. */
struct snippet_ctx {
    const char *q, *ho, *hc;
};

/* A substring hit: the snippet is cut here from the text (column 5). */
static void substring_hit_row(sqlite3_stmt *st, void *row, const void *ctx)
{
    const struct snippet_ctx *c = ctx;
    struct store_hit *h = row;
    hit_from_row(st, h);
    const char *text = (const char *)sqlite3_column_text(st, 5);
    h->snippet = substring_snippet(text ? text : "", c->q, c->ho, c->hc);
    if (!h->snippet) h->snippet = strdup("");
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
    const struct snippet_ctx c = {q, ho, hc};
    return read_rows(s, st, what, (void **)&out->v, &out->n, sizeof *out->v, substring_hit_row, &c,
                     err, errlen);
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
        cols_free(&h->v[i], hit_cols, N_COLS(hit_cols));
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

static const struct col run_cols[] = {
    COL(COL_INT, struct store_run_info, id),
    COL(COL_TEXT, struct store_run_info, kind),
    COL(COL_TEXT, struct store_run_info, model),
    COL(COL_TEXT, struct store_run_info, config_json),
    COL(COL_TEXT, struct store_run_info, summary_json),
    COL(COL_TIME, struct store_run_info, created),
    COL(COL_TEXT, struct store_run_info, env_json),
    COL(COL_TEXT, struct store_run_info, verdict),
};

static void run_row(sqlite3_stmt *st, void *row, const void *ctx)
{
    cols_read(st, 0, row, run_cols, N_COLS(run_cols));
}

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
    if (read_rows(s, st, what, (void **)&out->v, &out->n, sizeof *out->v, run_row, NULL, err,
                  errlen) == 0)
        return 0;
    store_runs_free(out);
    return -1;
}

void store_runs_free(struct store_runs *r)
{
    for (size_t i = 0; i < r->n; i++) cols_free(&r->v[i], run_cols, N_COLS(run_cols));
    free(r->v);
    memset(r, 0, sizeof *r);
}
