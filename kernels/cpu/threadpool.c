/* threadpool: persistent workers for the CPU kernels. A job is published by
 * bumping a generation counter; workers spin on it for a short while (the
 * decode loop issues a matmul every few microseconds), then sleep on a
 * condition variable. Completion is a countdown the caller spins on, then
 * sleeps on, the same way. No thread is created per call. */
#include "cpu/threadpool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How long a waiter spins before sleeping. Long enough to cover the gap
 * between two matmuls of one forward pass, short enough not to burn a
 * shared core while the app is idle. */
#define TP_SPIN_NS 200000

struct tp_worker {
    struct threadpool *tp;
    int ith;
    pthread_t thread;
    /* Last generation this worker started, or that tp_run_any skipped it
     * for; whoever moves it from gen-1 to gen owns that slot. */
    atomic_uint started;
};

struct threadpool {
    int n;                    /* threads including the caller */
    struct tp_worker *workers; /* n - 1 of them */
    int n_started;

    tp_fn fn;                 /* current job, published by gen */
    void *arg;
    atomic_uint gen;          /* bumped once per tp_run */
    atomic_int pending;       /* workers still running the current job */
    atomic_bool stop;

    pthread_mutex_t mu;
    pthread_cond_t cv_work;   /* workers sleep here for a new gen */
    pthread_cond_t cv_done;   /* the caller sleeps here for pending == 0 */
    atomic_int n_sleeping;    /* workers inside cv_work wait */
    atomic_bool caller_sleeping;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins until *gen differs from seen or the budget runs out; true if it changed. */
static bool spin_for_gen(struct threadpool *tp, unsigned seen)
{
    int64_t t0 = now_ns();
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (atomic_load_explicit(&tp->gen, memory_order_acquire) != seen) return true;
            cpu_relax();
        }
        if (atomic_load_explicit(&tp->stop, memory_order_relaxed)) return true;
        if (now_ns() - t0 > TP_SPIN_NS) return false;
    }
}

static void *worker_main(void *p)
{
    struct tp_worker *w = p;
    struct threadpool *tp = w->tp;
    /* gen is 0 when tp_open creates us; reading it here instead would miss
     * a first job published before this thread got scheduled. */
    unsigned seen = 0;
    for (;;) {
        if (!spin_for_gen(tp, seen)) {
            /* seq_cst pairing with tp_run: either it sees n_sleeping > 0
             * and broadcasts, or we see the new gen under the mutex. */
            atomic_fetch_add(&tp->n_sleeping, 1);
            pthread_mutex_lock(&tp->mu);
            while (atomic_load(&tp->gen) == seen && !atomic_load(&tp->stop))
                pthread_cond_wait(&tp->cv_work, &tp->mu);
            pthread_mutex_unlock(&tp->mu);
            atomic_fetch_sub(&tp->n_sleeping, 1);
        }
        if (atomic_load(&tp->stop)) break;
        seen = atomic_load_explicit(&tp->gen, memory_order_acquire);
        unsigned prev = seen - 1;
        if (!atomic_compare_exchange_strong(&w->started, &prev, seen))
            continue;   /* tp_run_any finished without us: skip this job */
        tp->fn(tp->arg, w->ith, tp->n);
        if (atomic_fetch_sub(&tp->pending, 1) == 1 && atomic_load(&tp->caller_sleeping)) {
            pthread_mutex_lock(&tp->mu);
            pthread_cond_broadcast(&tp->cv_done);
            pthread_mutex_unlock(&tp->mu);
        }
    }
    return NULL;
}

struct threadpool *tp_open(int n_threads)
{
    if (n_threads < 1) n_threads = 1;
    struct threadpool *tp = calloc(1, sizeof *tp);
    if (!tp) return NULL;
    tp->n = n_threads;
    atomic_init(&tp->gen, 0);
    atomic_init(&tp->pending, 0);
    atomic_init(&tp->stop, false);
    atomic_init(&tp->n_sleeping, 0);
    atomic_init(&tp->caller_sleeping, false);
    if (pthread_mutex_init(&tp->mu, NULL) != 0) goto fail_mu;
    if (pthread_cond_init(&tp->cv_work, NULL) != 0) goto fail_cv1;
    if (pthread_cond_init(&tp->cv_done, NULL) != 0) goto fail_cv2;
    if (n_threads > 1) {
        tp->workers = calloc((size_t)n_threads - 1, sizeof *tp->workers);
        if (!tp->workers) goto fail_workers;
    }
    for (int i = 1; i < n_threads; i++) {
        struct tp_worker *w = &tp->workers[i - 1];
        w->tp = tp;
        w->ith = i;
        atomic_init(&w->started, 0);
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            tp_close(tp);   /* joins the ones already started */
            return NULL;
        }
        tp->n_started++;
    }
    return tp;

fail_workers:
    pthread_cond_destroy(&tp->cv_done);
fail_cv2:
    pthread_cond_destroy(&tp->cv_work);
fail_cv1:
    pthread_mutex_destroy(&tp->mu);
fail_mu:
    free(tp);
    return NULL;
}

void tp_close(struct threadpool *tp)
{
    if (!tp) return;
    atomic_store(&tp->stop, true);
    pthread_mutex_lock(&tp->mu);
    pthread_cond_broadcast(&tp->cv_work);
    pthread_mutex_unlock(&tp->mu);
    for (int i = 0; i < tp->n_started; i++) pthread_join(tp->workers[i].thread, NULL);
    free(tp->workers);
    pthread_cond_destroy(&tp->cv_done);
    pthread_cond_destroy(&tp->cv_work);
    pthread_mutex_destroy(&tp->mu);
    free(tp);
}

