/* metrics: fixed log-spaced histograms with percentiles, per-request phase
 * timestamps turned into latencies, and engine-wide counters (throughput,
 * step shape, goodput against an SLO). Not thread-safe: the engine guards it. */
#ifndef TERN_METRICS_H
#define TERN_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"

/* Buckets: METRICS_PER_DECADE per factor of 10 from METRICS_MIN up to
 * METRICS_MIN * 10^METRICS_DECADES; values below go to bucket 0, above to
 * the last. A percentile is reported as the geometric middle of its bucket
 * (clamped to the exact min/max seen), so it is within one bucket
 * (a factor of 10^(1/METRICS_PER_DECADE) = 1.12) of the exact value. */
#define METRICS_MIN 1e-6
#define METRICS_DECADES 11
#define METRICS_PER_DECADE 20
#define METRICS_NBUCKETS (METRICS_DECADES * METRICS_PER_DECADE + 1)

struct metrics_hist {
    uint64_t count;
    double sum, min, max;
    uint64_t bucket[METRICS_NBUCKETS];
};

void metrics_hist_init(struct metrics_hist *h);
void metrics_hist_add(struct metrics_hist *h, double v);
int metrics_hist_bucket(double v);
/* Lower and upper bound of bucket i. */
void metrics_hist_bounds(int i, double *lo, double *hi);
/* q in [0, 1]: the value below which a fraction q of the samples lie. */
double metrics_hist_quantile(const struct metrics_hist *h, double q);
void metrics_hist_summary(const struct metrics_hist *h, struct engine_hist *out);

/* Derives the latencies of m from its timestamps (token_t included). */
void metrics_finalize(struct engine_metrics *m);

struct metrics {
    double slo_ttft_s, slo_tpot_s;
    struct metrics_hist queue, ttft, tpot, itl, prefill, e2e, step_s, step_tokens;
    uint64_t steps, submitted, finished[ENGINE_N_STATUS];
    uint64_t prompt_tokens, cached_tokens, generated_tokens, preemptions, slo_met;
    double busy_s, backend_s;
    double busy_cpu_s, backend_cpu_s; /* engine thread CPU time */
};

void metrics_init(struct metrics *mx, double slo_ttft_s, double slo_tpot_s);
/* Adds a finished request (metrics_finalize already applied). */
void metrics_add_request(struct metrics *mx, const struct engine_metrics *m);
/* Adds one engine step: wall time, time inside the backend, tokens run,
 * and the engine thread's CPU time for both (insensitive to other load). */
void metrics_add_step(struct metrics *mx, double step_s, double backend_s, int32_t n_tokens,
                      double step_cpu_s, double backend_cpu_s);
/* Whether a finished request met both SLOs (ok/stop/length only). */
bool metrics_met_slo(const struct metrics *mx, const struct engine_metrics *m);
/* Fills the metric parts of an engine snapshot. */
void metrics_fill_stats(const struct metrics *mx, double uptime_s, struct engine_stats *out);

#endif
