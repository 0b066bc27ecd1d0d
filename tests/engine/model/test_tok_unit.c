/* test_tok_unit: tokenizer behaviour beyond id conformance, on the real
 * models (SmolLM2: byte-level BPE; Gemma 3: SentencePiece): the streaming
 * detokenizer (held-back UTF-8, U+FFFD), special tokens (EOG, BOS, parsing
 * only on request), robustness on random bytes, and load errors on small
 * GGUF files written in memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tok.h"
#include "gguf_writer.h"
#include "tap.h"
#include "tok_testutil.h"

static struct tok *open_model(const char *src, const char *fetch)
{
    char path[1024], err[512];
    if (tt_model_path(src, fetch, path, sizeof path)) {
        ok(0, "%s: fetch-model could not provide the model", fetch);
        return NULL;
    }
    struct gguf_ctx *g = gguf_open(path, err, sizeof err);
    struct tok *t = g ? tok_open(g, err, sizeof err) : NULL;
    if (g) gguf_close(g);
    if (!t) ok(0, "%s: %s", fetch, err);
    return t;
}

/* Strict UTF-8 validity (no overlongs, surrogates, or values past U+10FFFF). */
static bool valid_utf8(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!k || i + k > n) return false;
        uint32_t cp = k == 1 ? c : c & (0x7f >> k);
        for (size_t j = 1; j < k; j++) {
            if (((unsigned char)s[i + j] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | ((unsigned char)s[i + j] & 0x3f);
        }
        if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += k;
    }
    return true;
}

/* Streams the tokens of text; every fragment must be valid UTF-8 and all of
 * them together the text itself. */
static void stream_roundtrip(const struct tok *t, const char *name, const char *text)
{
    char err[256];
    int32_t ids[512];
    int64_t n = tok_encode(t, text, strlen(text), 0, ids, 512, err, sizeof err);
    size_t cap = tok_stream_cap(t);
    char *frag = malloc(cap), all[2048] = "";
    struct tok_stream s;
    tok_stream_init(&s);
    s.first = true; /* a whole encoded text: drop the SentencePiece space prefix */
    bool each_valid = true, held = false;
    size_t len = 0;
    for (int64_t i = 0; frag && i < n; i++) {
        size_t k = tok_stream_push(t, &s, ids[i], frag, cap);
        each_valid &= valid_utf8(frag, k) && strlen(frag) == k;
        held |= s.n_pending > 0;
        if (len + k < sizeof all) memcpy(all + len, frag, k), len += k;
    }
    size_t k = frag ? tok_stream_flush(&s, frag, cap) : 0;
    ok(n > 0 && each_valid && k == 0 && len == strlen(text) && memcmp(all, text, len) == 0,
       "%s: streamed fragments are valid UTF-8 and rebuild the text (%lld tokens%s)", name,
       (long long)n, held ? ", some bytes held back" : "");
    free(frag);
}

static void stream_invalid(const struct tok *t, const char *name, const char *byte_ff,
                           const char *byte_e2)
{
    int32_t ff = tok_find_text(t, byte_ff), e2 = tok_find_text(t, byte_e2);
    char out[256];
    struct tok_stream s;
    tok_stream_init(&s);
    if (!ok(ff >= 0 && e2 >= 0, "%s: byte tokens %s and %s exist", name, byte_ff, byte_e2)) return;
    size_t k = tok_stream_push(t, &s, ff, out, sizeof out);
    ok(k == 3 && memcmp(out, "\xef\xbf\xbd", 3) == 0, "%s: an invalid byte streams as U+FFFD", name);
    k = tok_stream_push(t, &s, e2, out, sizeof out);
    ok(k == 0 && s.n_pending == 1, "%s: a lone 0xE2 is held back", name);
    k = tok_stream_flush(&s, out, sizeof out);
    ok(k == 3 && memcmp(out, "\xef\xbf\xbd", 3) == 0 && s.n_pending == 0,
       "%s: flushing an incomplete sequence gives U+FFFD", name);
    tok_stream_push(t, &s, e2, out, sizeof out);
    k = tok_stream_push(t, &s, tok_find_text(t, "A"), out, sizeof out);
    ok(k == 4 && memcmp(out, "\xef\xbf\xbd" "A", 4) == 0,
       "%s: 0xE2 then 'A': U+FFFD, then the A", name);
}

