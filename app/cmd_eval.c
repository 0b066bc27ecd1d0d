/* cmd_eval: 'tern eval' — perplexity over a text file (the method of the
 * reference engine's llama-perplexity, so figures compare) and prompt-set
 * runs from JSONL. Both go through the engine's scheduler at batch priority
 * (an eval never makes a chat stutter); both store their run in the history
 * database. Progress and ETA on stderr, only on a terminal. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_opts.h"
#include "clock.h"
#include "commands.h"
#include "textsafe.h"
#include "engine.h"
#include "gguf.h"
#include "perplexity.h"
#include "store.h"
#include "tok.h"

enum {
    OPT_PPL = CLI_OPT_CMD, OPT_PROMPTS, OPT_STRIDE, OPT_CHUNKS, OPT_CONCURRENCY, OPT_OUT,
    OPT_DB, OPT_NO_SAVE, OPT_JSON, OPT_RAW,
};

struct eopts {
    const struct cli *cli;
    const char *ppl, *prompts, *out, *db;
    long ctx, stride, chunks, concurrency, max_tokens; /* ctx: the perplexity window */
    bool max_tokens_set;        /* --max-tokens given (else a server's cap may lower it) */
    bool no_save, json, raw;
    struct engine_config eng;   /* the shared engine options (cli_engine_opt) */
};

struct eval {
    const struct eopts *o;
    struct engine *e;
    struct engine_info info;
    bool tty;
    double t0, last_draw;
    /* prompts: "prompt" lines get the chat template (a chat model, no --raw) */
    bool chat;
    int32_t max_tokens;         /* a line's reply limit unless it says */
};

static void progress(struct eval *ev, const char *what, double done, double total)
{
    double t = app_now_s() - ev->t0;
    if (!ev->tty || (t - ev->last_draw < 0.1 && done < total)) return;
    ev->last_draw = t;
    int w = 30, f = total > 0 ? (int)(done / total * w) : 0;
    double eta = done > 0 ? t * (total - done) / done : 0;
    fprintf(stderr, "\r%s [%.*s%*s] %3.0f%%  %.0f s, ETA %.0f s ", what, f,
            "##############################", w - f, "", total > 0 ? 100 * done / total : 0, t,
            eta);
    if (done >= total) fprintf(stderr, "\r%*s\r", 70, "");
    fflush(stderr);
}

/* Stores a run; on failure says so and goes on (the result is printed). */
static void save_run(const struct eval *ev, const char *kind, cJSON *config, cJSON *summary)
{
    if (ev->o->no_save) return;
    char err[1024];
    struct store *s;
    if (store_open(&s, ev->o->db, STORE_READWRITE, err, sizeof err) != 0) {
        fprintf(stderr, "tern eval: %s; result not stored\n", err);
        return;
    }
    char *c = cJSON_PrintUnformatted(config), *r = cJSON_PrintUnformatted(summary);
    store_run_add(s, kind, ev->info.model_name, c, r);
    if (store_flush(s, err, sizeof err) != 0)
        fprintf(stderr, "tern eval: %s; result not stored\n", err);
    free(c);
    free(r);
    store_close(s);
}

/* ----------------------------------------------------------- perplexity */

static int read_file(const char *path, char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t cap = 1 << 16, n = 0;
    char *p = malloc(cap);
    while (p) {
        n += fread(p + n, 1, cap - n, f);
        if (n < cap) break;
        char *q = realloc(p, cap *= 2);
        if (!q) {
            free(p);
            p = NULL;
        } else {
            p = q;
        }
    }
    int rc = ferror(f) || !p ? -1 : 0;
    fclose(f);
    if (rc) {
        free(p);
        return -1;
    }
    *buf = p;
    *len = n;
    return 0;
}

/* The file's tokens as the reference tokenizes a perplexity text: BOS (and
 * EOS) as the model's metadata says, special-token text left as text. */
static int32_t *tokenize_file(const char *model_path, const char *path, int64_t *n, bool *add_bos,
                              int32_t *bos, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    int32_t *ids = NULL;
    struct tok *t = NULL;
    struct gguf_ctx *g = gguf_open(model_path, err, errlen);
    if (!g) return NULL;
    t = tok_open(g, err, errlen);
    gguf_close(g);
    if (!t) return NULL;
    if (read_file(path, &text, &len) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        goto done;
    }
    *n = tok_encode(t, text, len, TOK_ADD_BOS, NULL, 0, err, errlen);
    if (*n < 0) goto done;
    ids = malloc((size_t)(*n + 1) * sizeof *ids);
    if (!ids || tok_encode(t, text, len, TOK_ADD_BOS, ids, *n, err, errlen) != *n) {
        free(ids);
        ids = NULL;
        goto done;
    }
    *add_bos = tok_adds_bos(t);
    *bos = tok_bos(t);
done:
    free(text);
    tok_close(t);
    return ids;
}

struct chunk {
    uint64_t id;
    int32_t done;      /* prompt tokens processed so far */
    bool finished;
    double nll, nll_sq;   /* the scored positions' losses, summed and squared */
    int32_t n_scored;
    enum engine_status status;
};

