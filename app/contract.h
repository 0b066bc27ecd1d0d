/* contract: the acceptance contract of 'tern bench --contract FILE' — a
 * human-written `key = value` file (data/config.c's syntax: '#' comments,
 * one key a line) naming the model, the workload, the targets and an
 * optional quality gate (docs/CONTRACT.md). This module reads and checks
 * the file, plans the workload's requests and judges a run's summary
 * against the targets; it prints nothing. Errors name the file, the line
 * and the key: "chat.contract:12: target.ttft.p99: '3 parsecs' is not a
 * duration (e.g. 250ms, 1.5s)". */
#ifndef TERN_CONTRACT_H
#define TERN_CONTRACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_profiles.h"

struct cJSON;

#define CONTRACT_MAX_BUCKETS 16
#define CONTRACT_MAX_TARGETS 24
#define CONTRACT_MAX_TENANTS 8

enum contract_metric { CM_TTFT, CM_TPOT, CM_E2E, CM_ERROR_RATE, CM_GOODPUT, CM_ATTAINMENT,
                       CM_AVAILABILITY };
enum contract_arrival { CA_CLOSED, CA_CONSTANT, CA_POISSON, CA_BURSTS };

struct contract_bucket {
    int32_t lo, hi;              /* tokens, drawn uniformly in [lo, hi] */
    double share;                /* 0..1; a histogram's shares sum to 1 */
};

struct contract_tenant {
    char name[32];
    bool batch;                  /* priority: batch (else interactive) */
    double share;
};

struct contract_target {
    enum contract_metric metric;
    int pct;                     /* latencies: 50, 90 or 99 */
    double limit;                /* seconds; a share for error-rate/attainment; req/s goodput */
    int line;
    char key[80];                /* "target.ttft.p99", "target.chat.ttft.p99" */
    char tenant[32];             /* a tenant's own figures; "" = all requests */
};

struct contract {
    char *path, *dir;            /* the file, and its folder (relative paths in it) */
    char *name;
    char *model_name, *model_sha256, *model_revision;
    char *model_licence, *model_source, *retention, *region;   /* recorded, not checked */
    int model_line[3];           /* lines of name, sha256, revision (0: absent) */
    /* workload */
    long requests;
    struct contract_bucket prompt[CONTRACT_MAX_BUCKETS], output[CONTRACT_MAX_BUCKETS];
    int n_prompt, n_output;
    char *prompts;               /* JSONL prompt set (path as resolved), or NULL */
    enum contract_arrival arrival;
    double rate;                 /* requests/s of an open loop */
    long burst;                  /* bursts: requests arriving together */
    long concurrency;            /* closed loop: in flight */
    long peak;                   /* open loop: most in flight (0 = no cap) */
    double streamed, cancelled, slow_readers;   /* shares of clients, 0..1 */
    struct contract_tenant tenants[CONTRACT_MAX_TENANTS];
    int n_tenants;
    uint64_t seed;
    double slo_ttft, slo_tpot;   /* goodput: what a good request meets */
    /* targets */
    struct contract_target targets[CONTRACT_MAX_TARGETS];
    int n_targets;
    /* quality gate (optional) */
    char *quality_text;          /* perplexity text */
    double max_perplexity;
    /* the fallback route decided in advance (route.h's form), used unless
     * --route is given; NULL = none */
    char *route;
    double route_ttft;           /* seconds; 0 = none */
    long ppl_ctx, ppl_chunks;
    char *quality_prompts;       /* JSONL with expected answers (tern eval's format) */
    double min_accuracy;
    long quality_max_tokens;
};

/* Reads and checks path. Returns 0, or -1 with err naming file, line, key
 * and the problem (a missing key: file and key). c is zeroed first; free it
 * with contract_free in either case. */
int contract_load(struct contract *c, const char *path, char *err, size_t errlen);
void contract_free(struct contract *c);

/* A planned request's prompt from the contract's prompt set. */
struct contract_plan {
    struct bench_load_req *v;
    int n;
    char **texts;                /* prompts from the prompt set (owned), n entries or NULL */
    int *tenant;                 /* each request's tenant index, or -1 */
};

/* Plans c's requests at `rate` requests/s (<= 0: the contract's own rate):
 * lengths from the histograms (or the prompt set, whose lines are read
 * here: {"prompt": ..., "max_tokens": N} or ShareGPT {"conversations": [...]}),
 * tenants, streamed/cancelled/slow shares and arrival times, all from the
 * contract's seed. Returns 0 or -1 with err (file:line of a bad line). */
int contract_plan(const struct contract *c, double rate, struct contract_plan *p, char *err,
                  size_t errlen);
void contract_plan_free(struct contract_plan *p);

/* Judges summary (bench_load_run's) against the targets: an array of rows
 * {target, line, limit, measured, unit, pass, margin}; *all_pass false
 * when any fails (a figure that was not measured fails). */
struct cJSON *contract_judge(const struct contract *c, const struct cJSON *summary,
                             bool *all_pass);

/* The SLO a request must meet to count as good, as the targets say. */
const char *contract_metric_name(enum contract_metric m);

#endif
