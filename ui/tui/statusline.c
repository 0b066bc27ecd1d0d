/* statusline: key hints and messages on the last line (see statusline.h). */
#include "statusline.h"

#include <string.h>

#include "text.h"

struct hint {
    const char *key, *what;
};

static const struct hint chat_hints[] = {
    {"F1", "help"},     {"Enter", "send"}, {"Esc", "cancel"},  {"F2", "gauges"},
    {"F3", "timeline"}, {"F4", "params"},  {"F5", "sessions"}, {"F6", "model"},
    {"F10", "quit"},
};
static const struct hint list_hints[] = {
    {"Enter", "open"}, {"^N", "new"},  {"r", "rename"}, {"Del", "delete"},
    {"Tab", "chat"},   {"F1", "help"}, {"F10", "quit"},
};

void ui_statusline_draw(WINDOW *w, struct ui_rect r, const struct ui_state *s,
                        const struct ui_theme *t, bool sessions_focused)
{
    ui_draw_fill(w, r.y, r.x, r.w, t->a[UI_C_STATUS], " ");
    int x = r.x, end = r.x + r.w;
    if (s->status[0]) {
        attr_t a = s->status_error ? t->a[UI_C_ERROR] : t->a[UI_C_STATUS] | A_BOLD;
        x += ui_draw_fmt(w, r.y, x, end - x, a, " %s ", s->status);
        x += 1;
    }
    const struct hint *h = sessions_focused ? list_hints : chat_hints;
    size_t n = sessions_focused ? sizeof list_hints / sizeof *h : sizeof chat_hints / sizeof *h;
    for (size_t i = 0; i < n; i++) {
        int need = ui_text_width(h[i].key, strlen(h[i].key)) +
                   ui_text_width(h[i].what, strlen(h[i].what)) + 2;
        if (x + need > end) break;
        x += ui_draw_str(w, r.y, x, end - x, t->a[UI_C_KEY], h[i].key);
        x += ui_draw_fmt(w, r.y, x, end - x, t->a[UI_C_STATUS], " %s ", h[i].what);
    }
}
