/* test_grammar: structured output's grammar (engine/grammar). The JSON
 * Schema compiler on good and bad schemas (the keyword and the path in the
 * message), the byte matcher on texts it must take and refuse, and the token
 * masks: on a small handmade vocabulary and, when the model file is cached,
 * on SmolLM2's, every mask bit agrees with feeding that token to the matcher,
 * and random walks under the mask always end in JSON that parses. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "jsg.h"
#include "sampler.h"
#include "tap.h"
#include "tmask.h"
#include "tok.h"

static struct jsg *compile(const char *schema, char *err, size_t n)
{
    return jsg_compile(schema, strlen(schema), false, err, n);
}

static bool accepts(const struct jsg *g, const char *text)
{
    struct jsg_state s;
    jsg_start(g, &s);
    return jsg_feed(g, &s, text, strlen(text)) && jsg_complete(g, &s);
}

static bool prefix_ok(const struct jsg *g, const char *text)
{
    struct jsg_state s;
    jsg_start(g, &s);
    return jsg_feed(g, &s, text, strlen(text));
}

static const char *person =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},"
    "\"age\":{\"type\":\"integer\"},"
    "\"nick\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":3},"
    "\"role\":{\"enum\":[\"admin\",\"user\",1,null]},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,\"maxItems\":2},"
    "\"home\":{\"$ref\":\"#/$defs/place\"},"
    "\"score\":{\"anyOf\":[{\"type\":\"number\"},{\"type\":\"null\"}]}},"
    "\"required\":[\"name\",\"age\",\"role\"],\"additionalProperties\":false,"
    "\"$defs\":{\"place\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
    "\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/place\"},{\"type\":\"null\"}]}},"
    "\"required\":[\"city\",\"next\"]}}}";

static void test_matcher(void)
{
    char err[256] = "";
    struct jsg *g = compile(person, err, sizeof err);
    tap_ok(g != NULL, "the person schema compiles (%s)", err);
    if (!g) return;
    tap_ok(accepts(g, "{\"name\":\"Al\",\"age\":3,\"role\":\"user\"}"), "required only");
    tap_ok(accepts(g, "{ \"name\": \"A\\u00e9\\n\",\n  \"age\": -12, \"nick\": \"\xc3\xa9\", "
                      "\"role\": null, \"tags\": [\"x\", \"y\"], \"home\": {\"city\": \"P\", "
                      "\"next\": {\"city\": \"Q\", \"next\": null}}, \"score\": 1.5e3}"),
           "every property, nested $ref recursion, whitespace, escapes, UTF-8");
    tap_ok(accepts(g, "{\"name\":\"a\",\"age\":0,\"role\":1}"), "enum number");
    tap_ok(!accepts(g, "{\"age\":3,\"name\":\"Al\",\"role\":\"user\"}"), "out of order refused");
    tap_ok(!prefix_ok(g, "{\"name\":\"Al\",\"role\""), "skipping a required property refused");
    tap_ok(!accepts(g, "{\"name\":\"Al\",\"age\":3}"), "missing required refused");
    tap_ok(!prefix_ok(g, "{\"name\":\"Al\",\"age\":3.5"), "fraction in an integer refused");
    tap_ok(!prefix_ok(g, "{\"name\":\"Al\",\"age\":3,\"role\":\"root\""), "value outside the enum");
    tap_ok(!prefix_ok(g, "{\"name\":\"Al\",\"age\":3,\"role\":1,\"tags\":[]"), "minItems 1");
    tap_ok(!prefix_ok(g, "{\"name\":\"Al\",\"age\":3,\"role\":1,\"tags\":[\"a\",\"b\",\"c\""),
           "maxItems 2");
    tap_ok(!prefix_ok(g, "{\"name\":\"Al\",\"age\":3,\"role\":1,\"extra\""),
           "undeclared property refused");
    tap_ok(!prefix_ok(g, "{\"name\":\"a\x01"), "control byte in a string refused");
    tap_ok(accepts(g, "{\"name\":\"a\",\"age\":1,\"nick\":\"\xc3\xa9\\n\\u00e9\",\"role\":1}"),
           "maxLength 3 counts characters (UTF-8, escapes)");
    tap_ok(!prefix_ok(g, "{\"name\":\"a\",\"age\":1,\"nick\":\"abcd"), "maxLength 3 refuses a fourth");
    tap_ok(!prefix_ok(g, "{\"name\":\"a\",\"age\":1,\"nick\":\"\","), "minLength 1 refuses \"\"");
    tap_ok(!prefix_ok(g, "{\"name\":\"\xc3("), "broken UTF-8 refused");
    tap_ok(!accepts(g, "{\"name\":\"a\",\"age\":1,\"role\":1} "), "nothing after the value");
    tap_ok(!prefix_ok(g, "{\"name\":\"a\",\"age\":012"), "leading zero refused");
    jsg_free(g);

    g = jsg_compile(NULL, 0, true, err, sizeof err);
    tap_ok(g && accepts(g, "{\"a\":[1,{\"b\":null},\"x\",true],\"c\":{}}"), "json_object: any object");
    tap_ok(g && !accepts(g, "[1]") && !prefix_ok(g, "\"s"), "json_object: only an object at the top");
    jsg_free(g);

    g = compile("{\"type\":\"array\",\"items\":{\"enum\":[1,12,123]}}", err, sizeof err);
    tap_ok(g && accepts(g, "[1,12,123,1]") && !prefix_ok(g, "[1234"), "enum values that prefix each other");
    jsg_free(g);
    g = compile("{\"type\":[\"integer\",\"null\"]}", err, sizeof err);
    tap_ok(g && accepts(g, "7") && accepts(g, "null") && !accepts(g, "\"7\""), "type array");
    jsg_free(g);
    g = compile("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", err, sizeof err);
    tap_ok(g && accepts(g, "{\"x\":1,\"y\":2}") && !prefix_ok(g, "{\"x\":\""), "map of integers");
    jsg_free(g);
}

static void expect_error(const char *schema, const char *want1, const char *want2, const char *what)
{
    char err[256] = "";
    struct jsg *g = compile(schema, err, sizeof err);
    tap_ok(!g && strstr(err, want1) && (!want2 || strstr(err, want2)), "%s: \"%s\"", what, err);
    jsg_free(g);
}

static void test_errors(void)
{
    expect_error("{\"type\":\"string\",\"pattern\":\"^a\"}", "'pattern'", "#", "pattern refused");
    expect_error("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":3}}}",
                 "'minimum'", "#/properties/a", "minimum refused with its path");
    expect_error("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"strin\"}}}", "'strin'",
                 "#/properties/a", "unknown type");
    expect_error("{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "unsatisfiable", NULL,
                 "minItems > maxItems");
    expect_error("{\"$ref\":\"#/$defs/nope\"}", "names no definition", NULL, "dangling $ref");
    expect_error("{\"$ref\":\"#/$defs/a\",\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}}}", "cycle",
                 NULL, "$ref cycle");
    expect_error("{\"type\":\"object\",\"required\":[\"x\"],\"properties\":{}}", "'x'", NULL,
                 "required property not declared");
    expect_error("{\"type\":\"object\"", "not valid JSON", NULL, "malformed JSON");
    expect_error("{\"oneOf\":[{\"type\":\"string\"}]}", "'oneOf'", NULL, "oneOf refused");
    expect_error("{\"enum\":[]}", "'enum'", NULL, "empty enum");
    /* a huge schema: 3000 properties nest past the node bound or the property bound */
    size_t cap = 200000;
    char *big = malloc(cap);
    size_t n = (size_t)snprintf(big, cap, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < 3000; i++)
        n += (size_t)snprintf(big + n, cap - n, "%s\"p%d\":{\"type\":\"string\"}", i ? "," : "", i);
    snprintf(big + n, cap - n, "}}");
    expect_error(big, "more than", NULL, "huge schema refused");
    free(big);
}

