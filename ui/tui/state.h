/* state: everything the terminal UI shows, kept apart from drawing and from
 * the engine and store (the bridge fills it from their events; panes only
 * read it). Sessions, the open session's transcript with each reply's phase
 * timings, generation parameters, and the instrument readings. */
#ifndef TERN_UI_STATE_H
#define TERN_UI_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctxfit.h"
#include "engine.h"

enum ui_role { UI_ROLE_USER, UI_ROLE_ASSISTANT, UI_ROLE_SYSTEM, UI_ROLE_NOTE };
enum { UI_ALERT_MODEL, UI_ALERT_STORE };
/* Whether a streaming reply thinks: undecided until its first bytes rule
 * "<think>" in or out (think.h). */
enum ui_think_state { UI_THINK_UNKNOWN, UI_THINK_NONE, UI_THINK_OPEN, UI_THINK_DONE };
enum ui_msg_status {
    UI_MSG_DONE,
    UI_MSG_QUEUED, /* submitted, no token yet */
    UI_MSG_STREAMING,
    UI_MSG_CANCELLED,
    UI_MSG_ERROR,      /* rejected, timed out, failed (see note) */
    UI_MSG_INTERRUPTED /* the app died while it streamed (from the store) */
};

#define UI_MAX_CHUNKS 32

/* Where one reply's time went (seconds since the request arrived). */
struct ui_phase {
    bool have;
    double t0;                       /* arrival (engine clock) */
    double queue_s;                  /* waiting for admission */
    int n_chunks;                    /* prefill chunks seen (PREFILL events) */
    double chunk_end[UI_MAX_CHUNKS]; /* end of each chunk, relative to t0 */
    int32_t chunk_done[UI_MAX_CHUNKS];
    double prefill_end; /* first token, relative to t0 */
    double admit_t;     /* admission, relative to t0 */
    double pf_t;        /* last prefill chunk's end, relative to t0 */
    double prefill_s;   /* first scheduled to prefill done (pp tok/s = n_computed / it) */
    int32_t pf_done, pf_total; /* prefill progress (prompt tokens in the cache / all) */
    double decode_s;
    double ttft_s, tpot_s, e2e_s;
    int32_t n_prompt, n_cached, n_computed, n_generated, n_preempted;
    int32_t n_spec_steps, n_draft, n_accepted; /* speculative decoding: steps with guesses,
                                                  guesses, kept */
    bool spec_from_draft; /* the guesses came from a draft model, not n-gram lookup */
    char status[24]; /* "streaming", "stop", "cancelled", ... */
    /* A remote engine's reply: what the client measured (connect, response
     * headers) and, when the server said, its own phases (server-side). */
    bool remote, server_known;
    double connect_s, headers_s;
    double srv_queue_s, srv_prefill_s, srv_decode_s;
    /* --route: each move before the first token ("local -> URL (rejected
     * after 0.002 s)"), "" when the reply did not move */
    char fallback[200];
};

struct ui_msg {
    enum ui_role role;
    enum ui_msg_status status;
    char *text;
    size_t len, cap;
    char *note;      /* error or status line shown under the text */
    int64_t key;     /* store key (0: not stored) */
    uint64_t req_id; /* engine request while streaming */
    struct ui_phase ph;
    /* thinking (think.h), counted as it streams: tokens and seconds from the
     * first token to </think>; 0 for replies read back from the history */
    enum ui_think_state think;
    int32_t think_tokens;
    double think_s;
    size_t think_seen; /* bytes already searched for </think> (each token scans its own bytes) */
    /* layout cache of the chat pane: line count at width lay_w for lay_len bytes */
    bool lay_think;
    int lay_w, lay_lines;
    size_t lay_len;
    enum ui_msg_status lay_status;
};

struct ui_params {
    float temp, top_p;
    float min_p, repeat_penalty; /* engine defaults 0.05, 1 (off) */
    int32_t top_k;               /* engine default 40 */
    uint64_t seed;               /* 0: a new seed per reply */
    int32_t max_tokens;
    enum ui_ctx_policy ctx_policy; /* what to do when the conversation outgrows the context */
    int32_t lookup_k;              /* n-gram lookup guesses a decode step; 0 = off (--lookup-k) */
    char system[512];
};

