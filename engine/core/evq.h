/* evq: the engine's event queue. A FIFO of events from all requests with a
 * file descriptor that is readable while the queue is not empty (eventfd),
 * so a UI can poll() it beside the keyboard. Every function expects the
 * caller to hold the engine's lock; the queue itself does not lock. The
 * caller gives the function that frees an event (as redis' lists take a free
 * method), so the queue depends on the event's type only, not on engine.c. */
#ifndef TERN_EVQ_H
#define TERN_EVQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

struct evq_node {
    struct engine_event ev;
    void *owner;               /* the request it belongs to (released by the caller) */
    struct evq_node *next;
};

typedef void evq_free_fn(struct engine_event *ev);

struct evq {
    struct evq_node *head, *tail;
    size_t n;
    int fd;                    /* eventfd: readable while n > 0 */
    evq_free_fn *free_ev;      /* frees an event's heap parts */
};

int evq_init(struct evq *q, evq_free_fn *free_ev, char *err, size_t errlen);
/* Frees queued events (free_ev); calls release(owner) for each. */
void evq_free(struct evq *q, void (*release)(void *owner));
/* Takes ownership of ev's heap parts. Returns 0 or -1 on out-of-memory
 * (ev is then freed with free_ev). */
int evq_push(struct evq *q, struct engine_event *ev, void *owner);
/* Moves up to max events (of request id, or any when id == 0) into out;
 * calls release(owner) for each. Returns the count. */
int evq_pop(struct evq *q, uint64_t id, struct engine_event *out, int max,
            void (*release)(void *owner));
/* Whether an event of request id (any when 0) is queued. */
int evq_has(const struct evq *q, uint64_t id);
/* Waits on cond (signalled by whoever pushes, under mu) until an event of
 * request id (any when id == 0) is queued or timeout_s passes (< 0: no
 * limit). Takes and releases mu itself. Returns whether one is waiting. */
bool evq_wait(const struct evq *q, pthread_mutex_t *mu, pthread_cond_t *cond, uint64_t id,
              double timeout_s);

#endif
