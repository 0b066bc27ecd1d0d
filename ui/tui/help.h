/* help: the F1 overlay listing every key, centred over the screen. */
#ifndef TERN_UI_HELP_H
#define TERN_UI_HELP_H

#include "draw.h"
#include "theme.h"

void ui_help_draw(WINDOW *w, struct ui_rect screen, const struct ui_theme *t);

#endif
