/* tmask: token masks from a jsg matcher state (tmask.h). */
#include "tmask.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok.h"

#define CACHE_SLOTS 64   /* masks kept per request (each n_vocab / 8 bytes) */

/* A byte trie in depth-first order: node i's subtree is [i, end[i]). */
struct trie {
    int32_t n;
    uint8_t *byte;
    uint16_t *depth;     /* 1 for a token's first byte */
    int32_t *end;
    int32_t *tok;        /* first token ending here, -1 none (chained by next) */
};

struct tmask_vocab {
    int32_t n_vocab, words;
    char *bytes;         /* every token's text, concatenated */
    int64_t *off;        /* [n_vocab + 1] */
    bool *usable, *eog;  /* [n_vocab] */
    int32_t *next;       /* [n_vocab] next token of the same trie node */
    int32_t *next2;      /* [n_vocab] the same in the string trie */
    struct trie all, str;
    uint32_t *plain;     /* tokens that keep a plain string plain */
    int32_t *plain_ids;  /* the same, by ascending character count */
    int32_t *plain_cp;   /* their character counts */
    int32_t n_plain;
    uint32_t *eog_bits;
    int32_t max_len;
    struct jsg_state *scratch; /* [max_len + 1] states along a trie path */
};

struct slot {
    uint64_t hash;
    uint8_t *key;
    size_t key_len;
    uint32_t *bits;
    int32_t n_allowed;
};

struct tmask {
    const struct jsg *g;
    struct tmask_vocab *v;
    struct jsg_state st;
    bool ended;          /* an end-of-generation token was accepted */
    struct slot slots[CACHE_SLOTS];
    int32_t n_slots, evict;
    uint8_t key[1 + JSG_ALTS * (1 + JSG_DEPTH * sizeof(struct jsg_frame))];
    uint64_t hits, misses;
};

/* ---- vocabulary ----------------------------------------------------------------- */

struct entry {
    const char *s;
    int32_t len, id;
};

static int cmp_entry(const void *x, const void *y)
{
    const struct entry *a = x, *b = y;
    int32_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->s, b->s, (size_t)n);
    if (c) return c;
    if (a->len != b->len) return (a->len > b->len) - (a->len < b->len);
    return (a->id > b->id) - (a->id < b->id);
}

static void trie_free(struct trie *t)
{
    free(t->byte);
    free(t->depth);
    free(t->end);
    free(t->tok);
    memset(t, 0, sizeof *t);
}

/* Builds the trie of e[0..n) (sorted); next chains tokens of one node. */
static int trie_build(struct trie *t, const struct entry *e, int32_t n, int32_t max_len,
                      int32_t *next)
{
    int64_t cap = 0;
    for (int32_t i = 0; i < n; i++) cap += e[i].len;
    if (cap > INT32_MAX / 2) return -1;
    size_t c = (size_t)(cap ? cap : 1);
    t->byte = malloc(c);
    t->depth = malloc(c * sizeof *t->depth);
    t->end = malloc(c * sizeof *t->end);
    t->tok = malloc(c * sizeof *t->tok);
    int32_t *path = malloc((size_t)(max_len + 1) * sizeof *path);
    if (!t->byte || !t->depth || !t->end || !t->tok || !path) {
        free(path);
        return -1;
    }
    int32_t depth = 0; /* of the previous entry's path */
    int32_t *last_tok = NULL;
    for (int32_t i = 0; i < n; i++) {
        int32_t lcp = 0;
        if (i > 0) {
            int32_t m = e[i].len < e[i - 1].len ? e[i].len : e[i - 1].len;
            while (lcp < m && e[i].s[lcp] == e[i - 1].s[lcp]) lcp++;
        }
        for (; depth > lcp; depth--) t->end[path[depth]] = t->n; /* close the old branch */
        for (int32_t d = lcp + 1; d <= e[i].len; d++) {
            int32_t k = t->n++;
            t->byte[k] = (uint8_t)e[i].s[d - 1];
            t->depth[k] = (uint16_t)d;
            t->tok[k] = -1;
            path[d] = k;
        }
        depth = e[i].len;
        /* tokens of one node chain in id order (entries are sorted by id last) */
        int32_t node = path[depth];
        next[e[i].id] = -1;
        if (t->tok[node] < 0) t->tok[node] = e[i].id;
        else if (last_tok) *last_tok = e[i].id;
        last_tok = &next[e[i].id];
    }
    for (; depth > 0; depth--) t->end[path[depth]] = t->n;
    free(path);
    return 0;
}

/* True when the token, read inside a JSON string with nothing pending,
 * leaves it inside with nothing pending: printable ASCII but quote and
 * backslash, and whole UTF-8 sequences. */
