/* tok_bpe: byte-level BPE ("gpt2" tokenizer model). The text is split
 * into words by the pre-tokenizer regexes that tokenizer.ggml.pre names
 * (PCRE2, UTF + UCP, JIT), applied one after another the way the reference
 * engine applies them: each regex splits every current piece into its
 * matches and the gaps between them. Each word is then mapped byte by byte to
 * the printable code points of the byte-level alphabet and merged pairwise by
 * merge rank (lowest first, ties leftmost). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_impl.h"

/* \s as the reference engine's whitespace table has it (PCRE2's own \s
 * also takes U+180E); written into each pattern in place of \s and \S. */
#define WS_SET "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define RE_CONTRACT "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3 RE_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2 RE_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN35 RE_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_DS_LETTERS "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+"
#define RE_CJK "[一-龥ࠀ-一가-퟿]+"

enum { MAX_RE = 6 };

struct pre_def {
    const char *names; /* tokenizer.ggml.pre values, '|'-separated */
    bool ignore_merges; /* a word that is a token is not merged (Llama 3) */
    bool add_bos;       /* default of tokenizer.ggml.add_bos_token */
    bool no_bos;        /* no default BOS id */
    bool raw;           /* SentencePiece-style BPE: raw UTF-8, ▁ for spaces (gemma4) */
    const char *re[MAX_RE];
};

/* The reference engine's table (llama-vocab.cpp), for the families tern supports. */
static const struct pre_def pre_defs[] = {
    {.names = "default",
     .re = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {.names = "gpt-2|gpt2|phi-2|mpt|olmo|jais|trillion|granite-docling|exaone4|jina-es|jina-de|"
              "gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|modern-bert|jina-v1-en|jina-v2-code|"
              "roberta-bpe",
     .re = {RE_GPT2}},
    {.names = "llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano",
     .ignore_merges = true, .add_bos = true, .re = {RE_LLAMA3}},
    {.names = "dbrx|smaug-bpe", .re = {RE_LLAMA3}},
    {.names = "chatglm-bpe", .no_bos = true, .re = {RE_LLAMA3}},
    {.names = "glm4|glm5", .ignore_merges = true, .no_bos = true, .re = {RE_LLAMA3}},
    {.names = "qwen2|deepseek-r1-qwen|stablelm2|hunyuan|megrez|solar-open|grok-2|f2llmv2",
     .re = {RE_QWEN2}},
    {.names = "qwen35", .re = {RE_QWEN35}},
    {.names = "starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b|mellum2",
     .re = {"\\p{N}", RE_GPT2}},
    {.names = "falcon", .re = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}},
    {.names = "deepseek-llm",
     .re = {"[\\r\\n]", RE_DS_LETTERS, "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", RE_CJK, "\\p{N}+"}},
    {.names = "deepseek-coder",
     .re = {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}"}},
    {.names = "seed-coder",
     .re = {RE_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|"
                        "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {.names = "ufakzeka",
     .re = {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
            "\\s+(?!\\S)|\\s+"}},
    {.names = "minicpm5", .ignore_merges = true,
     .re = {"\\p{N}{1,3}", RE_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+"
                                       "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    /* Gemma 4: spaces become ▁, only newline runs are split off, merges on raw UTF-8. */
    {.names = "gemma4", .add_bos = true, .no_bos = true, .raw = true, .re = {"[^\\n]+|[\\n]+"}},
};
#define N_PRE (sizeof pre_defs / sizeof pre_defs[0])

struct tok_bpe {
    pcre2_code *re[MAX_RE];
    int n_re;
};

static bool name_in(const char *names, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = names;;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0) return true;
        if (!bar) return false;
        p = bar + 1;
    }
}

/* Rewrites \s and \S into explicit classes over WS_SET. */
static char *rewrite_ws(const char *re)
{
    size_t cap = strlen(re) * 8 + 256, n = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    bool in_class = false;
    for (const char *p = re; *p; p++) {
        const char *add = NULL;
        char one[3] = {0};
        if (p[0] == '\\' && (p[1] == 's' || p[1] == 'S')) {
            if (in_class) add = p[1] == 's' ? WS_SET : NULL;
            else add = p[1] == 's' ? "[" WS_SET "]" : "[^" WS_SET "]";
            if (!add) { free(out); return NULL; } /* \S inside a class: unsupported */
            p++;
        } else if (p[0] == '\\' && p[1]) {
            one[0] = p[0];
            one[1] = p[1];
            add = one;
            p++;
        } else {
            if (p[0] == '[' && !in_class) in_class = true;
            else if (p[0] == ']' && in_class) in_class = false;
            one[0] = p[0];
            add = one;
        }
        size_t al = strlen(add);
        if (n + al + 1 > cap) { free(out); return NULL; }
        memcpy(out + n, add, al);
        n += al;
    }
    out[n] = 0;
    return out;
}

int tok_bpe_init(struct tok *t, char *err, size_t errlen)
{
    const struct pre_def *def = NULL;
    for (size_t i = 0; i < N_PRE && !def; i++)
        if (name_in(pre_defs[i].names, t->pre)) def = &pre_defs[i];
    if (!def) {
        snprintf(err, errlen, "tokenizer.ggml.pre: unsupported pre-tokenizer '%s'", t->pre);
        return -1;
    }
    struct tok_bpe *b = calloc(1, sizeof *b);
    if (!b) goto oom;
    t->bpe = b;
    t->ignore_merges = def->ignore_merges;
    t->add_bos = def->add_bos;
    t->byte_level = !def->raw;
    if (def->no_bos) t->bos = -1;
    if (def->raw) t->eos = -1;
    for (int i = 0; i < MAX_RE && def->re[i]; i++) {
        char *pat = rewrite_ws(def->re[i]);
        if (!pat) goto oom;
        int ec;
        PCRE2_SIZE eo;
        b->re[i] = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &ec, &eo, NULL);
        free(pat);
        if (!b->re[i]) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(ec, msg, sizeof msg);
            snprintf(err, errlen, "pre-tokenizer '%s': regex %d at offset %zu: %s", t->pre, i,
                     (size_t)eo, (const char *)msg);
            return -1;
        }
        pcre2_jit_compile(b->re[i], PCRE2_JIT_COMPLETE); /* falls back to the interpreter */
        b->n_re = i + 1;
    }
    return 0;
oom:
    snprintf(err, errlen, "pre-tokenizer '%s': out of memory", t->pre);
    return -1;
}

