/* test_metrics: histogram percentiles against exact percentiles of known
 * samples (within one bucket), latency derivation, counters. */
#include <math.h>
#include <stdlib.h>

#include "metrics.h"
#include "tap.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* exact nearest-rank percentile */
static double exact(const double *sorted, int n, double q)
{
    int k = (int)ceil(q * n);
    return sorted[(k < 1 ? 1 : k) - 1];
}

int main(void)
{
    enum { N = 5000 };
    static double v[N];
    struct metrics_hist h;
    metrics_hist_init(&h);
    /* Log-normal-ish samples spread over 4 decades (deterministic LCG). */
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(s >> 11) / 9007199254740992.0;
        v[i] = 1e-4 * pow(10.0, 4 * u * u);
        metrics_hist_add(&h, v[i]);
    }
    qsort(v, N, sizeof v[0], cmp);
    const double qs[] = {0.5, 0.9, 0.99, 0.999};
    double ratio = pow(10.0, 1.0 / METRICS_PER_DECADE);
    for (int i = 0; i < 4; i++) {
        double got = metrics_hist_quantile(&h, qs[i]), want = exact(v, N, qs[i]);
        double r = got > want ? got / want : want / got;
        ok(r <= ratio * 1.0000001, "p%g %.6g vs exact %.6g: within one bucket (x%.4f)",
           qs[i] * 100, got, want, r);
    }
    is_int((long long)h.count, N, "count");
    struct engine_hist sum;
    metrics_hist_summary(&h, &sum);
    is_near(sum.max, v[N - 1], 1e-12, "max exact");
    double mean = 0;
    for (int i = 0; i < N; i++) mean += v[i];
    is_near(sum.mean, mean / N, 1e-9, "mean exact");

    /* Bucket bounds contain their values. */
    const double probe[] = {3e-6, 0.0123, 0.5, 7.0, 123.0};
    for (int i = 0; i < 5; i++) {
        double lo, hi;
        metrics_hist_bounds(metrics_hist_bucket(probe[i]), &lo, &hi);
        ok(lo <= probe[i] && probe[i] < hi, "%g in [%g, %g)", probe[i], lo, hi);
    }

    /* Per-request derivation. */
    double tt[4] = {1.5, 1.6, 1.8, 2.1};
    struct engine_metrics m = {.status = ENGINE_STOP, .t_arrival = 1.0, .t_admitted = 1.2,
                               .t_first_sched = 1.2, .t_prefill_done = 1.45,
                               .t_first_token = 1.5, .t_finished = 2.2, .n_generated = 4,
                               .token_t = tt};
    metrics_finalize(&m);
    is_near(m.queue_s, 0.2, 1e-12, "queue");
    is_near(m.prefill_s, 0.25, 1e-12, "prefill");
    is_near(m.ttft_s, 0.5, 1e-12, "ttft");
    is_near(m.decode_s, 0.6, 1e-12, "decode");
    is_near(m.tpot_s, 0.2, 1e-12, "tpot = decode / (n - 1)");
    is_near(m.e2e_s, 1.2, 1e-12, "e2e");

    struct metrics mx;
    metrics_init(&mx, 0.6, 0.25);
    metrics_add_request(&mx, &m);
    is_int((long long)mx.itl.count, 3, "3 inter-token gaps");
    is_int((long long)mx.slo_met, 1, "met both SLOs");
    struct engine_metrics m2 = m;
    m2.tpot_s = 0.3;
    metrics_add_request(&mx, &m2);
    is_int((long long)mx.slo_met, 1, "slow TPOT misses the SLO");
    metrics_add_step(&mx, 0.010, 0.0099, 64, 0.010, 0.0099);
    struct engine_stats st = {0};
    metrics_fill_stats(&mx, 10.0, &st);
    is_near(st.sched_overhead, 0.01, 1e-9, "overhead fraction");
    is_near(st.goodput_rps, 0.1, 1e-12, "goodput");
    is_int((long long)st.finished[ENGINE_STOP], 2, "finished by status");
    return tap_done();
}
