/* test_prom: the Prometheus text parser and the server mappings on fixtures
 * written from the servers' documentation (make_fixtures.py: vLLM v0.10 and
 * v0.6 names, SGLang v0.4, llama-server --metrics), plus malformed input.
 * Percentiles must describe the interval between two scrapes (bucket
 * deltas), not the server's lifetime. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prom.h"
#include "prom_map.h"
#include "tap.h"

static char *slurp(const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/engine/remote/fixtures/%s", getenv("TERN_SRC"), name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) { free(p); p = NULL; }
    if (p) p[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return p;
}

static int load(const char *name, struct prom_doc *d)
{
    size_t n;
    char *t = slurp(name, &n);
    char err[128];
    memset(d, 0, sizeof *d);
    int rc = t ? prom_parse(t, n, d, err, sizeof err) : -1;
    free(t);
    return rc;
}

static bool near(double a, double b, double tol) { return fabs(a - b) <= tol; }

static void scrape(const char *name, struct prom_map_state *st, double t, struct engine_stats *s)
{
    struct prom_doc d;
    memset(s, 0, sizeof *s);
    if (load(name, &d) != 0) tap_bail("cannot read fixture %s (TERN_SRC set?)", name);
    tap_ok(d.n_bad == 0, "%s: every sample line parses (%d bad)", name, d.n_bad);
    prom_map_apply(&d, st, t, s);
    prom_free(&d);
}

static void test_vllm(void)
{
    struct prom_map_state st = {0};
    struct engine_stats s;
    scrape("vllm-1.prom", &st, 10.0, &s);
    tap_ok(!strcmp(s.server.source, "vllm"), "vllm-1: source vllm (%s)", s.server.source);
    tap_ok(near(s.server.ttft.p50, 0.625, 1e-9), "vllm-1: first scrape p50 from all buckets (%g)",
           s.server.ttft.p50);
    scrape("vllm-2.prom", &st, 11.0, &s);
    tap_ok(engine_stat_known(&s, ENGINE_STAT_RUNNING) && s.running == 4,
           "vllm: running summed over engines = 4 (%d)", s.running);
    tap_ok(s.waiting == 2, "vllm: waiting = 2 (%d)", s.waiting);
    tap_ok(near(s.kv_usage, 0.5, 1e-9), "vllm: kv usage averaged over the engines (%g)",
           s.kv_usage);
    tap_ok(s.preemptions == 8, "vllm: preemptions 2 engines x 4 (%llu)",
           (unsigned long long)s.preemptions);
    tap_ok(near(s.prefix_hit_rate, 0.25, 1e-9), "vllm: prefix hit rate 0.25 (%g)",
           s.prefix_hit_rate);
    tap_ok(s.server.ttft.count == 10, "vllm: TTFT interval count 10 (%llu)",
           (unsigned long long)s.server.ttft.count);
    tap_ok(near(s.server.ttft.p50, 0.05, 1e-9),
           "vllm: TTFT p50 over the interval = 0.05 s, not the lifetime ~0.69 (%g)",
           s.server.ttft.p50);
    tap_ok(near(s.server.ttft.p90, 0.058, 1e-9), "vllm: TTFT p90 = 0.058 (%g)", s.server.ttft.p90);
    tap_ok(s.server.itl.count == 400 && near(s.server.itl.p50, 0.0375, 1e-9),
           "vllm: ITL from inter_token_latency_seconds, interval p50 0.0375 (%g, n=%llu)",
           s.server.itl.p50, (unsigned long long)s.server.itl.count);
    tap_ok(engine_stat_known(&s, ENGINE_STAT_SRV_E2E) && s.server.e2e.count == 10,
           "vllm: E2E interval known, 10 samples");
    tap_ok(engine_stat_known(&s, ENGINE_STAT_SRV_QUEUE) && near(s.server.queue.p50, 0.15, 1e-9),
           "vllm: queue p50 0.15 (%g)", s.server.queue.p50);
    tap_ok(engine_stat_known(&s, ENGINE_STAT_SRV_GEN) && near(s.server.gen_tok_s, 1000, 1e-6),
           "vllm: generation rate from the counter delta: 1000 tok/s (%g)", s.server.gen_tok_s);
    tap_ok(!engine_stat_known(&s, ENGINE_STAT_KV_BLOCKS) && !engine_stat_known(&s, ENGINE_STAT_STEPS),
           "vllm: KV blocks and steps marked unknown (not exported)");
    /* An interval with no new requests keeps the last interval's figures. */
    scrape("vllm-2.prom", &st, 12.0, &s);
    tap_ok(near(s.server.ttft.p50, 0.05, 1e-9), "vllm: a quiet interval keeps the last figures");
}

static void test_vllm_old(void)
{
    struct prom_map_state st = {0};
    struct engine_stats s;
    scrape("vllm-old.prom", &st, 1.0, &s);
    tap_ok(engine_stat_known(&s, ENGINE_STAT_KV_USAGE) && near(s.kv_usage, 0.5, 1e-9),
           "vllm v0.6: gpu_cache_usage_perc read as KV usage");
    tap_ok(engine_stat_known(&s, ENGINE_STAT_SRV_ITL),
           "vllm v0.6: ITL from time_per_output_token_seconds");
    tap_ok(!engine_stat_known(&s, ENGINE_STAT_PREFIX), "vllm v0.6: no prefix counters: unknown");
}

