/* bench_grammar: what structured output costs per decode step.
 *
 *   1. The mask alone: real replies (JSON texts of the kind the models give)
 *      are tokenized with the model's tokenizer and replayed token by token;
 *      each step computes the mask (tmask_compute), applies it to a logits
 *      row (tmask_apply) and advances (tmask_accept). Timed per step at batch
 *      1 (one request) and batch 32 (32 requests, each at its own place in
 *      its reply, one mask each per step), with each request's mask cache
 *      cold at its start, as in the server.
 *   2. The decode step it is compared with: the engine on the same model,
 *      1 and 32 requests decoding together (mean TPOT), unconstrained and
 *      under json_object (the whole path: mask, masked sampling, advance).
 * Part 1 times the grammar's own work (compute + accept); the sampler then
 * draws among the allowed tokens only (sampler_sample_masked), which costs
 * less than its unconstrained draw over the whole row (printed beside).
 *
 * usage: bench_grammar [MODEL.gguf] [threads]   (figures: docs/PERFORMANCE.md) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "gguf.h"
#include "jsg.h"
#include "sampler.h"
#include "tmask.h"
#include "tok.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct cas {
    const char *name, *schema; /* NULL schema: json_object */
    const char *reply;
};

static const struct cas cases[] = {
    {"nested object",
     "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":"
     "\"integer\"},\"address\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
     "\"zip\":{\"type\":\"string\"}},\"required\":[\"city\",\"zip\"],\"additionalProperties\":false}},"
     "\"required\":[\"name\",\"age\",\"address\"],\"additionalProperties\":false}",
     "{\n  \"name\": \"Ann\",\n  \"age\": 31,\n  \"address\": {\n    \"city\": \"Paris\",\n    "
     "\"zip\": \"00001\"\n  }\n}"},
    {"enums + number",
     "{\"type\":\"object\",\"properties\":{\"sentiment\":{\"enum\":[\"positive\",\"negative\","
     "\"neutral\"]},\"confidence\":{\"type\":\"number\"},\"sarcastic\":{\"type\":\"boolean\"}},"
     "\"required\":[\"sentiment\",\"confidence\",\"sarcastic\"],\"additionalProperties\":false}",
     "{\"sentiment\": \"positive\", \"confidence\": 0.93, \"sarcastic\": false}"},
    {"array of $defs",
     "{\"$defs\":{\"p\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"},\"y\":"
     "{\"type\":\"number\"},\"label\":{\"anyOf\":[{\"type\":\"string\",\"maxLength\":40},"
     "{\"type\":\"null\"}]}},\"required\":[\"x\",\"y\",\"label\"],\"additionalProperties\":false}},"
     "\"type\":\"object\",\"properties\":{\"points\":{\"type\":\"array\",\"items\":{\"$ref\":"
     "\"#/$defs/p\"}}},\"required\":[\"points\"],\"additionalProperties\":false}",
     "{\"points\": [{\"x\": 0, \"y\": 0, \"label\": \"origin\"}, {\"x\": 3.5, \"y\": -4, \"label\": "
     "null}, {\"x\": 10, \"y\": 12.25, \"label\": \"the far corner of the field\"}, {\"x\": 1, "
     "\"y\": 1, \"label\": \"one\"}, {\"x\": 2, \"y\": 4, \"label\": \"two\"}]}"},
    {"json_object, long text", NULL,
     "{\"title\": \"A walk in Lisbon\", \"summary\": \"We started at the river in the early "
     "morning, climbed the hills of Alfama past tiled houses and small cafes, stopped for "
     "coffee and a pastry, watched the trams squeeze through the narrow streets, and ended "
     "the day at a viewpoint above the red roofs as the sun went down over the water.\", "
     "\"tags\": [\"travel\", \"city\", \"walking\"], \"rating\": 4.5}"},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))
#define BATCH 32
#define ROUNDS 5

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Replays one case: batch requests, request i starting i steps into the
 * reply (so the batch is spread over its states); returns mean µs per step
 * and fills the p99 and the cache hit rate. */
