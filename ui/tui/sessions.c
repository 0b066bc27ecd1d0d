/* sessions: the sessions list pane (see sessions.h). */
#include "sessions.h"

#include <stdio.h>
#include <time.h>

void ui_sessions_draw(WINDOW *w, struct ui_rect r, const struct ui_state *s,
                      const struct ui_theme *t, bool focused)
{
    ui_draw_box(w, r, focused ? t->a[UI_C_USER] : t->a[UI_C_TITLE],
                s->list_runs ? "sessions+runs" : "sessions F5");
    struct ui_rect in = {r.y + 1, r.x + 1, r.h - 2, r.w - 2};
    if (in.h < 2 || in.w < 4) return;
    if (!s->store_ok) ui_draw_str(w, in.y + in.h - 1, in.x, in.w, t->a[UI_C_WARN], "history off");
    /* two rows per session; keep the selection in view */
    int per = 2, fit = in.h / per;
    size_t first = s->sel >= (size_t)fit ? s->sel - (size_t)fit + 1 : 0;
    for (size_t i = first; i < s->n_sessions && (int)(i - first) < fit; i++) {
        const struct ui_session *se = &s->sessions[i];
        int y = in.y + (int)(i - first) * per;
        attr_t a = focused && i == s->sel ? t->a[UI_C_SEL]
                   : i == s->cur          ? A_BOLD
                                          : t->a[UI_C_NORMAL];
        ui_draw_fill(w, y, in.x, in.w, a, " ");
        ui_draw_str(w, y, in.x, 2, a, i == s->cur ? "▶" : " ");
        /* a one-shot `tern run` exchange (listed with a) says so first */
        ui_draw_fmt(w, y, in.x + 2, in.w - 2, a, "%s%s", se->run ? "run: " : "",
                    se->title && se->title[0] ? se->title : "(untitled)");
        char date[32] = "";
        if (se->created > 0) {
            time_t tt = (time_t)se->created;
            struct tm tm;
            localtime_r(&tt, &tm);
            strftime(date, sizeof date, "%m-%d %H:%M", &tm);
        }
        ui_draw_str(w, y + 1, in.x + 2, in.w - 2, t->a[UI_C_DIM], date);
    }
}