/* Submits chunk i: n_ctx tokens, scored from `first`. Without a stride, the
 * chunk's first token becomes BOS (as llama-perplexity does); its strided
 * variant keeps the text's own tokens. */
static int submit_chunk(struct eval *ev, const int32_t *tokens, int64_t start, int32_t n_ctx,
                        int32_t first, int32_t bos, struct chunk *c, char *err, size_t errlen)
{
    int32_t *buf = malloc((size_t)n_ctx * sizeof *buf);
    if (!buf) return -1;
    memcpy(buf, tokens + start, (size_t)n_ctx * sizeof *buf);
    if (bos >= 0) buf[0] = bos;
    struct engine_request q = {0};
    q.prompt_tokens = buf;
    q.n_prompt_tokens = n_ctx;
    q.score = true;
    q.score_from = first;
    q.priority = ENGINE_PRIO_BATCH;
    engine_sampling_greedy(&q.sampling);
    enum engine_status why;
    c->id = engine_submit(ev->e, &q, &why, err, errlen);
    free(buf); /* the engine copied it */
    return c->id ? 0 : -1;
}

static void take_chunk_events(struct eval *ev, struct chunk *c)
{
    struct engine_event evs[16];
    int k;
    while (!c->finished && (k = engine_poll_request(ev->e, c->id, evs, 16)) > 0) {
        for (int i = 0; i < k; i++) {
            if (evs[i].type == ENGINE_EV_PREFILL) c->done = evs[i].done;
            if (evs[i].type == ENGINE_EV_FINISHED) {
                c->finished = true;
                c->status = evs[i].status;
                if (evs[i].metrics) {
                    c->nll = evs[i].metrics->nll_sum;
                    c->nll_sq = evs[i].metrics->nll_sq_sum;
                    c->n_scored = evs[i].metrics->n_scored;
                }
                if (evs[i].status != ENGINE_OK && evs[i].message)
                    fprintf(stderr, "tern eval: chunk failed: %s\n", evs[i].message);
            }
            engine_event_free(&evs[i]);
        }
    }
}

/* Runs every chunk, at most `conc` in flight (the reference evaluates four
 * sequences per batch too); fills *nll, *nll_sq and *count. */
static int run_chunks(struct eval *ev, const int32_t *tokens, int64_t n_chunk, int32_t n_ctx,
                      int64_t stride_step, int32_t first, int32_t bos, double *nll, double *nll_sq,
                      int64_t *count)
{
    struct chunk *c = calloc((size_t)n_chunk, sizeof *c);
    if (!c) return -1;
    char err[512];
    int rc = 0;
    int64_t next = 0, done = 0;
    while (done < n_chunk && rc == 0) {
        int64_t inflight = 0;
        for (int64_t i = 0; i < next; i++) inflight += !c[i].finished;
        while (next < n_chunk && inflight < ev->o->concurrency) {
            if (submit_chunk(ev, tokens, next * stride_step, n_ctx, first, bos, &c[next], err,
                             sizeof err) != 0) {
                fprintf(stderr, "tern eval: chunk %lld: %s\n", (long long)next + 1, err);
                rc = -1;
                break;
            }
            next++;
            inflight++;
        }
        engine_wait_events(ev->e, 0, 0.05);
        double tok = 0;
        done = 0;
        for (int64_t i = 0; i < next; i++) {
            take_chunk_events(ev, &c[i]);
            if (c[i].finished && c[i].status != ENGINE_OK) rc = -1;
            done += c[i].finished;
            tok += c[i].finished ? n_ctx : c[i].done;
        }
        progress(ev, "perplexity", tok, (double)n_chunk * n_ctx);
    }
    for (int64_t i = 0; i < n_chunk && rc == 0; i++) {
        *nll += c[i].nll;
        *nll_sq += c[i].nll_sq;
        *count += c[i].n_scored;
    }
    for (int64_t i = 0; i < next; i++)
        if (!c[i].finished) engine_cancel(ev->e, c[i].id);
    free(c);
    return rc;
}

