/* draw: small drawing helpers shared by the panes: width-exact text into a
 * column budget, filling, horizontal rules and boxes. Pane rectangles are
 * given in window coordinates. */
#ifndef TERN_UI_DRAW_H
#define TERN_UI_DRAW_H

#include <stddef.h>

#include "uicurses.h"

struct ui_rect {
    int y, x, h, w;
};

/* Draws s[0..n) at (y, x) in at most maxw columns with attr; control
 * characters become spaces and a wide character that would not fit is
 * left out. Returns the columns drawn. */
int ui_draw_text(WINDOW *w, int y, int x, int maxw, attr_t attr, const char *s, size_t n);
/* The same for a NUL-terminated string. */
int ui_draw_str(WINDOW *w, int y, int x, int maxw, attr_t attr, const char *s);
/* The same, a string wider than maxw shortened in the middle
 * ("SmolLM2-135M…Q4_1.gguf"), so both its start and its end show. */
int ui_draw_mid(WINDOW *w, int y, int x, int maxw, attr_t attr, const char *s);
/* printf-style into at most maxw columns. */
int ui_draw_fmt(WINDOW *w, int y, int x, int maxw, attr_t attr, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void ui_draw_fill(WINDOW *w, int y, int x, int n, attr_t attr, const char *cell);
/* A box around r with a title in its top border; the inside is cleared. */
void ui_draw_box(WINDOW *w, struct ui_rect r, attr_t border, const char *title);
void ui_draw_clear(WINDOW *w, struct ui_rect r);

#endif
