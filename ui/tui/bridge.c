/* bridge: UI state <-> engine and store (see bridge.h). */
#include "bridge.h"
#include "route.h"

#include "cpu/threadpool.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TITLE "New chat"

/* Copies s into d[n], cut at a character boundary. */
static void copy_str(char *d, size_t n, const char *s)
{
    size_t l = strlen(s);
    if (l >= n) {
        l = n - 1;
        while (l > 0 && ((unsigned char)s[l] & 0xC0) == 0x80) l--;
    }
    memcpy(d, s, l);
    d[l] = 0;
}

static void *load_main(void *arg)
{
    struct ui_bridge *b = arg;
    b->loaded = b->open_engine ? b->open_engine(&b->cfg, b->open_ud, b->load_err,
                                                sizeof b->load_err)
                               : engine_open(&b->cfg, b->load_err, sizeof b->load_err);
    /* a CPU engine's decode is shown against the streaming read: the cached
     * limits, or measured here once per machine (a second, off the UI thread) */
    b->have_limits = false;
    if (b->loaded) {
        struct engine_info info;
        engine_info(b->loaded, &info);
        char path[4096], err[512];
        limits_default_path(cpu_isa_best(), path, sizeof path);
        b->have_limits = info.backend.name && !strcmp(info.backend.name, "cpu") &&
                         limits_get(&b->limits, path, cpu_isa_best(), false, err, sizeof err) >= 0;
    }
    (void)!write(b->load_pipe[1], "x", 1);
    return NULL;
}

static void set_model_path(struct ui_bridge *b, const char *path)
{
    copy_str(b->model_path, sizeof b->model_path, path ? path : "");
    b->cfg.model_path = b->model_path;
    const char *base = strrchr(b->model_path, '/');
    copy_str(b->model_file, sizeof b->model_file, base ? base + 1 : b->model_path);
}

static int start_loader(struct ui_bridge *b, struct ui_state *st, char *err, size_t errlen)
{
    if (pthread_create(&b->loader, NULL, load_main, b) != 0) {
        snprintf(err, errlen, "model loader: cannot start a thread");
        return -1;
    }
    b->loading = true;
    st->loading = true;
    return 0;
}

void ui_bridge_switch_model(struct ui_bridge *b, struct ui_state *st, const char *path)
{
    char err[256];
    if (b->loading || ui_state_streaming(st)) return;
    if (b->load_pipe[0] < 0) { /* started without a model */
        if (pipe(b->load_pipe) < 0) return;
        fcntl(b->load_pipe[0], F_SETFD, FD_CLOEXEC);
        fcntl(b->load_pipe[1], F_SETFD, FD_CLOEXEC);
    }
    engine_close(b->eng); /* frees the old model's memory before the new one maps */
    b->eng = b->loaded = NULL;
    b->cfg.remote.n_urls = 0; /* a file picked while attached runs here, not on the server */
    set_model_path(b, path);
    st->engine_ok = false;
    st->have_stats = false;
    st->base_model = false;
    st->alert[UI_ALERT_MODEL][0] = 0;
    copy_str(st->model_name, sizeof st->model_name, b->model_file);
    st->backend[0] = st->device[0] = 0;
    if (start_loader(b, st, err, sizeof err) < 0) {
        snprintf(st->alert[UI_ALERT_MODEL], sizeof st->alert[0], "%s", err);
        return;
    }
    ui_state_set_status(st, false, "loading %s…", b->model_file);
}

/* The first-run banner: the default model is absent, so say where it was
 * looked for and a fix that works for an installed tern (the source tree's
 * fetch-model is not there); other errors as given, "no model" said once. */
static void model_alert(struct ui_state *st, const char *e)
{
    static const char pre[] = "no model: ", absent[] = " is absent";
    if (!strncmp(e, pre, sizeof pre - 1)) e += sizeof pre - 1;
    const char *end = strstr(e, absent), *slash = NULL;
    for (const char *p = e; end && p < end; p++)
        if (*p == '/') slash = p;
    if (!end || !slash) {
        snprintf(st->alert[UI_ALERT_MODEL], sizeof st->alert[0], "no model: %s", e);
        return;
    }
    snprintf(st->alert[UI_ALERT_MODEL], sizeof st->alert[0],
             "No model yet: %.*s is not in %.*s. Fetch the default model with\n%s\n"
             "or start tern chat -m PATH.",
             (int)(end - slash - 1), slash + 1, (int)(slash - e), e, UI_PULL_DEFAULT);
}

int ui_bridge_open(struct ui_bridge *b, struct ui_state *st, const struct engine_config *cfg,
                   const char *db_path, const char *model_error, char *err, size_t errlen)
{
    return ui_bridge_open_with(b, st, cfg, NULL, NULL, db_path, model_error, err, errlen);
}