static bool string_plain(const unsigned char *s, int32_t n)
{
    for (int32_t i = 0; i < n;) {
        unsigned b = s[i];
        if (b < 0x80) {
            if (b < 0x20 || b == '"' || b == '\\' || b == 0x7f) return false;
            i++;
            continue;
        }
        int k = b >= 0xC2 && b <= 0xDF ? 1 : b >= 0xE0 && b <= 0xEF ? 2 : b >= 0xF0 && b <= 0xF4 ? 3 : -1;
        if (k < 0 || i + k >= n) return false; /* not UTF-8, or cut off */
        for (int j = 1; j <= k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return false;
        i += k + 1;
    }
    return n > 0;
}

static int32_t popcount_words(const uint32_t *b, int32_t n)
{
    int32_t c = 0;
    for (int32_t i = 0; i < n; i++) c += __builtin_popcount(b[i]);
    return c;
}

static void set_bit(uint32_t *b, int32_t i)
{
    b[i >> 5] |= 1u << (i & 31);
}

static int32_t utf8_chars(const char *s, int32_t n)
{
    int32_t c = 0;
    for (int32_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

struct plain_entry {
    int32_t cp, id;
};

static int cmp_plain(const void *x, const void *y)
{
    const struct plain_entry *a = x, *b = y;
    if (a->cp != b->cp) return (a->cp > b->cp) - (a->cp < b->cp);
    return (a->id > b->id) - (a->id < b->id);
}

/* The plain tokens by character count, for strings with a maxLength. */
static int plain_list(struct tmask_vocab *v)
{
    int32_t n = popcount_words(v->plain, v->words);
    struct plain_entry *e = malloc((size_t)(n ? n : 1) * sizeof *e);
    v->plain_ids = malloc((size_t)(n ? n : 1) * sizeof *v->plain_ids);
    v->plain_cp = malloc((size_t)(n ? n : 1) * sizeof *v->plain_cp);
    if (!e || !v->plain_ids || !v->plain_cp) {
        free(e);
        return -1;
    }
    int32_t k = 0;
    for (int32_t i = 0; i < v->n_vocab; i++)
        if (v->plain[i >> 5] >> (i & 31) & 1u)
            e[k++] = (struct plain_entry){utf8_chars(v->bytes + v->off[i],
                                                     (int32_t)(v->off[i + 1] - v->off[i])), i};
    qsort(e, (size_t)k, sizeof *e, cmp_plain);
    for (int32_t i = 0; i < k; i++) {
        v->plain_ids[i] = e[i].id;
        v->plain_cp[i] = e[i].cp;
    }
    v->n_plain = k;
    free(e);
    return 0;
}

static int vocab_tries(struct tmask_vocab *v)
{
    struct entry *e = malloc((size_t)v->n_vocab * sizeof *e);
    if (!e) return -1;
    int32_t n = 0, n_str = 0;
    for (int32_t i = 0; i < v->n_vocab; i++) {
        int32_t len = (int32_t)(v->off[i + 1] - v->off[i]);
        if (v->usable[i] && len > 0) e[n++] = (struct entry){v->bytes + v->off[i], len, i};
    }
    qsort(e, (size_t)n, sizeof *e, cmp_entry);
    int rc = trie_build(&v->all, e, n, v->max_len, v->next);
    for (int32_t i = 0; i < n && rc == 0; i++) {
        if (string_plain((const unsigned char *)e[i].s, e[i].len)) set_bit(v->plain, e[i].id);
        else e[n_str++] = e[i]; /* still sorted */
    }
    if (rc == 0) rc = trie_build(&v->str, e, n_str, v->max_len, v->next2);
    free(e);
    return rc == 0 ? plain_list(v) : rc;
}

struct tmask_vocab *tmask_vocab_from(int32_t n_vocab, const char *const *texts,
                                     const size_t *lens, const bool *usable, const bool *eog,
                                     char *err, size_t errlen)
{
    struct tmask_vocab *v = calloc(1, sizeof *v);
    if (!v || n_vocab <= 0) goto oom;
    v->n_vocab = n_vocab;
    v->words = (n_vocab + 31) / 32;
    int64_t total = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        size_t l = lens[i] > 4096 ? 0 : lens[i]; /* no real token is longer */
        total += (int64_t)l;
        if ((int32_t)l > v->max_len) v->max_len = (int32_t)l;
    }
    v->bytes = malloc((size_t)(total ? total : 1));
    v->off = malloc((size_t)(n_vocab + 1) * sizeof *v->off);
    v->usable = calloc((size_t)n_vocab, sizeof *v->usable);
    v->eog = calloc((size_t)n_vocab, sizeof *v->eog);
    v->next = malloc((size_t)n_vocab * sizeof *v->next);
    v->next2 = malloc((size_t)n_vocab * sizeof *v->next2);
    v->plain = calloc((size_t)v->words, sizeof *v->plain);
    v->eog_bits = calloc((size_t)v->words, sizeof *v->eog_bits);
    v->scratch = malloc((size_t)(v->max_len + 1) * sizeof *v->scratch);
    if (!v->bytes || !v->off || !v->usable || !v->eog || !v->next || !v->next2 || !v->plain ||
        !v->eog_bits || !v->scratch)
        goto oom;
    int64_t o = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        size_t l = lens[i] > 4096 ? 0 : lens[i];
        v->off[i] = o;
        memcpy(v->bytes + o, texts[i], l);
        o += (int64_t)l;
        v->usable[i] = usable[i] && l > 0 && !eog[i];
        v->eog[i] = eog[i];
        if (eog[i]) set_bit(v->eog_bits, i);
    }
    v->off[n_vocab] = o;
    if (vocab_tries(v) != 0) goto oom;
    return v;
oom:
    snprintf(err, errlen, "grammar: out of memory for the token trie (%d tokens)", n_vocab);
    tmask_vocab_free(v);
    return NULL;
}

struct tmask_vocab *tmask_vocab_new(const struct tok *t, char *err, size_t errlen)
{
    int32_t n = tok_n_vocab(t);
    char **texts = calloc((size_t)(n > 0 ? n : 1), sizeof *texts);
    size_t *lens = calloc((size_t)(n > 0 ? n : 1), sizeof *lens);
    bool *usable = calloc((size_t)(n > 0 ? n : 1), sizeof *usable);
    bool *eog = calloc((size_t)(n > 0 ? n : 1), sizeof *eog);
    size_t cap = tok_max_piece(t) + 16;
    char *buf = malloc(cap);
    struct tmask_vocab *v = NULL;
    if (!texts || !lens || !usable || !eog || !buf) {
        snprintf(err, errlen, "grammar: out of memory for the token trie (%d tokens)", n);
        goto done;
    }
    for (int32_t i = 0; i < n; i++) {
        eog[i] = tok_is_eog(t, i);
        /* control, user-defined and unused tokens never stand for JSON text */
        usable[i] = !tok_is_special(t, i) && tok_token_type(t, i) != TOK_TYPE_UNUSED;
        lens[i] = usable[i] ? tok_decode_token(t, i, buf, cap) : 0;
        if (lens[i] > cap) lens[i] = 0;
        texts[i] = malloc(lens[i] + 1);
        if (!texts[i]) {
            snprintf(err, errlen, "grammar: out of memory for the token trie (%d tokens)", n);
            goto done;
        }
        memcpy(texts[i], buf, lens[i]);
    }
    v = tmask_vocab_from(n, (const char *const *)texts, lens, usable, eog, err, errlen);
done:
    for (int32_t i = 0; texts && i < n; i++) free(texts[i]);
    free(texts);
    free(lens);
    free(usable);
    free(eog);
    free(buf);
    return v;
}

void tmask_vocab_free(struct tmask_vocab *v)
{
    if (!v) return;
    trie_free(&v->all);
    trie_free(&v->str);
    free(v->bytes);
    free(v->off);
    free(v->usable);
    free(v->eog);
    free(v->next);
    free(v->next2);
    free(v->plain);
    free(v->plain_ids);
    free(v->plain_cp);
    free(v->eog_bits);
    free(v->scratch);
    free(v);
}

int32_t tmask_vocab_size(const struct tmask_vocab *v)
{
    return v->n_vocab;
}

int32_t tmask_n_eog(const struct tmask_vocab *v)
{
    return popcount_words(v->eog_bits, v->words);
}

int32_t tmask_trie_nodes(const struct tmask_vocab *v)
{
    return v->all.n;
}

/* ---- masks ------------------------------------------------------------------------ */

struct tmask *tmask_new(const struct jsg *g, struct tmask_vocab *v)
{
    struct tmask *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->g = g;
    m->v = v;
    jsg_start(g, &m->st);
    return m;
}

void tmask_free(struct tmask *m)
{
    if (!m) return;
    for (int32_t i = 0; i < m->n_slots; i++) {
        free(m->slots[i].key);
        free(m->slots[i].bits);
    }
    free(m);
}

/* One pass over the trie from state s: a node whose byte the state at its
 * parent rejects is skipped with its whole subtree. Bounded by the trie's
 * node count (~2 bytes per token); in practice by the few subtrees whose
 * first bytes the grammar allows. */
static void walk(const struct tmask_vocab *v, const struct trie *t, const int32_t *next,
                 const struct jsg *g, const struct jsg_state *s, uint32_t *bits)
{
    struct jsg_state *st = v->scratch;
    jsg_state_copy(&st[0], s);
    for (int32_t i = 0; i < t->n;) {
        int d = t->depth[i];
        if (!jsg_step(g, &st[d - 1], t->byte[i], &st[d])) {
            i = t->end[i];
            continue;
        }
        for (int32_t k = t->tok[i]; k >= 0; k = next[k]) set_bit(bits, k);
        i++;
    }
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static struct slot *slot_for(struct tmask *m, uint64_t h, size_t key_len)
{
    struct slot *s;
    if (m->n_slots < CACHE_SLOTS) {
        s = &m->slots[m->n_slots];
        s->bits = malloc((size_t)m->v->words * sizeof *s->bits);
        if (!s->bits) return NULL;
        m->n_slots++;
    } else {
        s = &m->slots[m->evict];       /* round robin: recurring states come back soon */
        m->evict = (m->evict + 1) % CACHE_SLOTS;
    }
    free(s->key);
    s->key = malloc(key_len ? key_len : 1);
    if (!s->key) {
        s->key_len = 0;
        s->hash = 0;
        return NULL;
    }
    memcpy(s->key, m->key, key_len);
    s->key_len = key_len;
    s->hash = h;
    return s;
}

const uint32_t *tmask_compute(struct tmask *m, int32_t *n_allowed)
{
    const struct tmask_vocab *v = m->v;
    size_t kl = jsg_state_key(&m->st, m->key, sizeof m->key);
    uint64_t h = fnv1a(m->key, kl) ^ (uint64_t)m->ended;
    for (int32_t i = 0; i < m->n_slots; i++) {
        struct slot *s = &m->slots[i];
        if (s->hash == h && s->key_len == kl && memcmp(s->key, m->key, kl) == 0 && !m->ended) {
            m->hits++;
            *n_allowed = s->n_allowed;
            return s->bits;
        }
    }
    m->misses++;
    struct slot *s = slot_for(m, h, kl);
    if (!s) return NULL;
    uint32_t *bits = s->bits;
    memset(bits, 0, (size_t)v->words * sizeof *bits);
    if (!m->ended) {
        if (jsg_complete(m->g, &m->st))
            for (int32_t i = 0; i < v->words; i++) bits[i] |= v->eog_bits[i];
        int32_t room = jsg_plain_string_room(m->g, &m->st);
        if (room == INT32_MAX) {
            for (int32_t i = 0; i < v->words; i++) bits[i] |= v->plain[i];
            walk(v, &v->str, v->next2, m->g, &m->st, bits);
        } else if (room >= 0) {
            for (int32_t i = 0; i < v->n_plain && v->plain_cp[i] <= room; i++)
                set_bit(bits, v->plain_ids[i]);
            walk(v, &v->str, v->next2, m->g, &m->st, bits);
        } else {
            walk(v, &v->all, v->next, m->g, &m->st, bits);
        }
    }
    s->n_allowed = popcount_words(bits, v->words);
    if (m->ended) s->hash = ~h; /* an ended state is never looked up again */
    *n_allowed = s->n_allowed;
    return bits;
}

int tmask_accept(struct tmask *m, int32_t token)
{
    const struct tmask_vocab *v = m->v;
    if (token < 0 || token >= v->n_vocab || m->ended) return -1;
    if (v->eog[token]) {
        if (!jsg_complete(m->g, &m->st)) return -1;
        m->ended = true;
        return 0;
    }
    if (!v->usable[token]) return -1;
    struct jsg_state tmp;
    jsg_state_copy(&tmp, &m->st);
    if (!jsg_feed(m->g, &tmp, v->bytes + v->off[token], (size_t)(v->off[token + 1] - v->off[token])))
        return -1;
    jsg_state_copy(&m->st, &tmp);
    return 0;
}

bool tmask_complete(const struct tmask *m)
{
    return jsg_complete(m->g, &m->st);
}

void tmask_cache_stats(const struct tmask *m, uint64_t *hits, uint64_t *misses)
{
    *hits = m->hits;
    *misses = m->misses;
}

/* Bounded by n_vocab; a word with every token allowed costs one test. */
void tmask_apply(const uint32_t *allow, float *logits, int32_t n_vocab)
{
    for (int32_t w = 0; w * 32 < n_vocab; w++) {
        uint32_t a = allow[w];
        if (a == 0xffffffffu) continue;
        int32_t lim = n_vocab - w * 32 < 32 ? n_vocab - w * 32 : 32;
        for (int32_t b = 0; b < lim; b++)
            if (!(a >> b & 1u)) logits[w * 32 + b] = -INFINITY;
    }
}
