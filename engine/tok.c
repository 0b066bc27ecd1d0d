/* tok: loads a tokenizer from GGUF metadata and encodes text the way the
 * reference engine (llama.cpp) does: special-token partitioning first, then
 * SentencePiece (tok_spm.c) or byte-level BPE (tok_bpe.c) per text fragment.
 * Also decoding and the streaming detokenizer. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tok.h"
#include "tok_impl.h"

/* --- small helpers ------------------------------------------------------------ */

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

static int hash_init(struct tok_hash *h, size_t n)
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
static void vocab_insert(struct tok *t, int32_t id)
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
static void merge_insert(struct tok *t, int32_t m)
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

/* --- loading -------------------------------------------------------------------- */

static const struct gguf_kv *str_array(const struct gguf_ctx *g, const char *key, char *err,
                                       size_t errlen)
{
    const struct gguf_kv *kv = gguf_get_arr(g, key);
    if (!kv || kv->v.arr.type != GGUF_VT_STRING || !kv->v.arr.strs) {
        snprintf(err, errlen, "%s: %s", key, kv ? "not an array of strings" : "missing");
        return NULL;
    }
    return kv;
}

static int load_tokens(struct tok *t, const struct gguf_ctx *g, char *err, size_t errlen)
{
    const char *key = "tokenizer.ggml.tokens";
    const struct gguf_kv *kv = str_array(g, key, err, errlen);
    if (!kv) return -1;
    if (kv->v.arr.n == 0 || kv->v.arr.n > INT32_MAX / 2) {
        snprintf(err, errlen, "%s: bad token count %llu", key, (unsigned long long)kv->v.arr.n);
        return -1;
    }
    size_t n = (size_t)kv->v.arr.n, bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += kv->v.arr.strs[i].len ? kv->v.arr.strs[i].len + 1 : 24;
    t->n_vocab = (int32_t)n;
    t->pool = malloc(bytes);
    t->off = malloc(n * sizeof *t->off);
    t->len = malloc(n * sizeof *t->len);
    t->score = calloc(n, sizeof *t->score);
    t->attr = malloc(n * sizeof *t->attr);
    if (!t->pool || !t->off || !t->len || !t->score || !t->attr || hash_init(&t->vocab, n)) {
        snprintf(err, errlen, "%s: out of memory for %zu tokens", key, n);
        return -1;
    }
    size_t p = 0;
    for (size_t i = 0; i < n; i++) {
        const struct gguf_str *s = &kv->v.arr.strs[i];
        t->off[i] = (uint32_t)p;
        if (s->len) {
            memcpy(t->pool + p, s->ptr, s->len);
            t->len[i] = (uint32_t)s->len;
        } else { /* the reference renames empty tokens */
            t->len[i] = (uint32_t)snprintf(t->pool + p, 24, "[EMPTY_%zu]", i);
        }
        p += t->len[i];
        t->pool[p++] = 0;
        t->attr[i] = TOK_ATTR_NORMAL;
        vocab_insert(t, (int32_t)i);
    }
    return 0;
}

static int load_scores_types(struct tok *t, const struct gguf_ctx *g, char *err, size_t errlen)
{
    const struct gguf_kv *kv = gguf_get_arr(g, "tokenizer.ggml.scores");
    if (kv) {
        if ((kv->v.arr.type != GGUF_VT_F32 && kv->v.arr.type != GGUF_VT_I32) ||
            kv->v.arr.n < (uint64_t)t->n_vocab) {
            snprintf(err, errlen, "tokenizer.ggml.scores: want %d f32/i32 values, have %llu of %s",
                     t->n_vocab, (unsigned long long)kv->v.arr.n, gguf_vtype_name(kv->v.arr.type));
            return -1;
        }
        for (int32_t i = 0; i < t->n_vocab; i++) {
            const char *d = (const char *)kv->v.arr.data + 4 * (size_t)i;
            if (kv->v.arr.type == GGUF_VT_F32) {
                memcpy(&t->score[i], d, 4);
            } else {
                int32_t v;
                memcpy(&v, d, 4);
                t->score[i] = (float)v;
            }
        }
    }
    kv = gguf_get_arr(g, "tokenizer.ggml.token_type");
    if (!kv) return 0;
    if (kv->v.arr.type != GGUF_VT_I32 || kv->v.arr.n < (uint64_t)t->n_vocab) {
        snprintf(err, errlen, "tokenizer.ggml.token_type: want %d i32 values, have %llu of %s",
                 t->n_vocab, (unsigned long long)kv->v.arr.n, gguf_vtype_name(kv->v.arr.type));
        return -1;
    }
    static const uint16_t map[7] = {TOK_ATTR_UNDEFINED, TOK_ATTR_NORMAL, TOK_ATTR_UNKNOWN,
                                    TOK_ATTR_CONTROL, TOK_ATTR_USER_DEFINED, TOK_ATTR_UNUSED,
                                    TOK_ATTR_BYTE};
    for (int32_t i = 0; i < t->n_vocab; i++) {
        int32_t v;
        memcpy(&v, (const char *)kv->v.arr.data + 4 * (size_t)i, 4);
        t->attr[i] = v >= 0 && v < 7 ? map[v] : TOK_ATTR_UNDEFINED;
    }
    return 0;
}

