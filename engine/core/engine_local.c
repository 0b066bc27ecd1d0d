/* engine_local: the in-process engine behind the engine_ops seam: its open
 * and close (model, tokenizer, backend, KV pool, scheduler, the engine
 * thread) and the ops a consumer calls (events, cancel, pause, statistics,
 * info, token counts). Submission is engine_request.c's; the engine thread
 * is engine_loop.c's. Every op takes the public handle: the local state is
 * its first member. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "draft.h"
#include "engine_impl.h"
#include "model.h"

/* ---- events (consumer side) ----------------------------------------------------- */

/* A queued event holds a reference on its request (engine_emit). */
static void release_event(void *owner)
{
    struct engine_req *r = owner;
    r->n_events--;
    engine_req_unref(r);
}

static int local_poll_events(struct engine *base, struct engine_event *out, int max)
{
    struct engine_local *e = engine_local_of(base);
    pthread_mutex_lock(&e->mu);
    int n = evq_pop(&e->evq, 0, out, max, release_event);
    pthread_mutex_unlock(&e->mu);
    return n;
}

static int local_poll_request(struct engine *base, uint64_t id, struct engine_event *out, int max)
{
    struct engine_local *e = engine_local_of(base);
    pthread_mutex_lock(&e->mu);
    int n = evq_pop(&e->evq, id ? id : UINT64_MAX, out, max, release_event);
    pthread_mutex_unlock(&e->mu);
    return n;
}

static int local_event_fd(const struct engine *base)
{
    return engine_local_cof(base)->evq.fd;
}

static bool local_wait_events(struct engine *base, uint64_t id, double timeout_s)
{
    struct engine_local *e = engine_local_of(base);
    return evq_wait(&e->evq, &e->mu, &e->ev_cond, id, timeout_s);
}

/* ---- control -------------------------------------------------------------------- */

