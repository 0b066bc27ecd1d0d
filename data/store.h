/* store: the SQLite history store (sessions, messages, per-request phase
 * timings, bench/eval runs, full-text search). See docs/SCHEMA.md.
 *
 * Threading: writes never touch disk on the caller's thread. Each write call
 * copies its arguments into a job and returns at once; one writer thread runs
 * the jobs in order, batched into transactions. Because a new row's id is not
 * known when its write call returns, write calls that create rows return a
 * *key*: a positive key is a row id already in the database, a negative key
 * names a row still queued (the writer maps it to the id once inserted). Keys
 * of either kind can be passed to every later call; store_resolve() waits for
 * the writer and returns the row id.
 *
 * Reads run on the caller's thread on their own connection (WAL lets another
 * process read and write at the same time); each read first waits until this
 * store's queued writes are committed, so it sees them.
 *
 * All functions are safe to call from several threads. Strings passed in are
 * copied; strings returned belong to the returned struct and are freed with
 * its *_free function. */
#ifndef TERN_STORE_H
#define TERN_STORE_H

#include <stddef.h>
#include <stdint.h>

struct store;

typedef int64_t store_key; /* > 0: row id; < 0: queued row; 0: none */

enum store_mode {
    STORE_READWRITE, /* create if missing, migrate, mark dead writers' replies interrupted */
    STORE_READONLY,  /* read calls only (history of a read-only file); no writer thread */
};

/* ${XDG_DATA_HOME:-$HOME/.local/share}/tern/history.db */
void store_default_path(char *buf, size_t n);

/* Opens (creating the file mode 0600 and its folder mode 0700 if missing) the
 * database at path (NULL: the default path). Returns 0, or -1 with a message
 * saying which file and why (read-only, corrupt, newer schema, ...): callers
 * then go on without history and say so. */
int store_open(struct store **out, const char *path, enum store_mode mode, char *err,
               size_t errlen);
/* Commits every queued write, marks replies still streaming as interrupted,
 * stops the writer and frees everything. NULL is fine. */
void store_close(struct store *s);
const char *store_path(const struct store *s);

/* Waits until every write queued so far is committed. Returns 0, or -1 when
 * a write failed since the last call (message in err). */
int store_flush(struct store *s, char *err, size_t errlen);
/* The row id of a key (waits for the writer when the key is queued); 0 when
 * the row could not be written. */
int64_t store_resolve(struct store *s, store_key key);

/* ---- writes (queued; return at once) ----
 * Every write accepts s == NULL (history off: it does nothing, returns 0),
 * so callers need no branch per call when the store could not be opened. */

/* A chat session; params_json: the generation parameters as a JSON object
 * (may be NULL). */
store_key store_session_new(struct store *s, const char *title, const char *model,
                            const char *params_json);
/* The same of a kind: "chat", or "run" (one `tern run` exchange: listed by
 * tern history, left out of the chat's session list). */
store_key store_session_new_kind(struct store *s, const char *kind, const char *title,
                                 const char *model, const char *params_json);
void store_session_rename(struct store *s, store_key session, const char *title);
/* Replaces the session's generation parameters (JSON object, or NULL). */
void store_session_set_params(struct store *s, store_key session, const char *params_json);
void store_session_delete(struct store *s, store_key session);

/* Deletes one message (and its requests): a regenerated reply, an edited
 * turn. */
void store_message_delete(struct store *s, store_key message);

/* role: "system", "user" or "assistant"; n_tokens < 0 when unknown. */
store_key store_message_add(struct store *s, store_key session, const char *role,
                            const char *text, int64_t n_tokens);

/* A streamed assistant reply: written (empty, status "streaming") at once,
 * its text rewritten at most once a second while tokens arrive, and at the
 * end. If the process dies, the next read-write open marks it "interrupted"
 * with the text of the last write (at most one second behind). */
store_key store_reply_begin(struct store *s, store_key session);
void store_reply_append(struct store *s, store_key reply, const char *text, size_t len);
/* status: "ok", "cancelled", "error", ...; n_tokens < 0 when unknown. */
void store_reply_finish(struct store *s, store_key reply, const char *status, int64_t n_tokens);
/* The same for a reply that failed: status ("rejected", "error", "timeout")
 * and the message saying why, shown again when the session is reopened. */
void store_reply_fail(struct store *s, store_key reply, const char *status, const char *error,
                      int64_t n_tokens);

/* One generation's figures (seconds; < 0 when not measured). */
struct store_request {
    const char *model;      /* display name, e.g. the file's basename */
    const char *model_file; /* path */
    const char *model_hash; /* content hash if known, or NULL */
    const char *backend;    /* "cpu", "cuda" */
    const char *params_json;
    const char *status;     /* "ok", "cancelled", "error", "timeout", ... */
    double queue_s, prefill_s, ttft_s, tpot_s, decode_s, e2e_s;
    int64_t prompt_tokens, cached_tokens, generated_tokens;
    /* --route (v8): where it was served and each fallback before that, JSON
     * ({"served_by":..., "fallbacks":[{"from","to","reason","waited_s"}]});
     * NULL = no route */
    const char *route_json;
    /* v9: a reply's thinking (<think>...</think>): seconds from its first
     * token to </think>, and its tokens; think_tokens 0 = none (NULL) */
    double think_s;
    int64_t think_tokens;
};
/* message may be 0 (a request with no stored message, e.g. a bench run). */
store_key store_request_add(struct store *s, store_key message, const struct store_request *r);

