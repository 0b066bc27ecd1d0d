/* evq: FIFO of engine events with an eventfd that is readable while events
 * wait. The fd is written when the queue becomes non-empty and drained when
 * it becomes empty, both under the engine lock, so its state always matches. */
#include "evq.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

int evq_init(struct evq *q, evq_free_fn *free_ev, char *err, size_t errlen)
{
    memset(q, 0, sizeof *q);
    q->free_ev = free_ev;
    q->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->fd < 0) {
        snprintf(err, errlen, "engine: eventfd: %s", strerror(errno));
        return -1;
    }
    return 0;
}

void evq_free(struct evq *q, void (*release)(void *owner))
{
    struct evq_node *n = q->head;
    while (n) {
        struct evq_node *next = n->next;
        q->free_ev(&n->ev);
        if (release) release(n->owner);
        free(n);
        n = next;
    }
    if (q->fd >= 0) close(q->fd);
    memset(q, 0, sizeof *q);
    q->fd = -1;
}

static void signal_fd(int fd)
{
    uint64_t one = 1;
    ssize_t w = write(fd, &one, sizeof one);
    (void)w; /* EAGAIN only if the counter is saturated: still readable */
}

static void drain_fd(int fd)
{
    uint64_t v;
    ssize_t r = read(fd, &v, sizeof v);
    (void)r; /* EAGAIN: already drained */
}

int evq_push(struct evq *q, struct engine_event *ev, void *owner)
{
    struct evq_node *n = malloc(sizeof *n);
    if (!n) {
        q->free_ev(ev);
        return -1;
    }
    n->ev = *ev;
    n->owner = owner;
    n->next = NULL;
    if (q->tail) q->tail->next = n;
    else q->head = n;
    q->tail = n;
    if (q->n++ == 0) signal_fd(q->fd);
    return 0;
}

int evq_pop(struct evq *q, uint64_t id, struct engine_event *out, int max,
            void (*release)(void *owner))
{
    int got = 0;
    struct evq_node **pp = &q->head, *prev = NULL;
    while (*pp && got < max) {
        struct evq_node *n = *pp;
        if (id != 0 && n->ev.id != id) {
            prev = n;
            pp = &n->next;
            continue;
        }
        *pp = n->next;
        if (q->tail == n) q->tail = prev;
        out[got++] = n->ev;
        if (release) release(n->owner);
        free(n);
        if (--q->n == 0) drain_fd(q->fd);
    }
    return got;
}

int evq_has(const struct evq *q, uint64_t id)
{
    if (id == 0) return q->n > 0;
    for (const struct evq_node *n = q->head; n; n = n->next)
        if (n->ev.id == id) return 1;
    return 0;
}

bool evq_wait(const struct evq *q, pthread_mutex_t *mu, pthread_cond_t *cond, uint64_t id,
              double timeout_s)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    if (timeout_s >= 0) {
        double s = (double)until.tv_sec + (double)until.tv_nsec * 1e-9 + timeout_s;
        until.tv_sec = (time_t)s;
        until.tv_nsec = (long)((s - (double)until.tv_sec) * 1e9);
    }
    pthread_mutex_lock(mu);
    while (!evq_has(q, id)) {
        int rc = timeout_s < 0 ? pthread_cond_wait(cond, mu)
                               : pthread_cond_timedwait(cond, mu, &until);
        if (rc == ETIMEDOUT) break;
    }
    bool has = evq_has(q, id);
    pthread_mutex_unlock(mu);
    return has;
}
