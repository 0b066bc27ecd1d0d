/* spec_util: what the speculative decoding tests share (header-only): one
 * result per request (token ids, text, each token's event time, the final
 * metrics), running several requests at once through the engine API, and
 * comparing two results token for token. */
#ifndef TERN_TEST_SPEC_UTIL_H
#define TERN_TEST_SPEC_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"
#include "tap.h"

#define MAXTOK 512

struct res {
    uint64_t id;
    char text[16384];
    size_t len;
    int32_t tok[MAXTOK], n_tok;
    size_t end_of_tok[MAXTOK];
    double t[MAXTOK];            /* event time: tokens of one step share it */
    bool done;
    enum engine_status st;
    char msg[128];
    struct engine_metrics m;
};

/* Runs n requests at once and collects each one's tokens and text. */
static inline void run_many(struct engine *e, const struct engine_request *q, int n, struct res *out)
{
    char err[512];
    enum engine_status why;
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].id = engine_submit(e, &q[i], &why, err, sizeof err);
        if (!out[i].id) {
            tap_diag("submit: %s", err);
            out[i].done = true;
            out[i].st = ENGINE_ERROR;
        }
    }
    struct engine_event evs[64];
    for (int left = n; left > 0;) {
        for (int i = 0; i < n; i++) {
            struct res *o = &out[i];
            if (o->done) continue;
            engine_wait_events(e, o->id, 0.05);
            int k = engine_poll_request(e, o->id, evs, 64);
            for (int j = 0; j < k; j++) {
                struct engine_event *ev = &evs[j];
                if (ev->type == ENGINE_EV_TOKEN && ev->text) {
                    size_t l = strlen(ev->text);
                    if (o->len + l < sizeof o->text) {
                        memcpy(o->text + o->len, ev->text, l + 1);
                        o->len += l;
                    }
                    if (ev->token >= 0 && o->n_tok < MAXTOK) {
                        o->end_of_tok[o->n_tok] = o->len;
                        o->t[o->n_tok] = ev->t;
                        o->tok[o->n_tok++] = ev->token;
                    }
                }
                if (ev->type == ENGINE_EV_FINISHED) {
                    o->done = true;
                    left--;
                    o->st = ev->status;
                    snprintf(o->msg, sizeof o->msg, "%s", ev->message ? ev->message : "");
                    if (ev->metrics) o->m = *ev->metrics;
                    o->m.token_t = NULL;
                }
                engine_event_free(ev);
            }
        }
    }
}

static inline bool same(const struct res *a, const struct res *b)
{
    return a->n_tok == b->n_tok && memcmp(a->tok, b->tok, (size_t)a->n_tok * sizeof *a->tok) == 0 &&
           a->len == b->len && memcmp(a->text, b->text, a->len) == 0 && a->st == b->st;
}

/* First token index where two results differ (for the diagnostic). */
static inline int first_diff(const struct res *a, const struct res *b)
{
    int i = 0;
    while (i < a->n_tok && i < b->n_tok && a->tok[i] == b->tok[i]) i++;
    return i;
}

/* n greedy chat requests of one user message each, gen tokens past EOS. */
static inline void spec_requests(struct engine_request *q, struct engine_message (*msgs)[1], int n,
                                 int32_t gen)
{
    for (int i = 0; i < n; i++) {
        memset(&q[i], 0, sizeof q[i]);
        q[i].messages = msgs[i];
        q[i].n_messages = 1;
        q[i].max_tokens = gen;
        q[i].ignore_eos = true;
        engine_sampling_greedy(&q[i].sampling);
    }
}

/* The oracle: each request alone with guesses off for it (lookup_k -1),
 * then set back to the engine's (0); checks gen tokens and no guesses. */
static inline void spec_plain(struct engine *e, struct engine_request *q, int n, struct res *plain,
                              int32_t gen)
{
    for (int i = 0; i < n; i++) {
        q[i].lookup_k = -1;
        run_many(e, &q[i], 1, &plain[i]);
        q[i].lookup_k = 0;
        ok(plain[i].n_tok == gen && plain[i].m.n_spec_steps == 0,
           "plain %d: %d tokens, no guesses", i, plain[i].n_tok);
    }
}

#endif
