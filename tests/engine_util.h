/* engine_util: helpers shared by the engine tests (header-only): the model
 * path from packaging/fetch-model, a CPU backend on it, and one-sequence
 * forward calls with a trivial block table. */
#ifndef TERN_ENGINE_UTIL_H
#define TERN_ENGINE_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"

/* Model path from packaging/fetch-model (it downloads when missing); 0 on success. */
static inline int eu_model_path(const char *which, char *buf, size_t n)
{
    const char *src = getenv("TERN_SRC");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s/packaging/fetch-model' --model %s --print-path",
             src ? src : ".", which);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    buf[0] = 0;
    if (!fgets(buf, (int)n, p)) buf[0] = 0;
    int rc = pclose(p);
    buf[strcspn(buf, "\n")] = 0;
    return rc == 0 && buf[0] ? 0 : -1;
}

/* A test's MODEL argument: a path, or "--default-model" for the default
 * model of packaging/fetch-model. 0 on success. */
static inline int eu_model_arg(const char *arg, char *buf, size_t n)
{
    if (strcmp(arg, "--default-model") == 0) return eu_model_path("smollm2", buf, n);
    snprintf(buf, n, "%s", arg);
    return 0;
}

static inline struct backend *eu_cpu(const struct model *m, int threads, int scalar, enum kv_type kv,
                              uint64_t kv_bytes, char *err, size_t errlen)
{
    struct backend_config cfg = {
        .kind = BACKEND_CPU, .threads = threads, .kv_type = kv, .kv_block_tokens = 16,
        .kv_bytes = kv_bytes, .max_batch_tokens = 64, .max_seqs = 4, .force_scalar = scalar != 0,
    };
    return backend_cpu_open(m, &cfg, err, errlen);
}

/* Feeds tokens[0..n) of one sequence (positions p0..) in chunks of `chunk`,
 * calling row(ud, pos, logits) for every position when want_all, else only
 * for the last. table: block ids 0..; returns 0 or -1 with err. */
typedef void (*eu_row_fn)(void *ud, int32_t pos, const float *logits);
static inline int eu_feed(struct backend *be, const int32_t *table, int32_t n_blocks,
                   const int32_t *tokens, int32_t n, int32_t p0, int32_t chunk, int want_all,
                   eu_row_fn row, void *ud, float *logits, char *err, size_t errlen)
{
    int32_t tok[512], pos[512], seq[512];
    uint8_t want[512];
    const int32_t nv = be->model->hp.n_vocab;
    const struct fwd_seq s = { table, n_blocks };
    if (chunk > 512) chunk = 512;
    for (int32_t i = 0; i < n; i += chunk) {
        const int32_t k = n - i < chunk ? n - i : chunk;
        for (int32_t j = 0; j < k; j++) {
            tok[j] = tokens[i + j];
            pos[j] = p0 + i + j;
            seq[j] = 0;
            want[j] = want_all || i + j == n - 1;
        }
        const struct fwd_batch b = { k, tok, pos, seq, want, 1, &s };
        if (backend_forward(be, &b, logits, err, errlen)) return -1;
        int32_t r = 0;
        for (int32_t j = 0; j < k; j++)
            if (want[j] && row) row(ud, pos[j], logits + (size_t)r++ * nv);
    }
    return 0;
}

/* Cosine similarity of two rows (0 when either is all zeros). */
static inline double eu_cosine(const float *a, const float *b, int32_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (int32_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0;
}

/* Tokens [p0, p1) of one sequence in one forward (p1 - p0 <= 512), blocks
 * 0..n_blocks-1 as its table (n_blocks <= 64), every row a hidden state (dim
 * floats at the start of each n_vocab slot of out). */
static inline int eu_fwd_hidden(struct backend *be, const int32_t *toks, int32_t p0, int32_t p1,
                                int32_t n_blocks, float *out, char *err, size_t errlen)
{
    int32_t pos[512], seq[512], table[64];
    uint8_t want[512];
    if (p1 - p0 > 512 || n_blocks > 64) {
        snprintf(err, errlen, "eu_fwd_hidden: %d tokens, %d blocks (at most 512, 64)", p1 - p0, n_blocks);
        return -1;
    }
    for (int32_t i = 0; i < p1 - p0; i++) {
        pos[i] = p0 + i;
        seq[i] = 0;
        want[i] = FWD_WANT_EMBD;
    }
    for (int32_t i = 0; i < n_blocks; i++) table[i] = i;
    struct fwd_seq fs = { table, n_blocks };
    struct fwd_batch b = { p1 - p0, toks + p0, pos, seq, want, 1, &fs };
    return backend_forward(be, &b, out, err, errlen);
}

static inline int32_t eu_argmax(const float *x, int32_t n)
{
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

#endif
