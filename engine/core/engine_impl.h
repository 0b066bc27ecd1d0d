/* engine_impl: the local engine's internal state, shared by engine_local.c
 * (open/close, the ops table), engine_loop.c (the engine thread) and
 * engine_request.c (a request's life: submit, events, sampling, stop
 * strings). Requests are tokenized in the caller's thread at submit (so
 * refusals are immediate), then handed to the engine thread, which runs
 *   intake -> cancellations/timeouts/stalls -> plan (sched) -> forward
 *   (backend) -> sample/score -> events,
 * one iteration per step. One mutex guards what threads share: the inbox,
 * the live request list, the event queue and the published statistics;
 * the scheduler, KV manager and backend belong to the engine thread alone.
 * Not a public header: other modules use engine.h. */
#ifndef TERN_ENGINE_IMPL_H
#define TERN_ENGINE_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "engine.h"
#include "engine_ops.h"
#include "evq.h"
#include "jsg.h"
#include "kv.h"
#include "kvdisk.h"
#include "metrics.h"
#include "scheduler.h"
#include "template.h"
#include "tmask.h"
#include "tok.h"
#include "trace.h"

#define ENGINE_BLOCK_TOKENS 16
/* Default token budget per step, by backend (docs/SERVING.md: on the CPU
 * backend prefill cost per token is nearly flat from 32-token chunks up,
 * while a step's length, which every running stream waits for, grows with
 * the chunk; a GPU needs larger batches to fill). */
#define ENGINE_STEP_TOKENS_CPU 64
#define ENGINE_STEP_TOKENS_GPU 512
/* Logits rows a step may return beyond one per running sequence (scoring). */
#define ENGINE_SCORE_ROWS 64

struct engine_req {
    struct sched_seq seq;          /* seq.ud points back here */
    uint64_t id, tag;
    enum engine_priority prio;
    struct engine_sampling sp;
    void *sampler;                 /* sampler state (engine_request.c) */
    int32_t max_tokens;            /* 0 = up to the engine's limit */
    char **stop;
    int32_t n_stop;
    bool ignore_eos, score;
    int32_t score_from;
    bool want_lp;                  /* logprobs: each TOKEN event carries its entry */
    int32_t top_lp;                /* alternatives per generated token */
    struct engine_logprob *plp;    /* prompt_logprobs: [n_prompt] (engine thread; moved
                                      into the FINISHED event) */
    int32_t plp_top;               /* alternatives per prompt token */
    double deadline;               /* queue timeout, engine time; 0 = none */
    char *trace_id;                /* the request's own id for the trace, or NULL */
    char *trace_tags;              /* trace_tags_new(): its spans' tags, or NULL */
    struct jsg *grammar;           /* structured output's compiled schema, or NULL */
    struct tmask *gmask;           /* its decoding state (engine thread; made at the
                                      first sampled row) */
    bool embed;                    /* embeddings: rows are hidden states, pooled */
    enum engine_pooling pool;      /* resolved: mean, cls or last */
    int32_t embd_dims;             /* kept dimensions (<= n_embd) */
    double *embd_sum;              /* [n_embd] pooling accumulator (engine thread) */
    int32_t embd_n;                /* rows in embd_sum */
    float *embd_out;               /* the finished vector, moved into FINISHED */

    /* shared, under engine.mu */
    bool cancel, stalled, oom, finished;
    int refs;                      /* engine + queued events */
    int32_t n_events;              /* undrained events */
    struct engine_req *live_prev, *live_next, *inbox_next;

    /* engine thread only */
    bool admitted_once, prefill_done, counted_queued;
    bool cache_checked;            /* the disk cache was asked for its prompt */
    struct tok_stream ts;
    char *hold;                    /* decoded text not yet released (stop strings) */
    size_t hold_len, hold_cap;
    int32_t token_cap;
    struct engine_metrics m;       /* m.token_t grows with each token */
};

