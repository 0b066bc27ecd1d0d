/* test_tok_golden: SmolLM2 and Gemma 3 must give exactly the reference
 * engine's ids (tests/engine/model/tok/golden/<model>.ids, made by make_golden.py) on the
 * shared texts and on our own inputs; decode(encode(x)) == x where lossless.
 * Models come from packaging/fetch-model; a missing model fails the test.
 *   test_tok_golden --bench   prints encode throughput (MB/s) per text */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "tok.h"
#include "tap.h"
#include "tok_testutil.h"

static uint64_t fnv_ids(const int32_t *ids, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)ids[i];
        for (int b = 0; b < 4; b++) h = (h ^ ((v >> (8 * b)) & 0xff)) * 1099511628211ull;
    }
    return h;
}

/* Compares ids with one golden line body (ids, or '#' and chunk hashes). */
static int matches(const int32_t *ids, int64_t n, long want_n, char *body, char *why, size_t wl)
{
    if (n != want_n) {
        snprintf(why, wl, "got %lld ids, want %ld", (long long)n, want_n);
        return 0;
    }
    char *q = body;
    while (*q == ' ') q++;
    if (*q == '#') {
        q++;
        for (long k = 0; k < n; k += 512) {
            uint64_t want = strtoull(q, &q, 16);
            size_t len = (size_t)(n - k < 512 ? n - k : 512);
            if (fnv_ids(ids + k, len) != want) {
                snprintf(why, wl, "ids %ld..%ld differ from the reference", k, k + (long)len - 1);
                return 0;
            }
        }
        return 1;
    }
    for (long i = 0; i < n; i++) {
        long v = strtol(q, &q, 10);
        if (v != ids[i]) {
            snprintf(why, wl, "id %ld: got %d, want %ld", i, ids[i], v);
            return 0;
        }
    }
    return 1;
}

static int roundtrip(const struct tok *t, const char *text, size_t len, const int32_t *ids, int64_t n)
{
    size_t need = tok_decode(t, ids, (size_t)n, false, NULL, 0);
    char *buf = malloc(need + 1);
    if (!buf) return 0;
    tok_decode(t, ids, (size_t)n, false, buf, need + 1);
    int same = need == len && memcmp(buf, text, len) == 0;
    free(buf);
    return same;
}

/* CPU time of this process: the figure stays meaningful on a shared, loaded machine. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void bench(const struct tok *t, const char *model, const char *name, const char *text,
                  size_t len, int32_t *ids, int64_t cap)
{
    char err[256];
    int reps = 0;
    double t0 = now_s(), el;
    /* Bounded by ~1 s per text: enough repetitions for a stable figure. */
    do {
        tok_encode(t, text, len, 0, ids, cap, err, sizeof err);
        reps++;
        el = now_s() - t0;
    } while (el < 1.0);
    printf("bench %s %s: %zu bytes, %.2f MB/s of CPU time (%d runs, %.1f ms each)\n", model, name, len,
           (double)len * reps / el / 1e6, reps, el / reps * 1e3);
}

static void run_model(const char *src, const char *shared, const char *key, const char *fetch,
                      bool do_bench)
{
    char path[1024], err[512], gpath[1024];
    if (tt_model_path(src, fetch, path, sizeof path)) {
        ok(0, "%s: packaging/fetch-model --model %s could not provide the model", key, fetch);
        return;
    }
    struct gguf_ctx *g = gguf_open(path, err, sizeof err);
    struct tok *t = g ? tok_open(g, err, sizeof err) : NULL;
    if (g) gguf_close(g);
    if (!t) {
        ok(0, "%s: open %s: %s", key, path, err);
        return;
    }
    snprintf(gpath, sizeof gpath, "%s/tests/engine/model/tok/golden/%s.ids", src, key);
    size_t gl;
    char *gold = tt_slurp(gpath, &gl);
    if (!gold) {
        ok(0, "%s: cannot read %s", key, gpath);
        tok_close(t);
        return;
    }
    int64_t cap = 1 << 17;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    char *save = NULL;
    for (char *line = strtok_r(gold, "\n", &save); line && ids; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') continue;
        char srcname[16], name[128], flags[8];
        long want_n;
        int used = 0;
        if (sscanf(line, "%15s %127s %7s %ld%n", srcname, name, flags, &want_n, &used) != 4) continue;
        char tpath[1400];
        if (strcmp(srcname, "shared") == 0) snprintf(tpath, sizeof tpath, "%s/texts/%s", shared, name);
        else snprintf(tpath, sizeof tpath, "%s/tests/engine/model/tok/golden/inputs/%s", src, name);
        size_t len;
        char *text = tt_slurp(tpath, &len);
        if (!text) {
            ok(0, "%s %s: cannot read %s", key, name, tpath);
            continue;
        }
        unsigned fl = (strchr(flags, 'b') ? TOK_ADD_BOS : 0) | (strchr(flags, 's') ? TOK_PARSE_SPECIAL : 0);
        int64_t n = tok_encode(t, text, len, fl, ids, cap, err, sizeof err);
        char why[256] = "";
        ok(n >= 0 && n <= cap && matches(ids, n, want_n, line + used, why, sizeof why),
           "%s %s [%s]: %ld ids as the reference %s", key, name, flags, want_n, why);
        /* Lossless on valid UTF-8. Not for invalid-utf8.txt (SPM: a bad lead byte
         * swallows the next ▁; BPE: U+FFFD) nor, in BPE, nul-and-controls.txt (the
         * reference merges "\x1c\x1d" to a non-token and drops its bytes). */
        bool lossless = fl == 0 && strcmp(name, "invalid-utf8.txt") != 0 &&
                        (strcmp(tok_model_name(t), "llama") == 0 ||
                         strcmp(name, "nul-and-controls.txt") != 0);
        if (lossless && n >= 0 && n <= cap)
            ok(roundtrip(t, text, len, ids, n), "%s %s: decode(encode(x)) == x", key, name);
        if (do_bench && strcmp(srcname, "shared") == 0) bench(t, key, name, text, len, ids, cap);
        free(text);
    }
    free(ids);
    free(gold);
    tok_close(t);
}

int main(int argc, char **argv)
{
    bool do_bench = argc > 1 && strcmp(argv[1], "--bench") == 0;
    const char *src = getenv("TERN_SRC"), *shared = getenv("TERN_SHARED");
    if (!src || !shared) return tap_bail("TERN_SRC and TERN_SHARED must be set");
    run_model(src, shared, "smollm2", "smollm2", do_bench);
    run_model(src, shared, "gemma3", "gemma3-270m", do_bench);
    return tap_done();
}
