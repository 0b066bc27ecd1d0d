/* engine: the serving core's public API. One engine owns a model, its
 * tokenizer and a backend, and runs a scheduler thread that shares the
 * hardware between all submitted requests (continuous batching, chunked
 * prefill, paged KV cache with prefix reuse, priorities, preemption).
 *
 * Threading: every function here may be called from any thread. Requests are
 * submitted with engine_submit (returns at once); results come back as
 * events through a queue that any thread can drain, and engine_event_fd()
 * becomes readable while events are waiting (poll() it beside the keyboard).
 *
 * Ownership: the engine copies everything it needs from a request during
 * engine_submit (messages, prompt, stop strings); the caller's memory may be
 * freed right after. Events returned by engine_poll_events own heap data
 * (text, message, metrics): the consumer releases each one with
 * engine_event_free. Snapshots are plain structs (no pointers) or a cJSON
 * tree the caller frees with cJSON_Delete.
 *
 * Time: every timestamp is seconds on CLOCK_MONOTONIC since engine_open.
 *
 * Two implementations sit behind this API, chosen once by engine_open
 * (engine_ops.h): the local engine (a model in this process) and, when the
 * config names a URL, the remote engine (engine/remote: an OpenAI-compatible
 * server such as vLLM, SGLang, llama-server or another tern). Callers never
 * test which one they have; what a remote server does not export is marked
 * unknown in the snapshot (engine_stats.unknown), never reported as zero. */
#ifndef TERN_ENGINE_H
#define TERN_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"

struct cJSON;
struct model;
struct tok;
struct engine;

/* ---- configuration ---------------------------------------------------------- */

/* Several remote endpoints: which one takes the next request. */
enum engine_balance {
    ENGINE_BALANCE_ROUND_ROBIN = 0,
    ENGINE_BALANCE_LEAST_OUTSTANDING = 1
};
#define ENGINE_MAX_ENDPOINTS 8
#define ENGINE_SERVER_RECENT 8       /* a tern server's recent requests in a snapshot */
#define ENGINE_SERVER_TENANTS 6

struct engine_config {
    const char *model_path;          /* GGUF file (ignored when parts.model is set) */
    struct backend_config backend;   /* kind, threads, kv_type, kv_bytes, ... */
    int32_t n_ctx;                   /* context per sequence; 0 = model's training context */
    int32_t step_tokens;             /* token budget per step; 0 = measured default for
                                        the backend (CPU 64, CUDA 512) */
    int32_t max_running;             /* cap on running sequences; 0 = default (64) */
    int32_t max_queue;               /* waiting queue bound; 0 = default (256) */
    int32_t event_limit;             /* undrained events per request before it ends
                                        consumer-stalled; 0 = default (4096) */
    double slo_ttft_s, slo_tpot_s;   /* goodput SLO; 0 = default (1 s, 0.2 s) */
    const char *trace_path;          /* Chrome trace-event JSON written at close; NULL = off */
    const char *chat_template;       /* template family name overriding the model's
                                        ("chatml", "llama3", ...); NULL = model's */
    int32_t lookup_k;                /* speculative decoding by n-gram prompt lookup (guesses
                                        copied from the prompt and reply, verified in one
                                        pass; greedy output unchanged): guesses per decode
                                        step; 0 = off (requests may ask) */
#define ENGINE_DRAFT_K 4             /* a draft model's guesses per step when lookup_k is 0 */
    const char *draft_model;         /* speculative decoding with a draft model (draft.h):
                                        the file of a smaller model with the same
                                        vocabulary, whose greedy guesses replace the n-gram
                                        lookup's (lookup_k guesses per step, 4 when 0);
                                        NULL = none */
    /* Disk prefix cache (kvdisk.h): recent prefixes' KV blocks saved at close
     * (and by engine_cache_save), restored for a prompt that begins with one
     * instead of prefilling it. Needs model_path (its identity). */
    const char *kv_disk_dir;         /* its directory; NULL = off */
    uint64_t kv_disk_cap;            /* size cap in bytes, LRU eviction; 0 = default (2 GiB) */
    FILE *kv_disk_log;               /* its notes (an ignored entry: one line); NULL = none */
    /* Borrowed, pre-opened parts (tests: a fake backend; synthetic models).
     * When set, engine_open uses them instead of opening its own, and
     * engine_close does not close them. tok may be NULL only if every request
     * gives prompt_tokens (token events then carry empty text). */
    struct {
        const struct model *model;
        struct tok *tok;
        struct backend *backend;
    } parts;
    /* Remote engine: when n_urls > 0, engine_open talks to these servers
     * (base URLs, "http://host:8000" or "http://host:8000/v1") instead of
     * running a model; model_path, if also given, only lends its tokenizer
     * (exact token counts), and backend/n_ctx/step settings are ignored. */
    struct {
        const char *const *urls;
        int32_t n_urls;              /* 0 = local engine; at most ENGINE_MAX_ENDPOINTS */
        const char *api_key;         /* sent as a Bearer token; NULL = none */
        bool insecure;               /* skip TLS certificate verification */
        enum engine_balance balance;
        const char *model;           /* "model" field; NULL = the server's first /v1/models */
        double connect_timeout_s;    /* 0 = default (10 s) */
        double read_timeout_s;       /* no byte for this long ends a stream; 0 = default (60 s) */
        double scrape_interval_s;    /* /metrics sampling; 0 = default (1 s), < 0 = off */
        int32_t max_retries;         /* connect failures before any byte was sent; 0 = default (2) */
    } remote;
};

