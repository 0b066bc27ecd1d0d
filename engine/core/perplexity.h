/* perplexity: the reference's llama-perplexity method over any backend.
 * The token stream is cut into chunks of n_ctx tokens; each chunk starts a
 * fresh sequence whose first token is replaced by BOS (when the model adds
 * one), and only the second half of each chunk is scored: positions
 * j in [n_ctx/2, n_ctx - 1) predict token j + 1. PPL = exp(mean NLL). */
#ifndef TERN_PERPLEXITY_H
#define TERN_PERPLEXITY_H

#include <stddef.h>
#include <stdint.h>

struct backend;

struct ppl_params {
    int32_t n_ctx;            /* chunk length (512) */
    int32_t n_chunks;         /* <= 0: every whole chunk */
    int32_t bos;              /* BOS id put at each chunk start; < 0: none */
    int32_t n_batch;          /* tokens per forward call; <= 0: 128 */
    /* Called after each chunk with the running figures; may be NULL. */
    void (*progress)(void *ud, int32_t chunk, int32_t n_chunks, double ppl_so_far);
    void *ud;
};

struct ppl_result {
    double ppl;               /* exp(mean NLL) */
    double ppl_err;           /* the reference's "+/-" (standard error · ppl) */
    double nll;               /* mean negative log-likelihood, nats */
    int32_t n_chunks;         /* chunks evaluated */
    int64_t n_scored;         /* tokens scored */
};

/* Runs over tokens[0..n_tokens) (the whole text, tokenized with BOS as the
 * model wants). Needs n_ctx / kv_block_tokens free KV blocks (it uses blocks
 * 0.. of the pool: do not run it beside other sequences on the same backend).
 * Returns 0, or -1 with err (too few tokens, KV too small, forward failure). */
int ppl_run(struct backend *be, const int32_t *tokens, int64_t n_tokens,
            const struct ppl_params *p, struct ppl_result *out, char *err, size_t errlen);

/* out's ppl, ppl_err (the reference's: the spread of the positions' losses
 * over sqrt(n - 1), carried through exp), nll and n_scored from the sum of
 * n scored positions' losses and the sum of their squares. */
void ppl_from_sums(double nll_sum, double nll_sq_sum, int64_t n, struct ppl_result *out);

/* log p(target) under softmax(logits[n_vocab]), in double as the reference. */
double ppl_log_softmax(const float *logits, int32_t n_vocab, int32_t target);
/* The same, plus the n_top most likely tokens (descending log p) into
 * top_tok/top_lp[0..n_top) (n_top 0: none; ties keep the lower id). One pass
 * for the maximum and the sum, one for the top list: O(n_vocab * n_top) at
 * worst, O(n_vocab) for the usual row. The engine's scoring and logprobs
 * (OpenAI logprobs, echo, prompt_logprobs) use this one function. */
double ppl_token_logprobs(const float *logits, int32_t n_vocab, int32_t target, int32_t n_top,
                          int32_t *top_tok, float *top_lp);

#endif
