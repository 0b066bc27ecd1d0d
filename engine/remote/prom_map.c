/* prom_map: server metric names -> engine_stats (see prom_map.h). */
#include "prom_map.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *prom_map_source(const struct prom_doc *d)
{
    if (prom_has_prefix(d, "tern:")) return "tern";
    if (prom_has_prefix(d, "vllm:")) return "vllm";
    if (prom_has_prefix(d, "sglang:")) return "sglang";
    if (prom_has_prefix(d, "llamacpp:")) return "llamacpp";
    return "";
}

/* First of the names that exists (versions renamed metrics). */
/* A server's count as an integer: NaN and negatives read 0, values past the
 * type's range are clamped (casting such a double is undefined behaviour). */
static int32_t to_i32(double v)
{
    return v > 0 ? (v < 2147483647.0 ? (int32_t)v : INT32_MAX) : 0;
}

static uint64_t to_u64(double v)
{
    return v > 0 ? (v < 18446744073709549568.0 ? (uint64_t)v : UINT64_MAX) : 0;
}

static bool first_sum(const struct prom_doc *d, const char *const *names, double *v)
{
    for (int i = 0; names[i]; i++)
        if (prom_sum(d, names[i], v)) return true;
    return false;
}

static bool first_mean(const struct prom_doc *d, const char *const *names, double *v)
{
    for (int i = 0; names[i]; i++)
        if (prom_mean(d, names[i], v)) return true;
    return false;
}

static bool first_hist(const struct prom_doc *d, const char *const *names, struct prom_hist *h)
{
    for (int i = 0; names[i]; i++)
        if (prom_hist_get(d, names[i], h)) return true;
    return false;
}

struct names {
    const char *running[3], *waiting[3], *kv_usage[4], *preempt[3];
    const char *prefix_q[3], *prefix_h[3], *hit_rate[2], *gen_tokens[3], *gen_rate[3];
    const char *hist[PROM_H_N][3];
};