static int load_merges(struct tok *t, const struct gguf_ctx *g, char *err, size_t errlen)
{
    const char *key = "tokenizer.ggml.merges";
    const struct gguf_kv *kv = str_array(g, key, err, errlen);
    if (!kv) return -1;
    if (kv->v.arr.n > INT32_MAX / 2) {
        snprintf(err, errlen, "%s: bad merge count %llu", key, (unsigned long long)kv->v.arr.n);
        return -1;
    }
    size_t n = (size_t)kv->v.arr.n, bytes = 1;
    for (size_t i = 0; i < n; i++) bytes += kv->v.arr.strs[i].len + 1;
    t->n_merges = (uint32_t)n;
    t->mpool = malloc(bytes);
    t->moff = malloc((n + 1) * sizeof *t->moff);
    t->mlen = malloc((n + 1) * sizeof *t->mlen);
    t->msplit = malloc((n + 1) * sizeof *t->msplit);
    if (!t->mpool || !t->moff || !t->mlen || !t->msplit || hash_init(&t->merges, n)) {
        snprintf(err, errlen, "%s: out of memory for %zu merges", key, n);
        return -1;
    }
    size_t p = 0;
    for (size_t i = 0; i < n; i++) {
        const struct gguf_str *s = &kv->v.arr.strs[i];
        const char *sp = s->len > 1 ? memchr(s->ptr + 1, ' ', s->len - 1) : NULL;
        t->moff[i] = (uint32_t)p;
        if (sp) {
            memcpy(t->mpool + p, s->ptr, s->len);
            t->mlen[i] = (uint32_t)s->len;
            t->msplit[i] = (uint32_t)(sp - s->ptr);
        } else { /* no separator: the reference stores ("", "") */
            t->mpool[p] = ' ';
            t->mlen[i] = 1;
            t->msplit[i] = 0;
        }
        p += t->mlen[i];
        t->mpool[p++] = 0;
        merge_insert(t, (int32_t)i);
    }
    return 0;
}

static int32_t special_id(const struct tok *t, const struct gguf_ctx *g, const char *key,
                          int32_t def)
{
    uint32_t v;
    if (def >= t->n_vocab) def = -1;
    if (gguf_get_u32(g, key, &v) && v < (uint32_t)t->n_vocab) return (int32_t)v;
    return def;
}

static int32_t find_str(const struct tok *t, const char *s)
{
    return tok_find(t, s, strlen(s));
}

/* Token texts the reference treats as end-of-turn or fill-in-the-middle
 * markers (always control), and as end of generation. */
static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>",
    "<end_of_utterance>", NULL};
static const char *const fim_texts[] = {
    "<|eom_id|>", "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "\xe2\x96\x81<PRE>",
    "<|code_prefix|>", "<|prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>",
    "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", "<|fim_middle|>", "<fim-middle>",
    "<fim_middle>", "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>",
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>", "<|repo_name|>",
    "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>", NULL};
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "[e~[",
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>", "<|repo_name|>",
    "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>", NULL};

static void mark_control(struct tok *t, const char *const *texts, uint16_t extra)
{
    for (size_t i = 0; texts[i]; i++) {
        int32_t id = find_str(t, texts[i]);
        if (id >= 0) t->attr[id] |= TOK_ATTR_CONTROL | extra;
    }
}

