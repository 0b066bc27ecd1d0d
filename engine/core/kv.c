/* kv: paged KV block manager (block tables, ref counts, prefix reuse by hash
 * chain, LRU eviction of cached blocks). See kv.h. */
#include "kv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* Chain hash of a block given its predecessor's hash; never 0. */
static uint64_t block_hash(uint64_t prev, const int32_t *tok, int32_t n)
{
    uint64_t h = mix64(prev ^ 0x9e3779b97f4a7c15ULL);
    for (int32_t i = 0; i < n; i++) h = mix64(h ^ (uint32_t)tok[i]) + 0x632be59bd9b4e019ULL;
    return h ? h : 1;
}

int kv_init(struct kv *kv, int32_t n_blocks, int32_t block_tokens, char *err, size_t errlen)
{
    memset(kv, 0, sizeof *kv);
    if (n_blocks <= 0 || block_tokens <= 0) {
        snprintf(err, errlen, "kv: invalid pool (%d blocks of %d tokens)", n_blocks, block_tokens);
        return -1;
    }
    kv->n_blocks = n_blocks;
    kv->block_tokens = block_tokens;
    kv->n_hash = 1;
    while (kv->n_hash < 2 * n_blocks) kv->n_hash <<= 1;
    kv->blocks = calloc((size_t)n_blocks, sizeof *kv->blocks);
    kv->tokens = malloc((size_t)n_blocks * (size_t)block_tokens * sizeof *kv->tokens);
    kv->htab = malloc((size_t)kv->n_hash * sizeof *kv->htab);
    if (!kv->blocks || !kv->tokens || !kv->htab) {
        snprintf(err, errlen, "kv: out of memory for %d blocks", n_blocks);
        kv_free(kv);
        return -1;
    }
    for (int32_t i = 0; i < kv->n_hash; i++) kv->htab[i] = -1;
    for (int32_t i = 0; i < n_blocks; i++) {
        kv->blocks[i].next_free = i + 1 < n_blocks ? i + 1 : -1;
        kv->blocks[i].lru_prev = kv->blocks[i].lru_next = kv->blocks[i].hnext = -1;
    }
    kv->free_head = 0;
    kv->lru_head = kv->lru_tail = -1;
    kv->n_free = n_blocks;
    return 0;
}

void kv_free(struct kv *kv)
{
    free(kv->blocks);
    free(kv->tokens);
    free(kv->htab);
    memset(kv, 0, sizeof *kv);
}

/* ---- LRU list of cached blocks and hash table ---------------------------------- */

static void lru_unlink(struct kv *kv, int32_t b)
{
    struct kv_block *k = &kv->blocks[b];
    if (k->lru_prev >= 0) kv->blocks[k->lru_prev].lru_next = k->lru_next;
    else kv->lru_head = k->lru_next;
    if (k->lru_next >= 0) kv->blocks[k->lru_next].lru_prev = k->lru_prev;
    else kv->lru_tail = k->lru_prev;
    k->lru_prev = k->lru_next = -1;
}

static void lru_push(struct kv *kv, int32_t b)
{
    struct kv_block *k = &kv->blocks[b];
    k->lru_prev = kv->lru_tail;
    k->lru_next = -1;
    if (kv->lru_tail >= 0) kv->blocks[kv->lru_tail].lru_next = b;
    else kv->lru_head = b;
    kv->lru_tail = b;
}

static int32_t hash_find(const struct kv *kv, uint64_t h, const int32_t *tok)
{
    for (int32_t b = kv->htab[h & (uint64_t)(kv->n_hash - 1)]; b >= 0; b = kv->blocks[b].hnext) {
        const int32_t *bt = kv->tokens + (size_t)b * (size_t)kv->block_tokens;
        if (kv->blocks[b].hash == h && memcmp(bt, tok, (size_t)kv->block_tokens * sizeof *tok) == 0)
            return b;
    }
    return -1;
}

static void hash_remove(struct kv *kv, int32_t b)
{
    int32_t *p = &kv->htab[kv->blocks[b].hash & (uint64_t)(kv->n_hash - 1)];
    while (*p >= 0 && *p != b) p = &kv->blocks[*p].hnext;
    if (*p == b) *p = kv->blocks[b].hnext;
    kv->blocks[b].hnext = -1;
    kv->blocks[b].hashed = false;
}

/* ---- block lifecycle ------------------------------------------------------------- */

/* A block for new tokens: the free list first, else evict the LRU cached one. */
static int32_t block_take(struct kv *kv)
{
    int32_t b = kv->free_head;
    if (b >= 0) {
        kv->free_head = kv->blocks[b].next_free;
        kv->n_free--;
    } else {
        b = kv->lru_head;
        if (b < 0) return -1;
        lru_unlink(kv, b);
        hash_remove(kv, b);
        kv->n_cached--;
        kv->evictions++;
    }
    kv->blocks[b].ref = 1;
    kv->blocks[b].next_free = -1;
    kv->n_used++;
    return b;
}

