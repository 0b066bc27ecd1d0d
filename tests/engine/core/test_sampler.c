/* test_sampler: the sampling chain on hand-made logits. Expected
 * frequencies come from the softmax of the logits (computed here in
 * double), and draws are checked within 4.5 standard deviations. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"
#include "tap.h"

enum { DRAWS = 20000 };

static struct sampler_params plain(uint64_t seed)
{
    struct sampler_params p;
    sampler_params_default(&p);
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}

/* Draws DRAWS tokens from fixed logits; counts[n]. */
static void draw_many(const struct sampler_params *p, const float *logits, int32_t n,
                      int64_t *counts)
{
    struct sampler *s = sampler_init(p, n);
    float *row = malloc((size_t)n * sizeof *row);
    memset(counts, 0, (size_t)n * sizeof *counts);
    for (int i = 0; i < DRAWS; i++) {
        memcpy(row, logits, (size_t)n * sizeof *row);
        const int32_t t = sampler_sample(s, row, n);
        if (t >= 0 && t < n) counts[t]++;
    }
    free(row);
    sampler_free(s);
}

/* Checks counts against probabilities want[] (0 = must never appear). */
static void check_freq(const char *what, const int64_t *counts, const double *want, int32_t n)
{
    int good = 1;
    for (int32_t i = 0; i < n; i++) {
        const double mean = want[i] * DRAWS, sd = sqrt(DRAWS * want[i] * (1 - want[i]));
        const int fine = want[i] == 0.0 ? counts[i] == 0 : fabs((double)counts[i] - mean) <= 4.5 * sd + 1;
        if (!fine) tap_diag("  %s: token %d drawn %lld times, expected %.1f", what, i,
                            (long long)counts[i], mean);
        good &= fine;
    }
    ok(good, "%s: frequencies match the distribution", what);
}

/* softmax(logits / temp) restricted to keep[] (NULL = all). */
static void softmax_ref(const float *logits, int32_t n, double temp, const int *keep, double *out)
{
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        out[i] = keep && !keep[i] ? 0.0 : exp((double)logits[i] / temp);
        sum += out[i];
    }
    for (int32_t i = 0; i < n; i++) out[i] /= sum;
}

static void distributions(void)
{
    /* log-probabilities of 0.5, 0.25, 0.125, 0.0625, 0.0625 */
    const float lg[5] = { logf(0.5f), logf(0.25f), logf(0.125f), logf(0.0625f), logf(0.0625f) };
    int64_t counts[5];
    double want[5];
    struct sampler_params p = plain(7);

    draw_many(&p, lg, 5, counts);
    softmax_ref(lg, 5, 1.0, NULL, want);
    check_freq("temperature 1", counts, want, 5);

    p.temperature = 0.5f;
    draw_many(&p, lg, 5, counts);
    softmax_ref(lg, 5, 0.5, NULL, want);
    check_freq("temperature 0.5", counts, want, 5);

    p = plain(8);
    p.top_k = 2;
    draw_many(&p, lg, 5, counts);
    softmax_ref(lg, 5, 1.0, (const int[]){ 1, 1, 0, 0, 0 }, want);
    check_freq("top-k 2", counts, want, 5);

    p = plain(9);
    p.top_p = 0.8f; /* 0.5 + 0.25 < 0.8 <= 0.875: the first three */
    draw_many(&p, lg, 5, counts);
    softmax_ref(lg, 5, 1.0, (const int[]){ 1, 1, 1, 0, 0 }, want);
    check_freq("top-p 0.8", counts, want, 5);

    p = plain(10);
    p.min_p = 0.2f; /* keeps p >= 0.1: the first three */
    draw_many(&p, lg, 5, counts);
    softmax_ref(lg, 5, 1.0, (const int[]){ 1, 1, 1, 0, 0 }, want);
    check_freq("min-p 0.2", counts, want, 5);
}

/* top-p that needs more than the first 256 candidates: a flat row of 1000. */
static void wide_top_p(void)
{
    enum { N = 1000 };
    float lg[N];
    for (int i = 0; i < N; i++) lg[i] = i < 900 ? 0.0f : -1.0f;
    struct sampler_params p = plain(11);
    p.top_p = 0.5f;
    int64_t *counts = calloc(N, sizeof *counts);
    draw_many(&p, lg, N, counts);
    int64_t low = 0, high = 0, distinct = 0;
    for (int i = 0; i < N; i++) {
        if (i < 900) low += counts[i];
        else high += counts[i];
        distinct += counts[i] > 0;
    }
    ok(high == 0 && low == DRAWS, "top-p 0.5 of 1000: the low-probability tail is never "
       "drawn (%lld)", (long long)high);
    ok(distinct > 300, "top-p 0.5 of 1000: the kept set is wider than 256 (%lld distinct)",
       (long long)distinct);
    free(counts);
}

