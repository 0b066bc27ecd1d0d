/* sampler: the sampling chain of one request, in the reference's order:
 * penalties → top-k → top-p → min-p → temperature → seeded draw. Candidates
 * are (id, logit) pairs; only the filters that need an order sort, and top-p
 * first tries the best 256 before sorting the whole vocabulary. */
#include "sampler.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct cand {
    int32_t id;
    float logit;
};

struct sampler {
    struct sampler_params p;
    int32_t n_vocab;
    struct cand *c;           /* [n_vocab] candidates of the current step */
    int32_t *window;          /* ring of the last penalty_last_n accepted tokens */
    int32_t *sorted;          /* scratch: sorted copy of window */
    int32_t n_win, head;
    uint64_t rng[4];          /* xoshiro256** */
};

void sampler_params_default(struct sampler_params *p)
{
    *p = (struct sampler_params){
        .temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
        .repeat_penalty = 1.0f, .presence_penalty = 0.0f, .frequency_penalty = 0.0f,
        .penalty_last_n = 64, .seed = 0,
    };
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t next_u64(uint64_t *s)
{
    const uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
static double next_unit(uint64_t *s)
{
    return (double)(next_u64(s) >> 11) * 0x1.0p-53;
}

void sampler_reset(struct sampler *s)
{
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    s->n_win = 0;
    s->head = 0;
}

struct sampler *sampler_init(const struct sampler_params *p, int32_t n_vocab)
{
    if (n_vocab <= 0) return NULL;
    struct sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = *p;
    if (s->p.penalty_last_n < 0) s->p.penalty_last_n = 0;
    s->n_vocab = n_vocab;
    s->c = malloc((size_t)n_vocab * sizeof *s->c);
    const size_t w = (size_t)s->p.penalty_last_n + 1;
    s->window = malloc(w * sizeof *s->window);
    s->sorted = malloc(w * sizeof *s->sorted);
    if (!s->c || !s->window || !s->sorted) {
        sampler_free(s);
        return NULL;
    }
    sampler_reset(s);
    return s;
}

void sampler_free(struct sampler *s)
{
    if (!s) return;
    free(s->c);
    free(s->window);
    free(s->sorted);
    free(s);
}

void sampler_accept(struct sampler *s, int32_t token)
{
    const int32_t n = s->p.penalty_last_n;
    if (n <= 0) return;
    s->window[s->head] = token;
    s->head = (s->head + 1) % n;
    if (s->n_win < n) s->n_win++;
}

static int cmp_i32(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void penalize(struct sampler *s, float *logits)
{
    const struct sampler_params *p = &s->p;
    if (!s->n_win || (p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f &&
                      p->frequency_penalty == 0.0f))
        return;
    memcpy(s->sorted, s->window, (size_t)s->n_win * sizeof *s->sorted);
    qsort(s->sorted, (size_t)s->n_win, sizeof *s->sorted, cmp_i32);
    for (int32_t i = 0; i < s->n_win;) {
        int32_t j = i;
        while (j < s->n_win && s->sorted[j] == s->sorted[i]) j++;
        const int32_t tok = s->sorted[i], count = j - i;
        i = j;
        if (tok < 0 || tok >= s->n_vocab) continue;
        float *l = &logits[tok];
        if (p->repeat_penalty != 1.0f && p->repeat_penalty > 0.0f)
            *l = *l <= 0.0f ? *l * p->repeat_penalty : *l / p->repeat_penalty;
        *l -= (float)count * p->frequency_penalty + p->presence_penalty;
    }
}

static int32_t argmax(const float *logits, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

/* Descending by logit, then ascending id, so equal logits order stably. */
static int cmp_cand(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

static bool better(const struct cand *a, const struct cand *b)
{
    return cmp_cand(a, b) < 0;
}

static void sift_down(struct cand *h, int32_t n, int32_t i)
{
    /* min-heap by "better": the root is the worst kept candidate */
    for (;;) {
        int32_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && better(&h[w], &h[l])) w = l;
        if (r < n && better(&h[w], &h[r])) w = r;
        if (w == i) return;
        struct cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

/* Moves the k best of c[0..n) to the front, sorted. O(n log k). */
static void select_top(struct cand *c, int32_t n, int32_t k)
{
    for (int32_t i = k / 2 - 1; i >= 0; i--) sift_down(c, k, i);
    for (int32_t i = k; i < n; i++) {
        if (better(&c[i], &c[0])) {
            struct cand t = c[0];
            c[0] = c[i];
            c[i] = t;
            sift_down(c, k, 0);
        }
    }
    qsort(c, (size_t)k, sizeof *c, cmp_cand);
}

/* Keeps the smallest sorted prefix whose probability reaches top_p. */
static int32_t top_p_cut(struct cand *c, int32_t n, bool *sorted, float top_p)
{
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++) mx = c[i].logit > mx ? c[i].logit : mx;
    double total = 0.0;
    for (int32_t i = 0; i < n; i++) total += exp((double)(c[i].logit - mx));
    int32_t k = *sorted ? n : (n < 256 ? n : 256);
    for (;;) {
        if (!*sorted) select_top(c, n, k);
        *sorted = k == n;
        double cum = 0.0;
        for (int32_t i = 0; i < k; i++) {
            cum += exp((double)(c[i].logit - mx)) / total;
            if (cum >= top_p) return i + 1;
        }
        if (k == n) return n;
        k = n; /* the best 256 were not enough: sort everything */
    }
}

static int32_t draw(struct sampler *s, const struct cand *c, int32_t n)
{
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++) mx = c[i].logit > mx ? c[i].logit : mx;
    double total = 0.0;
    for (int32_t i = 0; i < n; i++) total += exp((double)(c[i].logit - mx));
    const double u = next_unit(s->rng) * total;
    double cum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        cum += exp((double)(c[i].logit - mx));
        if (u < cum) return c[i].id;
    }
    return c[n - 1].id;
}

/* The best allowed token (the lowest id among equals, as argmax). */
static int32_t argmax_masked(const float *logits, int32_t n, const uint32_t *allow)
{
    int32_t best = -1;
    for (int32_t w = 0; w * 32 < n; w++) {
        for (uint32_t a = allow[w]; a; a &= a - 1) {
            int32_t i = w * 32 + __builtin_ctz(a);
            if (i < n && (best < 0 || logits[i] > logits[best])) best = i;
        }
    }
    return best < 0 ? 0 : best;
}

/* Candidates: every token with a finite logit, or the allowed ones. */
static int32_t gather(struct sampler *s, const float *logits, int32_t n_vocab,
                      const uint32_t *allow)
{
    struct cand *c = s->c;
    int32_t n = 0;
    if (!allow) {
        for (int32_t i = 0; i < n_vocab; i++)
            if (logits[i] > -INFINITY) c[n++] = (struct cand){ i, logits[i] };
        return n;
    }
    for (int32_t w = 0; w * 32 < n_vocab; w++) {
        for (uint32_t a = allow[w]; a; a &= a - 1) {
            int32_t i = w * 32 + __builtin_ctz(a);
            if (i < n_vocab && logits[i] > -INFINITY) c[n++] = (struct cand){ i, logits[i] };
        }
    }
    return n;
}

static int32_t sample(struct sampler *s, float *logits, int32_t n_vocab, const uint32_t *allow)
{
    const struct sampler_params *p = &s->p;
    if (n_vocab > s->n_vocab) n_vocab = s->n_vocab;
    penalize(s, logits);
    if (p->temperature <= 0.0f)
        return allow ? argmax_masked(logits, n_vocab, allow) : argmax(logits, n_vocab);

    struct cand *c = s->c;
    int32_t n = gather(s, logits, n_vocab, allow);
    if (!n) return allow ? argmax_masked(logits, n_vocab, allow) : argmax(logits, n_vocab);
    bool sorted = false;
    if (p->top_k > 0 && p->top_k < n) {
        select_top(c, n, p->top_k);
        n = p->top_k;
        sorted = true;
    }
    if (p->top_p < 1.0f && p->top_p > 0.0f) n = top_p_cut(c, n, &sorted, p->top_p);
    if (p->min_p > 0.0f) {
        float mx = -INFINITY;
        for (int32_t i = 0; i < n; i++) mx = c[i].logit > mx ? c[i].logit : mx;
        const float cut = mx + logf(p->min_p);
        int32_t k = 0;
        for (int32_t i = 0; i < n; i++)
            if (c[i].logit >= cut) c[k++] = c[i];
        n = k;
    }
    for (int32_t i = 0; i < n; i++) c[i].logit /= p->temperature;
    return draw(s, c, n);
}

int32_t sampler_sample(struct sampler *s, float *logits, int32_t n_vocab)
{
    return sample(s, logits, n_vocab, NULL);
}

int32_t sampler_sample_masked(struct sampler *s, float *logits, int32_t n_vocab,
                              const uint32_t *allow)
{
    return sample(s, logits, n_vocab, allow);
}