static int do_perplexity(struct eval *ev)
{
    const struct eopts *o = ev->o;
    char err[1024];
    int64_t n = 0;
    bool add_bos = false;
    int32_t bos = -1, n_ctx = (int32_t)o->ctx;
    int32_t *tokens = tokenize_file(ev->info.model_path, o->ppl, &n, &add_bos, &bos, err, sizeof err);
    if (!tokens) {
        fprintf(stderr, "tern eval: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    /* llama-perplexity: without a stride, chunks of n_ctx tokens side by
     * side, the second half of each scored; with --stride S, windows every
     * S tokens, the last S predictions of each scored. */
    int64_t n_chunk, step;
    int32_t first;
    if (o->stride > 0) {
        n_chunk = n > n_ctx ? (n - n_ctx + o->stride - 1) / o->stride : 0;
        step = o->stride;
        first = n_ctx - (int32_t)o->stride - 1;
        add_bos = false;
    } else {
        n_chunk = n / n_ctx;
        step = n_ctx;
        first = n_ctx / 2;
    }
    if (o->chunks > 0 && n_chunk > o->chunks) n_chunk = o->chunks;
    if (n_chunk < 1 || (o->stride <= 0 && n < 2 * n_ctx)) {
        fprintf(stderr, "tern eval: %s: %lld tokens; perplexity at --ctx %d needs at least %d\n",
                o->ppl, (long long)n, n_ctx, o->stride > 0 ? n_ctx + 1 : 2 * n_ctx);
        free(tokens);
        return CLI_EXIT_FAIL;
    }
    double nll = 0, nll_sq = 0;
    int64_t count = 0;
    ev->t0 = app_now_s();
    int rc = run_chunks(ev, tokens, n_chunk, n_ctx, step, first, add_bos ? bos : -1, &nll, &nll_sq,
                     &count);
    double dur = app_now_s() - ev->t0;
    free(tokens);
    if (rc != 0 || count <= 0) {
        fprintf(stderr, "tern eval: perplexity failed\n");
        return CLI_EXIT_FAIL;
    }
    /* with llama-perplexity's standard error (a reading over a few chunks is
     * mostly this noise) */
    struct ppl_result pr;
    ppl_from_sums(nll, nll_sq, count, &pr);
    const double ppl = pr.ppl, mean = pr.nll, ppl_err = pr.ppl_err;
    cJSON *summary = cJSON_CreateObject(), *config = cJSON_CreateObject();
    cJSON_AddNumberToObject(summary, "perplexity", ppl);
    cJSON_AddNumberToObject(summary, "perplexity_err", ppl_err);
    cJSON_AddNumberToObject(summary, "nll_mean", mean);
    cJSON_AddNumberToObject(summary, "tokens", (double)n);
    cJSON_AddNumberToObject(summary, "chunks", (double)n_chunk);
    cJSON_AddNumberToObject(summary, "scored", (double)count);
    cJSON_AddNumberToObject(summary, "duration_s", dur);
    cJSON_AddNumberToObject(summary, "tok_s", (double)n_chunk * n_ctx / dur);
    cJSON_AddStringToObject(config, "file", o->ppl);
    cJSON_AddNumberToObject(config, "ctx", n_ctx);
    cJSON_AddNumberToObject(config, "stride", (double)(o->stride > 0 ? o->stride : 0));
    cJSON_AddNumberToObject(config, "chunks", (double)n_chunk);
    cJSON_AddStringToObject(config, "model_file", ev->info.model_path);
    cJSON_AddStringToObject(config, "backend", ev->info.backend.name);
    cJSON_AddStringToObject(config, "kv_type", cli_kv_type_name(o->eng.backend.kv_type));
    /* 0: the engine's default budget; 1 reads every prompt token as decode
     * does (the cache's blocks filled one token at a time) */
    cJSON_AddNumberToObject(config, "step_tokens", o->eng.step_tokens);
    if (o->json) {
        cJSON *both = cJSON_CreateObject();
        cJSON_AddItemReferenceToObject(both, "config", config);
        cJSON_AddItemReferenceToObject(both, "result", summary);
        textsafe_json(both);
        char *txt = cJSON_Print(both);
        if (txt) puts(txt);
        free(txt);
        cJSON_Delete(both);
    } else {
        printf("perplexity %.4f ± %.4f over %lld chunks of %d tokens (%lld scored) · %s · %.1f s, "
               "%.0f tok/s\n",
               ppl, ppl_err, (long long)n_chunk, n_ctx, (long long)count, ev->info.model_name, dur,
               (double)n_chunk * n_ctx / dur);
    }
    save_run(ev, "eval-perplexity", config, summary);
    cJSON_Delete(summary);
    cJSON_Delete(config);
    return CLI_EXIT_OK;
}

/* -------------------------------------------------------------- prompts */

struct item {
    int line;
    cJSON *obj;                 /* the input line */
    const char *prompt, *expected;
    bool templated;             /* sent through the chat template (as messages) */
    struct engine_message *msgs;
    int32_t n_msgs;
    const char **stop;
    int32_t n_stop;
    struct engine_sampling sampling;
    int32_t max_tokens;
    uint64_t id;
    bool submitted, finished;
    char *out;
    size_t out_len;
    enum engine_status status;
    char *message;
    struct engine_metrics m;
};

static const char *str_field(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A "prompt" line of a chat model as tern run sends a prompt: an optional
 * system message and one user turn, through the model's chat template
 * (sent raw, an instruct model often answers nothing at all). */
static const char *template_prompt(struct item *it, const char *system)
{
    it->msgs = calloc(2, sizeof *it->msgs);
    if (!it->msgs) return "out of memory";
    if (system) it->msgs[it->n_msgs++] = (struct engine_message){"system", system};
    it->msgs[it->n_msgs++] = (struct engine_message){"user", it->prompt};
    it->prompt = NULL;
    it->templated = true;
    return NULL;
}

/* Validates one line; NULL when fine, else why it is skipped. */
static const char *parse_item(struct item *it, const struct eval *ev)
{
    const cJSON *j = it->obj;
    if (!cJSON_IsObject(j)) return "not a JSON object";
    if (cJSON_GetObjectItemCaseSensitive(j, "prompt") && !str_field(j, "prompt"))
        return "\"prompt\" must be a string";
    it->prompt = str_field(j, "prompt");
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(j, "messages");
    if (!it->prompt && !msgs) return "needs \"prompt\" (string) or \"messages\" (array)";
    if (it->prompt && msgs) return "has both \"prompt\" and \"messages\"";
    const cJSON *rawv = cJSON_GetObjectItemCaseSensitive(j, "raw");
    if (rawv && !cJSON_IsBool(rawv)) return "\"raw\" must be true or false";
    if (rawv && msgs) return "\"raw\" is for \"prompt\" lines (\"messages\" always get the template)";
    const cJSON *sysv = cJSON_GetObjectItemCaseSensitive(j, "system");
    if (sysv && !cJSON_IsString(sysv)) return "\"system\" must be a string";
    if (sysv && msgs) return "has both \"system\" and \"messages\" (give it as a message)";
    if (it->prompt) {
        bool raw = !ev->chat || ev->o->raw || cJSON_IsTrue(rawv);
        if (raw && sysv)
            return ev->chat ? "\"system\" needs the chat template (this line is sent raw)"
                            : "\"system\" needs a chat template (the model has none)";
        if (!raw) {
            const char *why = template_prompt(it, sysv ? sysv->valuestring : NULL);
            if (why) return why;
        }
    }
    if (msgs) {
        it->templated = true;
        int n = cJSON_GetArraySize(msgs);
        if (!cJSON_IsArray(msgs) || n < 1) return "\"messages\" must be a non-empty array";
        it->msgs = calloc((size_t)n, sizeof *it->msgs);
        if (!it->msgs) return "out of memory";
        const cJSON *m;
        cJSON_ArrayForEach(m, msgs) {
            const char *role = str_field(m, "role"), *content = str_field(m, "content");
            if (!role || !content) return "each message needs string \"role\" and \"content\"";
            it->msgs[it->n_msgs++] = (struct engine_message){role, content};
        }
    }
    const cJSON *ans = cJSON_GetObjectItemCaseSensitive(j, "answer");
    if (!ans) ans = cJSON_GetObjectItemCaseSensitive(j, "expected");
    if (ans && !cJSON_IsString(ans)) return "\"answer\" must be a string";
    it->expected = ans ? ans->valuestring : NULL;
    engine_sampling_greedy(&it->sampling); /* evaluations are reproducible by default */
    it->max_tokens = ev->max_tokens;
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "max_tokens"))) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 1e6)
            return "\"max_tokens\" must be a positive number";
        it->max_tokens = (int32_t)v->valuedouble;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "temperature"))) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 0) return "\"temperature\" must be >= 0";
        if (v->valuedouble > 0) engine_sampling_default(&it->sampling);
        it->sampling.temp = (float)v->valuedouble;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "seed"))) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 0) return "\"seed\" must be a number >= 0";
        it->sampling.seed = (uint64_t)v->valuedouble;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "stop"))) {
        int n = cJSON_GetArraySize(v);
        if (!cJSON_IsArray(v)) return "\"stop\" must be an array of strings";
        it->stop = calloc((size_t)n + 1, sizeof *it->stop);
        if (!it->stop) return "out of memory";
        const cJSON *s;
        cJSON_ArrayForEach(s, v) {
            if (!cJSON_IsString(s)) return "\"stop\" must be an array of strings";
            it->stop[it->n_stop++] = s->valuestring;
        }
    }
    return NULL;
}