static void block_release(struct kv *kv, int32_t b)
{
    struct kv_block *k = &kv->blocks[b];
    if (--k->ref > 0) return;
    kv->n_used--;
    if (k->hashed) {
        lru_push(kv, b);
        kv->n_cached++;
    } else {
        k->next_free = kv->free_head;
        kv->free_head = b;
        kv->n_free++;
    }
}

/* Shares a registered block: a cached one leaves the LRU list. */
static void block_share(struct kv *kv, int32_t b)
{
    if (kv->blocks[b].ref++ == 0) {
        lru_unlink(kv, b);
        kv->n_cached--;
        kv->n_used++;
    }
}

/* ---- sequences ------------------------------------------------------------------- */

void kv_seq_init(struct kv_seq *s)
{
    memset(s, 0, sizeof *s);
}

void kv_seq_free(struct kv *kv, struct kv_seq *s)
{
    /* Release the tail first so that a prefix's later blocks are evicted
     * before its earlier ones (LRU order = reverse of usefulness). */
    for (int32_t i = s->n_blocks - 1; i >= 0; i--) block_release(kv, s->blocks[i]);
    free(s->blocks);
    kv_seq_init(s);
}

static int seq_grow(struct kv_seq *s, int32_t need)
{
    if (need <= s->cap) return 0;
    int32_t cap = s->cap ? s->cap : 8;
    while (cap < need) cap *= 2;
    int32_t *nb = realloc(s->blocks, (size_t)cap * sizeof *nb);
    if (!nb) return -1;
    s->blocks = nb;
    s->cap = cap;
    return 0;
}

/* The whole blocks of tokens already in the index, chained from the start:
 * their ids into blocks (NULL: not wanted), how many of them no sequence
 * holds into *n_unheld; returns the tokens they cover. */
static int32_t prefix_walk(const struct kv *kv, const int32_t *tokens, int32_t max_tokens,
                           int32_t *blocks, int32_t *n_unheld)
{
    uint64_t h = 0;
    int32_t n = 0, bt = kv->block_tokens, unheld = 0;
    while (n + bt <= max_tokens) {
        h = block_hash(h, tokens + n, bt);
        int32_t b = hash_find(kv, h, tokens + n);
        if (b < 0) break;
        if (blocks) blocks[n / bt] = b;
        if (kv->blocks[b].ref == 0) unheld++;
        n += bt;
    }
    if (n_unheld) *n_unheld = unheld;
    return n;
}

int32_t kv_peek_match(const struct kv *kv, const int32_t *tokens, int32_t max_tokens,
                      int32_t *n_cached_blocks)
{
    return prefix_walk(kv, tokens, max_tokens, NULL, n_cached_blocks);
}

int32_t kv_seq_match(struct kv *kv, struct kv_seq *s, const int32_t *tokens, int32_t n_tokens,
                     int32_t max_tokens)
{
    int32_t bt = kv->block_tokens, n = 0;
    if (seq_grow(s, kv_blocks_for(kv, n_tokens > 0 ? n_tokens : 1)) != 0) return -1;
    uint64_t h = 0;
    while (n + bt <= max_tokens) {
        uint64_t hn = block_hash(h, tokens + n, bt);
        int32_t b = hash_find(kv, hn, tokens + n);
        if (b < 0) break;
        block_share(kv, b);
        s->blocks[s->n_blocks++] = b;
        h = hn;
        n += bt;
    }
    s->n_hashed = s->n_blocks;
    s->last_hash = h;
    kv->query_tokens += (uint64_t)(max_tokens > 0 ? max_tokens : 0);
    kv->hit_tokens += (uint64_t)n;
    return n;
}

int kv_seq_reserve(struct kv *kv, struct kv_seq *s, int64_t n_tokens)
{
    int32_t need = kv_blocks_for(kv, n_tokens);
    if (need <= s->n_blocks) return 0;
    if (need - s->n_blocks > kv_available(kv) || seq_grow(s, need) != 0) return -1;
    while (s->n_blocks < need) s->blocks[s->n_blocks++] = block_take(kv);
    return 0;
}

void kv_seq_trim(struct kv *kv, struct kv_seq *s, int64_t n_tokens)
{
    int32_t keep = kv_blocks_for(kv, n_tokens);
    if (keep < s->n_hashed) keep = s->n_hashed; /* registered blocks stay */
    while (s->n_blocks > keep) block_release(kv, s->blocks[--s->n_blocks]);
}

