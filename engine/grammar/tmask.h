/* tmask: which tokens of a vocabulary may come next under a grammar (jsg).
 *
 * struct tmask_vocab is built once per tokenizer: every usable token's
 * bytes in a byte trie laid out in depth-first order, so that one pass over
 * the trie against a matcher state can skip a whole subtree at the first
 * byte the state rejects. Control and unused tokens are left out (they may
 * never appear inside JSON); end-of-generation tokens are allowed only when
 * the value is complete. A second trie holds the tokens that can leave a
 * JSON string (quote, backslash, control bytes, partial UTF-8), so inside a
 * plain string the mask is a precomputed set plus a walk over that small
 * trie. A vocabulary is read-only after it is built except for its walk
 * scratch: one thread at a time computes masks with it.
 *
 * struct tmask is one request's constrained decoding: the matcher state
 * after the tokens so far, and a cache of the masks of states already seen
 * (a string's inside, an array's next item recur step after step). */
#ifndef TERN_TMASK_H
#define TERN_TMASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jsg.h"

struct tok;
struct tmask_vocab;
struct tmask;

/* From a tokenizer. NULL with err filled (out of memory). */
struct tmask_vocab *tmask_vocab_new(const struct tok *t, char *err, size_t errlen);
/* From explicit token texts (tests): texts[i][0..lens[i]); usable[i] false
 * leaves token i out; eog[i] marks end-of-generation tokens. */
struct tmask_vocab *tmask_vocab_from(int32_t n_vocab, const char *const *texts,
                                     const size_t *lens, const bool *usable, const bool *eog,
                                     char *err, size_t errlen);
void tmask_vocab_free(struct tmask_vocab *v);
int32_t tmask_vocab_size(const struct tmask_vocab *v);
int32_t tmask_trie_nodes(const struct tmask_vocab *v);
/* End-of-generation tokens in the vocabulary. */
int32_t tmask_n_eog(const struct tmask_vocab *v);

/* Borrows g and v (they must outlive it). NULL when out of memory. */
struct tmask *tmask_new(const struct jsg *g, struct tmask_vocab *v);
void tmask_free(struct tmask *m);

/* The tokens allowed next, as a bitset of ceil(n_vocab / 32) words (bit
 * id % 32 of word id / 32), owned by m and valid until the next call;
 * *n_allowed gets their count (0: the grammar cannot go on in this
 * vocabulary). NULL when out of memory. */
const uint32_t *tmask_compute(struct tmask *m, int32_t *n_allowed);
/* Advances the state by token. Returns 0, or -1 when the token is not
 * allowed (the state is then unchanged). */
int tmask_accept(struct tmask *m, int32_t token);
/* True when the text so far is one whole JSON value. */
bool tmask_complete(const struct tmask *m);
/* Cache hits and misses so far (benchmarks). */
void tmask_cache_stats(const struct tmask *m, uint64_t *hits, uint64_t *misses);

/* Sets logits[i] = -INFINITY for every token the mask leaves out. */
void tmask_apply(const uint32_t *allow, float *logits, int32_t n_vocab);

#endif
