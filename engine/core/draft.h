/* draft (prefix draft_): speculative decoding with a draft model. A smaller
 * model with the target's vocabulary guesses the next k tokens of a
 * sequence by greedy decoding; the scheduler puts the guesses into the
 * target's decode step as extra rows, and the engine verifies them exactly
 * as it verifies n-gram lookup guesses (engine_loop.c: sample each row,
 * keep guesses up to the first that differs). A greedy draft is a
 * deterministic proposal, so the target's output, greedy or sampled, is
 * the same token for token as without the draft; the draft changes only
 * how many tokens one target pass yields.
 *
 * The draft has its own backend and a KV pool of its own (its bytes are
 * reported beside the target's). Each sequence's draft state is the list
 * of tokens whose K/V the draft holds; a proposal trims it to the prefix it
 * shares with the sequence (guesses the target rejected fall away), feeds
 * the rest, then decodes k tokens. No state survives a proposal that
 * fails: it proposes nothing and the step runs without guesses.
 *
 * The draft is fed a prompt in step with the target's prefill (draft_feed,
 * one call per prefill chunk), so it has seen the whole prompt when the
 * first decode step comes and guesses from that step on.
 *
 * Catching up is bounded: a draft state can still lag (the target reused
 * cached prefix blocks the draft never computed, or the draft's LRU dropped
 * the state), and feeding a whole prompt inside one step would stall every
 * sequence in the batch for the draft's prefill. So the tokens a step feeds
 * (prefill chunks, and any proposal's feed longer than k + 1, the steady
 * state's) share a budget of catchup_tokens per step, over all sequences;
 * a sequence behind by more than what is left feeds that much, proposes
 * nothing and decodes plainly, until a later step finds it caught up.
 * Engine thread only. */
#ifndef TERN_DRAFT_H
#define TERN_DRAFT_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

struct draft;
struct model;
struct tok;

struct draft_config {
    const char *model_path;
    struct backend_config backend; /* kind, threads, kv_type as the target's */
    int32_t max_seqs;              /* sequences with draft state at once (LRU beyond) */
    int32_t n_ctx;                 /* the target's context per sequence */
    int32_t catchup_tokens;        /* tokens one step feeds to catch up (0: 64) */
};

/* Opens the draft model and its backend. Refuses (NULL, err) a model
 * whose vocabulary differs from the target's tokenizer in size or in any
 * token's bytes: its guesses would be other tokens. */
struct draft *draft_open(const struct draft_config *c, const struct tok *target_tok, char *err,
                         size_t errlen);
void draft_close(struct draft *d);

/* Up to k guesses (greedy draft tokens) for the sequence seq_id whose
 * tokens are tokens[0 .. n); written to out, returns how many (0 when the
 * draft cannot: it is still catching up, its KV pool is full, a backend
 * error). step names the scheduler's step: the catch-up budget is per step. */
int32_t draft_propose(struct draft *d, uint64_t seq_id, const int32_t *tokens, int32_t n,
                      int32_t k, uint64_t step, int32_t *out);
/* Feeds the draft tokens[0 .. n) of sequence seq_id (what the target will
 * have computed after this step's prefill chunk of chunk tokens), without
 * guessing: the chunk always, a longer lag within the step's budget. */
void draft_feed(struct draft *d, uint64_t seq_id, const int32_t *tokens, int32_t n, int32_t chunk,
                uint64_t step);
/* Drops a sequence's draft state (it finished or was cancelled). */
void draft_forget(struct draft *d, uint64_t seq_id);

struct draft_info {
    const char *name;              /* the draft file's base name */
    uint64_t weight_bytes, kv_bytes;
    uint64_t proposals, tokens;    /* draft_propose calls that guessed, tokens guessed */
    uint64_t catchup_calls;        /* calls that fed a lagging sequence and guessed nothing */
    int32_t catchup_max_step;      /* most tokens fed to catch up in one step */
    uint64_t fed_prefill;          /* tokens fed beside the target's prefill (draft_feed) */
    double seconds;                /* time spent in draft forward passes */
};
void draft_get_info(const struct draft *d, struct draft_info *out);

#endif