void tok_bpe_free(struct tok_bpe *b)
{
    if (!b) return;
    for (int i = 0; i < b->n_re; i++) pcre2_code_free(b->re[i]);
    free(b);
}

/* --- byte-level alphabet ---------------------------------------------------- */

static bool byte_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

uint32_t tok_byte_to_cp(unsigned char b)
{
    if (byte_printable(b)) return b;
    if (b <= 0x20) return 256 + b;
    if (b >= 0x7F && b <= 0xA0) return 256 + 33 + (b - 0x7F);
    return 256 + 33 + 34; /* 0xAD */
}

int tok_cp_to_byte(uint32_t cp)
{
    if (cp < 256) return byte_printable(cp) ? (int)cp : -1;
    if (cp < 256 + 33) return (int)(cp - 256);
    if (cp < 256 + 33 + 34) return (int)(0x7F + cp - 256 - 33);
    if (cp == 256 + 33 + 34) return 0xAD;
    return -1;
}

/* --- pre-tokenizer ---------------------------------------------------------- */

struct u32v {
    uint32_t *v;
    size_t n, cap;
};

static int u32_push(struct u32v *a, uint32_t x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        uint32_t *v = realloc(a->v, cap * sizeof *v);
        if (!v) return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

static bool cp_is_space(uint32_t c)
{
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* The text the regexes see, with its code point ↔ byte maps. Non-ASCII
 * whitespace becomes U+000B and surrogates U+E000, as in the reference
 * (it matches on a substituted copy, and PCRE2 wants valid UTF-8). */
struct subject {
    uint32_t *cps;     /* n code points of the input */
    size_t n;
    char *s;           /* UTF-8 subject */
    uint32_t *c2b;     /* n+1: byte offset of each code point */
    uint32_t *b2c;     /* bytes+1: code point index at each byte offset */
};

static void subject_free(struct subject *sj)
{
    free(sj->cps);
    free(sj->s);
    free(sj->c2b);
    free(sj->b2c);
}

static int subject_make(struct subject *sj, const char *text, size_t len)
{
    memset(sj, 0, sizeof *sj);
    sj->cps = malloc((len + 1) * sizeof *sj->cps);
    sj->c2b = malloc((len + 1) * sizeof *sj->c2b);
    sj->s = malloc(len * 3 + 1);
    sj->b2c = malloc((len * 3 + 1) * sizeof *sj->b2c);
    if (!sj->cps || !sj->c2b || !sj->s || !sj->b2c) return -1;
    size_t off = 0, nb = 0;
    while (off < len) {
        uint32_t c = tok_utf8_next((const unsigned char *)text, len, &off);
        uint32_t r = c;
        if (r >= 0x80 && cp_is_space(r)) r = 0x0B;
        else if (r >= 0xD800 && r <= 0xDFFF) r = 0xE000;
        sj->c2b[sj->n] = (uint32_t)nb;
        size_t k = tok_utf8_put(r, sj->s + nb);
        for (size_t j = 0; j < k; j++) sj->b2c[nb + j] = (uint32_t)sj->n;
        nb += k;
        sj->cps[sj->n++] = c;
    }
    sj->c2b[sj->n] = (uint32_t)nb;
    sj->b2c[nb] = (uint32_t)sj->n;
    return 0;
}

/* Splits each piece (lengths in code points) by one regex into matches and gaps. */
static int split_by(const struct subject *sj, pcre2_code *re, pcre2_match_data *md,
                    const struct u32v *in, struct u32v *out, char *err, size_t errlen)
{
    size_t start = 0;
    for (size_t i = 0; i < in->n; i++) {
        size_t cs = start, ce = start + in->v[i];
        start = ce;
        const char *base = sj->s + sj->c2b[cs];
        size_t blen = sj->c2b[ce] - sj->c2b[cs], pos = 0, prev = 0;
        /* Bounded by the piece length: each match consumes at least one character. */
        while (pos < blen) {
            int rc = pcre2_match(re, (PCRE2_SPTR)base, blen, pos, PCRE2_NO_UTF_CHECK, md, NULL);
            if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
                rc = pcre2_match(re, (PCRE2_SPTR)base, blen, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                                 md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[128];
                pcre2_get_error_message(rc, msg, sizeof msg);
                snprintf(err, errlen, "pre-tokenizer: regex match failed at byte %zu: %s",
                         (size_t)sj->c2b[cs] + pos, (const char *)msg);
                return -1;
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            size_t ms = ov[0], me = ov[1];
            if (me == ms) { /* empty match: step one character */
                pos = ms + tok_utf8_len((unsigned char)base[ms]);
                continue;
            }
            uint32_t c_ms = sj->b2c[sj->c2b[cs] + ms], c_me = sj->b2c[sj->c2b[cs] + me];
            uint32_t c_prev = sj->b2c[sj->c2b[cs] + prev];
            if (c_ms > c_prev && u32_push(out, c_ms - c_prev)) goto oom;
            if (u32_push(out, c_me - c_ms)) goto oom;
            prev = pos = me;
        }
        uint32_t c_prev = sj->b2c[sj->c2b[cs] + prev];
        if (ce > c_prev && u32_push(out, (uint32_t)(ce - c_prev))) goto oom;
    }
    return 0;
oom:
    snprintf(err, errlen, "pre-tokenizer: out of memory");
    return -1;
}

/* --- merges ----------------------------------------------------------------- */

struct bpe_sym {
    int prev, next;
    const char *text;
    size_t n;
};

struct bpe_bigram {
    int left, right, rank;
    size_t ln, rn;
};

struct bpe_work {
    struct bpe_sym *syms;
    size_t n_syms, cap_syms;
    struct bpe_bigram *heap;
    size_t n_heap, cap_heap;
};

static bool bigram_first(const struct bpe_bigram *a, const struct bpe_bigram *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static int heap_push(struct bpe_work *w, struct bpe_bigram b)
{
    if (w->n_heap == w->cap_heap) {
        size_t cap = w->cap_heap ? w->cap_heap * 2 : 64;
        struct bpe_bigram *v = realloc(w->heap, cap * sizeof *v);
        if (!v) return -1;
        w->heap = v;
        w->cap_heap = cap;
    }
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bigram_first(&b, &w->heap[p])) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = b;
    return 0;
}

static struct bpe_bigram heap_pop(struct bpe_work *w)
{
    struct bpe_bigram top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= w->n_heap) break;
        if (c + 1 < w->n_heap && bigram_first(&w->heap[c + 1], &w->heap[c])) c++;
        if (!bigram_first(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (w->n_heap) w->heap[i] = last;
    return top;
}

static int add_bigram(const struct tok *t, struct bpe_work *w, int left, int right)
{
    if (left < 0 || right < 0) return 0;
    const struct bpe_sym *l = &w->syms[left], *r = &w->syms[right];
    int32_t rank = tok_merge_rank(t, l->text, l->n, r->text, r->n);
    if (rank < 0) return 0;
    return heap_push(w, (struct bpe_bigram){left, right, rank, l->n, r->n});
}

static int emit_word(const struct tok *t, const struct bpe_work *w, struct tok_ids *out)
{
    for (size_t i = 0; i < w->n_syms; i++) {
        const struct bpe_sym *s = &w->syms[i];
        if (s->n == 0) continue;
        int32_t id = tok_find(t, s->text, s->n);
        if (id >= 0) {
            if (tok_ids_push(out, id)) return -1;
            continue;
        }
        /* Not a token: the reference looks up each single byte (as <0xNN>
         * without the byte alphabet) and drops misses. */
        for (size_t j = 0; j < s->n; j++) {
            char hex[8];
            int32_t b;
            if (t->byte_level) {
                b = tok_find(t, s->text + j, 1);
            } else {
                snprintf(hex, sizeof hex, "<0x%02X>", (unsigned char)s->text[j]);
                b = tok_find(t, hex, 6);
            }
            if (b >= 0 && tok_ids_push(out, b)) return -1;
        }
    }
    return 0;
}

static int merge_word(const struct tok *t, struct bpe_work *w, const char *word, size_t n,
                      struct tok_ids *out)
{
    w->n_syms = 0;
    w->n_heap = 0;
    if (w->cap_syms < n) {
        struct bpe_sym *s = realloc(w->syms, n * sizeof *s);
        if (!s) return -1;
        w->syms = s;
        w->cap_syms = n;
    }
    /* Llama 3: a word that is a token stays whole; Gemma 4: so does a newline run. */
    bool whole = t->ignore_merges;
    if (!t->byte_level) {
        whole = true;
        for (size_t i = 0; i < n && whole; i++) whole = word[i] == '\n';
    }
    if (whole && tok_find(t, word, n) >= 0) {
        w->syms[0] = (struct bpe_sym){-1, -1, word, n};
        w->n_syms = 1;
        return emit_word(t, w, out);
    }
    for (size_t off = 0; off < n;) {
        size_t cl = tok_utf8_len((unsigned char)word[off]);
        if (cl > n - off) cl = n - off;
        int i = (int)w->n_syms++;
        w->syms[i] = (struct bpe_sym){i - 1, off + cl == n ? -1 : i + 1, word + off, cl};
        off += cl;
    }
    for (int i = 1; i < (int)w->n_syms; i++)
        if (add_bigram(t, w, i - 1, i)) return -1;
    /* Bounded by the word's characters: each pop merges or drops a stale pair. */
    while (w->n_heap) {
        struct bpe_bigram b = heap_pop(w);
        struct bpe_sym *l = &w->syms[b.left], *r = &w->syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n != b.ln || r->n != b.rn) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->syms[r->next].prev = b.left;
        if (add_bigram(t, w, l->prev, b.left) || add_bigram(t, w, b.left, l->next)) return -1;
    }
    return emit_word(t, w, out);
}

int tok_bpe_encode(const struct tok *t, const char *text, size_t len, struct tok_ids *out,
                   char *err, size_t errlen)
{
    if (len == 0) return 0;
    int rc = -1;
    struct subject sj = {0};
    struct u32v a = {0}, b = {0};
    struct bpe_work w = {0};
    char *word = NULL;
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!md || subject_make(&sj, text, len) || u32_push(&a, (uint32_t)sj.n)) goto oom;
    for (int i = 0; i < t->bpe->n_re; i++) {
        b.n = 0;
        if (split_by(&sj, t->bpe->re[i], md, &a, &b, err, errlen)) goto fail;
        struct u32v tmp = a;
        a = b;
        b = tmp;
    }
    word = malloc(len * 3 * 2 + 8);
    if (!word) goto oom;
    size_t start = 0;
    for (size_t i = 0; i < a.n; i++) {
        size_t n = 0;
        for (size_t c = start; c < start + a.v[i]; c++) {
            char u[4];
            size_t k = tok_utf8_put(sj.cps[c], u);
            if (!t->byte_level) {
                memcpy(word + n, u, k);
                n += k;
                continue;
            }
            for (size_t j = 0; j < k; j++) n += tok_utf8_put(tok_byte_to_cp((unsigned char)u[j]), word + n);
        }
        start += a.v[i];
        if (n && merge_word(t, &w, word, n, out)) goto oom;
    }
    rc = 0;
    goto fail;
oom:
    snprintf(err, errlen, "tokenizer: out of memory encoding %zu bytes", len);
fail:
    free(word);
    free(w.syms);
    free(w.heap);
    free(a.v);
    free(b.v);
    if (md) pcre2_match_data_free(md);
    subject_free(&sj);
    return rc;
}
