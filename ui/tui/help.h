/* help: the F1 overlay listing every key (from the keymap table), sized to
 * the screen, its text wrapped at words; taller than the screen, it
 * scrolls (↓/↑, PgDn/PgUp, Space). */
#ifndef TERN_UI_HELP_H
#define TERN_UI_HELP_H

#include <stdbool.h>

#include "draw.h"
#include "theme.h"

/* *top: first line shown (clamped here). Returns true when lines remain
 * below the box. */
bool ui_help_draw(WINDOW *w, struct ui_rect screen, const struct ui_theme *t, int *top,
                  struct ui_rect *box);

#endif