/* The handmade vocabulary: single bytes, JSON-ish pieces, a partial UTF-8
 * lead, a lone continuation, and an end token (id 0). */
static const char *const small_vocab[] = {
    "</s>", "{", "}", "[", "]", "\"", ":", ",", " ", "\n", "a", "b", "x", "0", "1", "2", "-",
    ".", "e", "t", "r", "u", "n", "l", "f", "s", "\\", "c", "d", "g", "h", "i", "j", "k", "m",
    "o", "p", "q", "v", "w", "y", "z", "3", "4", "5", "6", "7", "8", "9", "A", "P", "Q", "E", "{\"", "\":", "\",", "\"}", "true",
    "null", "false", " \"", "\n  ", "\xc3\xa9", "\xc3", "\xa9", "12", "abc", "\"name\"",
    "name", "age", "role", "admin", "user", "\":\"", "\"]", "\"]}", "tags", "city", "home",
    "next", "score", "nick", "\"age\":", "5.", "e+", "\\u", "00e9",
};
#define SMALL_N ((int32_t)(sizeof small_vocab / sizeof small_vocab[0]))

static uint64_t rng = 88172645463325252ull;
static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* Every bit of the mask agrees with tmask_accept on a copy of the state. */
static bool mask_consistent(const struct jsg *g, struct tmask_vocab *v, const int32_t *toks,
                            int32_t n_toks, const uint32_t *bits)
{
    for (int32_t t = 0; t < tmask_vocab_size(v); t++) {
        struct tmask *c = tmask_new(g, v);
        bool ok = true;
        for (int32_t i = 0; i < n_toks && ok; i++) ok = tmask_accept(c, toks[i]) == 0;
        bool acc = ok && tmask_accept(c, t) == 0;
        tmask_free(c);
        if (acc != ((bits[t >> 5] >> (t & 31)) & 1u)) {
            tap_diag("token %d: mask %u, accept %d", t, (bits[t >> 5] >> (t & 31)) & 1u, acc);
            return false;
        }
    }
    return true;
}

