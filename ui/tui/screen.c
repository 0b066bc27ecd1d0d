/* screen: one frame of the whole UI (see screen.h). */
#include "screen.h"

#include <stdio.h>
#include <string.h>

#include "chat.h"
#include "help.h"
#include "inputbox.h"
#include "instruments.h"
#include "sessions.h"
#include "statusline.h"
#include "text.h"
#include "timeline.h"

static void chat_title(const struct ui_state *s, char *buf, size_t n)
{
    const char *t = s->n_sessions && s->sessions[s->cur].title && s->sessions[s->cur].title[0]
                        ? s->sessions[s->cur].title
                        : "new chat";
    if (s->loading)
        snprintf(buf, n, "%s · loading model…", t);
    else
        snprintf(buf, n, "%s", t);
}

void ui_screen_draw(WINDOW *w, int rows, int cols, struct ui_view *v)
{
    struct ui_state *s = v->st;
    const struct ui_theme *t = v->theme;
    werase(w);
    v->cursor = false;
    if (rows < UI_MIN_ROWS || cols < UI_MIN_COLS) {
        ui_draw_fmt(w, 0, 0, cols, t->a[UI_C_WARN], "terminal too small (%dx%d);", cols, rows);
        ui_draw_fmt(w, 1, 0, cols, t->a[UI_C_WARN], "need %dx%d. F10 quits.", UI_MIN_COLS,
                    UI_MIN_ROWS);
        return;
    }
    /* the input box's height depends on its own width, known from a first pass */
    struct ui_layout *L = &v->layout;
    ui_layout_compute(L, rows, cols, v->show_sessions, v->show_instruments, v->show_timeline, 1);
    int want = ui_inputbox_lines(v->in, L->r_input.w);
    ui_layout_compute(L, rows, cols, v->show_sessions, v->show_instruments, v->show_timeline, want);

    char title[160];
    chat_title(s, title, sizeof title);
    /* lasting problems (no model, no history) take the chat's top rows */
    struct ui_rect rc = L->r_chat;
    for (int i = 0; i < 2; i++) {
        struct ui_wrap wr;
        size_t st, len;
        int used;
        if (!s->alert[i][0]) continue;
        ui_wrap_init(&wr, s->alert[i], strlen(s->alert[i]), rc.w - 2);
        for (int k = 0; k < 3 && rc.h >= 6 && ui_wrap_next(&wr, &st, &len, &used); k++) {
            ui_draw_fill(w, rc.y, rc.x, rc.w, t->a[UI_C_ERROR], " ");
            ui_draw_text(w, rc.y, rc.x + 1, rc.w - 2, t->a[UI_C_ERROR], s->alert[i] + st, len);
            rc.y++, rc.h--;
        }
    }
    ui_chat_draw(w, rc, s, t, title, L->timeline);
    if (L->timeline) ui_timeline_draw(w, L->r_timeline, s, t);
    if (L->sessions) ui_sessions_draw(w, L->r_sessions, s, t, v->focus_sessions);
    if (L->instruments) ui_instruments_draw(w, L->r_instruments, s, t);
    ui_inputbox_draw(w, L->r_input, v->in, t, !v->focus_sessions,
                     s->loading ? "the model is loading; type away" : "Type a message, Enter sends",
                     &v->cur_y, &v->cur_x);
    v->cursor = !v->focus_sessions;
    ui_statusline_draw(w, L->r_status, s, t, v->focus_sessions && L->sessions);
    struct ui_rect all = {0, 0, rows - 1, cols};
    if (v->show_help) {
        ui_help_draw(w, all, t);
        v->cursor = false;
    }
    if (v->dlg && v->dlg->kind != UI_DLG_NONE) {
        v->cursor = v->dlg->kind != UI_DLG_CONFIRM && v->dlg->kind != UI_DLG_LIST;
        ui_dialog_draw(w, all, v->dlg, t, &v->cur_y, &v->cur_x);
    }
}
