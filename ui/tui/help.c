/* help: the key reference overlay (see help.h). */
#include "help.h"

#include <string.h>

#include "keymap.h"
#include "text.h"

static int str_w(const char *s)
{
    return ui_text_width(s, strlen(s));
}

/* One pass over the table: counts the lines at text width tw and, with w
 * set, draws those from top on into rows y0.. of the box. */
static int lay_out(WINDOW *w, int y0, int rows, int top, int x, int kw, int tw,
                   const struct ui_theme *t)
{
    int line = 0;
    for (size_t i = 0; i < ui_n_bindings; i++) {
        const struct ui_binding *b = &ui_bindings[i];
        if (!b->keys) continue;
        struct ui_wrap wr;
        size_t st, len;
        int used;
        bool first = true;
        if (str_w(b->keys) > kw) { /* a long key list takes a line of its own */
            int y = line - top;
            if (w && y >= 0 && y < rows)
                ui_draw_str(w, y0 + y, x, kw + 2 + tw, t->a[UI_C_USER], b->keys);
            first = false;
            line++;
        }
        ui_wrap_init(&wr, b->what, strlen(b->what), tw);
        while (ui_wrap_next(&wr, &st, &len, &used)) {
            int y = line - top;
            if (w && y >= 0 && y < rows) {
                if (first) ui_draw_str(w, y0 + y, x, kw, t->a[UI_C_USER], b->keys);
                ui_draw_text(w, y0 + y, x + kw + 2, tw, t->a[UI_C_NORMAL], b->what + st, len);
            }
            first = false;
            line++;
        }
    }
    return line;
}

bool ui_help_draw(WINDOW *w, struct ui_rect screen, const struct ui_theme *t, int *top,
                  struct ui_rect *box)
{
    /* the key column as wide as its widest entry, within a third of the box */
    int kw = 0;
    for (size_t i = 0; i < ui_n_bindings; i++)
        if (ui_bindings[i].keys && str_w(ui_bindings[i].keys) > kw) kw = str_w(ui_bindings[i].keys);
    int bw = screen.w < 84 ? screen.w : 84;
    if (kw > bw / 3) kw = bw / 3;
    int tw = bw - 4 - kw - 2;
    if (tw < 8) tw = 8;
    int lines = lay_out(NULL, 0, 0, 0, 0, kw, tw, t);
    int bh = lines + 2 < screen.h ? lines + 2 : screen.h;
    int rows = bh - 2;
    if (*top > lines - rows) *top = lines - rows;
    if (*top < 0) *top = 0;
    bool more = *top + rows < lines;
    struct ui_rect r = {screen.y + (screen.h - bh) / 2, screen.x + (screen.w - bw) / 2, bh, bw};
    *box = r;
    ui_draw_box(w, r, t->a[UI_C_TITLE],
                more || *top ? "keys · ↓/↑ scroll · other keys close" : "keys · any key closes");
    lay_out(w, r.y + 1, rows, *top, r.x + 2, kw, tw, t);
    return more;
}
