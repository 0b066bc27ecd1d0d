/* draw: width-exact text and boxes for the panes (see draw.h). */
#include "draw.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

#include "text.h"

static void ui_draw_raw(WINDOW *w, const char *s, size_t n)
{
    waddnstr(w, s, (int)n);
}

/* One grapheme of k bytes, never raw control bytes: a tab is a blank; other
 * controls show as their Unicode control picture (ESC as ␛, one cell, as
 * text.c counts them), invalid UTF-8 and non-printable code points as U+FFFD.
 * Text from a model or a paste can hold anything; the terminal only ever
 * gets printable characters. */
static void draw_cell(WINDOW *w, const char *s, size_t n, size_t k)
{
    unsigned char c = (unsigned char)s[0];
    uint32_t cp;
    size_t l = ui_utf8_decode(s, n, &cp);
    if (c == '\t') {
        waddch(w, ' ');
    } else if (c < 0x20 || c == 0x7F) {
        char pic[4];
        ui_draw_raw(w, pic, ui_utf8_encode(c == 0x7F ? 0x2421 : 0x2400 + c, pic));
    } else if ((cp == UI_REPLACEMENT && !(l == 3 && !memcmp(s, "\xEF\xBF\xBD", 3))) ||
               (cp >= 0x80 && wcwidth((wchar_t)cp) < 0)) {
        ui_draw_raw(w, "\xEF\xBF\xBD", 3);
    } else {
        ui_draw_raw(w, s, k);
    }
}

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
        draw_cell(w, s + i, n - i, k);
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

int ui_draw_mid(WINDOW *w, int y, int x, int maxw, attr_t attr, const char *s)
{
    size_t n = strlen(s);
    int total = ui_text_width(s, n);
    if (total <= maxw || maxw < 5) return ui_draw_text(w, y, x, maxw, attr, s, n);
    int head_w = (maxw - 1) / 2, tail_w = maxw - 1 - head_w;
    /* the tail: graphemes from the end while they fit */
    size_t tail = n;
    int tw = 0;
    while (tail > 0) {
        size_t p = tail - 1;
        while (p > 0 && ((unsigned char)s[p] & 0xC0) == 0x80) p--;
        int gw = ui_text_width(s + p, tail - p);
        if (tw + gw > tail_w) break;
        tw += gw;
        tail = p;
    }
    int col = ui_draw_text(w, y, x, head_w + (tail_w - tw), attr, s, n);
    col += ui_draw_text(w, y, x + col, 1, attr, "…", strlen("…"));
    col += ui_draw_text(w, y, x + col, maxw - col, attr, s + tail, n - tail);
    return col;
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
