/* route: fallback routes (issue 37). An engine behind the same API
 * (engine_ops.h) that composes an ordered list of engines, the local one
 * and remote ones ("local,http://replica:8080,https://api.example/v1"): a
 * request goes to the first target; before its first token, a qualifying
 * failure (rejected: queue full, admission, 429; a missed TTFT deadline;
 * an error: 5xx, a refused connection, a model not loaded) moves it to the
 * next target, re-submitted from the copy the route keeps. After the first
 * token nothing moves: a broken stream ends as the target ended it (partial
 * text, marked interrupted), as without a route. A remote target that
 * gave no answer at all (refused, cut before a status) is skipped for 2 s
 * (unless it is the last), so the requests behind the first do not each
 * pay its connect retries.
 *
 * Each move is a hop (from, to, reason), kept per request (route_trail,
 * also after it finished, for the history), counted per (from, to, reason)
 * (route_counts, for /metrics' tern:fallback_total) and written as a
 * "fallback" span on the request's track of the --trace file.
 *
 * Events keep the engine API's promises: one QUEUED per request, times on
 * the route's own clock (each target's are shifted onto it), the FINISHED
 * metrics' queue/TTFT/e2e counted from the route's arrival, so a fallback's
 * cost shows in TTFT. */
#ifndef TERN_ROUTE_H
#define TERN_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

#define ROUTE_MAX_TARGETS 8

enum route_reason {
    ROUTE_R_NONE = 0,        /* not a reason to move (success, a bad request, after a token) */
    ROUTE_R_REJECTED,        /* queue full, admission refused, 503, queue timeout */
    ROUTE_R_RATE_LIMITED,    /* HTTP 429 */
    ROUTE_R_TTFT,            /* no first token within the route's TTFT deadline */
    ROUTE_R_ERROR,           /* 5xx, a refused or broken connection, a backend failure */
    ROUTE_R_UNAVAILABLE,     /* the target never opened (model not loaded, server down) */
    ROUTE_N_REASON
};
/* "rejected", "rate-limited", "ttft-deadline", "error", "unavailable" ("none"). */
const char *route_reason_name(enum route_reason r);

/* One target of a route: "local", or a server's base URL with an optional
 * "#key-env=VAR" naming the environment variable that holds its Bearer key
 * (a managed API's key stays out of the command line and the config). */
struct route_target {
    bool local;
    char url[256];                   /* "" for local; the URL without its #... part */
    char key_env[64];                /* "" = the route's default key (--api-key) */
};
struct route_spec {
    struct route_target t[ROUTE_MAX_TARGETS];
    int32_t n;
};
/* Parses "local,URL1,URL2#key-env=VAR" (comma-separated, spaces around
 * items ignored). Returns 0, or -1 with err naming the bad item: empty,
 * not http(s)://, too long, an unknown #option, a bad variable name,
 * "local" twice, more than ROUTE_MAX_TARGETS. */
int route_parse(const char *spec, struct route_spec *out, char *err, size_t errlen);

/* Whether a request that ended with st (http_status from its metrics, 0 =
 * none or local) before any token should move on, and why. A request that
 * already had a token never moves (ROUTE_R_NONE). A bad request (HTTP 4xx
 * other than 408/429) fails the same everywhere: it does not move. */
enum route_reason route_classify(enum engine_status st, int32_t http_status, bool had_token);
/* The same for a refusal by engine_submit (no events follow). */
enum route_reason route_classify_submit(enum engine_status why);

struct route_config {
    const struct route_spec *spec;
    /* The settings every target is opened with: the local target uses its
     * model and backend; a remote target gets remote.urls = { its URL } and
     * its key and tokenizer_path as its model_path, the rest of remote.*
     * as given. base->trace_path, when set, is the route's
     * trace (a local target writes its own beside it, "<path>.local.json"). */
    const struct engine_config *base;
    const char *api_key;             /* default key of remote targets; NULL = none */
    const char *tokenizer_path;      /* model file lending remote targets its tokenizer
                                        (exact token counts); NULL = none */
    double ttft_deadline_s;          /* 0 = none: only rejections and errors move */
};

/* Opens every target in order. A target that cannot open (a bad model file,
 * a server that does not answer) stays in the route as unavailable: its
 * requests move past it at once (reason "unavailable", counted). A remote
 * one is tried again every 3 s and takes requests once it opens (a replica
 * started after the route); the local one is not (a model file that did not
 * load stays unloaded). Fails only when no target opens, with every
 * target's error in err. */
struct engine *route_open(const struct route_config *c, char *err, size_t errlen);
/* route_open's engine is closed with engine_close. */

/* Whether e is a route (route_* queries answer only for one). */
bool route_is(const struct engine *e);

int32_t route_n_targets(const struct engine *e);
/* "local" or the target's URL (without its key part); "" out of range. */
const char *route_target_name(const struct engine *e, int32_t i);
/* The error that kept target i closed, or NULL when it is open (as of now:
 * a remote target may open later). */
const char *route_target_error(const struct engine *e, int32_t i);

struct route_hop {
    int32_t from, to;                /* target indexes */
    enum route_reason reason;
    double t;                        /* route clock: when the move was decided */
    double waited_s;                 /* time spent on `from` before moving */
    char detail[128];                /* the failure's message, cut */
};
struct route_trail {
    int32_t served;                  /* target that took the request last; -1 none */
    int32_t n_hops;
    struct route_hop hop[ROUTE_MAX_TARGETS];
};
/* The trail of request id (live, or among the last finished ones).
 * Returns 0, or -1 when unknown (or e is not a route). */
int route_trail(struct engine *e, uint64_t id, struct route_trail *out);
/* "local -> http://b:8080 (rejected after 0.004 s)" joined by "; ", or ""
 * when the request never moved. */
void route_trail_text(const struct engine *e, const struct route_trail *t, char *buf, size_t n);

/* The history's form of request id's trail (data/store.h route_json):
 * {"served_by": NAME, "fallbacks": [{"from","to","reason","waited_s",
 * "detail"}]}; malloc'd, caller frees. NULL when e is not a route, the id
 * is unknown or out of memory. */
char *route_trail_json(struct engine *e, uint64_t id);

struct route_count {
    int32_t from, to;
    enum route_reason reason;
    uint64_t n;
};
/* The non-zero fallback counters; returns how many were written (<= max). */
int route_counts(struct engine *e, struct route_count *out, int max);

#endif