static void specials(const struct tok *t, const char *name, const char *end_turn, bool adds_bos)
{
    char err[256];
    int32_t ids[64];
    int32_t et = tok_find_text(t, end_turn);
    ok(et >= 0 && tok_is_eog(t, et) && tok_is_special(t, et), "%s: %s ends generation", name,
       end_turn);
    ok(tok_eos(t) >= 0 && tok_is_eog(t, tok_eos(t)), "%s: EOS ends generation", name);
    ok(tok_eot(t) >= 0 && tok_is_eog(t, tok_eot(t)), "%s: EOT (%s) ends generation", name,
       tok_piece(t, tok_eot(t)));
    int32_t hello = tok_find_text(t, "Hello");
    ok(hello >= 0 && !tok_is_eog(t, hello) && !tok_is_special(t, hello), "%s: 'Hello' is plain", name);
    int64_t n = tok_encode(t, end_turn, strlen(end_turn), TOK_PARSE_SPECIAL, ids, 64, err, sizeof err);
    ok(n == 1 && ids[0] == et, "%s: with TOK_PARSE_SPECIAL %s is one token", name, end_turn);
    n = tok_encode(t, end_turn, strlen(end_turn), 0, ids, 64, err, sizeof err);
    bool plain = n > 1;
    for (int64_t i = 0; i < n && i < 64; i++) plain &= !tok_is_special(t, ids[i]);
    ok(plain, "%s: without it, %s is plain text (%lld tokens)", name, end_turn, (long long)n);
    n = tok_encode(t, "Hi", 2, TOK_ADD_BOS, ids, 64, err, sizeof err);
    if (adds_bos)
        ok(n >= 2 && ids[0] == tok_bos(t) && tok_adds_bos(t), "%s: TOK_ADD_BOS puts BOS first", name);
    else
        ok(n >= 1 && ids[0] != tok_bos(t) && !tok_adds_bos(t),
           "%s: the metadata says no BOS, so TOK_ADD_BOS adds none", name);
    char buf[64];
    ok(tok_decode_token(t, et, buf, sizeof buf) == 0 &&
           tok_decode_token_special(t, et, buf, sizeof buf) == strlen(end_turn),
       "%s: control tokens decode to nothing, or to their text on request", name);
    n = tok_encode(t, "abc def, ghi!", 13, 0, ids, 1, err, sizeof err);
    ok(n > 1, "%s: a small buffer gets the needed count (%lld)", name, (long long)n);
}

/* Random bytes: never a crash, never a negative count (run under ASan in CI). */
static void random_bytes(const struct tok *t, const char *name)
{
    char err[256], buf[300];
    int32_t ids[1024];
    uint64_t x = 88172645463325252ull;
    int bad = 0;
    for (int it = 0; it < 300; it++) {
        size_t n = (size_t)(x % sizeof buf);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[i] = (char)(x & 0xff);
        }
        int64_t k = tok_encode(t, buf, n, it % 2 ? TOK_PARSE_SPECIAL : 0, ids, 1024, err, sizeof err);
        bad += k < 0 || (n > 0 && k == 0);
        char out[4096];
        size_t d = tok_decode(t, ids, (size_t)(k > 1024 ? 1024 : k > 0 ? k : 0), false, out, sizeof out);
        bad += d >= sizeof out && 0;
    }
    ok(bad == 0, "%s: 300 random byte strings tokenize without error", name);
}

/* SentencePiece with add_space_prefix (the suite's Llama vocabulary): the
 * encoder adds a leading space; a whole-text decode drops it, a stream
 * continuing a prompt keeps it. */
static void space_prefix(const char *shared)
{
    char path[1024], err[512], out[256];
    snprintf(path, sizeof path, "%s/tokenizer-suite/ggml-vocab-llama-spm.gguf", shared);
    struct gguf_ctx *g = gguf_open(path, err, sizeof err);
    struct tok *t = g ? tok_open(g, err, sizeof err) : NULL;
    if (g) gguf_close(g);
    if (!ok(t != NULL, "open the suite's llama-spm vocabulary (%s)", t ? "ok" : err)) return;
    int32_t ids[16];
    int64_t n = tok_encode(t, "Hello world", 11, 0, ids, 16, err, sizeof err);
    ok(n > 0 && strncmp(tok_piece(t, ids[0]), "\xe2\x96\x81", 3) == 0,
       "the encoder adds the space prefix (first piece '%s')", n > 0 ? tok_piece(t, ids[0]) : "");
    ok(tok_decode(t, ids, (size_t)n, false, out, sizeof out) == 11 && strcmp(out, "Hello world") == 0,
       "tok_decode drops it: '%s'", out);
    struct tok_stream s;
    for (int first = 0; first < 2; first++) {
        tok_stream_init(&s);
        s.first = first;
        size_t len = 0;
        for (int64_t i = 0; i < n; i++) len += tok_stream_push(t, &s, ids[i], out + len, sizeof out - len);
        ok(strcmp(out, first ? "Hello world" : " Hello world") == 0,
           "a stream with first=%d gives '%s'", first, out);
    }
    tok_close(t);
}

