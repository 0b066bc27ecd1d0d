/* test_tok_suite: the tokenizer conformance suite in $TERN_SHARED/tokenizer-suite.
 * Every case of every vocabulary must give exactly the reference engine's
 * ids (no BOS/EOS, special text as plain text); decode(encode(x)) must give
 * x back where the tokenizer is lossless. Fails when the folder is missing. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "tok.h"
#include "tap.h"
#include "tok_testutil.h"

/* Lossless means: text comes back byte for byte. SentencePiece loses nothing;
 * byte-level BPE loses invalid UTF-8 (it becomes U+FFFD). User-defined tokens
 * matched inside SPM text add a space prefix to what follows, so skip those. */
static int check_roundtrip(const struct tok *t, const char *text, size_t len, const int32_t *ids,
                           int64_t n)
{
    bool spm = strcmp(tok_model_name(t), "llama") == 0;
    for (int64_t i = 0; spm && i < n; i++)
        if (tok_token_type(t, ids[i]) == TOK_TYPE_USER_DEFINED) return -1;
    size_t need = tok_decode(t, ids, (size_t)n, false, NULL, 0);
    char *buf = malloc(need + 1);
    if (!buf) return 0;
    tok_decode(t, ids, (size_t)n, false, buf, need + 1);
    int same = need == len && memcmp(buf, text, len) == 0;
    free(buf);
    return same;
}

static void run_vocab(const char *dir, const char *name)
{
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct gguf_ctx *g = gguf_open(path, err, sizeof err);
    if (!g) {
        ok(0, "%s: open: %s", name, err);
        return;
    }
    struct tok *t = tok_open(g, err, sizeof err);
    gguf_close(g);
    if (!t) {
        ok(0, "%s: tok_open: %s", name, err);
        return;
    }
    size_t ni, no;
    char pin[1100], pout[1100];
    snprintf(pin, sizeof pin, "%s.inp", path);
    snprintf(pout, sizeof pout, "%s.out", path);
    char *inp = tt_slurp(pin, &ni), *out = tt_slurp(pout, &no);
    if (!inp || !out) {
        ok(0, "%s: cannot read .inp/.out", name);
        goto done;
    }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *p = inp, *line = out;
    int cases = 0, pass = 0, rt_checked = 0, rt_pass = 0;
    for (char *e; (e = strstr(p, sep)) != NULL; p = e + strlen(sep)) {
        size_t len = (size_t)(e - p);
        char *nl = strchr(line, '\n');
        if (!nl) break;
        *nl = 0;
        int32_t want[4096], got[4096];
        int nw = 0;
        for (char *q = line; *q && nw < 4096;) {
            char *end;
            long v = strtol(q, &end, 10);
            if (end == q) break;
            want[nw++] = (int32_t)v;
            q = end;
        }
        line = nl + 1;
        int64_t n = tok_encode(t, p, len, 0, got, 4096, err, sizeof err);
        cases++;
        int same = n == nw && memcmp(got, want, (size_t)nw * sizeof *got) == 0;
        if (same) {
            pass++;
        } else {
            char shown[256];
            size_t k = 0;
            for (size_t i = 0; i < len && k + 5 < sizeof shown; i++) /* one diag line: escape controls */
                k += (size_t)snprintf(shown + k, sizeof shown - k, (unsigned char)p[i] < 0x20 ? "\\x%02x" : "%c",
                                      (unsigned char)p[i]);
            shown[k] = 0;
            tap_diag("%s case %d (%zu bytes) '%s': got %lld ids, want %d", name, cases, len, shown,
                     (long long)n, nw);
            for (int i = 0; i < nw || i < n; i++)
                if (i >= nw || i >= n || got[i] != want[i]) {
                    tap_diag("  first difference at %d: got %d want %d", i, i < n ? got[i] : -1,
                             i < nw ? want[i] : -1);
                    break;
                }
        }
        if (n >= 0 && n <= 4096) {
            int r = check_roundtrip(t, p, len, got, n);
            if (r >= 0) {
                rt_checked++;
                rt_pass += r;
                if (!r) tap_diag("%s case %d: decode(encode(x)) != x", name, cases);
            }
        }
    }
    ok(cases > 0 && pass == cases, "%s: %d/%d cases give the reference ids", name, pass, cases);
    ok(rt_checked > 0 && rt_pass == rt_checked, "%s: decode(encode(x)) == x for %d/%d cases", name,
       rt_pass, rt_checked);
done:
    free(inp);
    free(out);
    tok_close(t);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* test_tok_suite [DIR]: DIR replaces $TERN_SHARED/tokenizer-suite (e.g. the
 * reference engine's models/ folder, which holds more vocabularies). */
int main(int argc, char **argv)
{
    const char *shared = getenv("TERN_SHARED");
    if (!shared && argc < 2) return tap_bail("TERN_SHARED is not set");
    char dir[1024];
    if (argc > 1) snprintf(dir, sizeof dir, "%s", argv[1]);
    else snprintf(dir, sizeof dir, "%s/tokenizer-suite", shared);
    DIR *d = opendir(dir);
    if (!d) return tap_bail("cannot open %s", dir);
    char *names[64];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < 64;) {
        size_t l = strlen(e->d_name);
        char inp[1400];
        snprintf(inp, sizeof inp, "%s/%s.inp", dir, e->d_name);
        /* vocabularies without test inputs (the reference's models/ has some) are not cases */
        if (l > 5 && strcmp(e->d_name + l - 5, ".gguf") == 0 && (argc < 2 || access(inp, R_OK) == 0))
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    ok(n >= 7, "suite has %d vocabularies (want at least 7)", n);
    for (int i = 0; i < n; i++) {
        run_vocab(dir, names[i]);
        free(names[i]);
    }
    return tap_done();
}
