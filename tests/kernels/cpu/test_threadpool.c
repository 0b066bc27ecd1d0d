/* test_threadpool: every index runs exactly once per tp_run, with the right
 * thread count, over many calls, for pools of 1..4 threads; calls separated
 * by pauses longer than the spin phase exercise the sleep/wake path;
 * tp_run_any and tp_run_claimed run every unit exactly once. */
#include <stdatomic.h>
#include <time.h>

#include "cpu/threadpool.h"
#include "tap.h"

struct job {
    atomic_int runs[8];
    atomic_int bad_nth;
    int want_nth;
};

static void count(void *arg, int ith, int nth)
{
    struct job *j = arg;
    if (nth != j->want_nth || ith < 0 || ith >= nth) atomic_fetch_add(&j->bad_nth, 1);
    else atomic_fetch_add(&j->runs[ith], 1);
}

static void nap_ms(int ms)
{
    struct timespec ts = { 0, ms * 1000000L };
    nanosleep(&ts, NULL);
}

static void check_pool(int nth, int calls, int nap_every)
{
    struct threadpool *tp = tp_open(nth);
    ok(tp != NULL, "tp_open(%d)", nth);
    if (!tp) return;
    is_int(tp_n_threads(tp), nth, "tp_n_threads");
    struct job j = { .want_nth = nth };
    for (int i = 0; i < 8; i++) atomic_init(&j.runs[i], 0);
    atomic_init(&j.bad_nth, 0);
    int exact = 1;
    for (int c = 1; c <= calls; c++) {
        tp_run(tp, count, &j);
        /* tp_run returns only after every index ran: the counts are final. */
        for (int i = 0; i < nth; i++) exact &= atomic_load(&j.runs[i]) == c;
        if (nap_every && c % nap_every == 0) nap_ms(2);
    }
    ok(exact, "%d threads, %d calls: each index ran once per call", nth, calls);
    is_int(atomic_load(&j.bad_nth), 0, "no call saw a wrong (ith, nth)");
    tp_close(tp);
}

/* tp_run_any: items claimed from a shared counter; every item done once by
 * the time it returns, whichever threads took part. */
struct claim_job {
    atomic_int next;
    atomic_int done[64];
};

static void claim(void *arg, int ith, int nth)
{
    struct claim_job *j = arg;
    (void)ith; (void)nth;
    for (int i; (i = atomic_fetch_add(&j->next, 1)) < 64;) atomic_fetch_add(&j->done[i], 1);
}

static void check_any(int nth, int calls, int nap_every)
{
    struct threadpool *tp = tp_open(nth);
    if (!ok(tp != NULL, "tp_open(%d) for tp_run_any", nth)) return;
    struct job idx = { .want_nth = nth };
    for (int i = 0; i < 8; i++) atomic_init(&idx.runs[i], 0);
    atomic_init(&idx.bad_nth, 0);
    int exact = 1, all_idx = 1;
    for (int c = 1; c <= calls; c++) {
        struct claim_job j;
        atomic_init(&j.next, 0);
        for (int i = 0; i < 64; i++) atomic_init(&j.done[i], 0);
        tp_run_any(tp, claim, &j);
        for (int i = 0; i < 64; i++) exact &= atomic_load(&j.done[i]) == 1;
        /* a plain tp_run right after still runs every index */
        tp_run(tp, count, &idx);
        for (int i = 0; i < nth; i++) all_idx &= atomic_load(&idx.runs[i]) == c;
        if (nap_every && c % nap_every == 0) nap_ms(1);
    }
    ok(exact, "tp_run_any, %d threads, %d calls: every item done exactly once", nth, calls);
    ok(all_idx, "tp_run between tp_run_any calls: every index ran once per call");
    tp_close(tp);
}

/* tp_run_claimed: every unit run exactly once, by a valid thread index,
 * for n_units 0, 1, fewer than the threads and many more, both claim
 * kinds; with many units and more than one thread, more than one thread
 * ran some (unit 0 waits, bounded, until another thread has run one). */
struct unit_job {
    atomic_int done[4096];
    atomic_int by[8];       /* units run per thread index */
    atomic_int bad_ith;
    int nth;
    int wait_for_other;
};

