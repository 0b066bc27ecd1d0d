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
    v->overlay = (struct ui_rect){0, 0, 0, 0};
    if (rows < UI_MIN_ROWS || cols < UI_MIN_COLS) {
        /* said in the words that fit, each line whole, centred */
        char l0[64], l1[64];
        snprintf(l0, sizeof l0, "%dx%d is too small", cols, rows);
        snprintf(l1, sizeof l1, "tern needs %dx%d", UI_MIN_COLS, UI_MIN_ROWS);
        const char *lines[] = {l0, l1, "F10 or Ctrl-C quits"};
        const char *tight[] = {"too small", l1 + 11, "^C quits"};
        int n = 3, y0 = rows > n ? (rows - n) / 2 : 0;
        for (int i = 0; i < n && y0 + i < rows; i++) {
            const char *l = (int)strlen(lines[i]) <= cols ? lines[i] : tight[i];
            int lw = (int)strlen(l);
            int x = lw < cols ? (cols - lw) / 2 : 0;
            ui_draw_str(w, y0 + i, x, cols - x, t->a[UI_C_WARN], l);
        }
        return;
    }
    /* the input box's height depends on its own width, known from a first pass */
    struct ui_layout *L = &v->layout;
    ui_layout_compute(L, rows, cols, v->show_sessions, v->show_instruments, v->show_timeline, 1);
    int want = ui_inputbox_lines(v->in, L->r_input.w);
    ui_layout_compute(L, rows, cols, v->show_sessions, v->show_instruments, v->show_timeline, want);

    char title[160];
    chat_title(s, title, sizeof title);
    ui_chat_draw(w, L->r_chat, s, t, title, L->timeline);
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
        v->help_more = ui_help_draw(w, all, t, &v->help_top, &v->overlay);
        v->cursor = false;
    }
    if (v->show_cache && v->cache) {
        ui_cache_draw(w, all, t, v->cache, &v->overlay);
        v->cursor = false;
    }
    if (v->dlg && v->dlg->kind != UI_DLG_NONE) {
        struct ui_rect box;
        v->cursor = v->dlg->kind != UI_DLG_CONFIRM && v->dlg->kind != UI_DLG_LIST;
        ui_dialog_draw(w, all, v->dlg, t, &v->cur_y, &v->cur_x, &box);
        if (v->overlay.h == 0) {
            v->overlay = box;
        } else { /* over the help: the rows of both */
            int y1 = v->overlay.y + v->overlay.h;
            if (box.y < v->overlay.y) v->overlay.y = box.y;
            if (box.y + box.h > y1) y1 = box.y + box.h;
            v->overlay.h = y1 - v->overlay.y;
        }
    }
}