/* Fills the defaults (all zeros mean "default" too, so this is optional). */
void engine_config_default(struct engine_config *c);

/* ---- requests ---------------------------------------------------------------- */

enum engine_status {
    ENGINE_OK,                /* finished normally (score-only request done) */
    ENGINE_STOP,              /* EOS/EOT token or a stop string */
    ENGINE_LENGTH,            /* max_tokens or the context limit reached */
    ENGINE_CANCELLED,         /* engine_cancel or engine_close */
    ENGINE_TIMEOUT,           /* waited longer than queue_timeout_s */
    ENGINE_REJECTED,          /* queue full, or can never fit the cache */
    ENGINE_ERROR,             /* bad request, backend failure (see message) */
    ENGINE_CONSUMER_STALLED,  /* its events were not drained past event_limit */
    ENGINE_N_STATUS
};
const char *engine_status_name(enum engine_status s); /* "ok", "stop", ..., "consumer-stalled" */

enum engine_priority {
    ENGINE_PRIO_INTERACTIVE = 0, /* chat, run: scheduled before batch work */
    ENGINE_PRIO_BATCH = 1        /* eval, bench */
};

struct engine_message {
    const char *role;                /* "system", "user", "assistant" */
    const char *content;
};

/* Sampling parameters (the sampler module applies them). temp <= 0 is greedy. */
struct engine_sampling {
    float temp;                      /* default 0.8 */
    int32_t top_k;                   /* 0 = off; default 40 */
    float top_p;                     /* 1 = off; default 0.95 */
    float min_p;                     /* 0 = off; default 0.05 */
    float repeat_penalty;            /* 1 = off */
    float presence_penalty, frequency_penalty; /* 0 = off */
    int32_t penalty_last_n;          /* window of the penalties; default 64 */
    uint64_t seed;                   /* same seed, same output */
};
/* The defaults, written once: engine_sampling_default fills them, and a
 * front end that shows them without linking the engine (the TUI's F4
 * parameters) reads the same constants. */
#define ENGINE_DEFAULT_TEMP 0.8f
#define ENGINE_DEFAULT_TOP_K 40
#define ENGINE_DEFAULT_TOP_P 0.95f
#define ENGINE_DEFAULT_MIN_P 0.05f
#define ENGINE_DEFAULT_REPEAT_PENALTY 1.0f
#define ENGINE_DEFAULT_PENALTY_LAST_N 64
void engine_sampling_default(struct engine_sampling *s);
void engine_sampling_greedy(struct engine_sampling *s);