/* A recent request's computed prefix (whole blocks): what engine_cache_save
 * writes to disk and the cache listing shows. */
#define ENGINE_RECENT 8
/* Shorter prefixes are not worth a file: their prefill is fast. */
#define ENGINE_DISK_MIN_TOKENS 128
struct engine_recent {
    int32_t *tokens, n;
    uint64_t hash;
    double t_made, t_used;         /* engine time */
    uint32_t hits;
    int32_t resident;              /* tokens whose blocks are still in the pool (publish) */
    char made_by[40];
};

struct engine_local {
    struct engine base;            /* ops = engine_local.c's table (first member) */
    struct engine_config cfg;
    char *model_path, *model_name;
    double t0;                     /* CLOCK_MONOTONIC at open */
    const struct model *model;
    struct model *own_model;
    struct tok *tok;
    bool own_tok;
    struct backend *be;
    bool own_be;
    struct backend_info binfo;
    int32_t n_ctx;                 /* context per sequence */
    int32_t max_total;             /* tokens one sequence may reach: min(n_ctx, pool) */
    int32_t n_vocab;
    struct tmpl tmpl;              /* chat template (when has_tmpl) */
    bool has_tmpl;
    struct draft *draft;           /* speculative decoding's draft model, or NULL */
    int32_t n_embd;                /* hidden size for embeddings; 0 = cannot embed */
    enum engine_pooling pooling;   /* what ENGINE_POOL_MODEL resolves to */
    char embd_why[192];            /* why this engine cannot embed, or "" */

    /* engine thread */
    struct kv kv;
    struct sched sched;
    struct trace trace;
    float *logits;                 /* [rows_cap * n_vocab] */
    float *lp_row;                 /* [n_vocab] a sampled row before the sampler changes it
                                      (logprobs requests; allocated on first use) */
    struct tmask_vocab *gvocab;    /* the token trie of structured output (built on the
                                      engine thread at the first such request) */
    int32_t rows_cap;

    /* disk prefix cache: kvd belongs to the engine thread (and to close);
     * recent[] and pub_disk[] are under mu */
    struct kvd kvd;
    bool kvd_on;
    bool kvd_save_req;             /* engine_cache_save waits for the engine thread */
    int kvd_save_rc;
    char kvd_save_err[256];
    struct engine_recent recent[ENGINE_RECENT];
    int32_t n_recent;
    double recent_checked;         /* engine time of the last resident count */
    struct engine_cache_entry *pub_disk;
    int32_t *pub_disk_head;        /* [n_pub_disk][32] opening tokens (text on request) */
    int32_t n_pub_disk;

    /* shared, under mu */
    pthread_mutex_t mu;
    pthread_cond_t work_cond;      /* engine thread: work arrived */
    pthread_cond_t ev_cond;        /* consumers: events queued */
    pthread_t thread;
    bool thread_started, stop;
    bool paused;                   /* engine_pause: intake and timeouts only, no steps */
    struct engine_req *inbox_head, *inbox_tail;
    int32_t n_inbox;
    int32_t n_queued;              /* accepted, never admitted yet (max_queue) */
    struct engine_req *live;       /* not finished */
    struct evq evq;
    struct metrics mx;
    struct engine_stats stats;     /* KV and scheduler counters, published each step */
    struct engine_req_info *pub_reqs; /* live requests, published each step */
    int32_t n_pub_reqs, cap_pub_reqs;
    uint64_t next_id;
};

/* Seconds since the engine opened. */
static inline double engine_now(const struct engine_local *e)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 - e->t0;
}

/* The local engine's state from the public handle (its first member). */
static inline struct engine_local *engine_local_of(struct engine *e)
{
    return (struct engine_local *)e;
}
static inline const struct engine_local *engine_local_cof(const struct engine *e)
{
    return (const struct engine_local *)e;
}