static double replay(struct tmask_vocab *v, const struct jsg *g, const int32_t *ids, int32_t n,
                     int batch, double *p99, double *hit_rate)
{
    int32_t steps = n + 1; /* the last mask allows the end token */
    double *t = malloc((size_t)steps * ROUNDS * sizeof *t);
    int32_t nt = 0;
    uint64_t hits = 0, misses = 0;
    for (int round = 0; round < ROUNDS; round++) {
        struct tmask *m[BATCH];
        int32_t pos[BATCH];
        for (int b = 0; b < batch; b++) {
            m[b] = tmask_new(g, v);
            pos[b] = 0;
            /* the batch's requests are spread over the reply */
            for (int32_t k = 0; k < (b * n) / batch; k++) tmask_accept(m[b], ids[pos[b]++]);
            uint64_t h, mi;
            tmask_cache_stats(m[b], &h, &mi);
        }
        for (int32_t s = 0; s < steps; s++) {
            double t0 = now();
            for (int b = 0; b < batch; b++) {
                int32_t na;
                (void)tmask_compute(m[b], &na);
                if (pos[b] < n) tmask_accept(m[b], ids[pos[b]++]);
                else { /* wrap: a new request with a cold cache, as in a server */
                    uint64_t h, mi;
                    tmask_cache_stats(m[b], &h, &mi);
                    hits += h;
                    misses += mi;
                    tmask_free(m[b]);
                    m[b] = tmask_new(g, v);
                    pos[b] = 0;
                }
            }
            t[nt++] = (now() - t0) * 1e6;
        }
        for (int b = 0; b < batch; b++) {
            uint64_t h, mi;
            tmask_cache_stats(m[b], &h, &mi);
            hits += h;
            misses += mi;
            tmask_free(m[b]);
        }
    }
    double sum = 0;
    for (int32_t i = 0; i < nt; i++) sum += t[i];
    qsort(t, (size_t)nt, sizeof *t, cmp_d);
    *p99 = t[(nt * 99) / 100 < nt ? (nt * 99) / 100 : nt - 1];
    *hit_rate = hits + misses ? (double)hits / (double)(hits + misses) : 0;
    free(t);
    return sum / nt;
}

static int mask_bench(const char *path)
{
    char err[256] = "";
    struct gguf_ctx *gg = gguf_open(path, err, sizeof err);
    struct tok *t = gg ? tok_open(gg, err, sizeof err) : NULL;
    if (!t) {
        fprintf(stderr, "bench_grammar: %s\n", err);
        return 1;
    }
    double t0 = now();
    struct tmask_vocab *v = tmask_vocab_new(t, err, sizeof err);
    if (!v) {
        fprintf(stderr, "bench_grammar: %s\n", err);
        return 1;
    }
    int32_t nv = tmask_vocab_size(v);
    printf("vocabulary %d tokens, trie %d nodes, built in %.1f ms (once per engine)\n", nv,
           tmask_trie_nodes(v), (now() - t0) * 1e3);
    float *row = calloc((size_t)nv, sizeof *row);
    uint64_t x = 1;
    for (int32_t i = 0; i < nv; i++) { /* a spread of logits, fixed */
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        row[i] = (float)((x >> 40) % 2000) / 100.0f - 10.0f;
    }
    printf("%-24s %6s %5s %12s %12s %9s\n", "schema", "tokens", "batch", "mean us/step",
           "p99 us/step", "cache hit");
    for (int c = 0; c < N_CASES; c++) {
        const char *s = cases[c].schema;
        struct jsg *g = jsg_compile(s, s ? strlen(s) : 0, s == NULL, err, sizeof err);
        int32_t ids[2048];
        int64_t n = tok_encode(t, cases[c].reply, strlen(cases[c].reply), 0, ids, 2048, err,
                               sizeof err);
        if (!g || n <= 0) {
            fprintf(stderr, "bench_grammar: %s: %s\n", cases[c].name, err);
            return 1;
        }
        /* the reply must be one the grammar takes, token by token */
        struct tmask *chk = tmask_new(g, v);
        for (int64_t i = 0; i < n; i++)
            if (tmask_accept(chk, ids[i]) != 0) {
                fprintf(stderr, "bench_grammar: %s: token %lld refused\n", cases[c].name,
                        (long long)i);
                return 1;
            }
        tmask_free(chk);
        int batches[2] = {1, BATCH};
        for (int b = 0; b < 2; b++) {
            double p99, hit;
            double mean = replay(v, g, ids, (int32_t)n, batches[b], &p99, &hit);
            printf("%-24s %6lld %5d %12.1f %12.1f %8.0f%%\n", cases[c].name, (long long)n,
                   batches[b], mean, p99, hit * 100);
        }
        /* the sampler (defaults: temperature 0.8, top-k 40, top-p 0.95,
         * min-p 0.05) on the first mask, against its unconstrained draw */
        struct sampler_params sp;
        sampler_params_default(&sp);
        struct sampler *smp = sampler_init(&sp, nv);
        struct tmask *m = tmask_new(g, v);
        int32_t na;
        const uint32_t *bits = tmask_compute(m, &na);
        double ts0 = now();
        for (int i = 0; i < 200; i++) sampler_sample_masked(smp, row, nv, bits);
        double ts1 = now();
        for (int i = 0; i < 200; i++) sampler_sample(smp, row, nv);
        double ts2 = now();
        printf("%-24s sampler: %.1f us masked (%d allowed), %.1f us unconstrained\n", "",
               (ts1 - ts0) / 200 * 1e6, na, (ts2 - ts1) / 200 * 1e6);
        tmask_free(m);
        sampler_free(smp);
        jsg_free(g);
    }
    free(row);
    tmask_vocab_free(v);
    tok_close(t);
    gguf_close(gg);
    return 0;
}

