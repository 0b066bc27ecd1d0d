/* tok_decode: ids to text (whole sequences, single tokens) and the
 * streaming detokenizer that only ever emits valid UTF-8. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok.h"
#include "tok_impl.h"

static size_t copy_out(const char *s, size_t n, char *out, size_t cap)
{
    if (n > cap) n = cap;
    memcpy(out, s, n);
    return n;
}

size_t tok_decode_token(const struct tok *t, int32_t id, char *out, size_t cap)
{
    if (!tok_valid_id(t, id)) return 0;
    return copy_out(t->dec_pool + t->dec_off[id], t->dec_len[id], out, cap);
}

size_t tok_decode_token_special(const struct tok *t, int32_t id, char *out, size_t cap)
{
    if (!tok_valid_id(t, id)) return 0;
    if (t->attr[id] & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL))
        return copy_out(t->pool + t->off[id], t->len[id], out, cap);
    return tok_decode_token(t, id, out, cap);
}

size_t tok_max_piece(const struct tok *t)
{
    return t->max_piece;
}

/* One token's bytes (pointer into the tables); strips one leading space when asked. */
static const char *piece_of(const struct tok *t, int32_t id, bool special, bool strip, size_t *n)
{
    const char *s;
    if (!tok_valid_id(t, id)) {
        *n = 0;
        return "";
    }
    if (special && (t->attr[id] & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL))) {
        s = t->pool + t->off[id];
        *n = t->len[id];
    } else {
        s = t->dec_pool + t->dec_off[id];
        *n = t->dec_len[id];
    }
    if (strip && *n && s[0] == ' ') {
        s++;
        (*n)--;
    }
    return s;
}

size_t tok_decode(const struct tok *t, const int32_t *ids, size_t n, bool special, char *out,
                  size_t cap)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t pn;
        const char *p = piece_of(t, ids[i], special, i == 0 && t->add_space_prefix, &pn);
        if (total < cap) memcpy(out + total, p, total + pn <= cap ? pn : cap - total);
        total += pn;
    }
    if (cap) out[total < cap ? total : cap - 1] = 0;
    return total;
}

/* --- streaming detokenizer ---------------------------------------------------------- */

void tok_stream_init(struct tok_stream *s)
{
    memset(s, 0, sizeof *s);
}

size_t tok_stream_cap(const struct tok *t)
{
    return (tok_max_piece(t) + 8) * 3 + 1;
}

/* Length of a complete valid UTF-8 sequence at p (n bytes available):
 * > 0 valid, 0 incomplete (a valid prefix), -1 invalid first byte. */
static int utf8_check(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    int k;
    uint32_t lo = 0x80, hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) k = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return -1;
    }
    for (int i = 1; i < k; i++) {
        if ((size_t)i >= n) return 0;
        if (p[i] < (i == 1 ? lo : 0x80) || p[i] > (i == 1 ? hi : 0xBF)) return -1;
    }
    return k;
}

/* Appends bytes to out (cap includes the NUL); returns false when full. */
static bool put(char *out, size_t cap, size_t *o, const void *b, size_t n)
{
    if (*o + n + 1 > cap) return false;
    memcpy(out + *o, b, n);
    *o += n;
    return true;
}

size_t tok_stream_push(const struct tok *t, struct tok_stream *s, int32_t id, char *out, size_t cap)
{
    size_t pn, o = 0;
    const char *p = piece_of(t, id, false, s->first && t->add_space_prefix, &pn);
    if (cap == 0) return 0;
    out[0] = 0;
    if (pn == 0) return 0;
    s->first = false;
    size_t n = s->n_pending + pn, i = 0;
    unsigned char *buf = malloc(n);
    if (!buf) return 0;
    memcpy(buf, s->pending, s->n_pending);
    memcpy(buf + s->n_pending, p, pn);
    s->n_pending = 0;
    /* Bounded by the token's bytes. */
    while (i < n) {
        int k = utf8_check(buf + i, n - i);
        if (k == 0) { /* incomplete at the end: hold it back */
            memcpy(s->pending, buf + i, n - i);
            s->n_pending = n - i;
            break;
        }
        bool ok = k > 0 ? put(out, cap, &o, buf + i, (size_t)k)
                        : put(out, cap, &o, "\xef\xbf\xbd", 3);
        if (!ok) break;
        i += k > 0 ? (size_t)k : 1;
    }
    out[o] = 0;
    free(buf);
    return o;
}

size_t tok_stream_flush(struct tok_stream *s, char *out, size_t cap)
{
    size_t o = 0;
    if (cap == 0) return 0;
    if (s->n_pending) put(out, cap, &o, "\xef\xbf\xbd", 3);
    s->n_pending = 0;
    out[o] = 0;
    return o;
}

