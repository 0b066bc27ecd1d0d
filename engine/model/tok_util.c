/* tok_util: the tokenizer's small shared pieces: lenient UTF-8 decoding as
 * the reference engine does it, growable id lists, and the open-addressing
 * hash tables of vocabulary texts and merge pairs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok.h"
#include "tok_impl.h"

uint32_t tok_utf8_next(const unsigned char *s, size_t n, size_t *off)
{
    size_t o = *off;
    unsigned char c = s[o];
    uint32_t cp;
    size_t k;
    if (c < 0x80) {
        *off = o + 1;
        return c;
    }
    if (!(c & 0x40)) goto bad;
    if (!(c & 0x20)) { k = 2; cp = c & 0x1f; }
    else if (!(c & 0x10)) { k = 3; cp = c & 0x0f; }
    else if (!(c & 0x08)) { k = 4; cp = c & 0x07; }
    else goto bad;
    if (o + k - 1 >= n) goto bad;
    for (size_t i = 1; i < k; i++) {
        if ((s[o + i] & 0xc0) != 0x80) goto bad;
        cp = (cp << 6) | (s[o + i] & 0x3f);
    }
    *off = o + k;
    return cp > 0x10FFFF ? 0xFFFD : cp;
bad:
    *off = o + 1;
    return 0xFFFD;
}

size_t tok_utf8_put(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xc0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xe0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (unsigned char)(0xf0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

int tok_ids_push(struct tok_ids *o, int32_t id)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 256;
        int32_t *v = realloc(o->v, cap * sizeof *v);
        if (!v) return -1;
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = id;
    return 0;
}

uint64_t tok_hash_bytes(const char *s, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

int tok_hash_init(struct tok_hash *h, size_t n)
{
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    h->slots = malloc(cap * sizeof *h->slots);
    if (!h->slots) return -1;
    memset(h->slots, 0xff, cap * sizeof *h->slots);
    h->mask = cap - 1;
    return 0;
}

int32_t tok_find(const struct tok *t, const char *s, size_t n)
{
    uint64_t h = tok_hash_bytes(s, n, TOK_HASH_SEED);
    uint32_t tag = (uint32_t)(h >> 32);
    /* Bounded by the probe length (load factor <= 1/2). */
    for (size_t i = h & t->vocab.mask;; i = (i + 1) & t->vocab.mask) {
        struct tok_slot sl = t->vocab.slots[i];
        if (sl.id < 0) return -1;
        if (sl.tag == tag && t->len[sl.id] == n && memcmp(t->pool + t->off[sl.id], s, n) == 0)
            return sl.id;
    }
}

/* Inserts id; a later token with the same text replaces an earlier one. */
void tok_vocab_insert(struct tok *t, int32_t id)
{
    const char *s = t->pool + t->off[id];
    size_t n = t->len[id];
    uint64_t h = tok_hash_bytes(s, n, TOK_HASH_SEED);
    for (size_t i = h & t->vocab.mask;; i = (i + 1) & t->vocab.mask) {
        int32_t o = t->vocab.slots[i].id;
        if (o < 0 || (t->len[o] == n && memcmp(t->pool + t->off[o], s, n) == 0)) {
            t->vocab.slots[i] = (struct tok_slot){(uint32_t)(h >> 32), id};
            return;
        }
    }
}

/* Merge "left right" hashes as its whole text, so a lookup hashes left, ' ', right. */
int32_t tok_merge_rank(const struct tok *t, const char *l, size_t ln, const char *r, size_t rn)
{
    uint64_t h = tok_hash_bytes(r, rn, tok_hash_bytes(" ", 1, tok_hash_bytes(l, ln, TOK_HASH_SEED)));
    uint32_t tag = (uint32_t)(h >> 32);
    for (size_t i = h & t->merges.mask;; i = (i + 1) & t->merges.mask) {
        struct tok_slot sl = t->merges.slots[i];
        int32_t m = sl.id;
        if (m < 0) return -1;
        if (sl.tag != tag) continue;
        const char *s = t->mpool + t->moff[m];
        if (t->msplit[m] == ln && t->mlen[m] == ln + 1 + rn && memcmp(s, l, ln) == 0 &&
            memcmp(s + ln + 1, r, rn) == 0)
            return m;
    }
}

static bool merge_same(const struct tok *t, int32_t a, int32_t b)
{
    return t->msplit[a] == t->msplit[b] && t->mlen[a] == t->mlen[b] &&
           memcmp(t->mpool + t->moff[a], t->mpool + t->moff[b], t->mlen[a]) == 0;
}

/* First occurrence keeps its rank, as in the reference. */
void tok_merge_insert(struct tok *t, int32_t m)
{
    const char *s = t->mpool + t->moff[m];
    uint64_t h = tok_hash_bytes(s, t->mlen[m], TOK_HASH_SEED);
    for (size_t i = h & t->merges.mask;; i = (i + 1) & t->merges.mask) {
        int32_t o = t->merges.slots[i].id;
        if (o < 0) {
            t->merges.slots[i] = (struct tok_slot){(uint32_t)(h >> 32), m};
            return;
        }
        if (merge_same(t, o, m)) return;
    }
}