static void item_free(struct item *it)
{
    cJSON_Delete(it->obj);
    free(it->msgs);
    free(it->stop);
    free(it->out);
    free(it->message);
    free(it->m.token_t);
}

/* Reads the JSONL file: good lines into *items, bad ones reported with their
 * line numbers (and listed in *bad) and skipped. */
static int read_items(const char *path, const struct eval *ev, struct item **items, int *n,
                      cJSON *bad)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "tern eval: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0, nitems = 0, capitems = 0;
    ssize_t len;
    int lineno = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        size_t k = (size_t)len;
        while (k && (line[k - 1] == '\n' || line[k - 1] == '\r' || line[k - 1] == ' ')) k--;
        if (!k) continue; /* blank lines are not items */
        struct item it = {.line = lineno, .obj = cJSON_ParseWithLength(line, k)};
        const char *why = it.obj ? parse_item(&it, ev) : "not valid JSON";
        if (why) {
            fprintf(stderr, "tern eval: %s:%d: %s; line skipped\n", path, lineno, why);
            cJSON *b = cJSON_CreateObject();
            cJSON_AddNumberToObject(b, "line", lineno);
            cJSON_AddStringToObject(b, "error", why);
            cJSON_AddItemToArray(bad, b);
            item_free(&it);
            continue;
        }
        if (nitems == capitems) {
            capitems = capitems ? capitems * 2 : 64;
            struct item *p = realloc(*items, capitems * sizeof *p);
            if (!p) {
                item_free(&it);
                break;
            }
            *items = p;
        }
        (*items)[nitems++] = it;
    }
    free(line);
    fclose(f);
    *n = (int)nitems;
    return 0;
}