static void load_specials(struct tok *t, const struct gguf_ctx *g)
{
    bool spm = t->type == TOK_SPM;
    /* Defaults: SPM 1/2/0; BPE 11/11 (none for ChatGLM, set by tok_bpe_init). */
    t->bos = special_id(t, g, "tokenizer.ggml.bos_token_id", spm ? 1 : t->bos);
    t->eos = special_id(t, g, "tokenizer.ggml.eos_token_id", spm ? 2 : t->eos);
    t->unk = special_id(t, g, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1);
    t->eot = special_id(t, g, "tokenizer.ggml.eot_token_id", -1);
    t->eom = special_id(t, g, "tokenizer.ggml.eom_token_id", -1);
    t->sep = special_id(t, g, "tokenizer.ggml.seperator_token_id", -1);
    t->pad = special_id(t, g, "tokenizer.ggml.padding_token_id", -1);
    t->add_bos = spm || t->add_bos; /* SPM and Llama-3 style BPE default to BOS */
    t->add_eos = false;
    t->add_space_prefix = spm;
    gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos);
    gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos);
    gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix);
    if (!t->byte_level) t->add_bos = true; /* the reference forces BOS for Gemma 4 */

    /* The first end-of-turn text present becomes EOT when metadata has none. */
    for (size_t i = 0; eot_texts[i] && t->eot < 0; i++) t->eot = find_str(t, eot_texts[i]);
    if (t->eom < 0) t->eom = find_str(t, "<|eom_id|>");
    mark_control(t, eot_texts, 0);
    mark_control(t, fim_texts, 0);
    mark_control(t, eog_texts, TOK_ATTR_EOG);
    static const char *const gpt_oss[] = {"<|channel|>", "<|message|>", "<|start|>",
                                          "<|constrain|>", NULL};
    for (size_t i = 0; gpt_oss[i]; i++) {
        int32_t id = find_str(t, gpt_oss[i]);
        if (id >= 0) t->attr[id] = TOK_ATTR_USER_DEFINED;
    }
    /* Gemma 4 (and PLaMo) have a normal </s>: it does not end generation there. */
    int32_t s_id = find_str(t, "</s>");
    if (s_id >= 0 && (find_str(t, "<|tool_response>") >= 0 || find_str(t, "<|plamo:eos|>") >= 0))
        t->attr[s_id] = TOK_ATTR_NORMAL;
    int32_t ids[3] = {t->eos, t->eot, t->eom};
    for (int i = 0; i < 3; i++)
        if (ids[i] >= 0) t->attr[ids[i]] |= TOK_ATTR_EOG;
    /* Harmony-style vocabularies: <|end|> separates messages, it does not end generation. */
    int32_t end = find_str(t, "<|end|>");
    if (end >= 0 && ((find_str(t, "<|return|>") >= 0 && find_str(t, "<|call|>") >= 0) ||
                     (find_str(t, "<|calls|>") >= 0 && find_str(t, "<|flush|>") >= 0)))
        t->attr[end] = TOK_ATTR_USER_DEFINED;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if ((t->attr[i] & TOK_ATTR_CONTROL) && strstr(t->pool + t->off[i], "unused"))
            t->attr[i] |= TOK_ATTR_UNUSED;
    t->nl = spm ? find_str(t, "<0x0A>") : find_str(t, "\xc4\x8a");
}

static int cmp_special(const void *a, const void *b, void *ud)
{
    const struct tok *t = ud;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (t->len[x] != t->len[y]) return t->len[x] > t->len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Insertion-free merge sort keeps equal-length specials in id order. */
static void sort_specials(struct tok *t)
{
    size_t n = t->n_specials;
    int32_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp) return; /* order only matters for overlapping specials */
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = cmp_special(&t->specials[j], &t->specials[i], t) < 0 ? t->specials[j++]
                                                                                 : t->specials[i++];
            while (i < mid) tmp[k++] = t->specials[i++];
            while (j < hi) tmp[k++] = t->specials[j++];
        }
        memcpy(t->specials, tmp, n * sizeof *tmp);
    }
    free(tmp);
}

