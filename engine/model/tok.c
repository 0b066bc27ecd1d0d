/* tok: loads a tokenizer from GGUF metadata as the reference engine
 * (llama.cpp) reads it: vocabulary, scores, token types, merges, special
 * ids and the special-token rules it applies by token text; and the small
 * queries. Encoding is in tok_encode.c (with tok_spm.c and tok_bpe.c),
 * decoding in tok_decode.c. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tok.h"
#include "tok_impl.h"

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
    if (!t->pool || !t->off || !t->len || !t->score || !t->attr || tok_hash_init(&t->vocab, n)) {
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
        tok_vocab_insert(t, (int32_t)i);
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
    if (!t->mpool || !t->moff || !t->mlen || !t->msplit || tok_hash_init(&t->merges, n)) {
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
        tok_merge_insert(t, (int32_t)i);
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
        if (t->len[i] > t->max_piece) t->max_piece = t->len[i]; /* raw text >= any rendering */
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

int32_t tok_find_text(const struct tok *t, const char *s)
{
    return tok_find(t, s, strlen(s));
}

const char *tok_piece(const struct tok *t, int32_t id)
{
    return tok_valid_id(t, id) ? t->pool + t->off[id] : "";
}

float tok_score(const struct tok *t, int32_t id)
{
    return tok_valid_id(t, id) ? t->score[id] : 0.0f;
}

bool tok_is_eog(const struct tok *t, int32_t id)
{
    return tok_valid_id(t, id) && (t->attr[id] & TOK_ATTR_EOG);
}

bool tok_is_special(const struct tok *t, int32_t id)
{
    return tok_valid_id(t, id) &&
           (t->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN));
}

enum tok_token_type tok_token_type(const struct tok *t, int32_t id)
{
    if (!tok_valid_id(t, id)) return TOK_TYPE_UNDEFINED;
    uint16_t a = t->attr[id];
    if (a & TOK_ATTR_BYTE) return TOK_TYPE_BYTE;
    if (a & TOK_ATTR_UNUSED) return TOK_TYPE_UNUSED;
    if (a & TOK_ATTR_USER_DEFINED) return TOK_TYPE_USER_DEFINED;
    if (a & TOK_ATTR_CONTROL) return TOK_TYPE_CONTROL;
    if (a & TOK_ATTR_UNKNOWN) return TOK_TYPE_UNKNOWN;
    if (a & TOK_ATTR_NORMAL) return TOK_TYPE_NORMAL;
    return TOK_TYPE_UNDEFINED;
}

