/* fuzz_tok: libFuzzer target for the tokenizer. The vocabularies of
 * $TERN_SHARED/tokenizer-suite are loaded once; each input's first byte
 * picks a vocabulary and the flags, the rest is the text. Checks, beyond
 * "no crash": the id count does not depend on the output buffer, every id
 * is in range, and the streamed text is valid UTF-8.
 *   build-fuzz/tests/engine/model/fuzz_tok -max_total_time=300 CORPUS tests/engine/model/tok/corpus
 * Without libFuzzer, test 'tok-fuzz-corpus' replays tests/engine/model/tok/corpus. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tok.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_VOCABS = 16 };
static struct tok *vocabs[MAX_VOCABS];
static int n_vocabs;

static int by_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *shared = getenv("TERN_SHARED");
    char dir[1024], path[1400], err[512];
    snprintf(dir, sizeof dir, "%s/tokenizer-suite", shared ? shared : "../shared");
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "fuzz_tok: cannot open %s (set TERN_SHARED)\n", dir);
        abort();
    }
    /* Sorted, so that an input's first byte picks the same vocabulary everywhere. */
    char names[MAX_VOCABS][256]; /* names longer than 255 bytes are skipped */
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < MAX_VOCABS;) {
        size_t l = strlen(e->d_name);
        if (l >= 5 && l < 256 && strcmp(e->d_name + l - 5, ".gguf") == 0) strcpy(names[n++], e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], by_name);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%.255s", dir, names[i]);
        struct gguf_ctx *g = gguf_open(path, err, sizeof err);
        struct tok *t = g ? tok_open(g, err, sizeof err) : NULL;
        if (g) gguf_close(g);
        if (t) vocabs[n_vocabs++] = t;
    }
    if (n_vocabs == 0) abort();
    return 0;
}

static int utf8_valid(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!k || i + k > n) return 0;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] & 0xc0) != 0x80) return 0;
        i += k;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (n_vocabs == 0) LLVMFuzzerInitialize(NULL, NULL); /* corpus replay has no init hook */
    if (size < 1) return 0;
    const struct tok *t = vocabs[data[0] % n_vocabs];
    unsigned flags = (data[0] >> 4) & (TOK_ADD_BOS | TOK_PARSE_SPECIAL);
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char err[256];
    int64_t n = tok_encode(t, text, len, flags, NULL, 0, err, sizeof err);
    if (n < 0) abort();
    int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
    if (!ids) return 0;
    if (tok_encode(t, text, len, flags, ids, n, err, sizeof err) != n) abort();
    struct tok_stream s;
    tok_stream_init(&s);
    size_t cap = tok_stream_cap(t);
    char *out = malloc(cap);
    for (int64_t i = 0; out && i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tok_n_vocab(t)) abort();
        size_t k = tok_stream_push(t, &s, ids[i], out, cap);
        if (!utf8_valid(out, k)) abort();
    }
    if (out && !utf8_valid(out, tok_stream_flush(&s, out, cap))) abort();
    size_t need = tok_decode(t, ids, (size_t)n, true, NULL, 0);
    char *all = malloc(need + 1);
    if (all && tok_decode(t, ids, (size_t)n, true, all, need + 1) != need) abort();
    free(all);
    free(out);
    free(ids);
    return 0;
}