static void unit_fn(void *ctx, int64_t u, int ith)
{
    struct unit_job *j = ctx;
    if (ith < 0 || ith >= j->nth) {
        atomic_fetch_add(&j->bad_ith, 1);
        return;
    }
    if (u == 0 && j->wait_for_other) {
        /* up to 5 s for a unit on another thread; this thread holds unit 0 */
        for (int i = 0; i < 5000; i++) {
            int other = 0;
            for (int t = 0; t < j->nth; t++) other += t != ith ? atomic_load(&j->by[t]) : 0;
            if (other) break;
            nap_ms(1);
        }
    }
    atomic_fetch_add(&j->done[u], 1);
    atomic_fetch_add(&j->by[ith], 1);
}

static void check_claimed(int nth, enum tp_claim how)
{
    struct threadpool *tp = tp_open(nth);
    if (!ok(tp != NULL, "tp_open(%d) for tp_run_claimed", nth)) return;
    static struct unit_job j;
    const int64_t sizes[] = { 0, 1, nth - 1, nth, nth + 1, 1000, 4096 };
    const char *kind = how == TP_CLAIM_SHARED ? "shared" : "own first";
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int64_t n = sizes[k];
        if (n < 0) continue;
        for (int i = 0; i < 4096; i++) atomic_init(&j.done[i], 0);
        for (int i = 0; i < 8; i++) atomic_init(&j.by[i], 0);
        atomic_init(&j.bad_ith, 0);
        j.nth = nth;
        j.wait_for_other = n >= 1000 && nth > 1;
        int exact = 1;
        for (int rep = 0; rep < 3; rep++) {
            tp_run_claimed(tp, n, how, unit_fn, &j);
            for (int64_t u = 0; u < 4096; u++)
                exact &= atomic_load(&j.done[u]) == (u < n ? rep + 1 : 0);
        }
        ok(exact && atomic_load(&j.bad_ith) == 0,
           "tp_run_claimed %s, %d threads, %lld units: each ran once per call, valid ith",
           kind, nth, (long long)n);
        if (j.wait_for_other) {
            int threads = 0;
            for (int t = 0; t < nth; t++) threads += atomic_load(&j.by[t]) > 0;
            ok(threads > 1, "tp_run_claimed %s, %d threads, %lld units: %d threads took part",
               kind, nth, (long long)n, threads);
        }
    }
    tp_close(tp);
}

int main(void)
{
    for (int nth = 1; nth <= 4; nth++) check_pool(nth, 500, 0);
    for (int nth = 2; nth <= 3; nth++) check_pool(nth, 40, 1);   /* workers asleep each call */
    check_pool(2, 300, 7);
    for (int nth = 1; nth <= 4; nth++) check_any(nth, 300, 0);
    check_any(3, 60, 3);
    for (int nth = 1; nth <= 4; nth++) {
        check_claimed(nth, TP_CLAIM_SHARED);
        check_claimed(nth, TP_CLAIM_OWN_FIRST);
    }
    {
        static struct unit_job j1;
        for (int i = 0; i < 4096; i++) atomic_init(&j1.done[i], 0);
        for (int i = 0; i < 8; i++) atomic_init(&j1.by[i], 0);
        atomic_init(&j1.bad_ith, 0);
        j1.nth = 1;
        tp_run_claimed(NULL, 3, TP_CLAIM_SHARED, unit_fn, &j1);
        ok(atomic_load(&j1.by[0]) == 3 && atomic_load(&j1.done[2]) == 1 &&
               atomic_load(&j1.done[3]) == 0,
           "tp_run_claimed on a NULL pool runs every unit on the caller");
    }
    tp_close(NULL);
    is_int(tp_n_threads(NULL), 1, "NULL pool counts as one thread");
    int pc = tp_physical_cores();
    ok(pc >= 1 && pc <= 4096, "tp_physical_cores = %d", pc);
    /* open/close many pools: no leaked threads or memory (ASan/TSan runs) */
    int all = 1;
    for (int i = 0; i < 50; i++) {
        struct threadpool *tp = tp_open(1 + i % 4);
        all &= tp != NULL;
        tp_close(tp);
    }
    ok(all, "50 pools opened and closed");
    return tap_done();
}
