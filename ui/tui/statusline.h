/* statusline: the bottom line: key hints, or the latest message (errors in
 * the error colour) with the hints that still fit. */
#ifndef TERN_UI_STATUSLINE_H
#define TERN_UI_STATUSLINE_H

#include <stdbool.h>

#include "draw.h"
#include "state.h"
#include "theme.h"

void ui_statusline_draw(WINDOW *w, struct ui_rect r, const struct ui_state *s,
                        const struct ui_theme *t, bool sessions_focused);

#endif
