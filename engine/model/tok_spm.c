/* tok_spm: SentencePiece-style ("llama") tokenization, the reference
 * engine's algorithm: split into UTF-8 characters, repeatedly merge the
 * adjacent pair whose concatenation is the highest-scoring vocabulary token
 * (ties: leftmost), then emit each final piece as its token or, when it is
 * not one, as byte-fallback tokens <0xNN>. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_impl.h"

struct spm_sym {
    int prev, next;
    const char *text;
    size_t n;
};

struct spm_bigram {
    int left, right;
    float score;
    size_t size;
};

struct spm_heap {
    struct spm_bigram *v;
    size_t n, cap;
};

/* a ranks above b: higher score, then smaller left index. */
static bool bigram_above(const struct spm_bigram *a, const struct spm_bigram *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int heap_push(struct spm_heap *h, struct spm_bigram b)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        struct spm_bigram *v = realloc(h->v, cap * sizeof *v);
        if (!v) return -1;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bigram_above(&b, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = b;
    return 0;
}

static struct spm_bigram heap_pop(struct spm_heap *h)
{
    struct spm_bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && bigram_above(&h->v[c + 1], &h->v[c])) c++;
        if (!bigram_above(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

static int try_add_bigram(const struct tok *t, const struct spm_sym *syms, struct spm_heap *h,
                          int left, int right)
{
    if (left < 0 || right < 0) return 0;
    size_t n = syms[left].n + syms[right].n;
    int32_t id = tok_find(t, syms[left].text, n);
    if (id < 0) return 0;
    struct spm_bigram b = {left, right, t->score[id], n};
    return heap_push(h, b);
}

static int32_t byte_token(const struct tok *t, unsigned char c)
{
    char buf[8];
    snprintf(buf, sizeof buf, "<0x%02X>", c);
    int32_t id = tok_find(t, buf, 6);
    if (id < 0) id = tok_find(t, (const char *)&c, 1);
    return id >= 0 ? id : t->unk;
}

static int emit_piece(const struct tok *t, const struct spm_sym *s, struct tok_ids *out)
{
    int32_t id = tok_find(t, s->text, s->n);
    if (id >= 0) return tok_ids_push(out, id);
    for (size_t j = 0; j < s->n; j++) {
        int32_t b = byte_token(t, (unsigned char)s->text[j]);
        if (b >= 0 && tok_ids_push(out, b)) return -1;
    }
    return 0;
}

int tok_spm_encode(const struct tok *t, const char *text, size_t len, struct tok_ids *out)
{
    if (len == 0) return 0;
    int rc = -1;
    struct spm_heap h = {0};
    struct spm_sym *syms = malloc(len * sizeof *syms);
    if (!syms) return -1;
    int n = 0;
    for (size_t off = 0; off < len; n++) {
        size_t cl = tok_utf8_len((unsigned char)text[off]);
        if (cl > len - off) cl = len - off;
        syms[n] = (struct spm_sym){n - 1, off + cl == len ? -1 : n + 1, text + off, cl};
        off += cl;
    }
    for (int i = 1; i < n; i++)
        if (try_add_bigram(t, syms, &h, i - 1, i)) goto fail;

    /* Bounded by the number of characters: each pop merges two symbols or
     * discards a stale pair. */
    while (h.n) {
        struct spm_bigram b = heap_pop(&h);
        struct spm_sym *l = &syms[b.left], *r = &syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) syms[r->next].prev = b.left;
        if (try_add_bigram(t, syms, &h, l->prev, b.left)) goto fail;
        if (try_add_bigram(t, syms, &h, b.left, l->next)) goto fail;
    }
    for (int i = 0; i != -1; i = syms[i].next)
        if (emit_piece(t, &syms[i], out)) goto fail;
    rc = 0;
fail:
    free(h.v);
    free(syms);
    return rc;
}