/* engine_cache.c: the prompt cache. open: after the template (its identity);
 * record: a finished request's prefix (lock held, before its blocks go);
 * restore: loads disk entries for waiting prompts (engine thread, no lock);
 * save: writes the recent prefixes (engine thread or after it stopped, no
 * lock); publish: resident counts (lock held). */
void engine_cache_open(struct engine_local *e);
void engine_cache_close(struct engine_local *e);
void engine_cache_record(struct engine_local *e, struct engine_req *r);
void engine_cache_restore(struct engine_local *e);
int engine_cache_save_now(struct engine_local *e, char *err, size_t errlen);
void engine_cache_publish(struct engine_local *e);
int engine_local_cache_list(struct engine *base, struct engine_cache_entry *out, int max,
                            bool with_text);
int engine_local_cache_save(struct engine *base, char *err, size_t errlen);

/* engine_loop.c: the engine thread. start publishes the first statistics. */
int engine_thread_start(struct engine_local *e, char *err, size_t errlen);
void engine_thread_stop(struct engine_local *e);

/* engine_request.c: a request's life. */
uint64_t engine_local_submit(struct engine *base, const struct engine_request *q,
                             enum engine_status *why, char *err, size_t errlen);
char *engine_render_chat(const struct engine_local *e, const struct engine_message *msgs, int32_t n,
                         char *err, size_t errlen);
/* The rendered template carries BOS itself when the model wants it. */
#define ENGINE_CHAT_TOK_FLAGS TOK_PARSE_SPECIAL
/* Drops a reference (the engine's or a queued event's); frees r at the last. */
void engine_req_unref(struct engine_req *r);
/* Queues an event of r (lock held); flags a consumer that fell behind. */
void engine_emit(struct engine_local *e, struct engine_req *r, struct engine_event *ev);

/* What one step's rows produced for a request (engine thread, no lock);
 * zeroed by the caller. */
struct engine_out {
    bool sampled;                  /* a token was sampled: token .. lp */
    int32_t token;
    char *text;                    /* released text (malloc'd, may be "") */
    bool finish;
    enum engine_status status;
    char *message;
    struct engine_logprob *lp;     /* the token's entry, when the request asked */
    double nll;                    /* the loss of the scored prompt positions */
    double nll_sq;                 /* and the sum of each position's loss squared */
    int32_t n_scored;
    /* A decode with guesses (n-gram lookup): the tokens sampled after this
     * one, in order ([n_more], malloc'd), of which the first n_accepted
     * tokens of the whole run (this one first) are accepted guesses already
     * in the sequence's tokens. */
    struct engine_out *more;
    int32_t n_more, n_accepted;
    int32_t n_draft;               /* guesses this step verified */
};
/* Frees what an unapplied out still owns. */
void engine_out_free(struct engine_out *o);
/* One prompt position's row: its loss (score requests) and its entry
 * (prompt_logprobs: the next prompt token's log p). */
void engine_req_score_row(struct engine_local *e, struct engine_req *r, const float *row,
                          int32_t pos, struct engine_out *o);
/* Samples r's next token from row; detokenizes it, matches stop strings,
 * applies the limits. */
void engine_req_sample_row(struct engine_local *e, struct engine_req *r, float *row,
                           struct engine_out *o);
/* Releases what is still held (end of a request); malloc'd, may be NULL. */
char *engine_flush_text(struct engine_local *e, struct engine_req *r);
/* Embeddings: adds one row (a hidden state at prompt position pos) to r's
 * pooling; engine_req_embedding returns the finished vector (malloc'd,
 * embd_dims floats, L2-normalised) or NULL when out of memory. */
void engine_req_embed_row(struct engine_local *e, struct engine_req *r, const float *row,
                          int32_t pos);
float *engine_req_embedding(const struct engine_local *e, const struct engine_req *r);
/* Resolves the model's pooling and whether this engine can embed (open). */
void engine_embed_setup(struct engine_local *e);

#endif