/* Random walks under the mask: each ends in the end token with text that
 * parses, or at the step bound. check: test every mask bit on the way. */
static void walks(const struct jsg *g, struct tmask_vocab *v, const char *const *texts,
                  const size_t *lens, const bool *eogs, int32_t eog, int n_walks, int max_steps, bool check,
                  const char *what)
{
    int ended = 0, parsed = 0, consistent = 1, never_empty = 1;
    int32_t *toks = malloc((size_t)max_steps * sizeof *toks);
    char *text = malloc((size_t)max_steps * 64 + 1);
    for (int w = 0; w < n_walks; w++) {
        struct tmask *m = tmask_new(g, v);
        size_t tl = 0;
        for (int s = 0; s < max_steps; s++) {
            int32_t n_allowed = 0;
            const uint32_t *bits = tmask_compute(m, &n_allowed);
            if (!bits || n_allowed == 0) {
                if (never_empty) tap_diag("empty mask after: %.*s", (int)tl, text);
                never_empty = 0;
                break;
            }
            if (check && consistent && !mask_consistent(g, v, toks, s, bits)) consistent = 0;
            /* pick the k-th allowed token; prefer ending half the time once possible */
            int32_t pick = -1;
            if ((bits[eog >> 5] >> (eog & 31)) & 1u && (next_rand() & 1)) pick = eog;
            for (int32_t k = (int32_t)(next_rand() % (uint32_t)n_allowed), t = 0; pick < 0; t++)
                if ((bits[t >> 5] >> (t & 31)) & 1u && k-- == 0) pick = t;
            toks[s] = pick;
            tmask_accept(m, pick);
            if (eogs[pick]) {
                ended++;
                text[tl] = 0;
                cJSON *j = cJSON_ParseWithLength(text, tl);
                parsed += j != NULL;
                if (!j) tap_diag("unparsed: %s", text);
                cJSON_Delete(j);
                break;
            }
            if (lens[pick] <= 64) memcpy(text + tl, texts[pick], lens[pick]), tl += lens[pick];
        }
        tmask_free(m);
    }
    tap_ok(never_empty, "%s: the mask is never empty before the end", what);
    tap_ok(ended > 0 && parsed == ended, "%s: %d/%d walks ended, every one parses", what, ended,
           n_walks);
    if (check) tap_ok(consistent, "%s: every mask bit agrees with feeding the token", what);
    free(toks);
    free(text);
}