struct engine_request {
    /* The prompt: exactly one of the three. messages are rendered with the
     * chat template (with the assistant turn opened); prompt is raw text
     * (BOS added per the model's metadata, special-token text parsed);
     * prompt_tokens are used as given. */
    const struct engine_message *messages;
    int32_t n_messages;
    const char *prompt;
    const int32_t *prompt_tokens;
    int32_t n_prompt_tokens;

    struct engine_sampling sampling;
    int32_t max_tokens;              /* new tokens; 0 = until the context is full */
    const char *const *stop;         /* stop strings: matched across token
                                        boundaries, never emitted */
    int32_t n_stop;
    enum engine_priority priority;
    double queue_timeout_s;          /* max time waiting for admission; 0 = none */
    uint64_t tag;                    /* echoed in every event */
    bool ignore_eos;                 /* keep generating past EOS/EOT (bench) */
    int32_t lookup_k;                /* speculative decoding by n-gram prompt lookup: guesses
                                        per decode step; 0 = the engine's (config), < 0 = off */
    /* Shown on the request's --trace spans, so that one request can be
     * followed from a front end's log (an HTTP X-Request-Id, a tenant) into
     * the trace; copied at submit; NULL or "" = none. */
    const char *trace_request_id;
    const char *trace_tenant;

    /* Scoring (eval perplexity): when score is set, the request generates
     * nothing; the engine computes sum of -log p(token[i+1] | token[0..i])
     * over prompt positions i in [score_from, n_prompt - 1) and reports it
     * in metrics.nll_sum / metrics.n_scored (finishes with ENGINE_OK). */
    bool score;
    int32_t score_from;

    /* Log-probabilities (OpenAI's logprobs / top_logprobs / echo, vLLM's
     * prompt_logprobs), natural log of the model's distribution: softmax of
     * the raw logits, before temperature, penalties and truncation.
     * logprobs: each TOKEN event carries its token's entry, with the
     * top_logprobs most likely alternatives. prompt_logprobs: the FINISHED
     * event carries one entry per prompt token (prompt_top_logprobs
     * alternatives each); with score set, only positions after score_from.
     * Prompt positions that need log-probabilities are computed, not taken
     * from the prefix cache. */
    bool logprobs;
    int32_t top_logprobs;            /* 0..ENGINE_MAX_TOP_LOGPROBS */
    bool prompt_logprobs;
    int32_t prompt_top_logprobs;     /* 0..ENGINE_MAX_TOP_LOGPROBS */

    /* Structured output (OpenAI's response_format): the reply is decoded
     * under a grammar (engine/grammar), as a token mask applied before
     * sampling, so it is JSON that validates; end of generation is allowed
     * only once the value is complete, and the request ends (ENGINE_STOP) as
     * soon as nothing else can follow. json_schema: the JSON Schema text,
     * compiled at submit (an unsupported keyword or a malformed schema
     * refuses the request with ENGINE_ERROR and a message naming the keyword
     * and its path); json_object: any JSON object. Copied at submit. */
    const char *json_schema;
    bool json_object;

    /* Reasoning models with thinking turned off (chat_template_kwargs
     * enable_thinking: false): the assistant turn is opened with an empty
     * thinking block, "<think>\n\n</think>\n\n", as Qwen3's own template
     * does, so the reply is the answer alone. Chat messages only. */
    bool no_think;

    /* Embeddings: the request generates nothing; its prompt (prompt or
     * prompt_tokens) is prefilled and the final hidden state (after the
     * output norm, before the LM head) is pooled over it, truncated to
     * dimensions (0 = all; 1..n_embd, for Matryoshka-trained models) and
     * L2-normalised. The FINISHED event (ENGINE_OK) carries the vector.
     * Sampling, stop, max_tokens and logprobs are ignored. Refused at submit
     * (ENGINE_ERROR) by a backend or engine that cannot return hidden
     * states, and for chat messages. */
    bool embed;
    enum engine_pooling {
        ENGINE_POOL_MODEL = 0,       /* the model's <arch>.pooling_type; mean when it has
                                        none (or "none") */
        ENGINE_POOL_MEAN,            /* average over every prompt position */
        ENGINE_POOL_CLS,             /* the first position */
        ENGINE_POOL_LAST             /* the last position (Qwen3-Embedding) */
    } pooling;
    int32_t dimensions;
};
/* "mean", "cls", "last" ("model" for ENGINE_POOL_MODEL). */
const char *engine_pooling_name(enum engine_pooling p);

