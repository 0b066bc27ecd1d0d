/* threadpool: persistent workers for the CPU kernels. Workers spin briefly
 * after a job, then sleep on a condition variable; no thread is created per
 * call. A job is a function run once by each of n threads with its index. */
#ifndef TERN_THREADPOOL_H
#define TERN_THREADPOOL_H

#include <stdint.h>

struct threadpool;

typedef void (*tp_fn)(void *arg, int ith, int nth);

/* n_threads includes the caller (which runs index 0). */
struct threadpool *tp_open(int n_threads);
void tp_close(struct threadpool *tp);
int tp_n_threads(const struct threadpool *tp);
/* Runs fn(arg, i, n) for i in [0, n) and returns when all are done. */
void tp_run(struct threadpool *tp, tp_fn fn, void *arg);
/* Like tp_run, but when the caller's own fn(arg, 0, n) returns, workers
 * that have not started yet are skipped instead of waited for. For jobs
 * whose workers claim work from a shared counter (so index 0 alone can
 * finish everything): a preempted or sleeping worker then costs nothing. */
void tp_run_any(struct threadpool *tp, tp_fn fn, void *arg);
/* Work units claimed one at a time: fn(ctx, u, ith) for every u in
 * [0, n_units), each exactly once, by whichever thread ith claims it
 * (tp_run_any underneath). Dynamic balance instead of a fixed split: on a
 * VM whose vCPUs run at different speeds, or with one preempted, the fast
 * threads take the slow one's units. The result must not depend on which
 * thread runs a unit. How the claims go:
 *   TP_CLAIM_SHARED     one counter, units in order 0, 1, ...: the caller
 *                       numbers its costliest units first (few, large units)
 *   TP_CLAIM_OWN_FIRST  each thread first takes its own contiguous share
 *                       (a counter no other thread touches until the share
 *                       runs out), then the others': many small units,
 *                       where a shared counter's cache line moving between
 *                       cores on every claim is a cost decode can measure */
enum tp_claim { TP_CLAIM_SHARED, TP_CLAIM_OWN_FIRST };
typedef void (*tp_unit_fn)(void *ctx, int64_t unit, int ith);
void tp_run_claimed(struct threadpool *tp, int64_t n_units, enum tp_claim how, tp_unit_fn fn,
                    void *ctx);
/* Physical cores of this machine (sysfs topology), at least 1. */
int tp_physical_cores(void);

#endif