/* Mean time per output token (TPOT: one decode step each) of n requests
 * decoding 64 tokens together. */
static double engine_tpot(struct engine *e, int n, bool json)
{
    engine_pause(e, true);
    for (int i = 0; i < n; i++) {
        struct engine_message msg = {"user", "Write a long story about a cat, as JSON."};
        struct engine_request q = {.messages = &msg, .n_messages = 1, .max_tokens = 64,
                                   .ignore_eos = !json, .json_object = json};
        engine_sampling_default(&q.sampling);
        q.sampling.seed = (uint64_t)i + 1;
        char err[256];
        enum engine_status why;
        if (!engine_submit(e, &q, &why, err, sizeof err))
            fprintf(stderr, "bench_grammar: submit: %s\n", err);
    }
    engine_pause(e, false);
    int left = n, k_tpot = 0;
    double tpot = 0;
    while (left > 0) {
        struct engine_event ev[64];
        engine_wait_events(e, 0, 1.0);
        int k = engine_poll_events(e, ev, 64);
        for (int i = 0; i < k; i++) {
            if (ev[i].type == ENGINE_EV_FINISHED) {
                left--;
                if (ev[i].metrics && ev[i].metrics->n_generated > 8) {
                    tpot += ev[i].metrics->tpot_s;
                    k_tpot++;
                }
            }
            engine_event_free(&ev[i]);
        }
    }
    return k_tpot ? tpot / k_tpot * 1e6 : 0;
}

static int step_bench(const char *path, int threads)
{
    struct engine_config cfg;
    engine_config_default(&cfg);
    cfg.model_path = path;
    cfg.backend.kind = BACKEND_CPU;
    cfg.backend.threads = threads;
    cfg.n_ctx = 512;
    char err[512];
    struct engine *e = engine_open(&cfg, err, sizeof err);
    if (!e) {
        fprintf(stderr, "bench_grammar: %s\n", err);
        return 1;
    }
    printf("\nengine on the same model, %d thread(s): mean TPOT (one decode step per token)\n",
           threads);
    int batches[2] = {1, BATCH};
    for (int b = 0; b < 2; b++) {
        double plain = engine_tpot(e, batches[b], false);
        double json = engine_tpot(e, batches[b], true);
        printf("batch %2d: %10.1f us/step unconstrained, %10.1f us/step json_object\n",
               batches[b], plain, json);
    }
    engine_close(e);
    return 0;
}

int main(int argc, char **argv)
{
    char def[512];
    const char *path = argc > 1 ? argv[1] : getenv("TERN_TEST_MODEL");
    if (!path) {
        snprintf(def, sizeof def, "%s/.local/share/tern/models/SmolLM2-135M-Instruct.Q4_1.gguf",
                 getenv("HOME") ? getenv("HOME") : "");
        path = def;
    }
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    if (mask_bench(path) != 0) return 1;
    return step_bench(path, threads);
}