#define ENGINE_MAX_TOP_LOGPROBS 20
/* One token's log-probability and the most likely tokens at its position
 * (descending). logprob is NAN where none exists (a prompt's first token,
 * or a position before score_from). */
struct engine_logprob {
    int32_t token;
    float logprob;
    int32_t rank;                    /* 1 + tokens more likely than it */
    int32_t n_top;
    struct engine_top_logprob {
        int32_t token;
        float logprob;
    } top[ENGINE_MAX_TOP_LOGPROBS];
};

/* Submits a request; returns its id (> 0) at once. On refusal returns 0
 * with *why = ENGINE_REJECTED (queue full; prompt + max_tokens can never fit
 * the cache or context, with the numbers in err) or ENGINE_ERROR (empty or
 * malformed request, tokenization failure); no events follow a refusal. */
uint64_t engine_submit(struct engine *e, const struct engine_request *r,
                       enum engine_status *why, char *err, size_t errlen);

/* Cancels a request at any stage; its KV blocks are freed before the next
 * step and it finishes with ENGINE_CANCELLED. Returns 0, or -1 when the id is
 * unknown or already finished. */
int engine_cancel(struct engine *e, uint64_t id);

/* Holds (paused = true) or releases the engine's steps. While held, requests
 * are still taken in (QUEUED events), cancelled and timed out, but none is
 * admitted or computed. Lets a caller submit a group that must be scheduled
 * together (a benchmark wave, a test of contention) or freeze the engine
 * while it inspects it. A remote engine cannot hold a server's queue: there
 * it holds the requests on the client (none is sent; cancelling one ends it
 * at once), lets the streams already running go on, and says so in the
 * snapshot (paused, server.held); releasing sends the held ones together. */
void engine_pause(struct engine *e, bool paused);

/* ---- events ------------------------------------------------------------------ */

enum engine_event_type {
    ENGINE_EV_QUEUED,        /* accepted into the waiting queue; total = prompt tokens */
    ENGINE_EV_ADMITTED,      /* got KV blocks; done = prompt tokens reused from the cache */
    ENGINE_EV_PREFILL,       /* prefill progress: done / total prompt tokens */
    ENGINE_EV_FIRST_TOKEN,   /* timing marker (t = first token time); a TOKEN event follows */
    ENGINE_EV_TOKEN,         /* one generated token: token + text; token -1: the text
                                held back at the end, released before FINISHED;
                                ENGINE_TOKEN_UNKNOWN: a token whose id the (remote)
                                engine does not know */
    ENGINE_EV_PREEMPTED,     /* lost its KV blocks; requeued, will be recomputed */
    ENGINE_EV_FINISHED       /* last event of a request: status, message, metrics */
};

#define ENGINE_TOKEN_UNKNOWN (-2)

/* Phase figures a remote server reported for one request (its `tern` block,
 * or llama-server's `timings`); known = false when it sent none. Seconds. */
struct engine_server_timing {
    bool known;
    double queue_s, prefill_s, ttft_s, tpot_s, decode_s, e2e_s;
};

