/* scheduler (prefix sched_): the batching policy. Each step it builds one backend batch from the
 * running sequences (decodes: one token each) plus prefill chunks, within a
 * token budget and a cap on running sequences; admits waiting sequences
 * (interactive before batch, FCFS within a class) when their KV blocks fit;
 * preempts the lowest-priority, latest sequence when a decode needs a block
 * and none is left (its blocks are freed; it is requeued and recomputed).
 *
 * A sequence is a list of known tokens (prompt, then generated ones) of
 * which the first n_computed have their K/V in the cache; every step computes
 * (part of) the rest, so prefill, decode and recompute after preemption are
 * one mechanism. Single-threaded (the engine thread); no clock inside, so the
 * policy is deterministic and testable with a fake backend. */
#ifndef TERN_SCHED_H
#define TERN_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "kv.h"

enum sched_state { SCHED_NEW, SCHED_WAITING, SCHED_RUNNING, SCHED_DONE };

struct sched_seq {
    uint64_t id;
    int priority;              /* 0 = interactive, 1 = batch */
    uint64_t order;            /* arrival order (FCFS key) */
    int32_t *tokens;           /* [n_tokens] prompt then generated tokens */
    int32_t n_tokens, cap;
    int32_t n_prompt;
    int32_t n_computed;        /* leading tokens whose K/V are in the cache */
    int32_t n_cached;          /* prompt tokens reused at the last admission */
    bool score;                /* want logits at positions [score_from, n_prompt - 1) */
    int32_t score_from;
    bool score_gen;            /* ... and it generates: the prompt's last position's row
                                  (the first sample) follows those rows */
    bool embd;                 /* embeddings: its rows are hidden states (FWD_WANT_EMBD) */
    int32_t lookup_k;          /* speculative decoding by n-gram prompt lookup: up to this
                                  many guessed tokens per decode step (0 = off) */
    int32_t n_limit;           /* tokens the sequence may reach (guesses stop there; 0 = none) */
    int32_t n_draft;           /* trailing tokens that are guesses being verified this step */
    int32_t lookup_cur;        /* guesses to try next (adapts to acceptance; 0 = lookup_k) */
    struct kv_seq kv;
    enum sched_state state;
    int32_t n_preempted;
    uint64_t planned_step;     /* step it was last put in a batch */
    void *ud;                  /* the engine's request */
};

/* Interactive prefill progresses by at least this many tokens per step,
 * even when decodes fill the budget. */
#define SCHED_MIN_INTERACTIVE_CHUNK 16

struct sched_config {
    int32_t step_tokens;       /* token budget per step */
    int32_t max_running;       /* cap on running sequences */
    int32_t max_logit_rows;    /* logits rows one step may ask for */
};

/* One sequence's share of a step: tokens [start, start + n), with logits rows
 * [row0, row0 + n_rows) (the last token's row when it completes the known
 * tokens; every scored position for score sequences). */
struct sched_item {
    struct sched_seq *seq;
    int32_t start, n;
    int32_t row0, n_rows;
    int32_t first_row_pos;     /* position of the first row */
    int32_t n_draft;           /* guesses among the tokens (a decode: rows 1 + n_draft) */
};

struct sched_plan {
    struct fwd_batch batch;
    int32_t *token, *pos, *seq;
    uint8_t *want;
    int32_t n_embd;            /* embedding rows in this step */
    struct fwd_seq *fseqs;
    struct sched_item *items;
    int32_t n_items;
    int32_t n_rows;
    struct sched_seq **admitted, **preempted;
    int32_t n_admitted, n_preempted;
};

struct sched {
    struct sched_config cfg;
    struct kv *kv;
    struct sched_seq **waiting;  /* sorted by (priority, order) */
    int32_t n_waiting, cap_waiting;
    struct sched_seq **running;  /* sorted by (priority, order) */
    int32_t n_running;
    uint64_t step;
    uint64_t next_order;
    uint64_t preemptions;
    uint64_t spec_drafts;        /* decode steps that carried guesses */
    uint64_t spec_draft_tokens;  /* guesses verified */
    uint64_t spec_accepted;      /* guesses accepted */
    /* Guesses from a draft model (draft.h) instead of n-gram lookup: when
     * set, a sequence with lookup_k > 0 gets its guesses from propose. */
    int32_t (*propose)(void *ud, const struct sched_seq *q, int32_t k, int32_t *out);
    void *propose_ud;
    /* With propose: called for each prefill chunk [start, start + n) of a
     * sequence that will guess, as the chunk is planned, so the draft sees
     * the prompt in the same steps as the target (propose_ud). */
    void (*feed)(void *ud, const struct sched_seq *q, int32_t start, int32_t n);
    struct sched_plan plan;
};

/* Largest batch a step may build (size the backend for it). */
int32_t sched_max_batch_tokens(const struct sched_config *cfg);

int sched_init(struct sched *s, struct kv *kv, const struct sched_config *cfg, char *err,
               size_t errlen);
void sched_free(struct sched *s);

/* Sequence helpers. */
void sched_seq_init(struct sched_seq *q, uint64_t id, int priority);
void sched_seq_free(struct sched_seq *q);
/* Appends a token (prompt or sampled); returns 0 or -1 on out-of-memory. */
int sched_seq_push(struct sched_seq *q, int32_t token);

/* Queues a new sequence (gets its arrival order). Returns 0 or -1 (OOM). */
int sched_add(struct sched *s, struct sched_seq *q);
/* Removes a sequence wherever it is and frees its KV blocks at once. */
void sched_remove(struct sched *s, struct sched_seq *q);

/* Plans the next step into s->plan; returns the number of tokens in the
 * batch (0: nothing to do). */
int32_t sched_plan(struct sched *s);
/* Applies a run step: advances n_computed and registers full blocks for
 * prefix reuse. Call after the backend ran s->plan.batch. A decode's
 * guesses are not computed yet: they wait for sched_seq_accept. */
void sched_commit(struct sched *s);

/* Speculative decoding (n-gram prompt lookup). A decode of a sequence with
 * lookup_k > 0 carries up to lookup_k guessed tokens, copied from what
 * followed the earlier position of its own tokens that matches the longest
 * suffix of them (the latest such position on ties); they are appended to tokens (n_draft) and
 * verified in the same forward pass, one logits row per position. After
 * sampling those rows in order, the caller keeps the first n_accepted
 * guesses (those equal to what was sampled): their K/V become computed, the
 * rest are dropped, and blocks that only held dropped guesses go back to
 * the pool (their K/V entries are overwritten by later tokens). */
void sched_seq_accept(struct sched *s, struct sched_seq *q, int32_t n_accepted);

/* The guesses for a sequence of n tokens: up to k tokens copied into out.
 * Returns how many (0: its last token occurs nowhere earlier). */
int32_t sched_lookup(const int32_t *tokens, int32_t n, int32_t k, int32_t *out);

#endif