static int local_cancel(struct engine *base, uint64_t id)
{
    struct engine_local *e = engine_local_of(base);
    int rc = -1;
    pthread_mutex_lock(&e->mu);
    for (struct engine_req *r = e->live; r; r = r->live_next) {
        if (r->id != id) continue;
        if (!r->finished) {
            r->cancel = true;
            rc = 0;
            pthread_cond_broadcast(&e->work_cond);
        }
        break;
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

static void local_pause(struct engine *base, bool paused)
{
    struct engine_local *e = engine_local_of(base);
    pthread_mutex_lock(&e->mu);
    e->paused = paused;
    pthread_cond_broadcast(&e->work_cond);
    pthread_mutex_unlock(&e->mu);
}

/* ---- statistics and info -------------------------------------------------------- */

static void local_snapshot(struct engine *base, struct engine_stats *out)
{
    struct engine_local *e = engine_local_of(base);
    pthread_mutex_lock(&e->mu);
    *out = e->stats;
    metrics_fill_stats(&e->mx, engine_now(e), out);
    out->waiting = e->n_inbox + e->stats.waiting;
    out->kv_usage = out->kv_total > 0 ? (double)out->kv_used / out->kv_total : 0;
    out->paused = e->paused;
    pthread_mutex_unlock(&e->mu);
}

static int local_requests(struct engine *base, struct engine_req_info *out, int max)
{
    struct engine_local *e = engine_local_of(base);
    pthread_mutex_lock(&e->mu);
    int n = e->n_pub_reqs;
    for (int i = 0; i < n && i < max; i++) out[i] = e->pub_reqs[i];
    pthread_mutex_unlock(&e->mu);
    return n;
}

static void local_info(const struct engine *base, struct engine_info *out)
{
    const struct engine_local *e = engine_local_cof(base);
    memset(out, 0, sizeof *out);
    const struct model_hparams *hp = &e->model->hp;
    out->model_path = e->model_path;
    out->model_name = e->model_name;
    out->arch = hp->arch_name;
    out->n_params = e->model->n_params;
    out->weight_bytes = e->model->weight_bytes;
    out->n_params_active = e->model->n_params_active;
    out->weight_bytes_active = e->model->weight_bytes_active;
    out->n_vocab = hp->n_vocab;
    out->n_ctx_train = hp->n_ctx_train;
    out->n_ctx = e->n_ctx;
    out->kv_block_tokens = e->kv.block_tokens;
    out->kv_blocks = e->kv.n_blocks;
    out->kv_bytes_per_token = e->be->kv_bytes_per_token;
    out->n_layer = hp->n_layer;
    out->sliding_window = hp->sliding_window;
    for (int32_t l = 0; l < hp->n_layer; l++) out->n_swa_layers += model_layer_is_swa(e->model, l);
    out->has_chat_template = e->has_tmpl;
    out->chat_template = e->has_tmpl ? tmpl_family_name(e->tmpl.family) : NULL;
    out->chat_template_fallback = e->has_tmpl && e->tmpl.fallback;
    out->chat_template_from_vocab = e->has_tmpl && e->tmpl.from_vocab;
    out->chat_template_opens_think = e->has_tmpl && e->tmpl.think_open;
    out->backend = e->binfo;
    out->token_counts = "model tokenizer";
    out->n_embd = e->n_embd;
    out->pooling = e->pooling;
    out->embd_why = e->embd_why;
    if (e->draft) {
        struct draft_info di;       /* name and sizes: fixed at open */
        draft_get_info(e->draft, &di);
        out->draft.name = di.name;
        out->draft.weight_bytes = di.weight_bytes;
        out->draft.kv_bytes = di.kv_bytes;
    }
}

/* ---- tokens --------------------------------------------------------------------- */

static int64_t local_count_tokens(const struct engine *base, const char *text, size_t len,
                                  char *err, size_t errlen)
{
    const struct engine_local *e = engine_local_cof(base);
    if (!e->tok) {
        snprintf(err, errlen, "engine: no tokenizer");
        return -1;
    }
    return tok_encode(e->tok, text, len, TOK_ADD_BOS | TOK_PARSE_SPECIAL, NULL, 0, err, errlen);
}

static int64_t local_count_chat_tokens(const struct engine *base, const struct engine_message *msgs,
                                       int32_t n, char *err, size_t errlen)
{
    const struct engine_local *e = engine_local_cof(base);
    char *text = engine_render_chat(e, msgs, n, err, errlen);
    if (!text) return -1;
    int64_t c = tok_encode(e->tok, text, strlen(text), ENGINE_CHAT_TOK_FLAGS, NULL, 0, err, errlen);
    free(text);
    return c;
}

static int local_token_bytes(const struct engine *base, int32_t id, char *out, size_t cap)
{
    const struct engine_local *e = engine_local_cof(base);
    if (!e->tok || id < 0 || id >= tok_n_vocab(e->tok)) return -1;
    return (int)tok_decode_token_special(e->tok, id, out, cap);
}

/* ---- open / close --------------------------------------------------------------- */

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int open_parts(struct engine_local *e, const struct engine_config *c, char *err, size_t errlen)
{
    if (c->parts.model) {
        e->model = c->parts.model;
    } else {
        if (!c->model_path) {
            snprintf(err, errlen, "engine: no model path");
            return -1;
        }
        e->own_model = model_open(c->model_path, err, errlen);
        if (!e->own_model) return -1;
        e->model = e->own_model;
    }
    if (c->parts.tok || c->parts.model) {
        e->tok = c->parts.tok;
    } else {
        e->tok = tok_open(e->model->gguf, err, errlen);
        if (!e->tok) return -1;
        e->own_tok = true;
    }
    if (c->parts.backend) {
        e->be = c->parts.backend;
    } else {
        struct backend_config bc = c->backend;
        if (bc.kv_block_tokens <= 0) bc.kv_block_tokens = ENGINE_BLOCK_TOKENS;
        struct sched_config sc = {.step_tokens = e->cfg.step_tokens > 0 ? e->cfg.step_tokens
                                                                        : ENGINE_STEP_TOKENS_GPU,
                                  .max_running = e->cfg.max_running};
        bc.max_batch_tokens = sched_max_batch_tokens(&sc);
        bc.max_seqs = e->cfg.max_running + 1;
        e->be = backend_open(e->model, &bc, err, errlen);
        if (!e->be) return -1;
        e->own_be = true;
    }
    e->be->ops->get_info(e->be, &e->binfo);
    engine_embed_setup(e);
    if (e->cfg.step_tokens <= 0) {
        bool gpu = e->binfo.name && strcmp(e->binfo.name, "cuda") == 0;
        e->cfg.step_tokens = gpu ? ENGINE_STEP_TOKENS_GPU : ENGINE_STEP_TOKENS_CPU;
    }
    return 0;
}

/* The scheduler's proposer when a draft model guesses (draft.h). */
static int32_t draft_guesses(void *ud, const struct sched_seq *q, int32_t k, int32_t *out)
{
    struct engine_local *e = ud;
    return draft_propose(e->draft, q->id, q->tokens, q->n_tokens, k, e->sched.step, out);
}

/* The scheduler's prefill hook: the draft sees each prompt chunk in the
 * step the target computes it. */
static void draft_chunk(void *ud, const struct sched_seq *q, int32_t start, int32_t n)
{
    struct engine_local *e = ud;
    draft_feed(e->draft, q->id, q->tokens, start + n, n, e->sched.step);
}

/* The draft model beside the target, on the same kind of backend. */
static int open_draft(struct engine_local *e, const struct engine_config *c, char *err,
                      size_t errlen)
{
    if (!c->draft_model) return 0;
    if (!e->tok) {
        snprintf(err, errlen, "engine: a draft model needs the target's tokenizer");
        return -1;
    }
    struct draft_config dc = {.model_path = c->draft_model, .backend = c->backend,
                              .max_seqs = e->cfg.max_running, .n_ctx = e->n_ctx,
                              /* catching up costs at most a prefill chunk per step */
                              .catchup_tokens = e->cfg.step_tokens};
    e->draft = draft_open(&dc, e->tok, err, errlen);
    if (!e->draft) return -1;
    e->sched.propose = draft_guesses;
    e->sched.feed = draft_chunk;
    e->sched.propose_ud = e;
    if (e->cfg.lookup_k <= 0) e->cfg.lookup_k = ENGINE_DRAFT_K;
    return 0;
}

static void fill_defaults(struct engine_config *c)
{
    struct engine_config d;
    engine_config_default(&d);
    if (c->max_running <= 0) c->max_running = d.max_running;
    if (c->max_queue <= 0) c->max_queue = d.max_queue;
    if (c->event_limit <= 0) c->event_limit = d.event_limit;
    if (c->slo_ttft_s <= 0) c->slo_ttft_s = d.slo_ttft_s;
    if (c->slo_tpot_s <= 0) c->slo_tpot_s = d.slo_tpot_s;
}

static int setup_serving(struct engine_local *e, char *err, size_t errlen)
{
    const struct model_hparams *hp = &e->model->hp;
    e->n_vocab = hp->n_vocab;
    e->n_ctx = e->cfg.n_ctx > 0 ? e->cfg.n_ctx : hp->n_ctx_train;
    if (e->n_ctx <= 0) e->n_ctx = 4096;
    if (kv_init(&e->kv, e->be->kv_n_blocks, e->be->kv_block_tokens, err, errlen) != 0) return -1;
    int64_t pool = (int64_t)e->kv.n_blocks * e->kv.block_tokens;
    e->max_total = pool < e->n_ctx ? (int32_t)pool : e->n_ctx;
    e->rows_cap = e->cfg.max_running + ENGINE_SCORE_ROWS;
    struct sched_config sc = {.step_tokens = e->cfg.step_tokens,
                              .max_running = e->cfg.max_running,
                              .max_logit_rows = e->rows_cap};
    if (sched_init(&e->sched, &e->kv, &sc, err, errlen) != 0) return -1;
    e->logits = malloc((size_t)e->rows_cap * (size_t)e->n_vocab * sizeof *e->logits);
    if (!e->logits) {
        snprintf(err, errlen, "engine: out of memory for %d logits rows of %d", e->rows_cap,
                 e->n_vocab);
        return -1;
    }
    metrics_init(&e->mx, e->cfg.slo_ttft_s, e->cfg.slo_tpot_s);
    if (e->cfg.trace_path) {
        if (trace_open(&e->trace, e->cfg.trace_path, err, errlen) != 0) return -1;
        trace_track(&e->trace, 0, "engine steps");
    }
    return evq_init(&e->evq, engine_event_free, err, errlen);
}

static void local_close(struct engine *base)
{
    struct engine_local *e = engine_local_of(base);
    engine_thread_stop(e);
    if (e->kvd_on) { /* the session's prefixes outlive it */
        char err[256];
        engine_cache_save_now(e, err, sizeof err);
    }
    engine_cache_close(e);
    evq_free(&e->evq, release_event);
    trace_close(&e->trace);
    free(e->logits);
    free(e->lp_row);
    tmask_vocab_free(e->gvocab);
    free(e->pub_reqs);
    sched_free(&e->sched);
    kv_free(&e->kv);
    draft_close(e->draft);
    if (e->own_be) backend_close(e->be);
    if (e->own_tok) tok_close(e->tok);
    if (e->own_model) model_close(e->own_model);
    pthread_cond_destroy(&e->ev_cond);
    pthread_cond_destroy(&e->work_cond);
    pthread_mutex_destroy(&e->mu);
    if (e->has_tmpl) tmpl_free(&e->tmpl);
    free(e->model_path);
    free(e->model_name);
    free(e);
}

static const struct engine_ops local_ops = {
    .name = "local",
    .submit = engine_local_submit,
    .cancel = local_cancel,
    .pause = local_pause,
    .poll_events = local_poll_events,
    .poll_request = local_poll_request,
    .event_fd = local_event_fd,
    .wait_events = local_wait_events,
    .snapshot = local_snapshot,
    .requests = local_requests,
    .info = local_info,
    .count_tokens = local_count_tokens,
    .count_chat_tokens = local_count_chat_tokens,
    .token_bytes = local_token_bytes,
    .cache_list = engine_local_cache_list,
    .cache_save = engine_local_cache_save,
    .close = local_close,
};

struct engine *engine_local_new(const struct engine_config *c, char *err, size_t errlen)
{
    struct engine_local *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "engine: out of memory");
        return NULL;
    }
    e->base.ops = &local_ops;
    e->evq.fd = -1;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    e->t0 = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    e->cfg = *c;
    fill_defaults(&e->cfg);
    e->model_path = strdup(c->model_path ? c->model_path : "(in memory)");
    e->model_name = strdup(base_name(e->model_path));
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->work_cond, NULL);
    pthread_cond_init(&e->ev_cond, NULL);
    if (!e->model_path || !e->model_name) {
        snprintf(err, errlen, "engine: out of memory");
        goto fail;
    }
    if (open_parts(e, c, err, errlen) != 0) goto fail;
    if (setup_serving(e, err, errlen) != 0) goto fail;
    if (open_draft(e, c, err, errlen) != 0) goto fail;
    if (e->tok && e->model->gguf) {
        if (tmpl_init_model(&e->tmpl, e->model->gguf, e->tok, c->chat_template, err, errlen) != 0)
            goto fail;
        e->has_tmpl = true;
    }
    engine_cache_open(e);
    if (engine_thread_start(e, err, errlen) != 0) goto fail;
    return &e->base;
fail:
    local_close(&e->base);
    return NULL;
}