/* Final per-request metrics; all times in seconds (0 when the phase never happened). */
struct engine_metrics {
    uint64_t id, tag;
    enum engine_status status;
    enum engine_priority priority;
    double t_arrival, t_admitted, t_first_sched, t_prefill_done, t_first_token, t_finished;
    double queue_s;                  /* admitted (or finished, if never) - arrival */
    double prefill_s;                /* prefill done - first scheduled */
    double ttft_s;                   /* first token - arrival */
    double tpot_s;                   /* (last token - first token) / (generated - 1) */
    double decode_s;                 /* last token - first token */
    double e2e_s;                    /* finished - arrival */
    int32_t n_prompt;                /* prompt tokens */
    int32_t n_cached;                /* prompt tokens reused from the prefix cache */
    int32_t n_computed;              /* prompt tokens prefilled (n_prompt = n_cached + n_computed,
                                        counted at the last admission) */
    int32_t n_restored;              /* of n_cached, tokens loaded from the disk prompt cache
                                        (kv_disk_dir) for this request */
    int32_t n_generated;
    int32_t n_preempted;             /* times this request was preempted */
    /* Speculative decoding (n-gram lookup): decode steps that carried
     * guesses, guesses verified, guesses accepted (tokens per such step =
     * 1 + accepted / steps). */
    int32_t n_spec_steps, n_draft_tokens, n_accepted_tokens;
    bool spec_from_draft;            /* the guesses came from a draft model (draft_model),
                                        not n-gram lookup */
    double *token_t;                 /* [n_generated] time of each token (ITL = differences) */
    double nll_sum;                  /* score requests */
    double nll_sq_sum;               /* each position's loss squared, summed (the spread) */
    int32_t n_scored;
    /* Remote engines (zero for the local one): the client's view. t_admitted
     * is when the response headers arrived; queue/prefill are then unknown
     * to the client (server.* has them when the server says). */
    bool remote;
    int32_t endpoint;                /* index into config remote.urls */
    double connect_s;                /* connection ready - arrival */
    double headers_s;                /* response headers - arrival */
    int32_t http_status;             /* 0 = no response */
    bool interrupted;                /* the stream broke before its end: text is partial */
    bool counts_estimated;           /* n_generated counted from stream events, not usage */
    double retry_after_s;            /* the server's Retry-After (429/503), 0 = none */
    struct engine_server_timing server;
};

struct engine_event {
    enum engine_event_type type;
    uint64_t id, tag;
    double t;                        /* when the event happened */
    int32_t done, total;             /* QUEUED, ADMITTED, PREFILL */
    int32_t token;                   /* TOKEN: token id; -1 otherwise */
    char *text;                      /* TOKEN: NUL-terminated UTF-8 fragment that became
                                        final (may be "", text held back for a possible
                                        stop string comes later); NULL otherwise */
    enum engine_status status;       /* FINISHED */
    char *message;                   /* FINISHED: why (error, rejected, stop string); may be NULL */
    struct engine_metrics *metrics;  /* FINISHED */
    /* Requests that asked for log-probabilities: TOKEN: [1] the token's;
     * FINISHED: [n_prompt] the prompt's (entry i for prompt token i). NULL
     * and 0 otherwise. Owned by the event. */
    struct engine_logprob *logprobs;
    int32_t n_logprobs;
    /* Embedding requests: FINISHED with ENGINE_OK carries the pooled,
     * normalised vector [n_embedding]; NULL and 0 otherwise. Owned. */
    float *embedding;
    int32_t n_embedding;
};
/* Frees text, message, metrics, logprobs and embedding of one event (safe on a zeroed event). */
void engine_event_free(struct engine_event *ev);

/* Moves up to max waiting events (oldest first) into out; returns the count.
 * engine_poll_request does the same for one request's events only (a
 * consumer per request, e.g. bench threads); others stay queued. */
int engine_poll_events(struct engine *e, struct engine_event *out, int max);
int engine_poll_request(struct engine *e, uint64_t id, struct engine_event *out, int max);
/* Readable (POLLIN) while any event is waiting; owned by the engine. */
int engine_event_fd(const struct engine *e);
/* Blocks until an event (of request id, or any when id == 0) is waiting or
 * timeout_s passes (< 0: no limit). Returns true when one is waiting. */
bool engine_wait_events(struct engine *e, uint64_t id, double timeout_s);

/* ---- lifecycle, stats and helpers --------------------------------------------- */

/* Loads the model, tokenizer and backend, sizes the KV pool and starts the
 * engine thread. Returns NULL with a message naming what failed. */
