/* prom_map: one server's Prometheus metrics -> the engine snapshot. Knows the
 * names that vLLM (v0.6 .. v0.11: kv_cache_usage_perc, or the older
 * gpu_cache_usage_perc; inter_token_latency_seconds, or the older
 * time_per_output_token_seconds), SGLang (v0.4/v0.5), llama.cpp's
 * llama-server (`llamacpp:`, --metrics) and tern serve (vLLM names plus
 * `tern:`) export. What a server does not export is left marked unknown
 * (ENGINE_STAT_* bits); percentiles come from the bucket deltas between two
 * scrapes, so they describe the last interval, not the server's lifetime. */
#ifndef TERN_PROM_MAP_H
#define TERN_PROM_MAP_H

#include "engine.h"
#include "prom.h"

enum prom_hist_kind { PROM_H_TTFT, PROM_H_ITL, PROM_H_E2E, PROM_H_QUEUE, PROM_H_N };

/* What one endpoint's mapping keeps between scrapes. */
struct prom_map_state {
    bool have_prev;
    double prev_t;                     /* seconds, caller's clock */
    struct prom_hist prev[PROM_H_N];
    bool prev_has[PROM_H_N];
    double prev_gen_tokens;            /* counter, for a throughput rate */
    bool prev_has_gen;
    struct engine_hist last[PROM_H_N]; /* the latest interval with samples */
    bool last_has[PROM_H_N];
};

/* "vllm", "sglang", "llamacpp", "tern", or "" when none of them. */
const char *prom_map_source(const struct prom_doc *d);

/* Fills the server-side parts of out from d scraped at time now: running,
 * waiting, kv_usage (+ kv blocks for tern), prefix hit rate, preemptions,
 * server.{ttft,itl,e2e,queue,gen_tok_s,source}; sets out->unknown bits for
 * what is absent. Updates st for the next interval. */
void prom_map_apply(const struct prom_doc *d, struct prom_map_state *st, double now,
                    struct engine_stats *out);

#endif