static void test_sglang(void)
{
    struct prom_map_state st = {0};
    struct engine_stats s;
    scrape("sglang-1.prom", &st, 1.0, &s);
    scrape("sglang-2.prom", &st, 2.0, &s);
    tap_ok(!strcmp(s.server.source, "sglang"), "sglang: source");
    tap_ok(s.running == 7 && s.waiting == 3, "sglang: running 7, queue 3 (%d, %d)", s.running,
           s.waiting);
    tap_ok(near(s.kv_usage, 0.28, 1e-9), "sglang: token_usage as KV usage");
    tap_ok(near(s.prefix_hit_rate, 0.0075, 1e-9), "sglang: cache_hit_rate");
    tap_ok(near(s.server.gen_tok_s, 1234.5, 1e-9), "sglang: gen_throughput gauge");
    tap_ok(near(s.server.ttft.p50, 0.05, 1e-9), "sglang: TTFT interval p50 0.05 (%g)",
           s.server.ttft.p50);
    tap_ok(!engine_stat_known(&s, ENGINE_STAT_PREEMPT) && !engine_stat_known(&s, ENGINE_STAT_SRV_QUEUE),
           "sglang: preemptions and queue time unknown (not exported)");
}

static void test_llamacpp(void)
{
    struct prom_map_state st = {0};
    struct engine_stats s;
    scrape("llamacpp.prom", &st, 1.0, &s);
    tap_ok(!strcmp(s.server.source, "llamacpp"), "llamacpp: source");
    tap_ok(s.running == 1 && s.waiting == 0 && engine_stat_known(&s, ENGINE_STAT_WAITING),
           "llamacpp: requests_processing 1, requests_deferred 0 (known zero)");
    tap_ok(near(s.server.gen_tok_s, 200, 1e-9), "llamacpp: predicted_tokens_seconds");
    tap_ok(engine_stat_known(&s, ENGINE_STAT_PREFIX) && near(s.prefix_hit_rate, 0.25, 1e-9),
           "llamacpp: prefix hit rate from cached / (computed + cached) prompt tokens (%g)",
           s.prefix_hit_rate);
    tap_ok(!engine_stat_known(&s, ENGINE_STAT_SRV_TTFT) && !engine_stat_known(&s, ENGINE_STAT_KV_USAGE),
           "llamacpp: no histograms, no KV usage in this version: unknown, not zero");
}

/* A page captured from tern serve (vLLM names plus tern:). */
static void test_tern(void)
{
    struct prom_map_state st = {0};
    struct engine_stats s;
    scrape("tern.prom", &st, 1.0, &s);
    tap_ok(!strcmp(s.server.source, "tern"), "tern serve: source tern (%s)", s.server.source);
    tap_ok(engine_stat_known(&s, ENGINE_STAT_KV_BLOCKS) && s.kv_total == 512 && s.kv_cached == 3 &&
               s.kv_block_tokens == 16,
           "tern serve: KV blocks from tern:kv_blocks{state}: %d/%d/%d of %d x %d tok", s.kv_used,
           s.kv_cached, s.kv_free, s.kv_total, s.kv_block_tokens);
    tap_ok(engine_stat_known(&s, ENGINE_STAT_RUNNING) && engine_stat_known(&s, ENGINE_STAT_KV_USAGE) &&
               engine_stat_known(&s, ENGINE_STAT_SRV_TTFT),
           "tern serve: running, KV usage and TTFT histogram in vLLM's names");
}

static void test_malformed(void)
{
    const char *t = "# TYPE x gauge\nx 1\nbad line here\n{novalue} 3\ny{a=\"b\\\"}\"} 2.5\n"
                    "z{le=\"+Inf\"} 7\nw\n" "big 1e308\nnan NaN\n";
    struct prom_doc d = {0};
    char err[64];
    int rc = prom_parse(t, strlen(t), &d, err, sizeof err);
    double v = 0;
    tap_ok(rc == 0, "malformed: parse returns 0");
    tap_ok(d.n_bad == 3, "malformed: 3 bad lines counted (%d)", d.n_bad);
    tap_ok(prom_sum(&d, "y", &v) && v == 2.5, "malformed: escaped quote inside a label value");
    tap_ok(!prom_sum(&d, "nan", &v), "malformed: NaN samples are not summed");
    tap_ok(isinf(d.s[2].le), "malformed: le=+Inf parsed");
    prom_free(&d);
    struct prom_map_state st = {0};
    struct engine_stats s = {0};
    prom_parse("", 0, &d, err, sizeof err);
    prom_map_apply(&d, &st, 0, &s);
    tap_ok(s.server.source[0] == 0 && !engine_stat_known(&s, ENGINE_STAT_RUNNING),
           "empty page: no source, everything unknown");
    prom_free(&d);
}

int main(void)
{
    test_vllm();
    test_vllm_old();
    test_sglang();
    test_llamacpp();
    test_tern();
    test_malformed();
    return tap_done();
}