struct engine *engine_open(const struct engine_config *c, char *err, size_t errlen);
/* Cancels what is running or waiting, stops the thread, writes the trace and
 * frees everything (undrained events too). No other thread may be inside an
 * engine call (or about to make one) when it is called. */
void engine_close(struct engine *e);

struct engine_hist {                 /* from log-spaced buckets */
    uint64_t count;
    double mean, p50, p90, p99, max;
};

struct engine_stats {
    double uptime_s;
    /* KV cache, in blocks of kv_block_tokens */
    int32_t kv_block_tokens;
    int32_t kv_total, kv_used, kv_cached, kv_free; /* used + cached + free = total */
    uint64_t prefix_query_tokens, prefix_hit_tokens; /* prompt tokens looked up / reused */
    double prefix_hit_rate;          /* hit / query tokens */
    uint64_t evictions, preemptions;
    /* speculative decoding (n-gram lookup): decode steps with guesses,
     * guesses verified, guesses accepted */
    uint64_t spec_drafts, spec_draft_tokens, spec_accepted_tokens;
    double draft_s;                  /* time in the draft model's passes (draft_model) */
    uint64_t draft_catchup;          /* proposals that fed a lagging draft state, no guess */
    int32_t draft_catchup_max;       /* most tokens one step fed the draft to catch up
                                        (bounded by step_tokens) */
    uint64_t draft_fed_prefill;      /* prompt tokens fed to the draft beside the target's
                                        prefill chunks */
    /* requests */
    int32_t running, waiting;
    uint64_t submitted, finished[ENGINE_N_STATUS];
    /* latencies (seconds) and step shape */
    struct engine_hist queue, ttft, tpot, itl, prefill, e2e;
    struct engine_hist step_s, step_tokens;
    uint64_t steps;
    double busy_s;                   /* wall time inside steps */
    double backend_s;                /* of which inside backend_forward */
    double sched_overhead;           /* (busy - backend) / busy */
    double busy_cpu_s, backend_cpu_s;/* the same in engine-thread CPU time: with a
                                        one-thread backend, the overhead share
                                        without other processes' interference */
    /* throughput */
    uint64_t prompt_tokens, cached_tokens, generated_tokens;
    double prompt_tok_s, gen_tok_s;  /* over busy time */
    double slo_ttft_s, slo_tpot_s;
    uint64_t slo_met;                /* finished requests that met both SLOs */
    double goodput_rps;              /* slo_met / uptime */
    /* configuration in force */
    int32_t step_tokens_budget, max_running, max_queue, n_ctx;
    struct backend_info backend;
    /* What is not known (ENGINE_STAT_* bits); 0 = all known. */
    uint32_t unknown;
    bool paused;                     /* engine_pause holds it (local: no step runs;
                                        remote: no new stream starts) */
    double kv_usage;                 /* used / total KV, 0..1 */
    /* Remote engines: the server's own view, from its Prometheus /metrics
     * (percentiles over the last sampling interval, from bucket deltas). The
     * top-level latency histograms are then the client's measurements. */
    struct engine_server_stats {
        bool remote;                 /* false: local engine, the rest is zero */
        char source[16];             /* "vllm", "sglang", "llamacpp", "tern", "" = no metrics */
        uint64_t scrapes, scrape_errors;
        int32_t held;                /* submitted but not sent: engine_pause holds them */
        double scrape_age_s;         /* since the last good scrape; < 0 never */
        char scrape_error[160];      /* last failure, "" if none */
        struct engine_hist ttft, itl, e2e, queue;
        double gen_tok_s;            /* the server's generation throughput */
        /* tern serve (its /v1/tern/status): the last finished requests,
         * newest first, and the tenants among them; n_recent 0 elsewhere. */
        int32_t n_recent;
        struct engine_server_req {
            char tenant[32], request_id[48];
            char route[8];           /* "chat", "cmpl" */
            char status[20];         /* engine status name */
            double queue_s, ttft_s, e2e_s;
            int32_t n_prompt, n_cached, n_generated;
        } recent[ENGINE_SERVER_RECENT];
        int32_t n_tenants;
        struct engine_server_tenant {
            char name[32];
            int32_t requests;        /* among the server's recent requests (up to 32) */
            int64_t tokens;          /* prompt + generated of those */
            double ttft_p50_s;       /* their median TTFT */
        } tenants[ENGINE_SERVER_TENANTS];
        int32_t n_endpoints;
        struct engine_endpoint {
            char url[128];
            bool healthy;            /* last /health or /v1/models answer was 2xx */
            double health_latency_s; /* of that answer */
            int32_t outstanding;     /* requests in flight from this client */
            uint64_t requests, errors;
            char last_error[160];
        } endpoint[ENGINE_MAX_ENDPOINTS];
    } server;
};
void engine_snapshot(struct engine *e, struct engine_stats *out);

