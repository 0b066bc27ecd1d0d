/* draw: width-exact text and boxes for the panes (see draw.h). */
#include "draw.h"

#include <stdarg.h>
#include <stdio.h>

#include "text.h"

int ui_draw_text(WINDOW *w, int y, int x, int maxw, attr_t attr, const char *s, size_t n)
{
    int col = 0;
    if (maxw <= 0) return 0;
    wattrset(w, attr);
    wmove(w, y, x);
    for (size_t i = 0; i < n;) {
        int gw;
        size_t k = ui_grapheme(s + i, n - i, &gw);
        if (col + gw > maxw) break;
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7F)
            waddch(w, ' '); /* tabs and controls: one blank cell, as text.c counts them */
        else
            waddnstr(w, s + i, (int)k);
        col += gw;
        i += k;
    }
    wattrset(w, A_NORMAL);
    return col;
}

int ui_draw_str(WINDOW *w, int y, int x, int maxw, attr_t attr, const char *s)
{
    size_t n = 0;
    while (s[n]) n++;
    return ui_draw_text(w, y, x, maxw, attr, s, n);
}

int ui_draw_fmt(WINDOW *w, int y, int x, int maxw, attr_t attr, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return ui_draw_str(w, y, x, maxw, attr, buf);
}

void ui_draw_fill(WINDOW *w, int y, int x, int n, attr_t attr, const char *cell)
{
    wattrset(w, attr);
    wmove(w, y, x);
    for (int i = 0; i < n; i++) waddstr(w, cell);
    wattrset(w, A_NORMAL);
}

void ui_draw_clear(WINDOW *w, struct ui_rect r)
{
    for (int y = 0; y < r.h; y++) ui_draw_fill(w, r.y + y, r.x, r.w, A_NORMAL, " ");
}

void ui_draw_box(WINDOW *w, struct ui_rect r, attr_t border, const char *title)
{
    if (r.h < 2 || r.w < 2) return;
    ui_draw_clear(w, r);
    ui_draw_fill(w, r.y, r.x + 1, r.w - 2, border, "─");
    ui_draw_fill(w, r.y + r.h - 1, r.x + 1, r.w - 2, border, "─");
    for (int y = 1; y < r.h - 1; y++) {
        ui_draw_str(w, r.y + y, r.x, 1, border, "│");
        ui_draw_str(w, r.y + y, r.x + r.w - 1, 1, border, "│");
    }
    ui_draw_str(w, r.y, r.x, 1, border, "┌");
    ui_draw_str(w, r.y, r.x + r.w - 1, 1, border, "┐");
    ui_draw_str(w, r.y + r.h - 1, r.x, 1, border, "└");
    ui_draw_str(w, r.y + r.h - 1, r.x + r.w - 1, 1, border, "┘");
    if (title && *title) {
        int tw = ui_draw_fmt(w, r.y, r.x + 2, r.w - 4, border | A_BOLD, " %s ", title);
        (void)tw;
    }
}
