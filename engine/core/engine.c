/* engine: the values of the public API (engine.h) that do not depend on
 * which engine runs: the defaults, status names, freeing an event, a
 * request's metrics as JSON. Both the local and the remote engine use them. */
#include "engine.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "engine_impl.h"

const char *engine_status_name(enum engine_status s)
{
    static const char *const names[ENGINE_N_STATUS] = {
        "ok", "stop", "length", "cancelled", "timeout", "rejected", "error", "consumer-stalled"};
    return (unsigned)s < ENGINE_N_STATUS ? names[s] : "?";
}

const char *engine_pooling_name(enum engine_pooling p)
{
    static const char *const names[] = {"model", "mean", "cls", "last"};
    return (unsigned)p < sizeof names / sizeof names[0] ? names[p] : "?";
}

void engine_config_default(struct engine_config *c)
{
    memset(c, 0, sizeof *c);
    c->backend.kind = BACKEND_AUTO;
    c->backend.kv_type = KV_F16;
    c->backend.kv_block_tokens = ENGINE_BLOCK_TOKENS;
    c->step_tokens = 0; /* by backend, once it is open */
    c->max_running = 64;
    c->max_queue = 256;
    c->event_limit = 4096;
    c->slo_ttft_s = 1.0;
    c->slo_tpot_s = 0.2;
}

void engine_sampling_default(struct engine_sampling *s)
{
    memset(s, 0, sizeof *s);
    s->temp = ENGINE_DEFAULT_TEMP;
    s->top_k = ENGINE_DEFAULT_TOP_K;
    s->top_p = ENGINE_DEFAULT_TOP_P;
    s->min_p = ENGINE_DEFAULT_MIN_P;
    s->repeat_penalty = ENGINE_DEFAULT_REPEAT_PENALTY;
    s->penalty_last_n = ENGINE_DEFAULT_PENALTY_LAST_N;
}

void engine_sampling_greedy(struct engine_sampling *s)
{
    engine_sampling_default(s);
    s->temp = 0;
}

void engine_event_free(struct engine_event *ev)
{
    if (!ev) return;
    free(ev->text);
    free(ev->message);
    if (ev->metrics) free(ev->metrics->token_t);
    free(ev->metrics);
    free(ev->logprobs);
    free(ev->embedding);
    ev->text = ev->message = NULL;
    ev->metrics = NULL;
    ev->logprobs = NULL;
    ev->n_logprobs = 0;
    ev->embedding = NULL;
    ev->n_embedding = 0;
}

static void null_or(cJSON *o, const char *name)
{
    cJSON_ReplaceItemInObjectCaseSensitive(o, name, cJSON_CreateNull());
}