/* ---- the prompt cache ----------------------------------------------------------- */

#define ENGINE_CACHE_TEXT 200
struct engine_cache_entry {
    bool on_disk;                    /* a saved file; else a recent prefix held in the KV pool */
    uint64_t hash;                   /* the prefix's hash: identifies it without its text */
    int32_t tokens;                  /* its tokens (memory: those whose blocks are resident) */
    uint64_t bytes;                  /* KV bytes (disk: the file's size) */
    uint32_t hits;                   /* restores (disk) or follow-ups that reused it (memory) */
    double age_s, idle_s;            /* since made, since last used */
    char made_by[40];                /* the request's trace id, or "request N" */
    bool usable;                     /* disk: made under this model, tokenizer, template and
                                        KV type (else it is never used) */
    char text[ENGINE_CACHE_TEXT];    /* its opening text, only when asked (privacy) */
};
/* Lists the cached prefixes, recent in-memory ones then disk entries, into
 * out[max]; returns how many (0 on a remote engine). */
int engine_cache_list(struct engine *e, struct engine_cache_entry *out, int max, bool with_text);
/* Saves the recent prefixes to the disk cache now (engine_close does too).
 * Returns the entries written or refreshed, or -1 with err. */
int engine_cache_save(struct engine *e, char *err, size_t errlen);

/* Bits of engine_stats.unknown: what the engine could not measure. The local
 * engine knows everything (0); a remote one knows what its server exports. */
enum {
    ENGINE_STAT_RUNNING = 1u << 0,   /* running */
    ENGINE_STAT_WAITING = 1u << 1,   /* waiting */
    ENGINE_STAT_KV_BLOCKS = 1u << 2, /* kv_total/used/cached/free, kv_block_tokens */
    ENGINE_STAT_KV_USAGE = 1u << 3,  /* kv_usage */
    ENGINE_STAT_PREFIX = 1u << 4,    /* prefix_* */
    ENGINE_STAT_PREEMPT = 1u << 5,   /* preemptions, evictions */
    ENGINE_STAT_STEPS = 1u << 6,     /* steps, step_*, busy/backend times, sched_overhead */
    ENGINE_STAT_SRV_TTFT = 1u << 7,  /* server.ttft */
    ENGINE_STAT_SRV_ITL = 1u << 8,   /* server.itl */
    ENGINE_STAT_SRV_E2E = 1u << 9,   /* server.e2e */
    ENGINE_STAT_SRV_QUEUE = 1u << 10,/* server.queue */
    ENGINE_STAT_SRV_GEN = 1u << 11,  /* server.gen_tok_s */
};
static inline bool engine_stat_known(const struct engine_stats *s, unsigned bit)
{
    return (s->unknown & bit) == 0;
}

/* One live (waiting or running) request, as of the last step. */
struct engine_req_info {
    uint64_t id, tag;
    enum engine_priority priority;
    bool running;                    /* false: waiting (or requeued after preemption) */
    int32_t n_prompt, n_cached;      /* prompt tokens, reused at the last admission */
    int32_t n_computed;              /* tokens whose K/V are in the cache */
    int32_t n_generated;
    int32_t kv_blocks;               /* blocks in its table (shared ones included) */
    int32_t n_preempted;
    double t_arrival;
};
/* Copies up to max live requests (running first) into out; returns how
 * many there are (may exceed max). */
