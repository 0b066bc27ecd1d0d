/* app: the event loop, key bindings and frames of `tern chat` (see app.h). */
#include "app.h"

#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bridge.h"
#include "chat.h"
#include "clip.h"
#include "dialog.h"
#include "input.h"
#include "inputbox.h"
#include "keymap.h"
#include "keys.h"
#include "layout.h"
#include "md.h"
#include "screen.h"
#include "term.h"
#include "text.h"
#include "theme.h"
#include "think.h"

#define FRAME_S (1.0 / 30.0)

enum action { ACT_NONE, ACT_QUIT, ACT_DELETE, ACT_RENAME, ACT_PARAMS, ACT_MODEL, ACT_SWITCH };

struct app {
    const struct ui_app_opts *o;
    struct ui_term term;
    struct ui_theme theme;
    struct ui_state st;
    struct ui_input in;
    struct ui_dialog dlg;
    struct ui_bridge br;
    struct ui_keys keys;
    struct ui_view view;
    bool dirty, quit;
    struct ui_rect overlay; /* the popup box of the last frame (h 0: none) */
    struct ui_cache_view cache; /* the F7 overlay's rows */
    /* the model picker's files (F6), and the one a question waits on */
    struct ui_model_entry *models;
    int n_models, switch_to;
    double t_start, last_frame, last_snap;
    long frames;
    /* headless key script */
    const char *script;
    bool script_wait;
    int idle_loops;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void ensure_utf8_locale(void)
{
    setlocale(LC_ALL, "");
    const char *cs = nl_langinfo(CODESET);
    if (cs && (strcmp(cs, "UTF-8") == 0 || strcmp(cs, "utf8") == 0)) return;
    /* widths and box drawing need UTF-8; the text is UTF-8 whatever LANG says */
    if (!setlocale(LC_CTYPE, "C.UTF-8")) setlocale(LC_CTYPE, "en_US.UTF-8");
}

/* ---- actions --------------------------------------------------------------- */

static bool run_cmd(struct app *a, enum ui_cmd cmd);

/* "/help", "/clear", "/model", "/bye" (as Ollama's REPL and llm have): the
 * command runs and the input is cleared; another "/word" alone is refused
 * so a typo is not sent to the model, while "/etc/hosts ..." or "/x and
 * more" is text. "//x" sends "/x". */
static bool slash_command(struct app *a)
{
    struct ui_state *st = &a->st;
    const char *t = a->in.buf;
    if (!t || t[0] != '/' || t[1] == '/' || t[1] == ' ' || t[1] == 0) return false;
    enum ui_cmd c = ui_keymap_slash(t);
    if (c == UI_CMD_NONE) {
        size_t n = strlen(t);
        while (n && (t[n - 1] == ' ' || t[n - 1] == '\n')) n--;
        for (size_t i = 1; i < n; i++)
            if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z') || t[i] == '?'))
                return false; /* not a lone command word: a message */
        ui_state_set_status(st, true, "unknown command; /help lists them (//x sends /x)");
        return true;
    }
    ui_input_clear(&a->in);
    run_cmd(a, c);
    return true;
}

static void send_input(struct app *a)
{
    struct ui_state *st = &a->st;
    if (a->in.len == 0) return;
    if (slash_command(a)) return;
    if (ui_state_streaming(st)) {
        ui_state_set_status(st, false, "a reply is streaming: wait, or Esc cancels it");
        return;
    }
    if (st->loading) {
        ui_state_set_status(st, false, "the model is still loading; your text is kept");
        return;
    }
    if (!st->engine_ok) { /* nothing to answer: no failed turn in the history, the text stays */
        ui_state_set_status(st, true, "no model loaded: F6 picks one; your text is kept");
        return;
    }
    char *text = ui_input_take(&a->in);
    if (!text) return;
    st->status[0] = 0;
    /* "//x" is the text "/x" */
    ui_bridge_send(&a->br, st, text[0] == '/' && text[1] == '/' ? text + 1 : text);
    free(text);
}

static void request_quit(struct app *a)
{
    if (ui_state_streaming(&a->st))
        ui_dialog_confirm(&a->dlg, ACT_QUIT, "quit", "A reply is streaming. Quit anyway?");
    else
        a->quit = true;
}

static void select_reply(struct app *a, int dir)
{
    struct ui_state *st = &a->st;
    size_t i = st->timeline_msg < st->n_msgs ? st->timeline_msg : st->n_msgs;
    for (;;) {
        if (dir < 0 ? i == 0 : i + 1 >= st->n_msgs) return;
        i = dir < 0 ? i - 1 : i + 1;
        if (st->msgs[i].role == UI_ROLE_ASSISTANT) break;
    }
    st->timeline_msg = i;
    a->view.show_timeline = true;
}

/* F6: the models of the models directory, described; Enter reopens the
 * engine on one. */
static void open_picker(struct app *a)
{
    struct ui_state *st = &a->st;
    char err[512];
    struct ui_model_entry *v = NULL;
    if (!a->o->list_models) {
        ui_state_set_status(st, false, "no model picker here (-m chooses the model)");
        return;
    }
    if (ui_state_streaming(st) || st->loading) {
        ui_state_set_status(st, false, "%s", st->loading ? "a model is loading; wait for it"
                                                         : "a reply is streaming: Esc cancels it first");
        return;
    }
    /* fits: the full context's KV cache in the chat's --kv-type */
    int n = a->o->list_models(a->o->models_dir, a->o->engine.backend.kv_type, &v, err, sizeof err);
    if (n < 0 && access(a->o->models_dir, F_OK) != 0) {
        n = 0; /* no models directory yet (first run): an empty picker says how to fill it */
        v = NULL;
    }
    if (n < 0) {
        ui_state_set_status(st, true, "models: %s", err);
        return;
    }
    free(a->models);
    a->models = v;
    a->n_models = n;
    ui_picker_open(&a->dlg, ACT_MODEL, v, n, st->engine_ok ? a->br.model_file : "",
                   a->o->models_dir, UI_PULL_DEFAULT);
}

static bool has_turns(const struct ui_state *st)
{
    for (size_t i = 0; i < st->n_msgs; i++)
        if (st->msgs[i].role == UI_ROLE_USER || st->msgs[i].role == UI_ROLE_ASSISTANT) return true;
    return false;
}

/* Reopens the engine on the picked file; new_session: in a new session
 * (the open one stays under F5). */
static void switch_model(struct app *a, int i, bool new_session)
{
    char path[4096];
    const struct ui_model_entry *e = &a->models[i];
    if (new_session) ui_bridge_new_session(&a->br, &a->st, NULL);
    snprintf(path, sizeof path, "%s/%s", a->o->models_dir, e->file);
    ui_bridge_switch_model(&a->br, &a->st, path);
    a->in.changed = true;
}

/* Enter in the picker: the loaded file says so; another of the same kind
 * loads into the open chat; one of the other kind (a base model mid-chat)
 * asks first, a new session the default answer. */
static void pick_model(struct app *a, int i)
{
    struct ui_state *st = &a->st;
    if (i < 0 || i >= a->n_models) return;
    const struct ui_model_entry *e = &a->models[i];
    if (!strcmp(e->file, a->br.model_file) && st->engine_ok) {
        ui_state_set_status(st, false, "%s is already loaded", e->file);
        return;
    }
    char title[96], msg[512];
    if (e->ok && has_turns(st) &&
        ui_picker_switch_question(e, st->engine_ok && st->base_model, title, sizeof title, msg,
                                  sizeof msg)) {
        a->switch_to = i;
        ui_dialog_ask(&a->dlg, ACT_SWITCH, title, msg,
                      " Enter: new session   k: keep this chat   Esc: cancel ", 'k');
        return;
    }
    switch_model(a, i, false);
    if (has_turns(st))
        ui_state_set_status(st, false, "loading %s; the chat continues with it", e->file);
}

/* The reply the timeline selects, else the newest. */
static const struct ui_msg *chosen_reply(const struct ui_state *st)
{
    if (st->timeline_msg < st->n_msgs && st->msgs[st->timeline_msg].role == UI_ROLE_ASSISTANT)
        return &st->msgs[st->timeline_msg];
    for (size_t i = st->n_msgs; i-- > 0;)
        if (st->msgs[i].role == UI_ROLE_ASSISTANT && st->msgs[i].len) return &st->msgs[i];
    return NULL;
}

/* Ctrl-Y copies the reply, Alt-Y its last code block (OSC 52). */
static void copy_reply(struct app *a, bool code)
{
    struct ui_state *st = &a->st;
    const struct ui_msg *m = chosen_reply(st);
    if (!m || !m->len) {
        ui_state_set_status(st, false, "no reply to copy");
        return;
    }
    /* the answer: a thinking model's thought is not what one pastes */
    struct ui_think th;
    ui_think_split(m->text, m->len, &th);
    const char *answer = m->text + th.answer;
    size_t answer_len = m->len - th.answer;
    char *text = NULL;
    if (code) {
        struct ui_md md;
        if (ui_md_parse(&md, answer, answer_len) == 0) {
            text = md.n_code ? ui_md_code_text(&md, md.n_code - 1) : NULL;
            ui_md_free(&md);
        }
        if (!text) {
            ui_state_set_status(st, false, "the reply has no code block");
            return;
        }
    }
    const char *s = text ? text : answer;
    size_t n = text ? strlen(text) : answer_len;
    int rc = a->o->headless ? 0 : ui_clip_osc52(a->term.out, s, n);
    a->st.copied = n;
    ui_state_set_status(st, rc != 0, rc ? "copy failed" : "copied %s (%zu bytes) to the clipboard",
                        code ? "the code block" : "the reply", n);
    free(text);
}

static void edit_last(struct app *a)
{
    struct ui_state *st = &a->st;
    if (ui_state_streaming(st)) {
        ui_state_set_status(st, false, "a reply is streaming: Esc cancels it first");
        return;
    }
    char *t = ui_bridge_take_last_user(&a->br, st);
    if (!t) {
        ui_state_set_status(st, false, "no message to edit");
        return;
    }
    ui_input_set(&a->in, t);
    free(t);
    ui_state_set_status(st, false, "editing your last message: Enter sends it again");
}

static void regenerate(struct app *a)
{
    struct ui_state *st = &a->st;
    if (ui_state_streaming(st)) {
        ui_state_set_status(st, false, "a reply is streaming: Esc cancels it first");
        return;
    }
    if (!ui_bridge_regenerate(&a->br, st))
        ui_state_set_status(st, false, "nothing to regenerate");
    else
        ui_state_set_status(st, false, "regenerating the last reply");
}

static void dialog_done(struct app *a, enum ui_dialog_result r)
{
    struct ui_state *st = &a->st;
    if (r == UI_DLG_OPEN) return;
    int act = a->dlg.action, choice = a->dlg.focus;
    if (r == UI_DLG_OK && act == ACT_PARAMS) {
        if (ui_dialog_get_params(&a->dlg, &st->params) < 0) return; /* stays open with the error */
        ui_bridge_save_params(&a->br, st);
    }
    /* closed first: an answer may open the next question */
    ui_dialog_close(&a->dlg);
    if (r == UI_DLG_ALT && act == ACT_SWITCH) switch_model(a, a->switch_to, false);
    if (r != UI_DLG_OK) return;
    switch (act) {
    case ACT_QUIT:
        a->quit = true;
        break;
    case ACT_DELETE:
        ui_bridge_delete_session(&a->br, st, st->sel);
        break;
    case ACT_RENAME:
        if (ui_dialog_text(&a->dlg)[0])
            ui_bridge_rename_session(&a->br, st, st->sel, ui_dialog_text(&a->dlg));
        break;
    case ACT_MODEL:
        pick_model(a, choice);
        break;
    case ACT_SWITCH:
        switch_model(a, a->switch_to, true);
        break;
    default:
        break;
    }
}

static void sessions_key(struct app *a, const struct ui_key *k)
{
    struct ui_state *st = &a->st;
    if (st->n_sessions == 0) return;
    if (k->fn == KEY_UP && st->sel > 0)
        st->sel--;
    else if (k->fn == KEY_DOWN && st->sel + 1 < st->n_sessions)
        st->sel++;
    else if (k->fn == 0 && k->ch == '\r') {
        if (ui_state_streaming(st)) {
            ui_state_set_status(st, false, "a reply is streaming: Esc cancels it first");
            return;
        }
        ui_bridge_open_session(&a->br, st, st->sel);
        a->view.focus_sessions = false;
    } else if (k->fn == 0 && k->ch == 'r') {
        ui_dialog_prompt(&a->dlg, ACT_RENAME, "rename session · Enter saves, Esc cancels",
                         st->sessions[st->sel].title);
    } else if (k->fn == 0 && k->ch == 'a') {
        ui_bridge_list_sessions(&a->br, st, !st->list_runs);
        ui_state_set_status(st, false, "%s", st->list_runs
                                                 ? "one-shot runs (tern run) listed too; a hides them"
                                                 : "chat sessions only; a lists one-shot runs too");
    } else if (k->fn == KEY_DC || (k->fn == 0 && k->ch == 'd')) {
        if (st->sel == st->cur && ui_state_streaming(st)) {
            ui_state_set_status(st, false, "a reply is streaming: Esc cancels it first");
            return;
        }
        char msg[160];
        snprintf(msg, sizeof msg, "Delete \"%.100s\" and its messages?",
                 st->sessions[st->sel].title);
        ui_dialog_confirm(&a->dlg, ACT_DELETE, "delete session", msg);
    }
}

static void insert_cp(struct ui_input *in, uint32_t cp)
{
    char b[4];
    ui_input_insert(in, b, ui_utf8_encode(cp, b));
}

static void input_key(struct app *a, const struct ui_key *k)
{
    struct ui_input *in = &a->in;
    switch (k->fn) {
    case 0:
        if (k->ch == '\r') {
            send_input(a);
            return;
        }
        if (k->ch == '\t') {
            insert_cp(in, ' ');
            return;
        }
        break;
    case UI_KEY_NEWLINE:
        ui_input_insert(in, "\n", 1);
        return;
    /* with nothing typed, Home/End move through the chat instead */
    case KEY_HOME:
    case KEY_END:
        if (in->len == 0) {
            a->st.scroll = k->fn == KEY_HOME ? 1 << 30 : 0;
            return;
        }
        break;
    case KEY_UP:
        if (!ui_input_line_up(in)) ui_input_hist_prev(in);
        return;
    case KEY_DOWN:
        if (!ui_input_line_down(in)) ui_input_hist_next(in);
        return;
    }
    ui_inputbox_edit_key(in, k);
}

static int page(const struct app *a)
{
    int h = a->view.layout.r_chat.h - 3;
    return h > 1 ? h : 1;
}

/* Keys that work whatever has the focus; returns true when handled. */
/* A pane shown (or asked for) that the window cannot hold says so, and how
 * wide or tall the window must be, rather than doing nothing. Returns true
 * when it said so. */
static bool say_if_hidden(struct app *a, const char *name, int which)
{
    struct ui_view *v = &a->view;
    struct ui_layout L;
    ui_layout_compute(&L, a->term.rows, a->term.cols, v->show_sessions, v->show_instruments,
                      v->show_timeline, 1);
    bool shown = which == 0 ? L.instruments : which == 1 ? L.timeline : L.sessions;
    if (shown) return false;
    /* the smallest window (of this height or width) where it shows alone */
    int need = 0;
    for (int n = 1; n <= 400 && !need; n++) {
        if (which == 1)
            ui_layout_compute(&L, n, a->term.cols, false, false, true, 1);
        else
            ui_layout_compute(&L, a->term.rows, n, which == 2, which == 0, false, 1);
        if (which == 0 ? L.instruments : which == 1 ? L.timeline : L.sessions) need = n;
    }
    if (which == 1)
        ui_state_set_status(&a->st, false, "%s %d rows (window: %d)", name, need, a->term.rows);
    else if (need && need <= a->term.cols)
        ui_state_set_status(&a->st, false, "%s room beside the other panes", name);
    else
        ui_state_set_status(&a->st, false, "%s %d columns (window: %d)", name, need, a->term.cols);
    return true;
}

/* F2/F3/F5: a pane that is on but has no room stays on and says why (the
 * key would otherwise seem dead); else the key toggles it. */
static void toggle_pane(struct app *a, bool *show, const char *name, int which)
{
    if (*show && say_if_hidden(a, name, which)) return;
    *show = !*show;
    if (*show) say_if_hidden(a, name, which);
}

/* The prompt cache as the engine lists it now (F7). */
static void cache_fill(struct app *a)
{
    struct ui_cache_view *c = &a->cache;
    static struct engine_cache_entry ce[UI_CACHE_MAX];
    c->n = 0;
    c->remote = false;
    if (!a->br.eng) return;
    struct engine_info info;
    engine_info(a->br.eng, &info);
    int n = engine_cache_list(a->br.eng, ce, UI_CACHE_MAX, false);
    c->remote = n == 0 && info.remote_url != NULL;
    for (int i = 0; i < n; i++) {
        struct ui_cache_row *r = &c->rows[c->n++];
        r->disk = ce[i].on_disk;
        r->usable = ce[i].usable;
        r->hash = ce[i].hash;
        r->tokens = ce[i].tokens;
        r->bytes = ce[i].bytes;
        r->hits = ce[i].hits;
        r->age_s = ce[i].age_s;
        snprintf(r->made_by, sizeof r->made_by, "%s", ce[i].made_by);
    }
}

/* Runs a command of the keymap (a key or a slash command); false when cmd
 * is no command this handles. */
static bool run_cmd(struct app *a, enum ui_cmd cmd)
{
    struct ui_view *v = &a->view;
    struct ui_state *st = &a->st;
    switch (cmd) {
    case UI_CMD_HELP:
        v->show_help = true;
        v->help_top = 0;
        return true;
    case UI_CMD_INSTRUMENTS:
        toggle_pane(a, &v->show_instruments, "instruments need", 0);
        return true;
    case UI_CMD_TIMELINE:
        toggle_pane(a, &v->show_timeline, "timeline needs", 1);
        return true;
    case UI_CMD_PARAMS:
        ui_dialog_params(&a->dlg, ACT_PARAMS, &st->params);
        return true;
    case UI_CMD_SESSIONS:
        toggle_pane(a, &v->show_sessions, "sessions need", 2);
        v->focus_sessions = v->show_sessions;
        st->sel = st->cur;
        return true;
    case UI_CMD_MODEL:
        open_picker(a);
        return true;
    case UI_CMD_NEW:
        if (ui_state_streaming(st)) {
            /* the reply belongs to the open transcript: it must end first */
            ui_state_set_status(st, false, "a reply is streaming: wait, or Esc cancels it");
            return true;
        }
        ui_bridge_new_session(&a->br, st, NULL);
        v->focus_sessions = false;
        ui_state_set_status(st, false, "new session");
        return true;
    case UI_CMD_COPY:
        copy_reply(a, false);
        return true;
    case UI_CMD_COPY_CODE:
        copy_reply(a, true);
        return true;
    case UI_CMD_REGEN:
        regenerate(a);
        return true;
    case UI_CMD_EDIT:
        edit_last(a);
        return true;
    case UI_CMD_THINK:
        ui_state_show_thinking(st, !st->show_thinking);
        ui_state_set_status(st, false, st->show_thinking ? "thinking shown (Alt-T folds it)"
                                                         : "thinking folded (Alt-T shows it)");
        return true;
    case UI_CMD_REDRAW:
        clearok(curscr, TRUE);
        return true;
    case UI_CMD_QUIT:
        request_quit(a);
        return true;
    case UI_CMD_CACHE:
        cache_fill(a);
        v->cache = &a->cache;
        v->show_cache = true;
        return true;
    default:
        return false;
    }
}

/* Keys that work whatever has the focus; returns true when handled. */
static bool global_key(struct app *a, const struct ui_key *k)
{
    struct ui_view *v = &a->view;
    struct ui_state *st = &a->st;
    int fn = k->fn;
    if (run_cmd(a, ui_keymap_find(fn, k->ch))) return true;
    if (fn == 0 && k->ch == '\t' && v->layout.sessions) {
        v->focus_sessions = !v->focus_sessions;
        return true;
    }
    switch (fn) {
    case UI_KEY_ESC:
        if (ui_bridge_cancel(&a->br, st))
            ui_state_set_status(st, false, "cancelling…");
        else if (v->focus_sessions)
            v->focus_sessions = false;
        return true;
    case KEY_PPAGE:
        st->scroll += page(a);
        return true;
    case KEY_NPAGE:
        st->scroll -= page(a);
        return true;
    case UI_KEY_WHEEL_UP:
        st->scroll += 3;
        return true;
    case UI_KEY_WHEEL_DOWN:
        st->scroll -= 3;
        return true;
    case UI_KEY_CTRL_HOME:
        st->scroll = 1 << 30;
        return true;
    case UI_KEY_CTRL_END:
        st->scroll = 0;
        return true;
    case UI_KEY_ALT_UP:
        select_reply(a, -1);
        return true;
    case UI_KEY_ALT_DOWN:
        select_reply(a, 1);
        return true;
    case KEY_RESIZE:
        ui_term_resize(&a->term);
        return true;
    default:
        return false;
    }
}

static void handle_key(struct app *a, const struct ui_key *k)
{
    a->dirty = true;
    if (k->fn == KEY_RESIZE) {
        ui_term_resize(&a->term);
        return;
    }
    if (a->view.show_cache) { /* any key closes the cache overlay */
        a->view.show_cache = false;
        return;
    }
    if (a->view.show_help) {
        /* a help taller than the window scrolls; any other key closes it */
        struct ui_view *v = &a->view;
        if (k->fn == KEY_DOWN || (k->fn == KEY_NPAGE && v->help_more) ||
            (k->fn == 0 && k->ch == ' ' && v->help_more))
            v->help_top += k->fn == KEY_DOWN ? 1 : a->term.rows / 2;
        else if ((k->fn == KEY_UP || k->fn == KEY_PPAGE) && v->help_top > 0)
            v->help_top -= k->fn == KEY_UP ? 1 : a->term.rows / 2;
        else
            v->show_help = false;
        return;
    }
    if (a->dlg.kind != UI_DLG_NONE) {
        dialog_done(a, ui_dialog_key(&a->dlg, k));
        return;
    }
    /* A pasted character is text, escape sequences and control characters
     * included (shown as control pictures): never Ctrl-C, Ctrl-N, ... */
    if (k->pasted && k->fn == 0 && !(a->view.focus_sessions && a->view.layout.sessions)) {
        insert_cp(&a->in, k->ch == '\t' ? ' ' : k->ch);
        return;
    }
    if (global_key(a, k)) return;
    if (a->view.focus_sessions && a->view.layout.sessions)
        sessions_key(a, k);
    else
        input_key(a, k);
}

/* ---- headless key script ------------------------------------------------------ */

/* Writes the script up to its next {wait} into the key pipe; handles
 * {resize CxR} itself. */
static void feed_script(struct app *a)
{
    while (a->script && *a->script && !a->script_wait) {
        const char *s = a->script;
        if (strncmp(s, "{wait}", 6) == 0) {
            a->script += 6;
            a->script_wait = true;
            a->idle_loops = 0;
            return;
        }
        int c, r, n = 0;
        if (sscanf(s, "{resize %dx%d}%n", &c, &r, &n) == 2 && n > 0) {
            a->script += n;
            resize_term(r, c);
            ui_term_resize(&a->term);
            a->dirty = true;
            continue;
        }
        const char *e = s + 1;
        while (*e && *e != '{') e++;
        (void)!write(a->term.key_wr, s, (size_t)(e - s));
        a->script = e;
    }
}

static void script_step(struct app *a, bool got_keys)
{
    if (!a->o->headless) return;
    if (a->script_wait) {
        bool idle = !a->st.loading && !ui_state_streaming(&a->st) && !got_keys;
        a->idle_loops = idle ? a->idle_loops + 1 : 0;
        if (a->idle_loops >= 3) a->script_wait = false;
    }
    feed_script(a);
    if ((!a->script || !*a->script) && !a->script_wait && !got_keys && !a->st.loading &&
        !ui_state_streaming(&a->st))
        a->idle_loops++;
    if (a->idle_loops > 6 && (!a->script || !*a->script)) a->quit = true;
    if (a->o->max_frames > 0 && a->frames >= a->o->max_frames) a->quit = true;
}

/* ---- frames ---------------------------------------------------------------- */

/* A popup's border over a wide character (CJK) splits it: the terminal
 * blanks the whole character while curses believes its other half still
 * shows, so when the popup goes (or moves) curses skips the cells it
 * thinks unchanged and a half-drawn line stays until Ctrl-L. The rows a
 * popup covered, before and now, are repainted whole whenever it opens,
 * closes, moves or resizes. */
static void repaint_overlay_rows(struct app *a)
{
    struct ui_rect o = a->overlay, n = a->view.overlay;
    if (o.y == n.y && o.h == n.h && o.x == n.x && o.w == n.w) return;
    int y0 = o.h && (!n.h || o.y < n.y) ? o.y : n.y;
    int y1 = o.y + o.h > n.y + n.h ? o.y + o.h : n.y + n.h;
    if (y1 > a->term.rows) y1 = a->term.rows;
    if (y1 > y0) wredrawln(stdscr, y0, y1 - y0);
    a->overlay = n;
}

static void frame(struct app *a)
{
    struct ui_state *st = &a->st;
    if (a->in.changed && st->engine_ok) {
        a->in.tokens = ui_bridge_count_tokens(&a->br, a->in.buf ? a->in.buf : "", a->in.len);
        a->in.changed = false;
        st->ctx_dirty = true;
    }
    if (st->ctx_dirty && st->engine_ok && !ui_state_streaming(st)) {
        /* the whole next prompt: recounted per edit, at most once a frame */
        st->ctx_tokens = (int32_t)ui_bridge_next_prompt_tokens(&a->br, st, a->in.buf);
        st->ctx_dirty = false;
    } else if (!st->engine_ok) {
        a->in.tokens = -1;
        st->ctx_tokens = -1;
    }
    a->in.ctx_tokens = st->ctx_tokens;
    a->in.ctx_limit = st->n_ctx;
    ui_screen_draw(stdscr, a->term.rows, a->term.cols, &a->view);
    repaint_overlay_rows(a);
    if (a->view.cursor) {
        curs_set(1);
        wmove(stdscr, a->view.cur_y, a->view.cur_x);
    } else {
        curs_set(0);
    }
    wnoutrefresh(stdscr);
    doupdate();
    a->frames++;
    a->dirty = false;
    a->last_frame = now_s();
}

static void on_signal(struct app *a)
{
    int sig = ui_term_signal();
    if (sig) a->quit = true; /* SIGINT, SIGTERM, SIGHUP: leave cleanly */
}

static int poll_timeout_ms(const struct app *a)
{
    double t = now_s();
    if (a->dirty) {
        double wait = a->last_frame + FRAME_S - t;
        return wait > 0 ? (int)(wait * 1000) + 1 : 0;
    }
    if (a->o->headless) return 20;
    return ui_state_streaming(&a->st) ? 100 : 500;
}

static void loop(struct app *a)
{
    while (!a->quit) {
        struct pollfd p[4];
        int n = 0;
        p[n++] = (struct pollfd){a->term.in_fd, POLLIN, 0};
        p[n++] = (struct pollfd){ui_term_signal_fd(), POLLIN, 0};
        int lfd = ui_bridge_load_fd(&a->br), efd = ui_bridge_event_fd(&a->br);
        if (lfd >= 0) p[n++] = (struct pollfd){lfd, POLLIN, 0};
        if (efd >= 0) p[n++] = (struct pollfd){efd, POLLIN, 0};
        int r = poll(p, (nfds_t)n, poll_timeout_ms(a));
        if (r < 0 && errno != EINTR) break;
        if (p[1].revents & POLLIN) on_signal(a);
        if (lfd >= 0 && (p[2].revents & POLLIN)) {
            ui_bridge_load_done(&a->br, &a->st);
            a->in.changed = true;
            a->dirty = true;
        }
        if (ui_bridge_drain(&a->br, &a->st)) {
            a->dirty = true;
            if (!ui_state_streaming(&a->st))
                a->last_snap = 0; /* show the finished reply's effect */
        }
        /* keys are read after every wake-up: a resize interrupts poll() and
         * arrives as KEY_RESIZE */
        struct ui_key k;
        bool got = false;
        for (int i = 0; i < 4096 && ui_keys_read(&a->keys, &k); i++) {
            handle_key(a, &k);
            got = true;
        }
        double t = now_s();
        if (a->st.engine_ok && t - a->last_snap > (ui_state_streaming(&a->st) ? 0.2 : 1.0)) {
            ui_bridge_snapshot(&a->br, &a->st);
            a->last_snap = t;
            a->dirty = true;
        }
        script_step(a, got);
        if (a->dirty && t - a->last_frame >= FRAME_S) frame(a);
    }
}

/* Cancels what streams and lets the engine report it, so the store keeps
 * the partial reply as cancelled rather than interrupted. */
static void wind_down(struct app *a)
{
    if (!ui_bridge_cancel(&a->br, &a->st)) return;
    double until = now_s() + 2.0;
    while (ui_state_streaming(&a->st) && now_s() < until) {
        if (a->br.eng) engine_wait_events(a->br.eng, 0, 0.1);
        ui_bridge_drain(&a->br, &a->st);
    }
}

static char *dump_screen(const struct app *a)
{
    size_t cap = (size_t)a->term.rows * ((size_t)a->term.cols * 4 + 2) + 1, o = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    for (int y = 0; y < a->term.rows; y++) {
        wchar_t wb[1024];
        int n = mvwinnwstr(stdscr, y, 0, wb, 1023);
        for (int i = 0; i < n && o + 5 < cap; i++) o += ui_utf8_encode((uint32_t)wb[i], out + o);
        out[o++] = '\n';
    }
    out[o] = 0;
    return out;
}

int ui_app_run(const struct ui_app_opts *o, char *err, size_t errlen)
{
    struct app a;
    memset(&a, 0, sizeof a);
    a.o = o;
    a.script = o->keys;
    a.t_start = now_s();
    ensure_utf8_locale();
    ui_state_init(&a.st);
    if (o->set_temp) a.st.defaults.temp = (float)o->temp;
    /* --lookup / --lookup-k: the F4 default of every session */
    if (o->engine.lookup_k > 0) a.st.defaults.lookup_k = o->engine.lookup_k;
    if (o->top_p > 0) a.st.defaults.top_p = (float)o->top_p;
    if (o->max_tokens > 0) a.st.defaults.max_tokens = o->max_tokens;
    if (o->top_k >= 0) a.st.defaults.top_k = (int32_t)o->top_k;
    if (o->min_p >= 0) a.st.defaults.min_p = (float)o->min_p;
    if (o->repeat_penalty >= 0) a.st.defaults.repeat_penalty = (float)o->repeat_penalty;
    if (o->seed >= 0) a.st.defaults.seed = (uint64_t)o->seed;
    if (o->set_ctx_policy) a.st.defaults.ctx_policy = (enum ui_ctx_policy)o->ctx_policy;
    if (o->system) snprintf(a.st.defaults.system, sizeof a.st.defaults.system, "%s", o->system);
    a.st.params = a.st.defaults;
    ui_input_init(&a.in);
    ui_dialog_init(&a.dlg);
    if (ui_term_open(&a.term, o->headless, o->rows > 0 ? o->rows : 24, o->cols > 0 ? o->cols : 80,
                     o->no_color || ui_theme_no_color_env(), err, errlen) < 0) {
        ui_dialog_free(&a.dlg);
        ui_input_free(&a.in);
        ui_state_free(&a.st);
        return 1;
    }
    ui_theme_init(&a.theme, a.term.color);
    ui_keys_init(&a.keys, stdscr);
    a.view = (struct ui_view){
        .st = &a.st, .in = &a.in, .dlg = &a.dlg, .theme = &a.theme, .show_instruments = true};
    int rc = 0;
    if (ui_bridge_open_with(&a.br, &a.st, &o->engine, o->open_engine, o->open_ud, o->db_path,
                            o->model_error, err, errlen) < 0) {
        rc = 1;
    } else {
        /* the chat's own sessions (one-shot runs listed on request); a new
         * session unless asked to continue the newest (-c), the others under F5 */
        ui_bridge_list_sessions(&a.br, &a.st, false);
        if (o->resume && a.st.n_sessions > 0) {
            ui_bridge_open_session(&a.br, &a.st, 0);
        } else {
            ui_bridge_new_session(&a.br, &a.st, NULL);
            if (o->resume)
                ui_state_set_status(&a.st, false, "no chat session to continue: a new one");
        }
        a.dirty = true;
        loop(&a);
        wind_down(&a);
    }
    char *screen = o->headless ? dump_screen(&a) : NULL;
    ui_term_close(&a.term);
    ui_bridge_close(&a.br);
    if (screen) {
        fputs(screen, stdout);
        free(screen);
        fprintf(stderr, "headless: %ld frames in %.3f s\n", a.frames, now_s() - a.t_start);
    }
    free(a.models);
    ui_dialog_free(&a.dlg);
    ui_input_free(&a.in);
    ui_state_free(&a.st);
    return rc;
}