int ui_bridge_open_with(struct ui_bridge *b, struct ui_state *st, const struct engine_config *cfg,
                        ui_engine_open_fn *open_engine, void *ud, const char *db_path,
                        const char *model_error, char *err, size_t errlen)
{
    char serr[512];
    memset(b, 0, sizeof *b);
    b->open_engine = open_engine;
    b->open_ud = ud;
    b->load_pipe[0] = b->load_pipe[1] = -1;
    b->cfg = *cfg;
    set_model_path(b, cfg->model_path);

    if (store_open(&b->db, db_path, STORE_READWRITE, serr, sizeof serr) < 0) {
        b->db = NULL;
        st->store_ok = false;
        snprintf(st->alert[UI_ALERT_STORE], sizeof st->alert[0],
                 "history off (nothing is saved): %s", serr);
    } else {
        st->store_ok = true;
    }
    if (model_error) {
        st->engine_ok = false;
        model_alert(st, model_error);
        return 0;
    }
    if (pipe(b->load_pipe) < 0) {
        snprintf(err, errlen, "model loader: pipe: %s", strerror(errno));
        return -1;
    }
    fcntl(b->load_pipe[0], F_SETFD, FD_CLOEXEC);
    fcntl(b->load_pipe[1], F_SETFD, FD_CLOEXEC);
    return start_loader(b, st, err, errlen);
}

void ui_bridge_close(struct ui_bridge *b)
{
    if (b->loading) {
        pthread_join(b->loader, NULL);
        b->loading = false;
        b->eng = b->loaded;
    }
    engine_close(b->eng);
    b->eng = NULL;
    store_close(b->db);
    b->db = NULL;
    for (int i = 0; i < 2; i++)
        if (b->load_pipe[i] >= 0) close(b->load_pipe[i]);
}

int ui_bridge_load_fd(const struct ui_bridge *b)
{
    return b->loading ? b->load_pipe[0] : -1;
}

int ui_bridge_event_fd(const struct ui_bridge *b)
{
    return b->eng ? engine_event_fd(b->eng) : -1;
}

void ui_bridge_load_done(struct ui_bridge *b, struct ui_state *st)
{
    char c;
    if (!b->loading) return;
    (void)!read(b->load_pipe[0], &c, 1);
    pthread_join(b->loader, NULL);
    b->loading = false;
    st->loading = false;
    b->eng = b->loaded;
    if (!b->eng) {
        st->engine_ok = false;
        if (b->cfg.remote.n_urls > 0) { /* no model loads here: the server did not answer */
            copy_str(st->model_name, sizeof st->model_name, "(not attached)");
            copy_str(st->backend, sizeof st->backend, "remote");
            copy_str(st->device, sizeof st->device, b->cfg.remote.urls[0]);
            snprintf(st->alert[UI_ALERT_MODEL], sizeof st->alert[0],
                     "cannot attach: %.480s. Start the server (tern serve) or check --url/--attach; "
                     "F6 loads a local model.",
                     b->load_err);
        } else {
            snprintf(st->alert[UI_ALERT_MODEL], sizeof st->alert[0], "model load failed: %s",
                     b->load_err);
        }
        return;
    }
    struct engine_info info;
    engine_info(b->eng, &info);
    st->engine_ok = true;
    copy_str(st->model_name, sizeof st->model_name,
             info.model_name ? info.model_name : b->model_file);
    /* attached without a file: the server's model names the sessions */
    if (!b->model_file[0]) copy_str(b->model_file, sizeof b->model_file, st->model_name);
    copy_str(st->backend, sizeof st->backend, info.backend.name ? info.backend.name : "?");
    copy_str(st->device, sizeof st->device, info.backend.device);
    copy_str(st->backend_note, sizeof st->backend_note, info.backend.note);
    st->decode_bytes = (double)info.weight_bytes_active;
    b->kv_key_bytes = (double)info.kv_bytes_per_token;
    b->n_layer = info.n_layer;
    b->n_swa_layers = info.n_swa_layers;
    b->sliding_window = info.sliding_window;
    int threads = b->cfg.backend.threads > 0 ? b->cfg.backend.threads : tp_physical_cores();
    st->read_limit_gbs = b->have_limits ? limits_read_gbs(&b->limits, threads) : 0;
    /* a sequence holds the context or the whole KV pool, whichever is less */
    int64_t pool = (int64_t)info.kv_blocks * info.kv_block_tokens;
    b->ctx_limit = pool > 0 && pool < info.n_ctx ? (int32_t)pool : info.n_ctx;
    st->n_ctx = b->ctx_limit;
    st->ctx_dirty = true;
    /* no template in the file: a base model, which continues text */
    b->base_model = !info.has_chat_template || info.chat_template_from_vocab;
    b->opens_think = info.chat_template_opens_think;
    st->base_model = b->base_model;
    if (b->base_model)
        ui_state_set_status(st, false,
                            "%s is a base model (no chat template): plain completion, your text "
                            "is continued",
                            st->model_name);
    else if (info.max_tokens_cap > 0)
        ui_state_set_status(st, false, "model ready: %s on %s; replies at most %d tokens (the "
                                       "server's cap per request)",
                            st->model_name, st->backend, (int)info.max_tokens_cap);
    else if (b->cfg.remote.n_urls > 0)
        ui_state_set_status(st, false, "attached to %s: model %s", st->device, st->model_name);
    else
        ui_state_set_status(st, false, "model ready: %s on %s", st->model_name, st->backend);
    b->max_tokens_cap = info.max_tokens_cap;
    ui_bridge_snapshot(b, st);
}

/* ---- parameters ---------------------------------------------------------- */