static void take_item_events(struct eval *ev, struct item *it)
{
    struct engine_event evs[32];
    int k;
    while (!it->finished && (k = engine_poll_request(ev->e, it->id, evs, 32)) > 0) {
        for (int i = 0; i < k; i++) {
            struct engine_event *e = &evs[i];
            if (e->type == ENGINE_EV_TOKEN && e->text) {
                size_t n = strlen(e->text);
                char *p = realloc(it->out, it->out_len + n + 1);
                if (p) {
                    memcpy(p + it->out_len, e->text, n + 1);
                    it->out = p;
                    it->out_len += n;
                }
            }
            if (e->type == ENGINE_EV_FINISHED) {
                it->finished = true;
                it->status = e->status;
                if (e->message) it->message = strdup(e->message);
                if (e->metrics) {
                    it->m = *e->metrics;
                    e->metrics->token_t = NULL;
                }
            }
            engine_event_free(e);
        }
    }
}

static void submit_item(struct eval *ev, struct item *it)
{
    struct engine_request q = {0};
    q.prompt = it->prompt;
    q.messages = it->msgs;
    q.n_messages = it->n_msgs;
    q.sampling = it->sampling;
    q.max_tokens = it->max_tokens;
    q.stop = it->stop;
    q.n_stop = it->n_stop;
    q.priority = ENGINE_PRIO_BATCH;
    char err[512];
    enum engine_status why = ENGINE_ERROR;
    it->submitted = true;
    it->id = engine_submit(ev->e, &q, &why, err, sizeof err);
    if (!it->id) {
        it->finished = true;
        it->status = why;
        it->message = strdup(err);
    }
}

/* Exact match after trimming surrounding white space. */
static bool exact_match(const char *out, const char *want)
{
    if (!out) out = "";
    while (*out == ' ' || *out == '\n' || *out == '\t' || *out == '\r') out++;
    while (*want == ' ' || *want == '\n' || *want == '\t' || *want == '\r') want++;
    size_t a = strlen(out), b = strlen(want);
    while (a && strchr(" \n\t\r", out[a - 1])) a--;
    while (b && strchr(" \n\t\r", want[b - 1])) b--;
    return a == b && memcmp(out, want, a) == 0;
}

static cJSON *item_json(const struct item *it)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "line", it->line);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(it->obj, "id");
    if (id) cJSON_AddItemToObject(o, "id", cJSON_Duplicate(id, true));
    cJSON_AddStringToObject(o, "output", it->out ? it->out : "");
    cJSON_AddStringToObject(o, "status", engine_status_name(it->status));
    cJSON_AddBoolToObject(o, "chat_template", it->templated);
    if (it->message) cJSON_AddStringToObject(o, "message", it->message);
    if (it->expected) {
        cJSON_AddStringToObject(o, "expected", it->expected);
        cJSON_AddBoolToObject(o, "match", exact_match(it->out, it->expected));
    }
    const struct engine_metrics *m = &it->m;
    cJSON *t = cJSON_AddObjectToObject(o, "timings");
    cJSON_AddNumberToObject(t, "queue_s", m->queue_s);
    cJSON_AddNumberToObject(t, "prefill_s", m->prefill_s);
    cJSON_AddNumberToObject(t, "ttft_s", m->ttft_s);
    cJSON_AddNumberToObject(t, "tpot_s", m->tpot_s);
    cJSON_AddNumberToObject(t, "decode_s", m->decode_s);
    cJSON_AddNumberToObject(t, "e2e_s", m->e2e_s);
    cJSON_AddNumberToObject(o, "prompt_tokens", m->n_prompt);
    cJSON_AddNumberToObject(o, "cached_prompt_tokens", m->n_cached);
    cJSON_AddNumberToObject(o, "generated_tokens", m->n_generated);
    return o;
}

static bool item_done(const struct item *it)
{
    return it->status == ENGINE_OK || it->status == ENGINE_STOP || it->status == ENGINE_LENGTH;
}

/* A request that did not complete, said on stderr with its line (and id):
 * its output line has the status too, but may go to a file. */
static void report_failure(const struct eval *ev, const struct item *it)
{
    char id[80] = "";
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(it->obj, "id");
    if (cJSON_IsString(v)) snprintf(id, sizeof id, " (id \"%.60s\")", v->valuestring);
    else if (cJSON_IsNumber(v)) snprintf(id, sizeof id, " (id %g)", v->valuedouble);
    /* the id and a server's message are untrusted text for a terminal */
    char *sid = textsafe_term(id), *msg = textsafe_term(it->message ? it->message : "");
    fprintf(stderr, "tern eval: %s:%d%s: failed: %s%s%s\n", ev->o->prompts, it->line,
            sid ? sid : "", engine_status_name(it->status), msg && msg[0] ? ": " : "",
            msg ? msg : "");
    free(sid);
    free(msg);
}

/* Runs the items, at most --concurrency in flight, writing each output line
 * in input order as soon as it and all before it are done. */