/* A minimal vocabulary file: general.architecture plus the given kvs. */
static struct gguf_ctx *vocab_file(struct gw *w, const char *model, const char *pre, bool tokens,
                                   bool merges, char *err, size_t errlen)
{
    gw_init(w);
    uint64_t n_kv = 1 + (model != NULL) + (pre != NULL) + 2 * tokens + merges;
    gw_header(w, 3, 0, n_kv);
    gw_kv_str(w, "general.architecture", "llama");
    if (model) gw_kv_str(w, "tokenizer.ggml.model", model);
    if (pre) gw_kv_str(w, "tokenizer.ggml.pre", pre);
    if (tokens) {
        static const char *const toks[] = {"a", "b", "ab", "<0x0A>", "\xe2\x96\x81"};
        static const uint32_t types[] = {1, 1, 1, 6, 1}; /* normal, byte */
        gw_kv_arr(w, "tokenizer.ggml.tokens", 8, 5);
        for (int i = 0; i < 5; i++) gw_str(w, toks[i]);
        gw_kv_arr(w, "tokenizer.ggml.token_type", 5, 5);
        for (int i = 0; i < 5; i++) gw_u32(w, types[i]);
    }
    if (merges) {
        gw_kv_arr(w, "tokenizer.ggml.merges", 8, 1);
        gw_str(w, "a b");
    }
    gw_pad(w, 32);
    return gguf_open_memory(w->p, w->n, "vocab.gguf", err, errlen);
}

static void load_errors(void)
{
    struct {
        const char *model, *pre;
        bool tokens, merges;
        const char *want, *what;
    } cases[] = {
        {NULL, NULL, true, false, "tokenizer.ggml.model: missing", "no tokenizer model"},
        {"bert", NULL, true, false, "unsupported tokenizer 'bert'", "an unsupported model"},
        {"gpt2", "klingon", true, true, "unsupported pre-tokenizer 'klingon'", "an unknown pre-tokenizer"},
        {"gpt2", "gpt-2", true, false, "tokenizer.ggml.merges: missing", "BPE without merges"},
        {"llama", NULL, false, false, "tokenizer.ggml.tokens: missing", "no token list"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512] = "";
        struct gw w;
        struct gguf_ctx *g = vocab_file(&w, cases[i].model, cases[i].pre, cases[i].tokens,
                                        cases[i].merges, err, sizeof err);
        struct tok *t = g ? tok_open(g, err, sizeof err) : NULL;
        ok(g && !t && strstr(err, cases[i].want) && strstr(err, "vocab.gguf"),
           "%s is an error naming the file and key: %s", cases[i].what, err);
        tok_close(t);
        if (g) gguf_close(g);
        gw_free(&w);
    }
    /* The same small vocabulary, valid: the text comes back, "ab" is used and
     * the newline goes through its byte token. */
    char err[512], back[64];
    struct gw w;
    struct gguf_ctx *g = vocab_file(&w, "llama", NULL, true, false, err, sizeof err);
    struct tok *t = g ? tok_open(g, err, sizeof err) : NULL;
    int32_t ids[16];
    int64_t n = t ? tok_encode(t, "ab\nba ab", 8, 0, ids, 16, err, sizeof err) : -1;
    bool has_ab = false, has_nl = false;
    for (int64_t i = 0; i < n && i < 16; i++) {
        has_ab |= ids[i] == tok_find_text(t, "ab");
        has_nl |= ids[i] == tok_find_text(t, "<0x0A>");
    }
    ok(n > 0 && n <= 16 && has_ab && has_nl &&
           tok_decode(t, ids, (size_t)n, false, back, sizeof back) == 8 && strcmp(back, "ab\nba ab") == 0,
       "tiny SPM vocabulary: merges to 'ab', newline as <0x0A>, decodes back (%lld ids)", (long long)n);
    tok_close(t);
    if (g) gguf_close(g);
    gw_free(&w);
}

int main(void)
{
    const char *src = getenv("TERN_SRC");
    if (!src) return tap_bail("TERN_SRC is not set");
    static const char *const texts[] = {
        "Emoji \xf0\x9f\xa6\x99\xf0\x9f\x98\x80 and \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e, "
        "\xd0\xa0\xd1\x83\xd1\x81\xd1\x81\xd0\xba\xd0\xb8\xd0\xb9 \xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\xa8\xe0\xa5\x8d",
        "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 \xf0\x9f\x87\xaf\xf0\x9f\x87\xb5",
    };
    struct tok *sm = open_model(src, "smollm2");
    if (sm) {
        for (int i = 0; i < 2; i++) stream_roundtrip(sm, "smollm2", texts[i]);
        stream_invalid(sm, "smollm2", "\xc4\xa2" /* U+0122 = byte 0x80 */, "\xc3\xa2" /* â = 0xE2 */);
        specials(sm, "smollm2", "<|im_end|>", false);
        random_bytes(sm, "smollm2");
        tok_close(sm);
    }
    struct tok *ge = open_model(src, "gemma3-270m");
    if (ge) {
        for (int i = 0; i < 2; i++) stream_roundtrip(ge, "gemma3", texts[i]);
        stream_invalid(ge, "gemma3", "<0xFF>", "<0xE2>");
        specials(ge, "gemma3", "<end_of_turn>", true);
        random_bytes(ge, "gemma3");
        tok_close(ge);
    }
    const char *shared = getenv("TERN_SHARED");
    if (shared) space_prefix(shared);
    else ok(0, "TERN_SHARED is not set");
    load_errors();
    return tap_done();
}