char *ui_params_to_json(const struct ui_params *p)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "temperature", (double)p->temp);
    cJSON_AddNumberToObject(o, "top_p", (double)p->top_p);
    cJSON_AddNumberToObject(o, "max_tokens", p->max_tokens);
    cJSON_AddNumberToObject(o, "top_k", p->top_k);
    cJSON_AddNumberToObject(o, "min_p", (double)p->min_p);
    cJSON_AddNumberToObject(o, "repeat_penalty", (double)p->repeat_penalty);
    if (p->seed) cJSON_AddNumberToObject(o, "seed", (double)p->seed);
    cJSON_AddStringToObject(o, "context_policy", ui_ctx_policy_name(p->ctx_policy));
    if (p->lookup_k > 0) cJSON_AddNumberToObject(o, "lookup_k", p->lookup_k);
    cJSON_AddStringToObject(o, "system", p->system);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

void ui_params_from_json(struct ui_params *p, const char *json)
{
    cJSON *o = json ? cJSON_Parse(json) : NULL;
    if (!o) return;
    const cJSON *v;
    if ((v = cJSON_GetObjectItem(o, "temperature")) && cJSON_IsNumber(v))
        p->temp = (float)v->valuedouble;
    if ((v = cJSON_GetObjectItem(o, "top_p")) && cJSON_IsNumber(v))
        p->top_p = (float)v->valuedouble;
    if ((v = cJSON_GetObjectItem(o, "max_tokens")) && cJSON_IsNumber(v))
        p->max_tokens = v->valueint;
    if ((v = cJSON_GetObjectItem(o, "top_k")) && cJSON_IsNumber(v)) p->top_k = v->valueint;
    if ((v = cJSON_GetObjectItem(o, "min_p")) && cJSON_IsNumber(v))
        p->min_p = (float)v->valuedouble;
    if ((v = cJSON_GetObjectItem(o, "repeat_penalty")) && cJSON_IsNumber(v))
        p->repeat_penalty = (float)v->valuedouble;
    if ((v = cJSON_GetObjectItem(o, "seed")) && cJSON_IsNumber(v) && v->valuedouble >= 0)
        p->seed = (uint64_t)v->valuedouble;
    if ((v = cJSON_GetObjectItem(o, "lookup_k")) && cJSON_IsNumber(v) && v->valueint >= 0 &&
        v->valueint <= 32)
        p->lookup_k = v->valueint;
    if ((v = cJSON_GetObjectItem(o, "context_policy")) && cJSON_IsString(v))
        ui_ctx_policy_parse(v->valuestring, &p->ctx_policy);
    if ((v = cJSON_GetObjectItem(o, "system")) && cJSON_IsString(v))
        copy_str(p->system, sizeof p->system, v->valuestring);
    cJSON_Delete(o);
}

/* ---- sessions ------------------------------------------------------------ */

static void title_from(const char *text, char *out, size_t n)
{
    size_t i = 0, o = 0;
    while (text[i] == ' ' || text[i] == '\n') i++;
    /* first line, cut at a character boundary */
    while (text[i] && text[i] != '\n' && o + 4 < n && o < 48) out[o++] = text[i++];
    while (o > 0 && ((unsigned char)out[o - 1] & 0xC0) == 0x80) o--;
    if (o > 0 && ((unsigned char)out[o - 1] & 0xC0) == 0xC0) o--;
    out[o] = 0;
}

/* The open session's store key, creating the session row on first use so
 * the parameters chosen before the first message are stored with it. */
static int64_t session_key(struct ui_bridge *b, struct ui_state *st, const char *first_text)
{
    if (st->n_sessions == 0) ui_state_add_session(st, 0, DEFAULT_TITLE, (double)time(NULL), true);
    struct ui_session *se = &st->sessions[st->cur];
    if (se->key != 0 || !b->db) return se->key;
    if (strcmp(se->title, DEFAULT_TITLE) == 0 && first_text) {
        char t[64];
        title_from(first_text, t, sizeof t);
        if (t[0]) ui_state_rename_session(st, st->cur, t);
    }
    char *pj = ui_params_to_json(&st->params);
    se->key = store_session_new(b->db, se->title, b->model_file, pj);
    free(pj);
    return se->key;
}

void ui_bridge_list_sessions(struct ui_bridge *b, struct ui_state *st, bool runs)
{
    struct store_session_list l;
    char err[256];
    if (!b->db) return;
    if (store_sessions(b->db, &l, err, sizeof err) < 0) {
        ui_state_set_status(st, true, "history: %s", err);
        return;
    }
    /* the open session keeps its entry (its key may still be queued) */
    bool have_open = st->n_sessions > 0, placed = false;
    struct ui_session open = have_open ? st->sessions[st->cur] : (struct ui_session){0};
    char *open_title = have_open ? strdup(open.title ? open.title : "") : NULL;
    int64_t open_id = have_open && open.key ? store_resolve(b->db, open.key) : 0;
    while (st->n_sessions) ui_state_remove_session(st, st->n_sessions - 1);
    st->cur = 0;
    for (size_t i = 0; i < l.n; i++) {
        bool run = l.v[i].kind && !strcmp(l.v[i].kind, "run"), is_open = open_id == l.v[i].id;
        if (run && !runs && !is_open) continue;
        int k = ui_state_add_session(st, is_open ? open.key : l.v[i].id,
                                     is_open && open_title ? open_title : l.v[i].title,
                                     l.v[i].created, false);
        if (k < 0) continue;
        st->sessions[k].n_messages = l.v[i].n_messages;
        st->sessions[k].run = run;
        if (is_open) st->cur = (size_t)k, placed = true;
    }
    if (have_open && !placed && ui_state_add_session(st, open.key, open_title, open.created, true) >= 0) {
        st->sessions[0].run = open.run;
        st->cur = 0;
    }
    st->sel = st->cur;
    st->list_runs = runs;
    free(open_title);
    store_session_list_free(&l);
}

