/* store_impl: the store's internals shared by its files (store.c: open,
 * close and the writer thread; store_read.c: the read calls). Not an API. */
#ifndef TERN_STORE_IMPL_H
#define TERN_STORE_IMPL_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "store.h"

struct store_job;
struct store_reply;

struct store {
    char *path;
    enum store_mode mode;
    sqlite3 *rdb;             /* reads, on callers' threads, under rmu */
    pthread_mutex_t rmu;
    sqlite3 *wdb;             /* writes, on the writer thread only */
    pthread_t writer;
    bool writer_started;

    pthread_mutex_t mu;       /* guards everything below */
    pthread_cond_t wake;      /* writer: work queued, or stop */
    pthread_cond_t done;      /* callers: a batch committed */
    struct store_job *head, *tail;
    uint64_t seq_queued, seq_done;
    struct store_reply *replies; /* replies being streamed */
    int64_t *ids;             /* queued key -k-1 -> row id (0 until written, -1 failed) */
    size_t n_ids, cap_ids;
    char werr[512];           /* first write error since the last flush */
    bool stop;
};

/* Waits for queued writes; 0, or -1 with the writer's message. */
int store_wait_writes(struct store *s, char *err, size_t errlen);
double store_now(void);

#endif