static int build_specials(struct tok *t, const struct gguf_ctx *g)
{
    t->specials = malloc((size_t)t->n_vocab * sizeof *t->specials);
    if (!t->specials) return -1;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (t->attr[i] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN))
            t->specials[t->n_specials++] = i;
    sort_specials(t);
    /* Phi-3 files strip whitespace after special tokens (by model name, as the reference). */
    const char *name = gguf_get_str(g, "general.name");
    char low[128] = {0};
    for (size_t i = 0; name && name[i] && i + 1 < sizeof low; i++)
        low[i] = (char)tolower((unsigned char)name[i]);
    if (strstr(low, "phi-3") || strstr(low, "phi3")) {
        for (uint32_t i = 0; i < t->n_specials; i++) t->attr[t->specials[i]] |= TOK_ATTR_RSTRIP;
        int32_t id = find_str(t, "</s>");
        if (id >= 0) t->attr[id] |= TOK_ATTR_RSTRIP;
        static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
        for (int i = 0; i < 3; i++)
            if ((id = find_str(t, keep[i])) >= 0) t->attr[id] &= (uint16_t)~TOK_ATTR_RSTRIP;
    }
    return 0;
}

/* Renders token i for users (control/unknown → nothing) into dst; returns length. */
static size_t render(const struct tok *t, int32_t i, char *dst)
{
    const char *s = t->pool + t->off[i];
    size_t n = t->len[i], o = 0;
    uint16_t a = t->attr[i];
    if (a & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL)) return 0;
    if (a & TOK_ATTR_USER_DEFINED) {
        memcpy(dst, s, n);
        return n;
    }
    if (a & TOK_ATTR_NORMAL) {
        if (t->type == TOK_SPM || !t->byte_level) {
            for (size_t k = 0; k < n;) {
                if (k + 3 <= n && memcmp(s + k, "\xe2\x96\x81", 3) == 0) {
                    dst[o++] = ' ';
                    k += 3;
                } else {
                    dst[o++] = s[k++];
                }
            }
            return o;
        }
        for (size_t k = 0; k < n;) {
            size_t at = k;
            uint32_t cp = tok_utf8_next((const unsigned char *)s, n, &k);
            int b = tok_cp_to_byte(cp);
            if (b >= 0) {
                dst[o++] = (char)b;
            } else { /* not in the byte alphabet: keep the text as it is */
                memcpy(dst + o, s + at, k - at);
                o += k - at;
            }
        }
        return o;
    }
    if ((a & TOK_ATTR_BYTE) && n == 6 && memcmp(s, "<0x", 3) == 0) {
        dst[0] = (char)strtol((char[3]){s[3], s[4], 0}, NULL, 16);
        return 1;
    }
    return 0;
}

static int build_pieces(struct tok *t)
{
    size_t total = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) total += t->len[i];
    t->dec_pool = malloc(total + 1);
    t->dec_off = malloc((size_t)t->n_vocab * sizeof *t->dec_off);
    t->dec_len = malloc((size_t)t->n_vocab * sizeof *t->dec_len);
    if (!t->dec_pool || !t->dec_off || !t->dec_len) return -1;
    size_t p = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        t->dec_off[i] = (uint32_t)p;
        t->dec_len[i] = (uint32_t)render(t, i, t->dec_pool + p);
        p += t->dec_len[i];
    }
    return 0;
}

struct tok *tok_open(const struct gguf_ctx *g, char *err, size_t errlen)
{
    struct tok *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "tokenizer: out of memory");
        return NULL;
    }
    const char *model = gguf_get_str(g, "tokenizer.ggml.model");
    const char *pre = gguf_get_str(g, "tokenizer.ggml.pre");
    if (!model) {
        snprintf(err, errlen, "%s: tokenizer.ggml.model: missing", gguf_path(g));
        goto fail;
    }
    if (strcmp(model, "llama") == 0) {
        t->type = TOK_SPM;
    } else if (strcmp(model, "gpt2") == 0 || strcmp(model, "gemma4") == 0) {
        t->type = TOK_BPE;
        if (strcmp(model, "gemma4") == 0) pre = "gemma4"; /* as the reference: implied */
    } else {
        snprintf(err, errlen, "%s: tokenizer.ggml.model: unsupported tokenizer '%s' (tern reads "
                 "'llama', 'gpt2' and 'gemma4')", gguf_path(g), model);
        goto fail;
    }
    snprintf(t->model, sizeof t->model, "%s", model);
    snprintf(t->pre, sizeof t->pre, "%s", pre && *pre ? pre : "default");
    t->bos = t->eos = 11; /* the BPE defaults (the reference's); tok_bpe_init may clear them */
    t->byte_level = true;
    char sub[256];
    if (load_tokens(t, g, sub, sizeof sub) || load_scores_types(t, g, sub, sizeof sub) ||
        (t->type == TOK_BPE && (load_merges(t, g, sub, sizeof sub) || tok_bpe_init(t, sub, sizeof sub)))) {
        snprintf(err, errlen, "%s: %s", gguf_path(g), sub);
        goto fail;
    }
    load_specials(t, g);
    if (build_specials(t, g) || build_pieces(t)) {
        snprintf(err, errlen, "%s: tokenizer: out of memory", gguf_path(g));
        goto fail;
    }
    return t;