static enum ui_msg_status status_of(const char *s)
{
    if (!s) return UI_MSG_DONE;
    if (!strcmp(s, "cancelled")) return UI_MSG_CANCELLED;
    if (!strcmp(s, "interrupted") || !strcmp(s, "streaming")) return UI_MSG_INTERRUPTED;
    if (!strcmp(s, "error") || !strcmp(s, "timeout") || !strcmp(s, "rejected")) return UI_MSG_ERROR;
    return UI_MSG_DONE;
}

static void phase_from_store(struct ui_phase *ph, const struct store_request_info *r)
{
    memset(ph, 0, sizeof *ph);
    ph->have = true;
    ph->queue_s = r->queue_s > 0 ? r->queue_s : 0;
    ph->ttft_s = r->ttft_s;
    ph->prefill_end = r->ttft_s > 0 ? r->ttft_s : 0;
    ph->decode_s = r->decode_s > 0 ? r->decode_s : 0;
    ph->tpot_s = r->tpot_s;
    ph->e2e_s = r->e2e_s;
    ph->n_prompt = (int32_t)r->prompt_tokens;
    ph->n_cached = (int32_t)r->cached_tokens;
    ph->n_computed = (int32_t)(r->prompt_tokens - r->cached_tokens);
    ph->n_generated = (int32_t)r->generated_tokens;
    ph->prefill_s = r->prefill_s;
    copy_str(ph->status, sizeof ph->status, r->status ? r->status : "");
}

/* K and V a token of a reply's decode read on average: positions n_prompt
 * on, n_generated of them (0 where the layers are unknown: remote). */
static double decode_kv_bytes(const struct ui_bridge *b, int32_t n_prompt, int32_t n_generated)
{
    if (b->n_layer <= 0) return 0;
    return engine_kv_keys(b->n_layer, b->n_swa_layers, b->sliding_window, n_prompt,
                          n_generated) * b->kv_key_bytes / b->n_layer;
}

void ui_bridge_open_session(struct ui_bridge *b, struct ui_state *st, size_t i)
{
    char err[256];
    struct store_transcript tr;
    if (i >= st->n_sessions) return;
    ui_state_clear_msgs(st);
    st->cur = st->sel = i;
    struct ui_session *se = &st->sessions[i];
    st->params = st->defaults;
    if (!b->db || se->key == 0) return;
    int64_t id = store_resolve(b->db, se->key);
    int rc = id > 0 ? store_transcript(b->db, id, &tr, err, sizeof err) : 1;
    if (rc != 0) {
        ui_state_set_status(st, true, "history: %s", rc < 0 ? err : "session not found");
        return;
    }
    ui_params_from_json(&st->params, tr.session.params_json);
    /* a session remembers its model: say when another one is loaded */
    if (tr.session.model && tr.session.model[0] && b->model_file[0] &&
        strcmp(tr.session.model, b->model_file) != 0)
        /* short enough to show whole at 80 columns with both file names */
        ui_state_set_status(st, false, "made with %s; loaded: %s",
                            tr.session.model, b->model_file);
    for (size_t k = 0; k < tr.n; k++) {
        const struct store_message_info *mi = &tr.msgs[k];
        enum ui_role role = !strcmp(mi->role, "user")     ? UI_ROLE_USER
                            : !strcmp(mi->role, "system") ? UI_ROLE_SYSTEM
                                                          : UI_ROLE_ASSISTANT;
        struct ui_msg *m = ui_state_add_msg(st, role, mi->text);
        if (!m) break;
        m->key = mi->id;
        m->status = status_of(mi->status);
        if (m->status == UI_MSG_ERROR && mi->error && mi->error[0]) ui_msg_set_note(m, mi->error);
        if (mi->req) {
            phase_from_store(&m->ph, mi->req);
            if (mi->req->think_tokens > 0) { /* its thinking's fold keeps its figures */
                m->think = UI_THINK_DONE;
                m->think_tokens = (int32_t)mi->req->think_tokens;
                m->think_s = mi->req->think_s > 0 ? mi->req->think_s : 0;
            }
            if (mi->req->ttft_s >= 0) ui_state_add_latency(st, mi->req->ttft_s, mi->req->tpot_s);
            /* a reopened reply shows its stored rate */
            if (mi->req->tpot_s > 0) {
                st->tok_s = 1.0 / mi->req->tpot_s;
                st->decode_kv_bytes = decode_kv_bytes(b, m->ph.n_prompt, m->ph.n_generated);
            }
        }
        if (role == UI_ROLE_ASSISTANT) st->timeline_msg = st->n_msgs - 1;
    }
    store_transcript_free(&tr);
}

void ui_bridge_new_session(struct ui_bridge *b, struct ui_state *st, const char *title)
{
    (void)b;
    if (ui_state_add_session(st, 0, title ? title : DEFAULT_TITLE, (double)time(NULL), true) < 0)
        return;
    st->cur = st->sel = 0;
    ui_state_clear_msgs(st);
    st->params = st->defaults;
}

void ui_bridge_rename_session(struct ui_bridge *b, struct ui_state *st, size_t i, const char *title)
{
    if (i >= st->n_sessions || ui_state_rename_session(st, i, title) < 0) return;
    if (b->db && st->sessions[i].key) store_session_rename(b->db, st->sessions[i].key, title);
}