static void test_small_vocab(void)
{
    size_t lens[SMALL_N];
    bool usable[SMALL_N], eog[SMALL_N];
    for (int32_t i = 0; i < SMALL_N; i++) {
        lens[i] = strlen(small_vocab[i]);
        usable[i] = i != 0;
        eog[i] = i == 0;
    }
    char err[256] = "";
    struct tmask_vocab *v = tmask_vocab_from(SMALL_N, small_vocab, lens, usable, eog, err, sizeof err);
    tap_ok(v != NULL, "small vocabulary builds (%s)", err);
    struct jsg *g = compile(person, err, sizeof err);
    struct jsg *any = jsg_compile(NULL, 0, true, err, sizeof err);
    if (!v || !g || !any) return;
    struct tmask *m = tmask_new(g, v);
    int32_t n = 0;
    const uint32_t *bits = tmask_compute(m, &n);
    int32_t brace_quote = 0;
    while (brace_quote < SMALL_N && strcmp(small_vocab[brace_quote], "{\"") != 0) brace_quote++;
    bool only_open = n == 2 && (bits[0] & (1u << 1)) &&
                     (bits[brace_quote >> 5] >> (brace_quote & 31) & 1u);
    tap_ok(only_open, "at the start only '{' and '{\"' are allowed (%d allowed)", n);
    tap_ok(tmask_accept(m, 0) == -1 && tmask_accept(m, 3) == -1, "end and '[' refused at the start");
    tmask_free(m);
    walks(g, v, small_vocab, lens, eog, 0, 200, 300, true, "person schema, small vocabulary");
    walks(any, v, small_vocab, lens, eog, 0, 200, 300, true, "json_object, small vocabulary");
    jsg_free(g);
    jsg_free(any);
    tmask_vocab_free(v);
}