int engine_requests(struct engine *e, struct engine_req_info *out, int max);
/* The same as JSON; caller frees with cJSON_Delete. NULL on out-of-memory. */
struct cJSON *engine_snapshot_json(struct engine *e);
/* One request's final metrics as JSON (for the store); caller frees. */
struct cJSON *engine_metrics_json(const struct engine_metrics *m);

/* Model and backend description for headers and `info`. Strings are owned
 * by the engine and valid until engine_close. */
struct engine_info {
    /* Speculative decoding with a draft model (NULL name: none): its file
     * and resident bytes (its work: engine_stats.draft_s) */
    struct {
        const char *name;
        uint64_t weight_bytes, kv_bytes;
    } draft;
    const char *model_path;
    const char *model_name;          /* general.name or the file name */
    const char *arch;
    uint64_t n_params, weight_bytes;   /* all resident (every expert of a MoE) */
    uint64_t n_params_active, weight_bytes_active;   /* read per decoded token */
    int32_t n_vocab, n_ctx_train, n_ctx;
    int32_t kv_block_tokens, kv_blocks;
    uint64_t kv_bytes_per_token;     /* to size --kv-mem for a number of tokens */
    /* What a decoded token reads of the cache: every layer's K and V of each
     * key it attends, n_swa_layers of the n_layer at most sliding_window
     * keys (0 layers: remote, unknown) */
    int32_t n_layer, n_swa_layers, sliding_window;
    bool has_chat_template;
    const char *chat_template;       /* template family ("chatml", "gemma", ...) or NULL */
    bool chat_template_fallback;     /* the model's template was not recognised: ChatML used */
    bool chat_template_opens_think;  /* its generation prompt opens <think> (DeepSeek-R1): a
                                        chat reply starts inside the thinking */
    bool chat_template_from_vocab;   /* the file has no template (a base model): the family
                                        was chosen from its vocabulary */
    struct backend_info backend;     /* remote: name "remote", device = URL and server kind */
    const char *remote_url;          /* first endpoint; NULL for the local engine */
    const char *token_counts;        /* how engine_count_tokens counts: "model tokenizer",
                                        "server /tokenize", "estimate (~4 bytes/token)" */
    /* Embeddings: the hidden size, and the pooling ENGINE_POOL_MODEL
     * resolves to; n_embd 0 when this engine cannot embed (embd_why says
     * why, else ""), -1 when a remote server decides (its /v1/embeddings
     * answers with the size, or refuses). */
    int32_t n_embd;
    enum engine_pooling pooling;
    const char *embd_why;
    int32_t max_tokens_cap;          /* remote: the server's cap of new tokens per request
                                        for this key (tern serve's tenant max_tokens);
                                        0 = none known. A default reply limit stays within
                                        it; an explicit one over it is the server's to refuse */
};
void engine_info(const struct engine *e, struct engine_info *out);

/* Keys the positions [p0, p0 + n) attend, on average, summed over the
 * layers: n_swa_layers of the n_layer attend at most `window` keys (the
 * others p + 1). Times one token's KV bytes over n_layer: what a decoded
 * token reads of the cache. */
double engine_kv_keys(int32_t n_layer, int32_t n_swa_layers, int32_t window, int64_t p0,
                      int64_t n);

/* The bytes token id stands for (a byte-level piece may be part of a UTF-8
 * character), written to out[0..cap) without a NUL; returns the length, or
 * -1 when the engine has no tokenizer or id is out of range. */
int engine_token_bytes(const struct engine *e, int32_t id, char *out, size_t cap);

/* Token count of raw text (as a prompt would be encoded), or -1 with err. */
int64_t engine_count_tokens(const struct engine *e, const char *text, size_t len,
                            char *err, size_t errlen);
/* Token count of a conversation rendered with the chat template (the
 * assistant turn opened), or -1 with err. */
int64_t engine_count_chat_tokens(const struct engine *e, const struct engine_message *msgs,
                                 int32_t n, char *err, size_t errlen);

#endif