void ui_bridge_delete_session(struct ui_bridge *b, struct ui_state *st, size_t i)
{
    if (i >= st->n_sessions) return;
    bool was_open = i == st->cur;
    if (b->db && st->sessions[i].key) store_session_delete(b->db, st->sessions[i].key);
    ui_state_remove_session(st, i);
    if (was_open) {
        if (st->n_sessions)
            ui_bridge_open_session(b, st, st->cur);
        else
            ui_state_clear_msgs(st);
    }
}

void ui_bridge_save_params(struct ui_bridge *b, struct ui_state *st)
{
    /* A session not stored yet gets them with its first message. */
    if (!st->n_sessions || !st->sessions[st->cur].key) {
        ui_state_set_status(st, false, "parameters set; stored with the session's first message");
        return;
    }
    char *pj = ui_params_to_json(&st->params);
    store_session_set_params(b->db, st->sessions[st->cur].key, pj);
    free(pj);
    ui_state_set_status(st, false, b->db ? "parameters saved with the session"
                                         : "parameters set (history is off)");
}

/* ---- requests ------------------------------------------------------------ */

static const char *role_name(enum ui_role r)
{
    return r == UI_ROLE_USER ? "user" : r == UI_ROLE_SYSTEM ? "system" : "assistant";
}

/* A reply that failed before or while it ran: shown with its reason and
 * stored with its status and message, so a reopened session shows it too. */
static void add_error_reply(struct ui_bridge *b, struct ui_state *st, int64_t skey,
                            const char *status, const char *fmt, const char *detail)
{
    char note[600];
    snprintf(note, sizeof note, fmt, detail);
    struct ui_msg *m = ui_state_add_msg(st, UI_ROLE_ASSISTANT, "");
    if (!m) return;
    m->status = UI_MSG_ERROR;
    ui_msg_set_note(m, note);
    ui_state_set_status(st, true, "%s", note);
    if (b->db && skey) {
        m->key = store_reply_begin(b->db, skey);
        store_reply_fail(b->db, m->key, status, note, 0);
    }
}

/* The conversation's turns (user and assistant text; notes, failed replies
 * and the user turns they answered left out: a failed turn must not make the
 * next prompt larger). idx[k] is turn k's transcript index. Returns the
 * count; v and idx have room for st->n_msgs + 1. */
static int32_t build_turns(const struct ui_state *st, struct engine_message *v, size_t *idx)
{
    int32_t n = 0;
    for (size_t i = 0; i < st->n_msgs; i++) {
        const struct ui_msg *m = &st->msgs[i];
        if (m->role == UI_ROLE_NOTE || m->status == UI_MSG_ERROR || m->len == 0) continue;
        if (m->role == UI_ROLE_USER && i + 1 < st->n_msgs &&
            st->msgs[i + 1].role == UI_ROLE_ASSISTANT && st->msgs[i + 1].status == UI_MSG_ERROR)
            continue;
        idx[n] = i;
        v[n++] = (struct engine_message){role_name(m->role), m->text};
    }
    return n;
}

/* A base model's prompt: the conversation as one text that the model
 * continues (each reply follows its user text directly; a new user turn
 * starts a new line). Caller frees; NULL when out of memory. */
static char *render_plain(const struct engine_message *v, int32_t n)
{
    size_t len = 1;
    for (int32_t i = 0; i < n; i++) len += strlen(v[i].content) + 2;
    char *t = malloc(len), *o = t;
    if (!t) return NULL;
    for (int32_t i = 0; i < n; i++) {
        bool sep = i > 0 && (!strcmp(v[i].role, "user") || !strcmp(v[i - 1].role, "system"));
        if (sep) *o++ = '\n';
        size_t l = strlen(v[i].content);
        memcpy(o, v[i].content, l);
        o += l;
    }
    *o = 0;
    return t;
}

static int64_t count_chat(void *ud, const struct engine_message *v, int32_t n, char *err,
                          size_t errlen)
{
    struct ui_bridge *b = ud;
    if (!b->base_model) return engine_count_chat_tokens(b->eng, v, n, err, errlen);
    char *t = render_plain(v, n);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int64_t r = engine_count_tokens(b->eng, t, strlen(t), err, errlen);
    free(t);
    return r;
}

/* Index of the first turn at or after transcript message `from`. */
static int32_t turn_at(const size_t *idx, int32_t n, size_t from)
{
    int32_t k = 0;
    while (k < n && idx[k] < from) k++;
    return k;
}

/* Says once per truncation step how much of the session the model no
 * longer sees. */
static void note_dropped(struct ui_state *st, int32_t dropped)
{
    if (dropped == st->ctx_dropped) return;
    st->ctx_dropped = dropped;
    if (dropped == 0) return;
    char t[160];
    snprintf(t, sizeof t,
             "%d earlier turn%s outside the context (context policy truncate: the model no "
             "longer sees %s)",
             dropped, dropped == 1 ? " is" : "s are", dropped == 1 ? "it" : "them");
    struct ui_msg *m = ui_state_add_msg(st, UI_ROLE_NOTE, t);
    if (m) m->status = UI_MSG_DONE;
}