static const struct names VLLM = {
    .running = {"vllm:num_requests_running"},
    .waiting = {"vllm:num_requests_waiting"},
    .kv_usage = {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"},
    .preempt = {"vllm:num_preemptions_total", "vllm:num_preemptions"},
    .prefix_q = {"vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"},
    .prefix_h = {"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"},
    .gen_tokens = {"vllm:generation_tokens_total"},
    .hist = {{"vllm:time_to_first_token_seconds"},
             {"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"},
             {"vllm:e2e_request_latency_seconds"},
             {"vllm:request_queue_time_seconds"}},
};

static const struct names SGLANG = {
    .running = {"sglang:num_running_reqs"},
    .waiting = {"sglang:num_queue_reqs"},
    .kv_usage = {"sglang:token_usage"},
    .hit_rate = {"sglang:cache_hit_rate"},
    .gen_tokens = {"sglang:generation_tokens_total"},
    .gen_rate = {"sglang:gen_throughput"},
    .hist = {{"sglang:time_to_first_token_seconds"},
             {"sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"},
             {"sglang:e2e_request_latency_seconds"},
             {"sglang:queue_time_seconds"}},
};

/* llama-server (the llama.cpp that llama-cpp-python 0.3.36 vendors, --metrics):
 * gauges and counters only, no histograms, no KV usage. */
static const struct names LLAMACPP = {
    .running = {"llamacpp:requests_processing"},
    .waiting = {"llamacpp:requests_deferred"},
    .kv_usage = {"llamacpp:kv_cache_usage_ratio"},
    .gen_tokens = {"llamacpp:tokens_predicted_total"},
    .gen_rate = {"llamacpp:predicted_tokens_seconds"},
};

static void summarize(const struct prom_hist *h, struct engine_hist *o)
{
    memset(o, 0, sizeof *o);
    o->count = to_u64(h->count);
    o->mean = h->count > 0 ? h->sum / h->count : 0;
    o->p50 = prom_hist_quantile(h, 0.50);
    o->p90 = prom_hist_quantile(h, 0.90);
    o->p99 = prom_hist_quantile(h, 0.99);
    o->max = prom_hist_quantile(h, 1.0);
}

static const unsigned HIST_BIT[PROM_H_N] = {ENGINE_STAT_SRV_TTFT, ENGINE_STAT_SRV_ITL,
                                            ENGINE_STAT_SRV_E2E, ENGINE_STAT_SRV_QUEUE};

static void map_hists(const struct prom_doc *d, const struct names *nm,
                      struct prom_map_state *st, struct engine_stats *out)
{
    struct engine_hist *dst[PROM_H_N] = {&out->server.ttft, &out->server.itl, &out->server.e2e,
                                         &out->server.queue};
    for (int k = 0; k < PROM_H_N; k++) {
        struct prom_hist cur, delta;
        if (!nm->hist[k][0] || !first_hist(d, nm->hist[k], &cur)) {
            out->unknown |= HIST_BIT[k];
            st->prev_has[k] = false;
            continue;
        }
        prom_hist_delta(&cur, st->prev_has[k] ? &st->prev[k] : NULL, &delta);
        /* An interval without requests keeps the last interval that had some. */
        if (delta.count > 0 || !st->last_has[k]) {
            summarize(&delta, &st->last[k]);
            st->last_has[k] = true;
        }
        *dst[k] = st->last[k];
        st->prev[k] = cur;
        st->prev_has[k] = true;
    }
}

static void map_gen_rate(const struct prom_doc *d, const struct names *nm,
                         struct prom_map_state *st, double now, struct engine_stats *out)
{
    double v;
    if (nm->gen_rate[0] && first_sum(d, nm->gen_rate, &v)) {
        out->server.gen_tok_s = v;
        return;
    }
    if (nm->gen_tokens[0] && first_sum(d, nm->gen_tokens, &v)) {
        if (st->prev_has_gen && now > st->prev_t && v >= st->prev_gen_tokens)
            out->server.gen_tok_s = (v - st->prev_gen_tokens) / (now - st->prev_t);
        else
            out->unknown |= ENGINE_STAT_SRV_GEN; /* a rate needs two scrapes */
        st->prev_gen_tokens = v;
        st->prev_has_gen = true;
        return;
    }
    out->unknown |= ENGINE_STAT_SRV_GEN;
}

/* tern serve: tern:kv_blocks{state="used|cached|free"}, tern:kv_block_tokens. */
static void map_tern_kv(const struct prom_doc *d, struct engine_stats *out)
{
    double used, cached, fr, bt;
    if (prom_sum_label(d, "tern:kv_blocks", "state", "used", &used) &&
        prom_sum_label(d, "tern:kv_blocks", "state", "cached", &cached) &&
        prom_sum_label(d, "tern:kv_blocks", "state", "free", &fr)) {
        out->kv_used = to_i32(used);
        out->kv_cached = to_i32(cached);
        out->kv_free = to_i32(fr);
        out->kv_total = to_i32((double)out->kv_used + out->kv_cached + out->kv_free);
        if (prom_sum(d, "tern:kv_block_tokens", &bt)) out->kv_block_tokens = to_i32(bt);
        out->unknown &= ~(unsigned)ENGINE_STAT_KV_BLOCKS;
    }
}

void prom_map_apply(const struct prom_doc *d, struct prom_map_state *st, double now,
                    struct engine_stats *out)
{
    const char *src = prom_map_source(d);
    snprintf(out->server.source, sizeof out->server.source, "%s", src);
    out->unknown |= ENGINE_STAT_RUNNING | ENGINE_STAT_WAITING | ENGINE_STAT_KV_BLOCKS |
                    ENGINE_STAT_KV_USAGE | ENGINE_STAT_PREFIX | ENGINE_STAT_PREEMPT |
                    ENGINE_STAT_STEPS;
    const struct names *nm = NULL;
    if (!strcmp(src, "vllm") || !strcmp(src, "tern")) nm = &VLLM;
    else if (!strcmp(src, "sglang")) nm = &SGLANG;
    else if (!strcmp(src, "llamacpp")) nm = &LLAMACPP;
    if (!nm) {
        out->unknown |= ENGINE_STAT_SRV_TTFT | ENGINE_STAT_SRV_ITL | ENGINE_STAT_SRV_E2E |
                        ENGINE_STAT_SRV_QUEUE | ENGINE_STAT_SRV_GEN;
        return;
    }
    double v, h;
    if (first_sum(d, nm->running, &v)) {
        out->running = to_i32(v);
        out->unknown &= ~(unsigned)ENGINE_STAT_RUNNING;
    }
    if (first_sum(d, nm->waiting, &v)) {
        out->waiting = to_i32(v);
        out->unknown &= ~(unsigned)ENGINE_STAT_WAITING;
    }
    if (nm->kv_usage[0] && first_mean(d, nm->kv_usage, &v)) {
        out->kv_usage = v;
        out->unknown &= ~(unsigned)ENGINE_STAT_KV_USAGE;
    }
    if (nm->preempt[0] && first_sum(d, nm->preempt, &v)) {
        out->preemptions = to_u64(v);
        out->unknown &= ~(unsigned)ENGINE_STAT_PREEMPT;
    }
    if (nm->prefix_q[0] && first_sum(d, nm->prefix_q, &v) && first_sum(d, nm->prefix_h, &h)) {
        out->prefix_query_tokens = to_u64(v);
        out->prefix_hit_tokens = to_u64(h);
        out->prefix_hit_rate = v > 0 ? h / v : 0;
        out->unknown &= ~(unsigned)ENGINE_STAT_PREFIX;
    } else if (nm->hit_rate[0] && first_sum(d, nm->hit_rate, &v)) {
        out->prefix_hit_rate = v; /* SGLang: a rate, no token counts */
        out->unknown &= ~(unsigned)ENGINE_STAT_PREFIX;
    }
    if (!strcmp(src, "llamacpp") && prom_sum(d, "llamacpp:prompt_tokens_cached_total", &h) &&
        prom_sum(d, "llamacpp:prompt_tokens_total", &v)) {
        /* llama-server counts computed and cached prompt tokens apart. */
        out->prefix_query_tokens = to_u64(v + h);
        out->prefix_hit_tokens = to_u64(h);
        out->prefix_hit_rate = v + h > 0 ? h / (v + h) : 0;
        out->unknown &= ~(unsigned)ENGINE_STAT_PREFIX;
    }
    if (!strcmp(src, "tern")) map_tern_kv(d, out);
    map_hists(d, nm, st, out);
    map_gen_rate(d, nm, st, now, out);
    st->prev_t = now;
    st->have_prev = true;
}
