/* app: `tern chat`'s event loop. One thread polls the keyboard, the
 * engine's event fd, the model loader and the signal pipe, applies what
 * arrived to the UI state and draws at most ~30 frames a second, only when
 * something changed (ncurses then sends only the changed cells, with one
 * refresh per frame). The engine does all computing on its own threads. */
#ifndef TERN_UI_APP_H
#define TERN_UI_APP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bridge.h"
#include "engine.h"
#include "picker.h"

struct ui_app_opts {
    struct engine_config engine; /* model_path and backend settings */
    /* How the engine is opened from it (the command's --route makes a
     * fallback route); NULL = engine_open. */
    ui_engine_open_fn *open_engine;
    void *open_ud;
    const char *db_path;         /* NULL: the default history database */
    const char *model_error;     /* no model path could be found: shown instead of loading */
    bool no_color;               /* also when NO_COLOR is set */
    /* parameters of new sessions; 0 / NULL keep the defaults */
    double temp, top_p;
    int32_t max_tokens;
    const char *system;
    bool resume; /* -c: continue the newest chat session (else a new one) */
    /* the model picker (F6): the models directory and how to list and
     * describe its files (the app reads their headers: kind, quant, size,
     * context, whether it fits in memory with a KV cache of type kv);
     * the count, or -1 with err; *out freed with free(). list NULL: no
     * picker */
    const char *models_dir;
    int (*list_models)(const char *dir, enum kv_type kv, struct ui_model_entry **out, char *err,
                       size_t errlen);
    bool set_temp;
    bool set_ctx_policy;
    /* the other sampling flags of run (< 0: default) */
    long top_k, seed;
    double min_p, repeat_penalty;
    int ctx_policy; /* enum ui_ctx_policy */
    /* headless: an off-screen rows x cols terminal, keys from `keys`
     * ("\r" Enter, "\x1b" Esc, "{wait}" waits until the model is loaded and
     * no reply streams, "{resize CxR}" resizes); quits when the keys are
     * used up and nothing streams, or after max_frames frames. The last
     * frame is printed to stdout. */
    bool headless;
    int rows, cols;
    long max_frames;
    const char *keys;
};

/* Runs the UI until the user quits. Returns the exit status (0, or 1 with
 * err when the terminal could not be set up). */
int ui_app_run(const struct ui_app_opts *o, char *err, size_t errlen);

#endif