static void greedy_and_seeds(void)
{
    float lg[6] = { 0.1f, 2.0f, 2.0f, -1.0f, 1.9f, 0.0f };
    struct sampler_params p = plain(1);
    p.temperature = 0.0f;
    struct sampler *s = sampler_init(&p, 6);
    is_int(sampler_sample(s, lg, 6), 1, "greedy: argmax, first of equal maxima");
    sampler_free(s);

    float row[6];
    int32_t a[64], b[64], c[64];
    struct sampler_params q = plain(42);
    struct sampler *s1 = sampler_init(&q, 6), *s2 = sampler_init(&q, 6);
    q.seed = 43;
    struct sampler *s3 = sampler_init(&q, 6);
    for (int i = 0; i < 64; i++) {
        memcpy(row, lg, sizeof row);
        a[i] = sampler_sample(s1, row, 6);
        memcpy(row, lg, sizeof row);
        b[i] = sampler_sample(s2, row, 6);
        memcpy(row, lg, sizeof row);
        c[i] = sampler_sample(s3, row, 6);
    }
    ok(memcmp(a, b, sizeof a) == 0, "same seed, same tokens");
    ok(memcmp(a, c, sizeof a) != 0, "different seed, different tokens");
    sampler_reset(s1);
    memcpy(row, lg, sizeof row);
    is_int(sampler_sample(s1, row, 6), a[0], "reset replays the seed");
    sampler_free(s1);
    sampler_free(s2);
    sampler_free(s3);
}

static int32_t greedy_after(struct sampler_params p, const float *lg, int32_t n,
                            const int32_t *hist, int nh)
{
    float row[8];
    p.temperature = 0.0f;
    struct sampler *s = sampler_init(&p, n);
    for (int i = 0; i < nh; i++) sampler_accept(s, hist[i]);
    memcpy(row, lg, (size_t)n * sizeof *row);
    const int32_t t = sampler_sample(s, row, n);
    sampler_free(s);
    return t;
}

static void penalties(void)
{
    const float lg[3] = { 2.0f, 1.5f, -1.0f };
    struct sampler_params p = plain(1);
    p.penalty_last_n = 4;
    is_int(greedy_after(p, lg, 3, (const int32_t[]){ 0 }, 1), 0, "no penalty: token 0");
    p.repeat_penalty = 2.0f; /* 2.0 / 2 = 1.0 < 1.5 */
    is_int(greedy_after(p, lg, 3, (const int32_t[]){ 0 }, 1), 1,
           "repeat penalty 2 divides a positive logit");
    const float neg[3] = { -1.0f, -1.5f, -9.0f }; /* -1 * 2 = -2 < -1.5 */
    is_int(greedy_after(p, neg, 3, (const int32_t[]){ 0 }, 1), 1,
           "repeat penalty 2 multiplies a negative logit");
    p.repeat_penalty = 1.0f;
    p.frequency_penalty = 0.3f; /* 2.0 - 0.3 = 1.7 > 1.5; twice: 1.4 < 1.5 */
    is_int(greedy_after(p, lg, 3, (const int32_t[]){ 0 }, 1), 0, "frequency penalty, once");
    is_int(greedy_after(p, lg, 3, (const int32_t[]){ 0, 0 }, 2), 1,
           "frequency penalty counts occurrences");
    p.frequency_penalty = 0.0f;
    p.presence_penalty = 0.6f; /* 2.0 - 0.6 = 1.4 < 1.5, however often */
    is_int(greedy_after(p, lg, 3, (const int32_t[]){ 0 }, 1), 1, "presence penalty");
    p.presence_penalty = 0.4f;
    is_int(greedy_after(p, lg, 3, (const int32_t[]){ 0, 0, 0 }, 3), 0,
           "presence penalty does not count occurrences");
    p.presence_penalty = 0.6f;
    is_int(greedy_after(p, lg, 3, (const int32_t[]){ 0, 2, 2, 2, 2 }, 5), 0,
           "penalties only see the last penalty_last_n tokens");
}

int main(void)
{
    greedy_and_seeds();
    distributions();
    wide_top_p();
    penalties();
    return tap_done();
}
