/* statusline: key hints and messages on the last line (see statusline.h). */
#include "statusline.h"

#include <string.h>

#include "keymap.h"
#include "text.h"

/* The message in maxw columns, cut at a word (with "…") when longer. */
static int draw_message(WINDOW *w, int y, int x, int maxw, attr_t a, const char *msg)
{
    size_t n = strlen(msg);
    int tw = ui_text_width(msg, n);
    if (maxw < 4) return 0;
    if (tw + 2 <= maxw) return ui_draw_fmt(w, y, x, maxw, a, " %s ", msg);
    struct ui_wrap wr;
    size_t st, len;
    int used;
    ui_wrap_init(&wr, msg, n, maxw - 3); /* " " text "…" */
    if (!ui_wrap_next(&wr, &st, &len, &used)) return 0;
    while (len && msg[st + len - 1] == ' ') len--;
    int c = ui_draw_str(w, y, x, 1, a, " ");
    c += ui_draw_text(w, y, x + c, maxw - c, a, msg + st, len);
    c += ui_draw_str(w, y, x + c, maxw - c, a, "…");
    return c;
}

void ui_statusline_draw(WINDOW *w, struct ui_rect r, const struct ui_state *s,
                        const struct ui_theme *t, bool sessions_focused)
{
    ui_draw_fill(w, r.y, r.x, r.w, t->a[UI_C_STATUS], " ");
    const struct ui_binding *b = sessions_focused ? ui_list_bar : ui_bindings;
    size_t n = sessions_focused ? ui_n_list_bar : ui_n_bindings;
    int x = r.x, end = r.x + r.w;
    if (s->status[0]) {
        attr_t a = s->status_error ? t->a[UI_C_ERROR] : t->a[UI_C_STATUS] | A_BOLD;
        /* beside F1 and F10 when it fits there; else the whole line is
         * the message's (the keys return with the next message) */
        int room = r.w - ui_keybar_min(b, n) - 1;
        int mw = ui_text_width(s->status, strlen(s->status)) + 2;
        x += draw_message(w, r.y, x, mw <= room ? room : r.w, a, s->status);
        x += 1;
    }
    int level[32];
    if (n > sizeof level / sizeof level[0]) n = sizeof level / sizeof level[0];
    ui_keybar_fit(b, n, end - x, level);
    for (size_t i = 0; i < n; i++) {
        if (level[i] < 0) continue;
        const char *l = b[i].bar[level[i]];
        x += ui_draw_str(w, r.y, x, end - x, t->a[UI_C_KEY], b[i].bar_key);
        if (l && l[0])
            x += ui_draw_fmt(w, r.y, x, end - x, t->a[UI_C_STATUS], " %s ", l);
        else
            x += ui_draw_str(w, r.y, x, end - x, t->a[UI_C_STATUS], " ");
    }
}
