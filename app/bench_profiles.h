/* bench_profiles: serving load profiles of 'tern bench' (short, long-prompt,
 * long-reply, mixed-priority, cancel, slow-consumer, multi-turn, all), and
 * the same driver for a planned load (a contract's workload, bench_load_run).
 * cmd_bench.c calls bench_profiles_main when --profile is given; argv as for
 * cmd_bench. */
#ifndef TERN_BENCH_PROFILES_H
#define TERN_BENCH_PROFILES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct cJSON;
struct engine;

int bench_profiles_main(int argc, char **argv);
/* The --profile options' help (tern bench --help shows it too). */
const char *bench_profiles_usage(void);

/* One planned request. */
struct bench_load_req {
    int32_t prompt_tokens;       /* cut from the texts when prompt is NULL */
    int32_t max_tokens;          /* generated exactly (EOS ignored) */
    const char *prompt;          /* a prompt set's raw text, or NULL; borrowed */
    double arrival;              /* open loop: seconds after the start */
    int cancel_after;            /* cancel after this many tokens; -1 never */
    int stall_after;             /* stop reading after this many tokens; -1 never */
    bool batch;                  /* batch priority (else interactive) */
    bool unstreamed;             /* a non-streaming client: its TTFT is its E2E */
};

struct bench_load {
    const char *name;            /* progress label */
    const struct bench_load_req *v;
    int n;
    bool open_loop;              /* arrivals as planned; else closed loop */
    int concurrency;             /* closed loop: requests in flight */
    int peak;                    /* open loop: most in flight (0 = no cap) */
    double slo_ttft, slo_tpot;   /* goodput SLO, seconds */
    uint64_t seed;               /* sampling seeds and prompt cuts */
    const char *texts;           /* folder of .txt to cut prompts from; NULL = default */
    bool progress;               /* a progress bar on stderr */
    FILE *requests_out;          /* every request's figures as JSON lines, or NULL */
    /* Tenants: request i belongs to group[i] (0..n_groups-1, or -1); the
     * summary then has by_tenant, each group's own figures. NULL: none. */
    const int *group;
    const char *const *group_names;
    int n_groups;
};

/* Runs L on an open engine (local or remote). Returns the summary, with
 * the keys of a profile's (ttft/tpot/itl/e2e percentiles, statuses,
 * goodput_rps, slo_met, ...) plus planned_incomplete and by_tenant; the caller frees it
 * with cJSON_Delete. NULL with err when the prompts cannot be built. */
struct cJSON *bench_load_run(struct engine *e, const struct bench_load *L, char *err,
                             size_t errlen);

#endif
