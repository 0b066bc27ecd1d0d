/* statusline: the bottom line: key hints, labels shortened to fit (keymap),
 * or the latest message (errors in the error colour) with the hints that
 * still fit; F1 and F10 stay beside any message that leaves them room, and
 * a message wider than the line is cut at a word. */
#ifndef TERN_UI_STATUSLINE_H
#define TERN_UI_STATUSLINE_H

#include <stdbool.h>

#include "draw.h"
#include "state.h"
#include "theme.h"

void ui_statusline_draw(WINDOW *w, struct ui_rect r, const struct ui_state *s,
                        const struct ui_theme *t, bool sessions_focused);

#endif
