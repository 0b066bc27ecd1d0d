/* threadpool: persistent workers for the CPU kernels. Workers spin briefly
 * after a job, then sleep on a condition variable; no thread is created per
 * call. A job is a function run once by each of n threads with its index. */
#ifndef TERN_THREADPOOL_H
#define TERN_THREADPOOL_H

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
/* Physical cores of this machine (sysfs topology), at least 1. */
int tp_physical_cores(void);

#endif