long ui_bridge_next_prompt_tokens(struct ui_bridge *b, struct ui_state *st, const char *input)
{
    char err[256];
    if (!b->eng) return -1;
    struct engine_message *v = malloc((st->n_msgs + 2) * sizeof *v);
    size_t *idx = malloc((st->n_msgs + 2) * sizeof *idx);
    long r = -1;
    if (!v || !idx) goto done;
    int32_t k = 0;
    if (st->params.system[0]) v[k++] = (struct engine_message){"system", st->params.system};
    int32_t n = build_turns(st, v + k, idx);
    int32_t first = turn_at(idx, n, st->ctx_first);
    memmove(v + k, v + k + first, (size_t)(n - first) * sizeof *v);
    k += n - first;
    if (input && input[0]) v[k++] = (struct engine_message){"user", input};
    r = k > 0 ? (long)count_chat(b, v, k, err, sizeof err) : 0;
done:
    free(v);
    free(idx);
    return r;
}

static void submit(struct ui_bridge *b, struct ui_state *st, int64_t skey);

void ui_bridge_send(struct ui_bridge *b, struct ui_state *st, const char *text)
{
    int64_t skey = session_key(b, st, text);
    struct ui_msg *u = ui_state_add_msg(st, UI_ROLE_USER, text);
    if (!u) return;
    if (b->db && skey) u->key = store_message_add(b->db, skey, "user", text, -1);
    st->sessions[st->cur].n_messages++;
    st->scroll = 0;
    submit(b, st, skey);
}

/* Drops the transcript from message i on (and from the store). */
static void drop_from(struct ui_bridge *b, struct ui_state *st, size_t i)
{
    while (st->n_msgs > i) {
        struct ui_msg *m = &st->msgs[st->n_msgs - 1];
        if (m->key && b->db) store_message_delete(b->db, m->key);
        if (m->role != UI_ROLE_NOTE && st->n_sessions) st->sessions[st->cur].n_messages--;
        free(m->text);
        free(m->note);
        st->n_msgs--;
    }
    if (st->timeline_msg >= st->n_msgs) st->timeline_msg = (size_t)-1;
    if (st->ctx_first > st->n_msgs) st->ctx_first = 0;
    st->ctx_dirty = true;
}

bool ui_bridge_regenerate(struct ui_bridge *b, struct ui_state *st)
{
    size_t i = st->n_msgs;
    while (i > 0 && st->msgs[i - 1].role != UI_ROLE_USER) i--;
    if (i == 0 || ui_state_streaming(st) || !b->eng) return false;
    drop_from(b, st, i); /* the replies (and notes) after the last user turn */
    int64_t skey = st->n_sessions ? st->sessions[st->cur].key : 0;
    st->scroll = 0;
    submit(b, st, skey);
    return true;
}

char *ui_bridge_take_last_user(struct ui_bridge *b, struct ui_state *st)
{
    size_t i = st->n_msgs;
    while (i > 0 && st->msgs[i - 1].role != UI_ROLE_USER) i--;
    if (i == 0 || ui_state_streaming(st)) return NULL;
    char *t = strdup(st->msgs[i - 1].text ? st->msgs[i - 1].text : "");
    if (t) drop_from(b, st, i - 1);
    return t;
}

/* Submits the conversation as it stands (its last turn is the user's). */
static void submit(struct ui_bridge *b, struct ui_state *st, int64_t skey)
{
    char err[512];
    enum engine_status why;
    if (!b->eng) {
        add_error_reply(b, st, skey, "error", "%s",
                        st->loading ? "the model is still loading; send again when it is ready"
                                    : "no model loaded (see the message at the top)");
        return;
    }
    st->ctx_dirty = true;
    size_t cap = st->n_msgs + 2;
    struct engine_message *v = malloc(cap * sizeof *v);
    size_t *idx = malloc(cap * sizeof *idx);
    if (!v || !idx) {
        free(v);
        free(idx);
        return;
    }
    int32_t n = build_turns(st, v + 1, idx);
    const struct engine_message sys = {"system", st->params.system};
    struct ui_ctxfit fit;
    int frc = ui_ctxfit_run(st->params.system[0] ? &sys : NULL, v + 1, n,
                            turn_at(idx, n, st->ctx_first), b->ctx_limit, st->params.max_tokens,
                            st->params.ctx_policy, count_chat, b, &fit, err, sizeof err);
    if (frc != 0) {
        free(v);
        free(idx);
        add_error_reply(b, st, skey, "rejected", frc > 0 ? "context full: %s" : "%s", err);
        return;
    }
    st->ctx_first = fit.first < n ? idx[fit.first] : st->n_msgs;
    note_dropped(st, fit.first);
    /* the kept turns, after the system prompt */
    struct engine_message *kept = v + 1 + fit.first;
    int32_t nk = n - fit.first;
    if (st->params.system[0]) {
        *--kept = sys;
        nk++;
    }
    struct engine_request r;
    memset(&r, 0, sizeof r);
    char *plain = b->base_model ? render_plain(kept, nk) : NULL;
    if (b->base_model && !plain) {
        free(v);
        free(idx);
        return;
    }
    if (plain) {
        r.prompt = plain;
    } else {
        r.messages = kept;
        r.n_messages = nk;
    }
    engine_sampling_default(&r.sampling);
    r.sampling.temp = st->params.temp;
    r.sampling.top_p = st->params.top_p;
    r.sampling.top_k = st->params.top_k;
    r.sampling.min_p = st->params.min_p;
    r.sampling.repeat_penalty = st->params.repeat_penalty;
    r.sampling.seed = st->params.seed ? st->params.seed : (uint64_t)time(NULL);
    r.max_tokens = fit.max_tokens;
    /* Within a server's cap per request (a tenant's max_tokens), said when
     * the model loaded: over it, every message would be refused. */
    if (b->max_tokens_cap > 0 && (r.max_tokens <= 0 || r.max_tokens > b->max_tokens_cap))
        r.max_tokens = b->max_tokens_cap;
    r.priority = ENGINE_PRIO_INTERACTIVE;
    r.lookup_k = st->params.lookup_k > 0 ? st->params.lookup_k : -1; /* F4's, 0 = off */
    uint64_t id = engine_submit(b->eng, &r, &why, err, sizeof err);
    free(plain);
    free(v);
    free(idx);
    if (id == 0) {
        add_error_reply(b, st, skey, why == ENGINE_REJECTED ? "rejected" : "error",
                        why == ENGINE_REJECTED ? "rejected: %s" : "request failed: %s", err);
        return;
    }
    struct ui_msg *m = ui_state_add_msg(st, UI_ROLE_ASSISTANT, "");
    if (!m) {
        engine_cancel(b->eng, id);
        return;
    }
    m->status = UI_MSG_QUEUED;
    m->req_id = id;
    if (b->db && skey) m->key = store_reply_begin(b->db, skey);
    st->timeline_msg = st->n_msgs - 1;
    st->last_token_t = 0;
    st->tok_s = 0;
}