/* The same walks on the default model's vocabulary (49,152 tokens). */
static void test_model_vocab(void)
{
    const char *path = getenv("TERN_TEST_MODEL");
    char def[512];
    if (!path) {
        snprintf(def, sizeof def, "%s/.local/share/tern/models/SmolLM2-135M-Instruct.Q4_1.gguf",
                 getenv("HOME") ? getenv("HOME") : "");
        path = def;
    }
    char err[256] = "";
    struct gguf_ctx *gg = gguf_open(path, err, sizeof err);
    if (!gg) {
        tap_skip("no model file (packaging/fetch-model)");
        return;
    }
    struct tok *t = tok_open(gg, err, sizeof err);
    struct tmask_vocab *v = t ? tmask_vocab_new(t, err, sizeof err) : NULL;
    tap_ok(v != NULL, "the model's vocabulary builds (%s), %d trie nodes", err,
           v ? tmask_trie_nodes(v) : 0);
    struct jsg *g = compile(person, err, sizeof err);
    if (v && g) {
        int32_t n = tmask_vocab_size(v);
        const char **texts = calloc((size_t)n, sizeof *texts);
        size_t *lens = calloc((size_t)n, sizeof *lens);
        bool *eogs = calloc((size_t)n, sizeof *eogs);
        for (int32_t i = 0; i < n; i++) eogs[i] = tok_is_eog(t, i);
        char *pool = malloc((size_t)n * 64);
        for (int32_t i = 0; i < n; i++) {
            lens[i] = tok_decode_token(t, i, pool + (size_t)i * 64, 64);
            if (lens[i] > 64) lens[i] = 64;
            texts[i] = pool + (size_t)i * 64;
        }
        int32_t eog = tok_eos(t);
        walks(g, v, texts, lens, eogs, eog, 40, 400, false, "person schema, model vocabulary");
        /* the consistency check on a few states (all 49k tokens each) */
        struct tmask *m = tmask_new(g, v);
        int32_t prefix[3] = {0}, np = 0, na;
        tap_ok(mask_consistent(g, v, prefix, 0, tmask_compute(m, &na)), "model vocabulary: start mask exact");
        const char *steps[] = {"{\"", "name", "\":\""};
        for (int i = 0; i < 3; i++) {
            int32_t id = tok_find_text(t, steps[i]);
            if (id >= 0 && tmask_accept(m, id) == 0) prefix[np++] = id;
        }
        tap_ok(np > 0 && mask_consistent(g, v, prefix, np, tmask_compute(m, &na)),
               "model vocabulary: mask exact after %d tokens (%d allowed)", np, na);
        tmask_free(m);
        free(texts);
        free(lens);
        free(eogs);
        free(pool);
    }
    jsg_free(g);
    tmask_vocab_free(v);
    if (t) tok_close(t);
    gguf_close(gg);
}

/* sampler_sample_masked draws exactly what sampler_sample draws from the
 * row with the masked-out logits at -inf (same seed, same token), greedy and
 * sampled, for random rows and masks of every density. */
static void test_masked_sampler(void)
{
    enum { NV = 1000, W = (NV + 31) / 32 };
    static float row[NV], a[NV], b[NV];
    static uint32_t allow[W];
    int same = 0, total = 0, inside = 1;
    for (int trial = 0; trial < 60; trial++) {
        struct sampler_params p;
        sampler_params_default(&p);
        p.seed = (uint64_t)trial;
        if (trial % 3 == 0) p.temperature = 0;
        if (trial % 4 == 1) p.top_k = 0, p.top_p = 1, p.min_p = 0;
        if (trial % 5 == 2) p.repeat_penalty = 1.3f, p.frequency_penalty = 0.5f;
        uint32_t density = 1 + (uint32_t)trial % 7; /* 1/2 .. 1/128 of the tokens */
        memset(allow, 0, sizeof allow);
        for (int i = 0; i < NV; i++) {
            row[i] = (float)(next_rand() % 4000) / 200.0f - 10.0f;
            if ((next_rand() & ((1u << density) - 1)) == 0) allow[i >> 5] |= 1u << (i & 31);
        }
        allow[7] |= 1u; /* at least one */
        struct sampler *s1 = sampler_init(&p, NV), *s2 = sampler_init(&p, NV);
        for (int k = 0; k < 10; k++) {
            memcpy(a, row, sizeof row);
            memcpy(b, row, sizeof row);
            tmask_apply(allow, b, NV);
            int32_t x = sampler_sample_masked(s1, a, NV, allow);
            int32_t y = sampler_sample(s2, b, NV);
            sampler_accept(s1, x);
            sampler_accept(s2, y);
            same += x == y;
            total++;
            inside &= (allow[x >> 5] >> (x & 31)) & 1u;
        }
        sampler_free(s1);
        sampler_free(s2);
    }
    tap_ok(same == total, "masked sampling equals sampling the -inf row: %d/%d draws", same, total);
    tap_ok(inside, "every masked draw is an allowed token");
}

int main(void)
{
    test_masked_sampler();
    test_matcher();
    test_errors();
    test_small_vocab();
    test_model_vocab();
    return tap_done();
}