/* kind: "bench", "eval-perplexity", "eval-prompts"; JSON texts may be NULL. */
store_key store_run_add(struct store *s, const char *kind, const char *model,
                        const char *config_json, const char *summary_json);

/* The same with the run's environment (JSON object: docs/CONTRACT.md) and,
 * for a contract run, its verdict ("pass" or "fail"); either may be NULL. */
store_key store_run_add_env(struct store *s, const char *kind, const char *model,
                            const char *config_json, const char *summary_json,
                            const char *env_json, const char *verdict);

/* ---- reads (caller's thread; 0 or -1 with a message) ---- */

struct store_session_info {
    int64_t id;
    char *title, *model, *params_json;
    char *kind; /* "chat" or "run" */
    double created, updated; /* unix seconds */
    int64_t n_messages;
};
struct store_session_list {
    struct store_session_info *v;
    size_t n;
};
/* Newest first. */
int store_sessions(struct store *s, struct store_session_list *out, char *err, size_t errlen);
void store_session_list_free(struct store_session_list *l);

struct store_request_info {
    int64_t id, message_id;
    double created;
    char *model, *model_file, *model_hash, *backend, *params_json, *status;
    double queue_s, prefill_s, ttft_s, tpot_s, decode_s, e2e_s; /* < 0: not measured */
    int64_t prompt_tokens, cached_tokens, generated_tokens;
    double think_s;       /* v9: < 0 when the reply did not think (or was not timed) */
    int64_t think_tokens; /* v9: < 0 likewise */
};
struct store_message_info {
    int64_t id;
    char *role, *text, *status;
    char *error;      /* why a failed reply failed, or NULL */
    int64_t n_tokens; /* < 0: unknown */
    double created, updated;
    struct store_request_info *req; /* the reply's generation, or NULL */
};
struct store_transcript {
    struct store_session_info session;
    struct store_message_info *msgs;
    size_t n;
};
/* Returns 0, 1 when no session has that id, -1 on error. */
int store_transcript(struct store *s, int64_t session_id, struct store_transcript *out, char *err,
                     size_t errlen);
void store_transcript_free(struct store_transcript *t);

struct store_hit {
    int64_t session_id, message_id;
    char *session_title, *role;
    char *snippet; /* matches wrapped in hl_open/hl_close */
    double created;
};
struct store_hits {
    struct store_hit *v;
    size_t n;
};
/* FTS5 query (words, "phrases", prefix*, AND/OR/NOT); best matches first.
 * A plain text that is not valid FTS5 syntax is searched as a phrase. */
int store_search(struct store *s, const char *query, const char *hl_open, const char *hl_close,
                 size_t limit, struct store_hits *out, char *err, size_t errlen);
void store_hits_free(struct store_hits *h);

/* TTFT/TPOT/E2E percentiles per model over completed requests (status ok,
 * stop or length); n_ok counts those. */
struct store_pcts {
    double p50, p90, p99, max;
};
struct store_model_stats {
    char *model;
    int64_t n_requests, n_ok, prompt_tokens, cached_tokens, generated_tokens;
    struct store_pcts ttft, tpot, e2e;
};
struct store_stats {
    struct store_model_stats *v;
    size_t n;
};
int store_stats(struct store *s, struct store_stats *out, char *err, size_t errlen);
void store_stats_free(struct store_stats *st);

struct store_run_info {
    int64_t id;
    char *kind, *model, *config_json, *summary_json;
    char *env_json, *verdict; /* NULL: not recorded (runs before schema v6, eval runs) */
    double created;
};
struct store_runs {
    struct store_run_info *v;
    size_t n;
};
/* Newest first; kind NULL for all. */
int store_runs(struct store *s, const char *kind, struct store_runs *out, char *err, size_t errlen);
void store_runs_free(struct store_runs *r);

/* ---- JSON (data/store_json.c) ---- */

struct cJSON;
/* A transcript as the export format of docs/SCHEMA.md (session fields,
 * "params" parsed, "messages" with each reply's "request"); caller frees
 * with cJSON_Delete. NULL when out of memory. */
struct cJSON *store_transcript_json(const struct store_transcript *t);
struct cJSON *store_request_json(const struct store_request_info *q);
struct cJSON *store_pcts_json(const struct store_pcts *p);

/* Linear-interpolated percentile (0..100) of n sorted values; shared by
 * stats, bench and eval so their figures agree. */
double store_percentile(const double *sorted, size_t n, double pct);

#endif