static const char *store_status(enum engine_status s)
{
    switch (s) {
    case ENGINE_OK:
    case ENGINE_STOP:
    case ENGINE_LENGTH:
        return "ok";
    case ENGINE_CANCELLED:
        return "cancelled";
    case ENGINE_TIMEOUT:
        return "timeout";
    case ENGINE_REJECTED:
        return "rejected";
    default:
        return "error";
    }
}

static void finish(struct ui_bridge *b, struct ui_state *st, struct ui_msg *m,
                   const struct engine_event *ev)
{
    const struct engine_metrics *mt = ev->metrics;
    struct ui_phase *ph = &m->ph;
    ph->have = true;
    if (mt) {
        ph->queue_s = mt->queue_s;
        ph->ttft_s = mt->n_generated > 0 ? mt->ttft_s : -1;
        if (mt->t_first_token > 0) ph->prefill_end = mt->t_first_token - mt->t_arrival;
        ph->decode_s = mt->decode_s;
        ph->tpot_s = mt->n_generated > 1 ? mt->tpot_s : -1;
        ph->e2e_s = mt->e2e_s;
        ph->n_prompt = mt->n_prompt;
        ph->n_cached = mt->n_cached;
        ph->n_computed = mt->n_computed;
        ph->n_generated = mt->n_generated;
        ph->n_preempted = mt->n_preempted;
        ph->n_spec_steps = mt->n_spec_steps;
        ph->n_draft = mt->n_draft_tokens;
        ph->n_accepted = mt->n_accepted_tokens;
        ph->spec_from_draft = mt->spec_from_draft;
        ph->remote = mt->remote;
        ph->connect_s = mt->connect_s;
        ph->headers_s = mt->headers_s;
        ph->server_known = mt->server.known;
        ph->srv_queue_s = mt->server.queue_s;
        ph->srv_prefill_s = mt->server.prefill_s;
        ph->srv_decode_s = mt->server.decode_s;
        ph->prefill_s = mt->prefill_s;
    }
    copy_str(ph->status, sizeof ph->status, engine_status_name(ev->status));
    struct route_trail trail;
    ph->fallback[0] = 0;
    if (route_trail(b->eng, ev->id, &trail) == 0)
        route_trail_text(b->eng, &trail, ph->fallback, sizeof ph->fallback);
    switch (ev->status) {
    case ENGINE_CANCELLED:
        m->status = UI_MSG_CANCELLED;
        ui_state_set_status(st, false, "reply cancelled; the partial text is kept");
        break;
    case ENGINE_OK:
    case ENGINE_STOP:
        m->status = UI_MSG_DONE;
        break;
    case ENGINE_LENGTH:
        m->status = UI_MSG_DONE;
        ui_msg_set_note(m, "(stopped at the token limit: F4 sets max tokens)");
        break;
    default: {
        char note[600];
        snprintf(note, sizeof note, "%s: %s", engine_status_name(ev->status),
                 ev->message ? ev->message : "no details");
        m->status = UI_MSG_ERROR;
        ui_msg_set_note(m, note);
        ui_state_set_status(st, true, "%s", note);
    }
    }
    m->req_id = 0;
    st->ctx_dirty = true;
    if (ph->ttft_s >= 0 && m->status != UI_MSG_ERROR)
        ui_state_add_latency(st, ph->ttft_s, ph->tpot_s);
    if (!b->db || !m->key) return;
    const char *sst = ev->metrics && ev->metrics->interrupted ? "interrupted"
                                                                : store_status(ev->status);
    store_reply_fail(b->db, m->key, sst,
                     m->status == UI_MSG_ERROR ? m->note : NULL, ph->n_generated);
    char *pj = ui_params_to_json(&st->params);
    struct store_request sr = {.model = st->model_name,
                               .model_file = b->model_path,
                               .backend = st->backend,
                               .params_json = pj,
                               /* the engine's word, as the live timeline showed it */
                               .status = engine_status_name(ev->status),
                               .queue_s = ph->queue_s,
                               .prefill_s = mt ? mt->prefill_s : -1,
                               .ttft_s = ph->ttft_s,
                               .tpot_s = ph->tpot_s,
                               .decode_s = ph->decode_s,
                               .e2e_s = ph->e2e_s,
                               .prompt_tokens = ph->n_prompt,
                               .cached_tokens = ph->n_cached,
                               .generated_tokens = ph->n_generated,
                               .think_s = m->think_s,
                               .think_tokens = m->think_tokens};
    char *rj = route_trail_json(b->eng, ev->id); /* NULL without --route */
    sr.route_json = rj;
    store_request_add(b->db, m->key, &sr);
    free(rj);
    free(pj);
}