int tp_n_threads(const struct threadpool *tp)
{
    return tp ? tp->n : 1;
}

static void wait_done(struct threadpool *tp)
{
    int64_t t0 = now_ns();
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (atomic_load_explicit(&tp->pending, memory_order_acquire) == 0) return;
            cpu_relax();
        }
        if (now_ns() - t0 > TP_SPIN_NS) break;
    }
    atomic_store(&tp->caller_sleeping, true);
    pthread_mutex_lock(&tp->mu);
    while (atomic_load(&tp->pending) != 0) pthread_cond_wait(&tp->cv_done, &tp->mu);
    pthread_mutex_unlock(&tp->mu);
    atomic_store(&tp->caller_sleeping, false);
}

static void run(struct threadpool *tp, tp_fn fn, void *arg, bool skip_late)
{
    if (!tp || tp->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    tp->fn = fn;
    tp->arg = arg;
    atomic_store_explicit(&tp->pending, tp->n - 1, memory_order_relaxed);
    unsigned g = atomic_fetch_add(&tp->gen, 1) + 1;  /* seq_cst: publishes fn, arg, pending */
    if (atomic_load(&tp->n_sleeping) > 0) {
        pthread_mutex_lock(&tp->mu);
        pthread_cond_broadcast(&tp->cv_work);
        pthread_mutex_unlock(&tp->mu);
    }
    fn(arg, 0, tp->n);
    if (skip_late) {
        /* Workers that have not started yet (preempted, or still waking
         * from the condition variable) are not waited for. */
        for (int i = 0; i < tp->n - 1; i++) {
            unsigned prev = g - 1;
            if (atomic_compare_exchange_strong(&tp->workers[i].started, &prev, g))
                atomic_fetch_sub(&tp->pending, 1);
        }
    }
    wait_done(tp);
}

void tp_run(struct threadpool *tp, tp_fn fn, void *arg)
{
    run(tp, fn, arg, false);
}

void tp_run_any(struct threadpool *tp, tp_fn fn, void *arg)
{
    run(tp, fn, arg, true);
}

/* Shares of tp_run_claimed's units, one counter per cache line; threads
 * beyond this many start on share ith mod TP_MAX_SHARES. */
#define TP_MAX_SHARES 32

struct claim_job {
    tp_unit_fn fn;
    void *ctx;
    int n_shares;
    struct claim_share {
        _Alignas(64) atomic_llong next;   /* units [next, end) of this share left */
        int64_t end;
    } share[TP_MAX_SHARES];
};

static void claim_worker(void *arg, int ith, int nth)
{
    struct claim_job *j = arg;
    (void)nth;
    const int own = ith % j->n_shares;
    for (int i = 0; i < j->n_shares; i++) {   /* own share, then the others' */
        struct claim_share *s = &j->share[(own + i) % j->n_shares];
        for (;;) {
            const int64_t u = atomic_fetch_add_explicit(&s->next, 1, memory_order_relaxed);
            if (u >= s->end) break;
            j->fn(j->ctx, u, ith);
        }
    }
}

void tp_run_claimed(struct threadpool *tp, int64_t n_units, enum tp_claim how, tp_unit_fn fn,
                    void *ctx)
{
    if (n_units <= 0) return;
    const int nth = tp_n_threads(tp);
    if (nth == 1 || n_units == 1) {   /* nothing to share: no pool sync */
        for (int64_t u = 0; u < n_units; u++) fn(ctx, u, 0);
        return;
    }
    struct claim_job j = { .fn = fn, .ctx = ctx, .n_shares = 1 };
    if (how == TP_CLAIM_OWN_FIRST) {
        j.n_shares = nth < TP_MAX_SHARES ? nth : TP_MAX_SHARES;
        if (n_units < j.n_shares) j.n_shares = (int)n_units;
    }
    const int64_t per = (n_units + j.n_shares - 1) / j.n_shares;
    for (int i = 0; i < j.n_shares; i++) {
        const int64_t lo = per * i < n_units ? per * i : n_units;
        atomic_init(&j.share[i].next, lo);
        j.share[i].end = lo + per < n_units ? lo + per : n_units;
    }
    tp_run_any(tp, claim_worker, &j);   /* thread 0 alone can finish every share */
}

/* Counts distinct (package, core) pairs in sysfs; falls back to the online
 * CPU count, then to 1. */
int tp_physical_cores(void)
{
    char seen[1024][2][16];
    int n_seen = 0, misses = 0;
    for (int cpu = 0; cpu < 1024 && misses < 64; cpu++) {
        char path[128], core[16] = "", pkg[16] = "";
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        FILE *f = fopen(path, "r");
        if (!f) {
            misses++;   /* offline CPUs leave gaps; 64 in a row ends the scan */
            continue;
        }
        misses = 0;
        if (!fgets(core, sizeof core, f)) core[0] = '\0';
        fclose(f);
        snprintf(path, sizeof path,
                 "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
        f = fopen(path, "r");
        if (f) {
            if (!fgets(pkg, sizeof pkg, f)) pkg[0] = '\0';
            fclose(f);
        }
        int dup = 0;
        for (int i = 0; i < n_seen && !dup; i++)
            dup = strcmp(seen[i][0], core) == 0 && strcmp(seen[i][1], pkg) == 0;
        if (!dup && n_seen < 1024) {
            memcpy(seen[n_seen][0], core, sizeof core);
            memcpy(seen[n_seen][1], pkg, sizeof pkg);
            n_seen++;
        }
    }
    if (n_seen > 0) return n_seen;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}
