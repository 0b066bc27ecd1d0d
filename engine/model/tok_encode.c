/* tok_encode: text to ids as the reference engine does it: special tokens
 * are split off first (longest first; control tokens only on request), then
 * each text fragment goes to SentencePiece (with the space prefix after a
 * special) or BPE. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok.h"
#include "tok_impl.h"

/* A piece of the input: raw text [off, off+len) or one special token. */
struct frag {
    int32_t id; /* -1 for raw text */
    size_t off, len;
};

struct frags {
    struct frag *v;
    size_t n, cap;
};

static int frag_push(struct frags *f, struct frag x)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        struct frag *v = realloc(f->v, cap * sizeof *v);
        if (!v) return -1;
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n++] = x;
    return 0;
}

static bool c_isspace(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Splits one raw fragment at every occurrence of special token id. */
static int split_one(const struct tok *t, const char *text, struct frag raw, int32_t id,
                     struct frags *out)
{
    const char *s = t->pool + t->off[id];
    size_t sl = t->len[id], off = raw.off, len = raw.len;
    uint16_t a = t->attr[id];
    for (;;) {
        const char *m = len >= sl ? memmem(text + off, len, s, sl) : NULL;
        if (!m) {
            if (len && frag_push(out, (struct frag){-1, off, len})) return -1;
            return 0;
        }
        size_t mpos = (size_t)(m - text), ll = mpos - off;
        if (a & TOK_ATTR_LSTRIP)
            while (ll && c_isspace(text[off + ll - 1])) ll--;
        if (ll && frag_push(out, (struct frag){-1, off, ll})) return -1;
        if (frag_push(out, (struct frag){id, 0, 0})) return -1;
        size_t end = off + len;
        off = mpos + sl;
        len = end - off;
        if (a & TOK_ATTR_RSTRIP)
            while (len && c_isspace(text[off])) off++, len--;
    }
}

/* The reference engine's special-token partition: each special token,
 * longest first, splits every remaining raw fragment. Bounded by
 * specials × fragments memmem scans. */
static int partition(const struct tok *t, const char *text, size_t len, bool parse_special,
                     struct frags *fr)
{
    struct frags tmp = {0};
    fr->n = 0;
    if (frag_push(fr, (struct frag){-1, 0, len})) return -1;
    for (uint32_t k = 0; k < t->n_specials; k++) {
        int32_t id = t->specials[k];
        if (!parse_special && (t->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN))) continue;
        const char *s = t->pool + t->off[id];
        bool any = false;
        for (size_t i = 0; i < fr->n && !any; i++)
            any = fr->v[i].id < 0 && fr->v[i].len >= t->len[id] &&
                  memmem(text + fr->v[i].off, fr->v[i].len, s, t->len[id]);
        if (!any) continue;
        tmp.n = 0;
        for (size_t i = 0; i < fr->n; i++) {
            int rc = fr->v[i].id < 0 ? split_one(t, text, fr->v[i], id, &tmp)
                                      : frag_push(&tmp, fr->v[i]);
            if (rc) {
                free(tmp.v);
                return -1;
            }
        }
        struct frags sw = *fr;
        *fr = tmp;
        tmp = sw;
    }
    free(tmp.v);
    return 0;
}

/* Copy of s with an optional leading space and every space as U+2581. */
static char *escape_spaces(const char *s, size_t n, bool prefix, size_t *len)
{
    size_t spaces = prefix ? 1 : 0;
    for (size_t i = 0; i < n; i++) spaces += s[i] == ' ';
    char *buf = malloc(n + 2 * spaces + 4);
    if (!buf) return NULL;
    size_t o = 0;
    if (prefix) {
        memcpy(buf, "\xe2\x96\x81", 3);
        o = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(buf + o, "\xe2\x96\x81", 3);
            o += 3;
        } else {
            buf[o++] = s[i];
        }
    }
    *len = o;
    return buf;
}

/* SentencePiece fragment: optional leading space, spaces escaped. */
static int encode_spm_frag(const struct tok *t, const char *s, size_t n, bool prefix,
                           struct tok_ids *out)
{
    size_t len;
    char *buf = escape_spaces(s, n, prefix, &len);
    if (!buf) return -1;
    int rc = tok_spm_encode(t, buf, len, out);
    free(buf);
    return rc;
}

/* BPE fragment; SentencePiece-style BPE (Gemma 4) escapes spaces first. */
static int bpe_frag(const struct tok *t, const char *s, size_t n, struct tok_ids *out, char *err,
                    size_t errlen)
{
    if (t->byte_level) return tok_bpe_encode(t, s, n, out, err, errlen);
    size_t len;
    char *buf = escape_spaces(s, n, false, &len);
    if (!buf) {
        snprintf(err, errlen, "tokenizer: out of memory encoding %zu bytes", n);
        return -1;
    }
    int rc = tok_bpe_encode(t, buf, len, out, err, errlen);
    free(buf);
    return rc;
}

int64_t tok_encode(const struct tok *t, const char *text, size_t len, unsigned flags,
                   int32_t *ids, int64_t cap, char *err, size_t errlen)
{
    struct tok_ids out = {0};
    struct frags fr = {0};
    int64_t rc = -1;
    bool add = flags & TOK_ADD_BOS;
    if (add && t->add_bos && t->bos >= 0 && tok_ids_push(&out, t->bos)) goto oom;
    if (len && partition(t, text, len, flags & TOK_PARSE_SPECIAL, &fr)) goto oom;
    bool prev_special = true; /* SPM: a space prefix starts the text and follows specials */
    for (size_t i = 0; i < fr.n; i++) {
        const struct frag *f = &fr.v[i];
        if (f->id >= 0) {
            if (tok_ids_push(&out, f->id)) goto oom;
            prev_special = true;
        } else if (t->type == TOK_SPM) {
            if (encode_spm_frag(t, text + f->off, f->len, t->add_space_prefix && prev_special, &out))
                goto oom;
            prev_special = false;
        } else if (bpe_frag(t, text + f->off, f->len, &out, err, errlen)) {
            goto fail;
        }
    }
    if (add && t->add_eos && t->eos >= 0 && tok_ids_push(&out, t->eos)) goto oom;
    for (size_t i = 0; i < out.n && (int64_t)i < cap; i++) ids[i] = out.v[i];
    rc = (int64_t)out.n;
    goto fail;
oom:
    snprintf(err, errlen, "tokenizer: out of memory encoding %zu bytes", len);
fail:
    free(out.v);
    free(fr.v);
    return rc;
}

