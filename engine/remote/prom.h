/* prom: a parser for the Prometheus text exposition format (version 0.0.4,
 * as vLLM, SGLang, llama-server and tern serve it) and the few queries the
 * remote engine needs: the sum of a metric over its label sets, and a
 * histogram's cumulative buckets merged over label sets. Untrusted input:
 * every line is bounds-checked; a malformed line is skipped and counted, not
 * fatal (one bad exporter line must not hide the rest). */
#ifndef TERN_PROM_H
#define TERN_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct prom_sample {
    char *name;                /* metric name with suffix (_bucket, _sum, _count, _total) */
    char *labels;              /* raw label text inside {}, "" if none */
    double le;                 /* the "le" label as a number (+Inf allowed); NAN if absent */
    double value;
};

struct prom_doc {
    struct prom_sample *s;
    int32_t n, cap;
    int32_t n_bad;             /* lines that did not parse */
};

/* Parses text[0..len) into d (zeroed by the caller or by prom_free). Returns
 * 0, or -1 with err on out-of-memory. */
int prom_parse(const char *text, size_t len, struct prom_doc *d, char *err, size_t errlen);
void prom_free(struct prom_doc *d);

/* Sum of the samples named name over all label sets; false when none exists. */
bool prom_sum(const struct prom_doc *d, const char *name, double *out);
/* The same over the samples whose label key equals value. */
bool prom_sum_label(const struct prom_doc *d, const char *name, const char *key, const char *value,
                    double *out);
/* Mean of the samples named name over label sets (a gauge per engine or
 * rank, e.g. KV usage); false when none exists. */
bool prom_mean(const struct prom_doc *d, const char *name, double *out);
/* Whether any sample's name starts with prefix ("vllm:"). */
bool prom_has_prefix(const struct prom_doc *d, const char *prefix);

#define PROM_MAX_BUCKETS 64
/* A histogram's cumulative buckets (upper bound le, count of samples <= le),
 * summed over label sets, ascending le; the last is +Inf. */
struct prom_hist {
    int32_t n;
    double le[PROM_MAX_BUCKETS];
    double cum[PROM_MAX_BUCKETS];
    double sum, count;
};
/* Reads base_bucket / base_sum / base_count; false when absent. */
bool prom_hist_get(const struct prom_doc *d, const char *base, struct prom_hist *out);
/* cur - prev bucket by bucket (the interval's samples). When prev is NULL,
 * has other bounds, or went backwards (server restart), the result is cur. */
void prom_hist_delta(const struct prom_hist *cur, const struct prom_hist *prev,
                     struct prom_hist *out);
/* The q-quantile by linear interpolation inside the bucket that holds it
 * (Prometheus' histogram_quantile); NAN when the histogram is empty. A value
 * in the +Inf bucket is reported as the largest finite bound. */
double prom_hist_quantile(const struct prom_hist *h, double q);

#endif
