/* fuzz_remote: libFuzzer target over everything the remote engine reads from
 * a server (untrusted bytes). Each input goes through:
 *   - the SSE reader, fed whole and again in pseudo-random splits (from a
 *     hash of the input): both feeds must give the same events; each event
 *     goes to oai_response_parse and the llama-server timings reader, as
 *     remote_stream's on_sse does;
 *   - oai_response_parse over the whole input (a non-streamed response);
 *   - oai_prompt_logprobs_parse (eval perplexity over --url);
 *   - the /v1/models, /props and /v1/tern/status readers (remote_parse);
 *   - prom_parse and prom_map_apply over two scrapes (the first half, then
 *     the whole), so the bucket-delta percentiles run on fuzzed histograms.
 * Seeds: tests/engine/remote/corpus (the fixtures, and regression inputs). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oai_logprobs.h"
#include "oai_response.h"
#include "prom.h"
#include "prom_map.h"
#include "remote_parse.h"
#include "sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Checked in every build type (assert is gone under NDEBUG). */
#define CHECK(c)                                                                 \
    do {                                                                         \
        if (!(c)) {                                                              \
            fprintf(stderr, "fuzz_remote: %s:%d: %s\n", __FILE__, __LINE__, #c); \
            abort();                                                             \
        }                                                                        \
    } while (0)

/* The events of one feed, serialized (name NUL data NUL ...). */
struct evlog {
    struct sse_buf b;
    int n;
};

static int on_ev(void *ud, const char *name, const char *d, size_t n)
{
    struct evlog *l = ud;
    CHECK(d[n] == 0);
    l->n++;
    if (sse_buf_add(&l->b, name, strlen(name) + 1) || sse_buf_add(&l->b, d, n + 1)) return -2;
    /* what remote_stream does with an event */
    struct oai_parsed p;
    char err[256];
    if (oai_response_parse(d, n, &p, err, sizeof err) == 0) {
        if (p.finish_reason) (void)oai_finish_status(p.finish_reason);
        oai_parsed_free(&p);
    } else {
        CHECK(err[0]);
    }
    struct engine_metrics m = {0};
    (void)remote_parse_timings(d, n, &m);
    CHECK(m.n_cached >= 0 && m.n_computed >= 0);
    return 0;
}

static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void fuzz_sse(const char *body, size_t size)
{
    struct sse_reader r;
    struct evlog whole = {0}, split = {0};
    sse_reader_init(&r, 1 << 16);
    int rc1 = sse_reader_feed(&r, body, size, on_ev, &whole);
    sse_reader_free(&r);
    sse_reader_init(&r, 1 << 16);
    uint64_t h = fnv((const uint8_t *)body, size) | 1;
    int rc2 = 0;
    for (size_t at = 0; at < size && rc2 == 0;) {
        h ^= h << 13, h ^= h >> 7, h ^= h << 17; /* xorshift */
        size_t n = 1 + (size_t)(h % 17);
        if (n > size - at) n = size - at;
        rc2 = sse_reader_feed(&r, body + at, n, on_ev, &split);
        at += n;
    }
    sse_reader_free(&r);
    /* the split never changes what is read (an over-long event fails both) */
    if (rc1 == 0 && rc2 == 0) {
        CHECK(whole.n == split.n && whole.b.len == split.b.len);
        CHECK(whole.b.len == 0 || memcmp(whole.b.p, split.b.p, whole.b.len) == 0);
    }
    sse_buf_free(&whole.b);
    sse_buf_free(&split.b);
}

static void fuzz_logprobs(const char *body, size_t size)
{
    /* the vLLM fixture's prompt ids, then ids taken from the input */
    int32_t ids[16] = {0, 3575, 282, 4649, 314};
    double out[16];
    char err[256];
    for (int n = 0; n <= 5; n += 5)
        if (oai_prompt_logprobs_parse(body, size, ids, n, out, err, sizeof err) != 0)
            CHECK(err[0]);
    for (int i = 0; i < 16; i++) ids[i] = size ? (int32_t)(uint8_t)body[i % size] * 37 : i;
    if (oai_prompt_logprobs_parse(body, size, ids, 16, out, err, sizeof err) == 0)
        CHECK(isnan(out[0]));
}

static void fuzz_json(const char *body, size_t size)
{
    struct oai_parsed p;
    char err[256];
    if (oai_response_parse(body, size, &p, err, sizeof err) == 0) oai_parsed_free(&p);
    struct remote_models mo;
    if (remote_parse_models(body, size, &mo) == 0) {
        CHECK(mo.n_ctx >= 0 && strlen(mo.owned_by) < sizeof mo.owned_by);
        free(mo.id);
    }
    CHECK(remote_parse_props_ctx(body, size) >= 0);
    struct engine_stats st;
    if (remote_parse_status(body, size, &st) == 0) {
        const struct engine_server_stats *sv = &st.server;
        CHECK(sv->n_recent >= 0 && sv->n_recent <= ENGINE_SERVER_RECENT);
        CHECK(sv->n_tenants >= 0 && sv->n_tenants <= ENGINE_SERVER_TENANTS);
        for (int i = 0; i < sv->n_tenants; i++) CHECK(sv->tenants[i].tokens >= 0);
    }
    fuzz_logprobs(body, size);
}

static void fuzz_prom(const char *body, size_t size)
{
    struct prom_doc a = {0}, b = {0};
    char err[256];
    struct prom_map_state ms;
    memset(&ms, 0, sizeof ms);
    struct engine_stats s1, s2;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    if (prom_parse(body, size / 2, &b, err, sizeof err) == 0) {
        (void)prom_map_source(&b);
        prom_map_apply(&b, &ms, 0.0, &s1);
    }
    if (prom_parse(body, size, &a, err, sizeof err) == 0) {
        prom_map_apply(&a, &ms, 1.0, &s2);
        struct prom_hist h, d;
        if (prom_hist_get(&a, "vllm:time_to_first_token_seconds", &h)) {
            CHECK(h.n >= 0 && h.n <= PROM_MAX_BUCKETS);
            prom_hist_delta(&h, NULL, &d);
            (void)prom_hist_quantile(&d, 0.5);
            (void)prom_hist_quantile(&d, 0.99);
        }
    }
    prom_free(&a);
    prom_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    fuzz_sse(body, size);
    fuzz_json(body, size);
    fuzz_prom(body, size);
    return 0;
}