static void run_items(struct eval *ev, struct item *v, int n, FILE *out)
{
    int next = 0, written = 0;
    ev->t0 = app_now_s();
    while (written < n) {
        int inflight = 0;
        for (int i = written; i < next; i++) inflight += !v[i].finished;
        while (next < n && inflight < ev->o->concurrency) {
            submit_item(ev, &v[next++]);
            inflight++;
        }
        engine_wait_events(ev->e, 0, 0.05);
        for (int i = written; i < next; i++) take_item_events(ev, &v[i]);
        while (written < next && v[written].finished) {
            if (!item_done(&v[written])) {
                if (ev->tty) fprintf(stderr, "\r%*s\r", 70, ""); /* under the progress bar */
                report_failure(ev, &v[written]);
            }
            cJSON *j = item_json(&v[written]);
            textsafe_json(j); /* model output may be invalid UTF-8 */
            char *txt = cJSON_PrintUnformatted(j);
            if (txt) fprintf(out, "%s\n", txt);
            free(txt);
            cJSON_Delete(j);
            written++;
        }
        fflush(out);
        progress(ev, "prompts", written, n);
    }
}

static cJSON *prompts_summary(const struct item *v, int n, cJSON *bad, double dur)
{
    cJSON *s = cJSON_CreateObject();
    int with = 0, match = 0, ok = 0, empty = 0;
    long long gen = 0, prompt = 0;
    double *ttft = malloc(((size_t)n + 1) * sizeof *ttft), *e2e = malloc(((size_t)n + 1) * sizeof *e2e);
    size_t nt = 0, ne = 0;
    for (int i = 0; i < n; i++) {
        bool done = item_done(&v[i]);
        ok += done;
        empty += done && !(v[i].out && v[i].out[0]);
        gen += v[i].m.n_generated;
        prompt += v[i].m.n_prompt;
        if (v[i].expected) {
            with++;
            match += exact_match(v[i].out, v[i].expected);
        }
        if (ttft && v[i].m.n_generated > 0) ttft[nt++] = v[i].m.ttft_s;
        if (e2e && done) e2e[ne++] = v[i].m.e2e_s;
    }
    cJSON_AddNumberToObject(s, "requests", n);
    cJSON_AddNumberToObject(s, "completed", ok);
    cJSON_AddNumberToObject(s, "failed", n - ok);
    cJSON_AddNumberToObject(s, "empty_replies", empty);
    cJSON_AddNumberToObject(s, "skipped_lines", cJSON_GetArraySize(bad));
    cJSON_AddItemReferenceToObject(s, "bad_lines", bad);
    cJSON_AddNumberToObject(s, "with_answer", with);
    cJSON_AddNumberToObject(s, "exact_match", match);
    if (with)
        cJSON_AddNumberToObject(s, "accuracy", (double)match / with);
    else
        cJSON_AddNullToObject(s, "accuracy");
    cJSON_AddNumberToObject(s, "prompt_tokens", (double)prompt);
    cJSON_AddNumberToObject(s, "generated_tokens", (double)gen);
    cJSON_AddNumberToObject(s, "duration_s", dur);
    struct store_pcts p[2] = {{NAN, NAN, NAN, NAN}, {NAN, NAN, NAN, NAN}};
    double *arr[2] = {ttft, e2e};
    size_t cnt[2] = {nt, ne};
    for (int k = 0; k < 2; k++) {
        if (!arr[k] || !cnt[k]) continue;
        /* insertion sort: prompt sets are small next to their run time */
        for (size_t i = 1; i < cnt[k]; i++)
            for (size_t j = i; j > 0 && arr[k][j - 1] > arr[k][j]; j--) {
                double t = arr[k][j];
                arr[k][j] = arr[k][j - 1];
                arr[k][j - 1] = t;
            }
        p[k].p50 = store_percentile(arr[k], cnt[k], 50);
        p[k].p90 = store_percentile(arr[k], cnt[k], 90);
        p[k].p99 = store_percentile(arr[k], cnt[k], 99);
        p[k].max = arr[k][cnt[k] - 1];
    }
    cJSON_AddItemToObject(s, "ttft", store_pcts_json(&p[0]));
    cJSON_AddItemToObject(s, "e2e", store_pcts_json(&p[1]));
    free(ttft);
    free(e2e);
    return s;
}