void kv_seq_commit(struct kv *kv, struct kv_seq *s, const int32_t *tokens, int32_t n_computed)
{
    int32_t bt = kv->block_tokens;
    while (s->n_hashed < s->n_blocks && (s->n_hashed + 1) * bt <= n_computed) {
        int32_t i = s->n_hashed, b = s->blocks[i];
        const int32_t *tk = tokens + (size_t)i * (size_t)bt;
        uint64_t h = block_hash(s->last_hash, tk, bt);
        /* Another sequence may have registered the same prefix meanwhile:
         * keep that one; this block stays private and is freed on release. */
        if (!kv->blocks[b].hashed && hash_find(kv, h, tk) < 0) {
            struct kv_block *k = &kv->blocks[b];
            k->hash = h;
            k->hashed = true;
            memcpy(kv->tokens + (size_t)b * (size_t)bt, tk, (size_t)bt * sizeof *tk);
            int32_t *head = &kv->htab[h & (uint64_t)(kv->n_hash - 1)];
            k->hnext = *head;
            *head = b;
        }
        s->last_hash = h;
        s->n_hashed++;
    }
}

int32_t kv_prefix_blocks(const struct kv *kv, const int32_t *tokens, int32_t max_tokens,
                         int32_t *blocks)
{
    return prefix_walk(kv, tokens, max_tokens, blocks, NULL);
}

static void block_register(struct kv *kv, int32_t b, uint64_t h, const int32_t *tk)
{
    struct kv_block *k = &kv->blocks[b];
    k->hash = h;
    k->hashed = true;
    memcpy(kv->tokens + (size_t)b * (size_t)kv->block_tokens, tk,
           (size_t)kv->block_tokens * sizeof *tk);
    int32_t *head = &kv->htab[h & (uint64_t)(kv->n_hash - 1)];
    k->hnext = *head;
    *head = b;
}

int kv_seq_adopt(struct kv *kv, struct kv_seq *s, const int32_t *tokens, int32_t n_blocks,
                 bool *fresh)
{
    const int32_t bt = kv->block_tokens;
    uint64_t *hs = malloc((size_t)(n_blocks > 0 ? n_blocks : 1) * sizeof *hs);
    if (!hs || seq_grow(s, n_blocks) != 0) {
        free(hs);
        return -1;
    }
    /* Share the blocks already registered first, so that taking fresh ones
     * cannot evict a later block of this same prefix. */
    int32_t missing = 0;
    uint64_t h = 0;
    for (int32_t k = 0; k < n_blocks; k++) {
        const int32_t *tk = tokens + (size_t)k * bt;
        hs[k] = h = block_hash(h, tk, bt);
        int32_t b = hash_find(kv, h, tk);
        fresh[k] = b < 0;
        s->blocks[k] = b;
        if (b >= 0) block_share(kv, b);
        else missing++;
    }
    if (missing > kv_available(kv)) {
        for (int32_t k = n_blocks - 1; k >= 0; k--)
            if (!fresh[k]) block_release(kv, s->blocks[k]);
        free(hs);
        return -1;
    }
    for (int32_t k = 0; k < n_blocks; k++)
        if (fresh[k]) {
            s->blocks[k] = block_take(kv);
            block_register(kv, s->blocks[k], hs[k], tokens + (size_t)k * bt);
        }
    s->n_blocks = s->n_hashed = n_blocks;
    s->last_hash = h;
    free(hs);
    return 0;
}

void kv_seq_unadopt(struct kv *kv, struct kv_seq *s, int32_t first)
{
    if (first < 0) first = 0;
    while (s->n_blocks > first) {
        int32_t b = s->blocks[--s->n_blocks];
        if (kv->blocks[b].ref == 1 && kv->blocks[b].hashed) hash_remove(kv, b);
        block_release(kv, b);
    }
    if (s->n_hashed > s->n_blocks) s->n_hashed = s->n_blocks;
}

int kv_check(const struct kv *kv, char *err, size_t errlen)
{
    int32_t used = 0, cached = 0, nfree = 0, nlru = 0;
    for (int32_t i = 0; i < kv->n_blocks; i++) {
        const struct kv_block *k = &kv->blocks[i];
        if (k->ref < 0) {
            snprintf(err, errlen, "kv: block %d has ref %d", i, k->ref);
            return -1;
        }
        if (k->ref > 0) used++;
        else if (k->hashed) cached++;
    }
    for (int32_t b = kv->free_head; b >= 0 && nfree <= kv->n_blocks; b = kv->blocks[b].next_free)
        nfree++;
    for (int32_t b = kv->lru_head; b >= 0 && nlru <= kv->n_blocks; b = kv->blocks[b].lru_next)
        nlru++;
    if (used != kv->n_used || cached != kv->n_cached || nlru != cached || nfree != kv->n_free ||
        used + cached + nfree != kv->n_blocks) {
        snprintf(err, errlen,
                 "kv: counters used %d/%d cached %d/%d (lru %d) free %d/%d of %d blocks",
                 used, kv->n_used, cached, kv->n_cached, nlru, nfree, kv->n_free, kv->n_blocks);
        return -1;
    }
    return 0;
}