static void apply(struct ui_bridge *b, struct ui_state *st, struct ui_msg *m,
                  const struct engine_event *ev)
{
    struct ui_phase *ph = &m->ph;
    switch (ev->type) {
    case ENGINE_EV_QUEUED:
        ph->have = true;
        ph->t0 = ev->t;
        ph->n_prompt = ev->total;
        ph->ttft_s = ph->tpot_s = -1; /* not yet: shown as – */
        snprintf(ph->status, sizeof ph->status, "queued");
        break;
    case ENGINE_EV_ADMITTED:
        ph->queue_s = ev->t - ph->t0;
        ph->n_cached = ev->done;
        ph->n_computed = ph->n_prompt - ev->done;
        ph->admit_t = ev->t - ph->t0;
        ph->pf_done = ev->done;
        ph->pf_total = ev->total;
        snprintf(ph->status, sizeof ph->status, "prefilling");
        break;
    case ENGINE_EV_PREFILL:
        if (ph->n_chunks < UI_MAX_CHUNKS) {
            ph->chunk_end[ph->n_chunks] = ev->t - ph->t0;
            ph->chunk_done[ph->n_chunks++] = ev->done;
        }
        ph->pf_done = ev->done;
        ph->pf_total = ev->total;
        ph->pf_t = ev->t - ph->t0;
        ph->prefill_s = ph->pf_t - ph->admit_t;
        break;
    case ENGINE_EV_FIRST_TOKEN:
        ph->prefill_end = ph->ttft_s = ev->t - ph->t0;
        snprintf(ph->status, sizeof ph->status, "decode");
        break;
    case ENGINE_EV_TOKEN: {
        size_t n = ev->text ? strlen(ev->text) : 0;
        if (ph->n_generated == 0 && m->len == 0 && b->opens_think && !b->base_model) {
            /* the prompt opened the thought: the reply's text holds it whole,
             * so the fold, the history and the copy treat it as any other */
            ui_msg_append(m, "<think>", 7);
            if (b->db && m->key) store_reply_append(b->db, m->key, "<think>", 7);
        }
        ui_msg_append(m, ev->text ? ev->text : "", n);
        if (b->db && m->key && n) store_reply_append(b->db, m->key, ev->text, n);
        m->status = UI_MSG_STREAMING;
        ph->n_generated++;
        ui_msg_track_think(m, ev->t);
        if (st->last_token_t > 0) ui_state_push_itl(st, ev->t - st->last_token_t);
        st->last_token_t = ev->t;
        ph->decode_s = ev->t - ph->t0 - ph->prefill_end;
        if (ph->n_generated > 1 && ph->decode_s > 0) {
            ph->tpot_s = ph->decode_s / (ph->n_generated - 1);
            st->tok_s = (ph->n_generated - 1) / ph->decode_s;
            st->decode_kv_bytes = decode_kv_bytes(b, ph->n_prompt, ph->n_generated);
        }
        ph->e2e_s = ev->t - ph->t0;
        break;
    }
    case ENGINE_EV_PREEMPTED:
        ph->n_preempted++;
        snprintf(ph->status, sizeof ph->status, "preempted");
        break;
    case ENGINE_EV_FINISHED:
        finish(b, st, m, ev);
        break;
    }
}

bool ui_bridge_drain(struct ui_bridge *b, struct ui_state *st)
{
    struct engine_event ev[64];
    bool any = false;
    if (!b->eng) return false;
    /* bounded so a flood of events cannot starve the keyboard */
    for (int round = 0; round < 16; round++) {
        int n = engine_poll_events(b->eng, ev, 64);
        for (int i = 0; i < n; i++) {
            struct ui_msg *m = ui_state_find_req(st, ev[i].id);
            if (m) apply(b, st, m, &ev[i]);
            engine_event_free(&ev[i]);
        }
        any |= n > 0;
        if (n < 64) break;
    }
    return any;
}

bool ui_bridge_cancel(struct ui_bridge *b, struct ui_state *st)
{
    bool any = false;
    for (size_t i = 0; i < st->n_msgs; i++) {
        struct ui_msg *m = &st->msgs[i];
        if (m->req_id && b->eng && engine_cancel(b->eng, m->req_id) == 0) any = true;
    }
    return any;
}

void ui_bridge_snapshot(struct ui_bridge *b, struct ui_state *st)
{
    if (!b->eng) return;
    engine_snapshot(b->eng, &st->stats);
    st->have_stats = true;
}

long ui_bridge_count_tokens(struct ui_bridge *b, const char *text, size_t len)
{
    char err[128];
    if (!b->eng) return -1;
    return (long)engine_count_tokens(b->eng, text, len, err, sizeof err);
}
