/* sampler: turns one row of logits into a token, per request: repetition /
 * presence / frequency penalties over a window of recent tokens, top-k,
 * top-p, min-p, temperature, then a seeded draw (same seed and inputs, same
 * tokens). Temperature 0 is greedy. Stop strings and EOS are the caller's. */
#ifndef TERN_SAMPLER_H
#define TERN_SAMPLER_H

#include <stdint.h>

struct sampler_params {
    float temperature;        /* <= 0: greedy (argmax after penalties) */
    int32_t top_k;            /* <= 0: off */
    float top_p;              /* >= 1: off */
    float min_p;              /* <= 0: off; keeps p >= min_p · p_max */
    float repeat_penalty;     /* 1: off; logit > 0 divided, <= 0 multiplied */
    float presence_penalty;   /* 0: off; subtracted once per seen token */
    float frequency_penalty;  /* 0: off; subtracted per occurrence */
    int32_t penalty_last_n;   /* window of accepted tokens the penalties see (0: off) */
    uint64_t seed;
};

/* The defaults of the reference's CLI: temp 0.8, top-k 40, top-p 0.95,
 * min-p 0.05, no penalties (window 64), seed 0. */
void sampler_params_default(struct sampler_params *p);

struct sampler;

/* Returns NULL when out of memory. */
struct sampler *sampler_init(const struct sampler_params *p, int32_t n_vocab);
void sampler_free(struct sampler *s);

/* Picks a token from logits[n_vocab] (modified in place). n_vocab must equal
 * the one given to sampler_init. Does not record the token: call
 * sampler_accept with the token actually used. */
int32_t sampler_sample(struct sampler *s, float *logits, int32_t n_vocab);
/* The same over the tokens of a mask only (structured output): allow is a
 * bitset of ceil(n_vocab / 32) words (bit i % 32 of word i / 32) with at
 * least one bit set. Visits only the allowed tokens' logits after the
 * penalties, so that a mask of a few tokens costs little, not a pass that
 * writes -inf over the rest. */
int32_t sampler_sample_masked(struct sampler *s, float *logits, int32_t n_vocab,
                              const uint32_t *allow);
/* Adds a token to the penalty window (prompt tokens too, if wanted). */
void sampler_accept(struct sampler *s, int32_t token);
/* Forgets the window and re-seeds the RNG with the original seed. */
void sampler_reset(struct sampler *s);

#endif