struct ui_session {
    int64_t key; /* store key (0: not stored) */
    char *title;
    double created; /* unix seconds */
    int64_t n_messages;
    bool run; /* a one-shot `tern run` exchange (kind run): listed only on request */
};

#define UI_SPARK_N 120

struct ui_state {
    /* sessions, newest first */
    struct ui_session *sessions;
    size_t n_sessions, cap_sessions;
    size_t cur;                /* open session index (valid when n_sessions > 0) */
    size_t sel;                /* selection in the sessions pane */
    bool list_runs;            /* the pane lists one-shot runs too (a toggles) */
    struct ui_params params;   /* of the open session */
    struct ui_params defaults; /* for new sessions (command-line options) */

    /* transcript of the open session */
    struct ui_msg *msgs;
    size_t n_msgs, cap_msgs;
    int scroll;          /* lines scrolled up from the bottom */
    size_t ctx_first;    /* first transcript message inside the context (truncate policy) */
    int32_t ctx_dropped; /* turns before it, outside the context */
    int32_t ctx_tokens;  /* tokens of the next prompt (conversation + input), -1 unknown */
    bool ctx_dirty;      /* conversation changed: ctx_tokens to recount */
    size_t timeline_msg; /* reply shown by the timeline (index into msgs) */
    bool show_thinking;  /* replies' thinking unfolded (Alt-T) */

    /* instruments */
    char model_name[128], backend[32], device[160], backend_note[256];
    int32_t n_ctx;
    bool base_model; /* no chat template: plain completion */
    size_t copied;   /* bytes of the last copy to the clipboard */
    struct engine_stats stats;
    bool have_stats;
    double *sess_ttft, *sess_tpot; /* this session's replies */
    size_t n_sess_lat, cap_sess_lat;
    double spark[UI_SPARK_N]; /* recent inter-token latencies, seconds */
    size_t spark_n, spark_head;
    double last_token_t;
    double tok_s; /* decode speed of the last/current reply */
    double decode_bytes;   /* weights read per decoded token (0 unknown: remote) */
    double decode_kv_bytes; /* and K and V, at the last reply's mean context */
    double read_limit_gbs; /* this machine's streaming read at the engine's threads (0 unknown) */

    /* status */
    char alert[2][600]; /* lasting problems shown above the chat: model, history */
    char status[256];   /* transient message (errors, notes) */
    bool status_error;
    bool loading; /* model still loading */
    bool engine_ok;
    bool store_ok;
};

void ui_state_init(struct ui_state *s);
void ui_state_free(struct ui_state *s);
void ui_params_default(struct ui_params *p);

/* Sessions (store_key, title, created). Returns the index or -1 on OOM. */
int ui_state_add_session(struct ui_state *s, int64_t key, const char *title, double created,
                         bool front);
void ui_state_remove_session(struct ui_state *s, size_t i);
int ui_state_rename_session(struct ui_state *s, size_t i, const char *title);

/* Transcript. Returns the new message or NULL on OOM. */
struct ui_msg *ui_state_add_msg(struct ui_state *s, enum ui_role role, const char *text);
void ui_state_clear_msgs(struct ui_state *s);
int ui_msg_append(struct ui_msg *m, const char *text, size_t len);
/* Folds or unfolds every reply's thinking (the chat pane lays them out again). */
void ui_state_show_thinking(struct ui_state *s, bool on);
/* After a token of m was appended (its n_generated counted, at engine time
 * t): counts the thinking's tokens and, at </think>, its time. */
void ui_msg_track_think(struct ui_msg *m, double t);
int ui_msg_set_note(struct ui_msg *m, const char *note);
/* The message streaming for request id, or NULL. */
struct ui_msg *ui_state_find_req(struct ui_state *s, uint64_t id);
bool ui_state_streaming(const struct ui_state *s);

/* Instruments */
void ui_state_push_itl(struct ui_state *s, double itl_s);
void ui_state_add_latency(struct ui_state *s, double ttft_s, double tpot_s);
/* Percentile (0..100) of this session's TTFT (which = 0) or TPOT (1); < 0 when none. */
double ui_state_session_pct(const struct ui_state *s, int which, double pct);

void ui_state_set_status(struct ui_state *s, bool error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