static int do_prompts(struct eval *ev)
{
    const struct eopts *o = ev->o;
    cJSON *bad = cJSON_CreateArray();
    struct item *v = NULL;
    int n = 0;
    ev->chat = ev->info.has_chat_template && !ev->info.chat_template_from_vocab;
    ev->max_tokens = (int32_t)o->max_tokens;
    /* A server's cap per request bounds the default, not an explicit --max-tokens. */
    if (!o->max_tokens_set && ev->info.max_tokens_cap > 0 && ev->max_tokens > ev->info.max_tokens_cap)
        ev->max_tokens = ev->info.max_tokens_cap;
    if (!ev->chat && !o->raw)
        fprintf(stderr,
                "tern eval: note: %s is a base model (the file has no chat template): \"prompt\" "
                "lines are sent as plain text, as with --raw\n",
                ev->info.model_name);
    if (read_items(o->prompts, ev, &v, &n, bad) != 0) {
        cJSON_Delete(bad);
        return CLI_EXIT_FAIL;
    }
    FILE *out = stdout;
    if (o->out && !(out = fopen(o->out, "w"))) {
        fprintf(stderr, "tern eval: --out %s: %s\n", o->out, strerror(errno));
        for (int i = 0; i < n; i++) item_free(&v[i]);
        free(v);
        cJSON_Delete(bad);
        return CLI_EXIT_FAIL;
    }
    run_items(ev, v, n, out);
    double dur = app_now_s() - ev->t0;
    if (out != stdout) fclose(out);
    cJSON *summary = prompts_summary(v, n, bad, dur), *config = cJSON_CreateObject();
    cJSON_AddStringToObject(config, "file", o->prompts);
    cJSON_AddNumberToObject(config, "concurrency", (double)o->concurrency);
    cJSON_AddNumberToObject(config, "max_tokens", (double)ev->max_tokens);
    cJSON_AddBoolToObject(config, "raw", o->raw);
    cJSON_AddBoolToObject(config, "chat_template", ev->chat && !o->raw);
    cJSON_AddStringToObject(config, "model_file", ev->info.model_path);
    cJSON_AddStringToObject(config, "backend", ev->info.backend.name);
    const cJSON *acc = cJSON_GetObjectItem(summary, "accuracy");
    int completed = (int)cJSON_GetObjectItem(summary, "completed")->valuedouble;
    int empty = (int)cJSON_GetObjectItem(summary, "empty_replies")->valuedouble;
    fprintf(stderr, "tern eval: %d prompts: %d completed, %d failed, %d bad lines skipped", n,
            completed, n - completed, cJSON_GetArraySize(bad));
    if (empty) fprintf(stderr, ", %d empty repl%s", empty, empty == 1 ? "y" : "ies");
    if (cJSON_IsNumber(acc))
        fprintf(stderr, "; exact match %d/%d = %.1f%%",
                (int)cJSON_GetObjectItem(summary, "exact_match")->valuedouble,
                (int)cJSON_GetObjectItem(summary, "with_answer")->valuedouble,
                100 * acc->valuedouble);
    fprintf(stderr, "; %.1f s\n", dur);
    save_run(ev, "eval-prompts", config, summary);
    cJSON_Delete(summary);
    cJSON_Delete(config);
    cJSON_Delete(bad);
    for (int i = 0; i < n; i++) item_free(&v[i]);
    free(v);
    /* Nothing completed (a server down, every line refused): a failure. */
    return n > 0 && completed == 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

/* ----------------------------------------------------------------- main */

static int on_opt(int c, const char *arg, void *ud)
{
    struct eopts *o = ud;
    const struct cli *cli = o->cli;
    switch (c) {
    case OPT_PPL: o->ppl = arg; return 0;
    case OPT_PROMPTS: o->prompts = arg; return 0;
    case CLI_O_CTX: return cli_opt_long(cli, CLI_O_CTX, arg, &o->ctx);
    case OPT_STRIDE: return cli_int(cli, "--stride", arg, 1, 1 << 20, &o->stride);
    case OPT_CHUNKS: return cli_int(cli, "--chunks", arg, 1, 1 << 30, &o->chunks);
    case OPT_CONCURRENCY: return cli_int(cli, "--concurrency", arg, 1, 4096, &o->concurrency);
    case OPT_OUT: o->out = arg; return 0;
    case OPT_DB: o->db = arg; return 0;
    case OPT_NO_SAVE: o->no_save = true; return 0;
    case OPT_JSON: o->json = true; return 0;
    case CLI_O_MAX_TOKENS:
        o->max_tokens_set = true;
        return cli_opt_long(cli, CLI_O_MAX_TOKENS, arg, &o->max_tokens);
    case OPT_RAW: o->raw = true; return 0;
    }
    /* the engine options every command shares (eval's --ctx is its window, above) */
    return cli_engine_opt(cli, c, arg, &o->eng, NULL, 0) == 0 ? 0 : -1;
}

static struct engine *open_engine(const struct cli *cli, const struct eopts *o, int32_t n_ctx)
{
    char path[4096], err[1024];
    if (cli->n_urls == 0 && cli_model_path(cli, path, sizeof path, err, sizeof err) != 0) {
        fprintf(stderr, "tern eval: %s\n", err);
        return NULL;
    }
    struct engine_config c = o->eng;
    c.model_path = path;
    c.n_ctx = n_ctx;
    /* Through --url, -m names the server's model file: its tokenizer cuts
     * the perplexity text into the ids the server scores (a name resolves
     * as in-process). */
    if (cli_engine_remote(cli, &c) && cli->model) {
        if (cli_model_path(cli, path, sizeof path, err, sizeof err) != 0) {
            fprintf(stderr, "tern eval: %s\n", err);
            return NULL;
        }
        c.model_path = path;
    }
    struct engine *e = cli_engine_open(cli, &c, err, sizeof err);
    if (!e) fprintf(stderr, "tern eval: %s\n", err);
    return e;
}

int cmd_eval(int argc, char **argv)
{
    static const char use[] =
        "usage: tern eval --perplexity FILE [--ctx N] [--stride S] [--chunks N]\n"
        "       tern eval --prompts FILE.jsonl [--raw] [--concurrency N] [--out FILE]\n"
        "\n"
        "Perplexity over a text file, with the method of llama-perplexity (chunks of --ctx\n"
        "tokens, the second half of each scored; with --stride S, windows every S tokens\n"
        "scoring their last S), or a prompt set. Both run at batch priority and are stored\n"
        "in the history database. Through --url, perplexity scores on the server (echo +\n"
        "logprobs) and needs -m MODEL, the server's model file, for its tokenizer.\n"
        "\n"
        "Prompt set: one JSON object per line (blank lines ignored), with\n"
        "  \"prompt\"       text; a chat model gets it as one user turn through its chat\n"
        "                 template, as tern run does (--raw or \"raw\": true: as plain\n"
        "                 text; a base model always gets plain text)\n"
        "  \"messages\"     or a conversation, [{\"role\": ..., \"content\": ...}, ...]\n"
        "                 (always through the template)\n"
        "and optionally \"system\" (a system message for \"prompt\"), \"answer\" (or\n"
        "\"expected\": graded by exact match, white space trimmed), \"id\" (echoed),\n"
        "\"max_tokens\", \"temperature\" (default 0: greedy), \"seed\", \"stop\" (array of\n"
        "strings), \"raw\". Output: one JSON line per request in input order (output,\n"
        "status, chat_template, expected and match, timings, token counts). A bad line\n"
        "is reported with its line number and skipped; a request that fails is reported\n"
        "with its line and status; the summary gives completed, failed, skipped and\n"
        "exact-match counts. Exit status 1 when no request completed.\n"
        "\n"
        "options:\n"
        "@ctx 512 for perplexity, the model's for prompts\n"
        "      --stride S        perplexity window stride (default: none)\n"
        "      --chunks N        evaluate at most N chunks\n"
        "      --concurrency N   requests in flight (default 4)\n"
        "@max-tokens 256 unless a line says; within a server's cap per request with --url\n"
        "      --raw             prompts: \"prompt\" lines as plain text, no chat template\n"
        "      --out FILE        prompts: JSONL outputs (default stdout)\n"
        "      --json            perplexity: print the result as JSON\n"
        "      --db PATH         history database; --no-save: do not store the run\n"
        "@threads physical cores\n"
        "@backend auto\n"
        "@kv-type f16 (perplexity with q8_0, q4_0 or q4c: what the quantized cache costs in "
        "quality)\n"
        "@step-tokens the engine's (1: each token through the decode path, as a reply reads the cache)\n"
        "\n" CLI_REMOTE_USAGE;
    static const struct option longopts[] = {
        {"perplexity", required_argument, 0, OPT_PPL},
        {"prompts", required_argument, 0, OPT_PROMPTS},
        CLI_SHARED(CLI_O_CTX),
        {"stride", required_argument, 0, OPT_STRIDE},
        {"chunks", required_argument, 0, OPT_CHUNKS},
        {"concurrency", required_argument, 0, OPT_CONCURRENCY},
        {"out", required_argument, 0, OPT_OUT},
        {"db", required_argument, 0, OPT_DB},
        {"no-save", no_argument, 0, OPT_NO_SAVE},
        {"json", no_argument, 0, OPT_JSON},
        CLI_SHARED(CLI_O_THREADS),
        CLI_SHARED(CLI_O_MAX_TOKENS),
        CLI_SHARED(CLI_O_BACKEND),
        CLI_SHARED(CLI_O_KV_TYPE),
        CLI_SHARED(CLI_O_PROMPT_ATTN),
        CLI_SHARED(CLI_O_PREFILL_INT8),
        CLI_SHARED(CLI_O_STEP_TOKENS),
        {"raw", no_argument, 0, OPT_RAW},
        {0, 0, 0, 0},
    };
    struct cli cli;
    struct eopts o = {.cli = &cli, .ctx = 512, .concurrency = 4, .max_tokens = 256};
    engine_config_default(&o.eng);
    int rc = cli_parse(&cli, argc, argv, "", longopts, on_opt, &o, use);
    if (rc >= 0) goto out;
    rc = CLI_EXIT_USAGE;
    if (!o.ppl == !o.prompts || cli.argc) {
        fprintf(stderr, "tern eval: give one of --perplexity FILE or --prompts FILE.jsonl\n");
        goto out;
    }
    if (o.ppl && cli.n_urls > 0 && !cli.model) {
        /* The server scores token ids (echo + logprobs): the text must be
         * cut by the server's own tokenizer, read from its model file. */
        fprintf(stderr, "tern eval: --perplexity through --url needs -m MODEL (the server's "
                        "model file) for its tokenizer\n");
        goto out;
    }
    struct eval ev = {.o = &o, .tty = isatty(STDERR_FILENO)};
    /* Perplexity chunks are exactly --ctx long; prompts use the model's context. */
    ev.e = open_engine(&cli, &o, o.ppl ? (int32_t)o.ctx : 0);
    rc = CLI_EXIT_FAIL;
    if (!ev.e) goto out;
    engine_info(ev.e, &ev.info);
    if (o.ppl) cli_opt_warn_ctx(&cli, o.ctx, ev.info.n_ctx_train);
    rc = o.ppl ? do_perplexity(&ev) : do_prompts(&ev);
    engine_close(ev.e);
out:
    cli_free(&cli);
    return rc;
}
