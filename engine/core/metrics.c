/* metrics: log-bucket histograms, per-request latencies, engine counters. */
#include "metrics.h"

#include <math.h>
#include <string.h>

void metrics_hist_init(struct metrics_hist *h)
{
    memset(h, 0, sizeof *h);
}

int metrics_hist_bucket(double v)
{
    if (!(v > METRICS_MIN)) return 0;
    int i = 1 + (int)floor(log10(v / METRICS_MIN) * METRICS_PER_DECADE);
    return i >= METRICS_NBUCKETS ? METRICS_NBUCKETS - 1 : i;
}

void metrics_hist_bounds(int i, double *lo, double *hi)
{
    if (i <= 0) {
        *lo = 0;
        *hi = METRICS_MIN;
        return;
    }
    *lo = METRICS_MIN * pow(10.0, (double)(i - 1) / METRICS_PER_DECADE);
    *hi = METRICS_MIN * pow(10.0, (double)i / METRICS_PER_DECADE);
}

void metrics_hist_add(struct metrics_hist *h, double v)
{
    if (v < 0 || v != v) v = 0;
    if (h->count == 0 || v < h->min) h->min = v;
    if (h->count == 0 || v > h->max) h->max = v;
    h->count++;
    h->sum += v;
    h->bucket[metrics_hist_bucket(v)]++;
}

double metrics_hist_quantile(const struct metrics_hist *h, double q)
{
    if (h->count == 0) return 0;
    /* nearest rank: the k-th smallest sample, k = ceil(q * count) */
    uint64_t k = (uint64_t)ceil(q * (double)h->count);
    if (k < 1) k = 1;
    uint64_t seen = 0;
    for (int i = 0; i < METRICS_NBUCKETS; i++) {
        seen += h->bucket[i];
        if (seen < k) continue;
        double lo, hi;
        metrics_hist_bounds(i, &lo, &hi);
        double v = i == 0 ? hi / 2 : sqrt(lo * hi);
        if (v < h->min) v = h->min;
        if (v > h->max) v = h->max;
        return v;
    }
    return h->max;
}

void metrics_hist_summary(const struct metrics_hist *h, struct engine_hist *out)
{
    out->count = h->count;
    out->mean = h->count ? h->sum / (double)h->count : 0;
    out->p50 = metrics_hist_quantile(h, 0.50);
    out->p90 = metrics_hist_quantile(h, 0.90);
    out->p99 = metrics_hist_quantile(h, 0.99);
    out->max = h->max;
}

static double span(double a, double b)
{
    return a > 0 && b >= a ? b - a : 0;
}

void metrics_finalize(struct engine_metrics *m)
{
    double admitted_or_end = m->t_admitted > 0 ? m->t_admitted : m->t_finished;
    m->queue_s = span(m->t_arrival, admitted_or_end);
    m->prefill_s = span(m->t_first_sched, m->t_prefill_done);
    m->ttft_s = span(m->t_arrival, m->t_first_token);
    double last = m->n_generated > 0 && m->token_t ? m->token_t[m->n_generated - 1] : 0;
    m->decode_s = span(m->t_first_token, last);
    m->tpot_s = m->n_generated > 1 ? m->decode_s / (m->n_generated - 1) : 0;
    m->e2e_s = span(m->t_arrival, m->t_finished);
}

void metrics_init(struct metrics *mx, double slo_ttft_s, double slo_tpot_s)
{
    memset(mx, 0, sizeof *mx);
    mx->slo_ttft_s = slo_ttft_s;
    mx->slo_tpot_s = slo_tpot_s;
    struct metrics_hist *hs[] = {&mx->queue, &mx->ttft, &mx->tpot, &mx->itl,
                                 &mx->prefill, &mx->e2e, &mx->step_s, &mx->step_tokens};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) metrics_hist_init(hs[i]);
}

static bool completed(enum engine_status s)
{
    return s == ENGINE_OK || s == ENGINE_STOP || s == ENGINE_LENGTH;
}

bool metrics_met_slo(const struct metrics *mx, const struct engine_metrics *m)
{
    return completed(m->status) && m->ttft_s <= mx->slo_ttft_s && m->tpot_s <= mx->slo_tpot_s;
}

void metrics_add_request(struct metrics *mx, const struct engine_metrics *m)
{
    mx->finished[m->status]++;
    if (m->status == ENGINE_REJECTED) return;
    metrics_hist_add(&mx->queue, m->queue_s);
    metrics_hist_add(&mx->e2e, m->e2e_s);
    if (m->t_prefill_done > 0) metrics_hist_add(&mx->prefill, m->prefill_s);
    if (m->t_first_token > 0) metrics_hist_add(&mx->ttft, m->ttft_s);
    if (m->n_generated > 1) metrics_hist_add(&mx->tpot, m->tpot_s);
    for (int32_t i = 1; i < m->n_generated && m->token_t; i++)
        metrics_hist_add(&mx->itl, m->token_t[i] - m->token_t[i - 1]);
    if (metrics_met_slo(mx, m)) mx->slo_met++;
}

void metrics_add_step(struct metrics *mx, double step_s, double backend_s, int32_t n_tokens,
                      double step_cpu_s, double backend_cpu_s)
{
    mx->busy_cpu_s += step_cpu_s;
    mx->backend_cpu_s += backend_cpu_s;
    mx->steps++;
    mx->busy_s += step_s;
    mx->backend_s += backend_s;
    metrics_hist_add(&mx->step_s, step_s);
    metrics_hist_add(&mx->step_tokens, (double)n_tokens);
}

void metrics_fill_stats(const struct metrics *mx, double uptime_s, struct engine_stats *out)
{
    out->uptime_s = uptime_s;
    out->submitted = mx->submitted;
    memcpy(out->finished, mx->finished, sizeof out->finished);
    metrics_hist_summary(&mx->queue, &out->queue);
    metrics_hist_summary(&mx->ttft, &out->ttft);
    metrics_hist_summary(&mx->tpot, &out->tpot);
    metrics_hist_summary(&mx->itl, &out->itl);
    metrics_hist_summary(&mx->prefill, &out->prefill);
    metrics_hist_summary(&mx->e2e, &out->e2e);
    metrics_hist_summary(&mx->step_s, &out->step_s);
    metrics_hist_summary(&mx->step_tokens, &out->step_tokens);
    out->steps = mx->steps;
    out->busy_s = mx->busy_s;
    out->backend_s = mx->backend_s;
    out->sched_overhead = mx->busy_s > 0 ? (mx->busy_s - mx->backend_s) / mx->busy_s : 0;
    out->busy_cpu_s = mx->busy_cpu_s;
    out->backend_cpu_s = mx->backend_cpu_s;
    out->prompt_tokens = mx->prompt_tokens;
    out->cached_tokens = mx->cached_tokens;
    out->generated_tokens = mx->generated_tokens;
    out->prompt_tok_s = mx->busy_s > 0 ? (double)(mx->prompt_tokens - mx->cached_tokens) / mx->busy_s : 0;
    out->gen_tok_s = mx->busy_s > 0 ? (double)mx->generated_tokens / mx->busy_s : 0;
    out->preemptions = mx->preemptions;
    out->slo_ttft_s = mx->slo_ttft_s;
    out->slo_tpot_s = mx->slo_tpot_s;
    out->slo_met = mx->slo_met;
    out->goodput_rps = uptime_s > 0 ? (double)mx->slo_met / uptime_s : 0;
}