struct cJSON *engine_metrics_json(const struct engine_metrics *m)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "id", (double)m->id);
    cJSON_AddNumberToObject(o, "tag", (double)m->tag);
    cJSON_AddStringToObject(o, "status", engine_status_name(m->status));
    cJSON_AddStringToObject(o, "priority", m->priority == ENGINE_PRIO_BATCH ? "batch" : "interactive");
    cJSON_AddNumberToObject(o, "t_arrival", m->t_arrival);
    cJSON_AddNumberToObject(o, "t_admitted", m->t_admitted);
    cJSON_AddNumberToObject(o, "t_first_sched", m->t_first_sched);
    cJSON_AddNumberToObject(o, "t_prefill_done", m->t_prefill_done);
    cJSON_AddNumberToObject(o, "t_first_token", m->t_first_token);
    cJSON_AddNumberToObject(o, "t_finished", m->t_finished);
    cJSON_AddNumberToObject(o, "queue_s", m->queue_s);
    cJSON_AddNumberToObject(o, "prefill_s", m->prefill_s);
    cJSON_AddNumberToObject(o, "ttft_s", m->ttft_s);
    cJSON_AddNumberToObject(o, "tpot_s", m->tpot_s);
    cJSON_AddNumberToObject(o, "decode_s", m->decode_s);
    cJSON_AddNumberToObject(o, "e2e_s", m->e2e_s);
    cJSON_AddNumberToObject(o, "prompt_tokens", m->n_prompt);
    cJSON_AddNumberToObject(o, "cached_tokens", m->n_cached);
    cJSON_AddNumberToObject(o, "computed_tokens", m->n_computed);
    cJSON_AddNumberToObject(o, "restored_tokens", m->n_restored);
    cJSON_AddNumberToObject(o, "generated_tokens", m->n_generated);
    cJSON_AddNumberToObject(o, "preemptions", m->n_preempted);
    if (m->n_spec_steps > 0) { /* speculative decoding (n-gram lookup) */
        cJSON_AddNumberToObject(o, "spec_steps", m->n_spec_steps);
        cJSON_AddStringToObject(o, "spec_source", m->spec_from_draft ? "draft" : "lookup");
        cJSON_AddNumberToObject(o, "spec_draft_tokens", m->n_draft_tokens);
        cJSON_AddNumberToObject(o, "spec_accepted_tokens", m->n_accepted_tokens);
        double rate = m->n_draft_tokens ? (double)m->n_accepted_tokens / m->n_draft_tokens : 0;
        cJSON_AddNumberToObject(o, "spec_acceptance_rate", rate);
        cJSON_AddNumberToObject(o, "spec_tokens_per_step",
                                1.0 + (double)m->n_accepted_tokens / m->n_spec_steps);
    }
    if (m->n_scored > 0) {
        cJSON_AddNumberToObject(o, "nll_sum", m->nll_sum);
        cJSON_AddNumberToObject(o, "nll_sq_sum", m->nll_sq_sum);
        cJSON_AddNumberToObject(o, "n_scored", m->n_scored);
    }
    if (m->remote) {
        /* Client-side figures; the server's own phases under "server" (null
         * when it reported none), so neither is passed off as the other. */
        cJSON_AddNumberToObject(o, "endpoint", m->endpoint);
        cJSON_AddNumberToObject(o, "connect_s", m->connect_s);
        cJSON_AddNumberToObject(o, "headers_s", m->headers_s);
        cJSON_AddNumberToObject(o, "http_status", m->http_status);
        cJSON_AddBoolToObject(o, "interrupted", m->interrupted);
        cJSON_AddBoolToObject(o, "counts_estimated", m->counts_estimated);
        if (!m->server.known) { /* server-side phases nobody reported */
            null_or(o, "queue_s");
            null_or(o, "prefill_s");
        }
        if (m->server.known) {
            cJSON *sv = cJSON_AddObjectToObject(o, "server");
            cJSON_AddNumberToObject(sv, "queue_s", m->server.queue_s);
            cJSON_AddNumberToObject(sv, "prefill_s", m->server.prefill_s);
            cJSON_AddNumberToObject(sv, "ttft_s", m->server.ttft_s);
            cJSON_AddNumberToObject(sv, "tpot_s", m->server.tpot_s);
            cJSON_AddNumberToObject(sv, "decode_s", m->server.decode_s);
            cJSON_AddNumberToObject(sv, "e2e_s", m->server.e2e_s);
        } else {
            cJSON_AddNullToObject(o, "server");
        }
    }
    cJSON *itl = cJSON_AddArrayToObject(o, "itl_s");
    for (int32_t i = 1; itl && m->token_t && i < m->n_generated; i++)
        cJSON_AddItemToArray(itl, cJSON_CreateNumber(m->token_t[i] - m->token_t[i - 1]));
    return o;
}

double engine_kv_keys(int32_t n_layer, int32_t n_swa_layers, int32_t window, int64_t p0,
                      int64_t n)
{
    if (n <= 0 || n_layer <= 0) return 0;
    /* p attends p + 1 keys: the mean of a..b, each capped at the window */
    const double a = (double)p0 + 1, b = (double)(p0 + n), w = window;
    const double full = (a + b) / 2;
    double swa = full;
    if (window > 0 && w <= a) swa = w;
    else if (window > 0 && w < b) swa = ((a + w) * (w - a + 1) / 2 + (b - w) * w) / (double)n;
    return (double)(n_layer - n_swa_layers) * full + (double)n_swa_layers * swa;
}
