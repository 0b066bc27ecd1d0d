/* kv: the paged KV cache manager. The backend owns the storage of a pool of
 * fixed-size blocks; this module decides which blocks each sequence uses:
 * per-sequence block tables, reference counts, and prefix reuse.
 *
 * Prefix reuse: a full block is identified by a hash chain over its tokens
 * (h_i = H(h_{i-1}, tokens of block i)), so equal hashes mean equal whole
 * prefixes. Full blocks are registered once computed; a new sequence whose
 * prompt starts with registered blocks shares them (ref count) and skips
 * their prefill. A block whose ref count drops to 0 stays registered and
 * reusable ("cached") until it is evicted, least recently used first, when
 * a fresh block is needed. Not thread-safe: the engine thread owns it. */
#ifndef TERN_KV_H
#define TERN_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kv_block {
    int32_t ref;               /* sequences using it */
    bool hashed;               /* registered in the prefix table */
    uint64_t hash;             /* chain hash of the prefix ending with this block */
    int32_t lru_prev, lru_next;/* cached (ref 0, hashed) list; -1 ends */
    int32_t next_free;         /* free list link */
    int32_t hnext;             /* hash bucket chain */
};

struct kv {
    int32_t n_blocks;
    int32_t block_tokens;
    struct kv_block *blocks;   /* [n_blocks] */
    int32_t *tokens;           /* [n_blocks * block_tokens] tokens of hashed blocks (verify) */
    int32_t *htab;             /* [n_hash] bucket heads */
    int32_t n_hash;
    int32_t free_head;
    int32_t lru_head, lru_tail;/* head = least recently used */
    int32_t n_free, n_cached, n_used;
    uint64_t evictions;
    uint64_t query_tokens, hit_tokens;
};

/* A sequence's block table. */
struct kv_seq {
    int32_t *blocks;
    int32_t n_blocks, cap;
    int32_t n_hashed;          /* leading blocks already registered / matched */
    uint64_t last_hash;        /* chain hash of block n_hashed-1 (0 before any) */
};

int kv_init(struct kv *kv, int32_t n_blocks, int32_t block_tokens, char *err, size_t errlen);
void kv_free(struct kv *kv);

/* Blocks that can be handed out now: free + cached (evictable). */
static inline int32_t kv_available(const struct kv *kv) { return kv->n_free + kv->n_cached; }
/* Blocks needed to hold n tokens. */
static inline int32_t kv_blocks_for(const struct kv *kv, int64_t n)
{
    return (int32_t)((n + kv->block_tokens - 1) / kv->block_tokens);
}

void kv_seq_init(struct kv_seq *s);
/* Releases every block of s (they become free or cached) and frees the table. */
void kv_seq_free(struct kv *kv, struct kv_seq *s);

/* Prefix lookup for a sequence with no blocks yet: shares the longest run of
 * registered blocks matching tokens[0 .. max_tokens) (whole blocks only) and
 * returns the number of tokens covered (a multiple of block_tokens), or -1
 * when the table cannot grow. Counts query/hit tokens for the hit rate. */
int32_t kv_seq_match(struct kv *kv, struct kv_seq *s, const int32_t *tokens, int32_t n_tokens,
                     int32_t max_tokens);
/* Number of tokens kv_seq_match would reuse, without taking anything;
 * *n_cached_blocks: how many of those blocks are cached (ref 0). */
int32_t kv_peek_match(const struct kv *kv, const int32_t *tokens, int32_t max_tokens,
                      int32_t *n_cached_blocks);

/* Grows s to cover n_tokens positions with fresh blocks (evicting cached
 * ones LRU first). Returns 0, or -1 when not enough blocks (s unchanged). */
int kv_seq_reserve(struct kv *kv, struct kv_seq *s, int64_t n_tokens);

/* Shrinks s to the blocks covering n_tokens positions; the blocks after
 * (never registered: they held uncomputed positions) go back to the pool. */
void kv_seq_trim(struct kv *kv, struct kv_seq *s, int64_t n_tokens);

/* Registers the full blocks of s whose tokens (tokens[0 .. n_computed)) are
 * now all computed, so that other sequences can reuse them. */
void kv_seq_commit(struct kv *kv, struct kv_seq *s, const int32_t *tokens, int32_t n_computed);

/* The registered blocks holding the longest whole-block prefix of
 * tokens[0 .. max_tokens): their ids go to blocks[] (room for max_tokens /
 * block_tokens); returns the tokens they cover. Changes nothing (the disk
 * cache saves them). */
int32_t kv_prefix_blocks(const struct kv *kv, const int32_t *tokens, int32_t max_tokens,
                         int32_t *blocks);

/* Disk restore: s (no blocks yet) takes the n_blocks whole blocks of
 * tokens[0 ..) as registered prefix blocks: those already registered are
 * shared (fresh[k] = false), the others are taken from the pool (free ones
 * first, then LRU eviction) and registered (fresh[k] = true: the caller
 * writes their K/V before the next step). kv_seq_free(kv, s) then leaves
 * them cached for the request that wants them. Returns 0, or -1 when the
 * pool cannot supply them (nothing taken). */
int kv_seq_adopt(struct kv *kv, struct kv_seq *s, const int32_t *tokens, int32_t n_blocks,
                 bool *fresh);

/* Self-check of the counters and lists; returns 0 or -1 with err. */
/* Undoes a restore from block first on (its K/V could not be written):
 * s's blocks first .. are released, and those only s held leave the
 * prefix index, so no later match reads them; the blocks after first
 * chain from it and go too. s is then freed by the caller. */
void kv_seq_unadopt(struct kv *kv, struct kv_seq *s, int32_t first);
int kv_check(const struct kv *kv, char *err, size_t errlen);

#endif