fail:
    tok_close(t);
    return NULL;
}

void tok_close(struct tok *t)
{
    if (!t) return;
    tok_bpe_free(t->bpe);
    free(t->pool);
    free(t->off);
    free(t->len);
    free(t->score);
    free(t->attr);
    free(t->dec_pool);
    free(t->dec_off);
    free(t->dec_len);
    free(t->vocab.slots);
    free(t->mpool);
    free(t->moff);
    free(t->mlen);
    free(t->msplit);
    free(t->merges.slots);
    free(t->specials);
    free(t);
}

/* --- encoding -------------------------------------------------------------------- */

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

/* --- queries and decoding ------------------------------------------------------------ */

int32_t tok_n_vocab(const struct tok *t) { return t->n_vocab; }
int32_t tok_bos(const struct tok *t) { return t->bos; }
int32_t tok_eos(const struct tok *t) { return t->eos; }
int32_t tok_eot(const struct tok *t) { return t->eot; }
int32_t tok_unk(const struct tok *t) { return t->unk; }
int32_t tok_pad(const struct tok *t) { return t->pad; }
bool tok_adds_bos(const struct tok *t) { return t->add_bos; }
const char *tok_model_name(const struct tok *t) { return t->model; }
const char *tok_pre_name(const struct tok *t) { return t->pre; }

static bool valid_id(const struct tok *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab;
}

int32_t tok_find_text(const struct tok *t, const char *s)
{
    return tok_find(t, s, strlen(s));
}

const char *tok_piece(const struct tok *t, int32_t id)
{
    return valid_id(t, id) ? t->pool + t->off[id] : "";
}

float tok_score(const struct tok *t, int32_t id)
{
    return valid_id(t, id) ? t->score[id] : 0.0f;
}

bool tok_is_eog(const struct tok *t, int32_t id)
{
    return valid_id(t, id) && (t->attr[id] & TOK_ATTR_EOG);
}

bool tok_is_special(const struct tok *t, int32_t id)
{
    return valid_id(t, id) &&
           (t->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN));
}

enum tok_token_type tok_token_type(const struct tok *t, int32_t id)
{
    if (!valid_id(t, id)) return TOK_TYPE_UNDEFINED;
    uint16_t a = t->attr[id];
    if (a & TOK_ATTR_BYTE) return TOK_TYPE_BYTE;
    if (a & TOK_ATTR_UNUSED) return TOK_TYPE_UNUSED;
    if (a & TOK_ATTR_USER_DEFINED) return TOK_TYPE_USER_DEFINED;
    if (a & TOK_ATTR_CONTROL) return TOK_TYPE_CONTROL;
    if (a & TOK_ATTR_UNKNOWN) return TOK_TYPE_UNKNOWN;
    if (a & TOK_ATTR_NORMAL) return TOK_TYPE_NORMAL;
    return TOK_TYPE_UNDEFINED;
}

static size_t copy_out(const char *s, size_t n, char *out, size_t cap)
{
    if (n > cap) n = cap;
    memcpy(out, s, n);
    return n;
}

size_t tok_decode_token(const struct tok *t, int32_t id, char *out, size_t cap)
{
    if (!valid_id(t, id)) return 0;
    return copy_out(t->dec_pool + t->dec_off[id], t->dec_len[id], out, cap);
}

size_t tok_decode_token_special(const struct tok *t, int32_t id, char *out, size_t cap)
{
    if (!valid_id(t, id)) return 0;
    if (t->attr[id] & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL))
        return copy_out(t->pool + t->off[id], t->len[id], out, cap);
    return tok_decode_token(t, id, out, cap);
}

size_t tok_max_piece(const struct tok *t)
{
    size_t m = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) m = t->len[i] > m ? t->len[i] : m;
    return m;
}

/* One token's bytes (pointer into the tables); strips one leading space when asked. */
static const char *piece_of(const struct tok *t, int32_t id, bool special, bool strip, size_t *n)
{
    const char *s;
    if (!valid_id(t, id)) {
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
    s->first = true;
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
