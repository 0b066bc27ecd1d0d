/* sessions: the sessions pane: the stored sessions, newest first, with
 * title and date; the open one marked, the selection highlighted while the
 * pane has the focus. */
#ifndef TERN_UI_SESSIONS_H
#define TERN_UI_SESSIONS_H

#include <stdbool.h>

#include "draw.h"
#include "state.h"
#include "theme.h"

void ui_sessions_draw(WINDOW *w, struct ui_rect r, const struct ui_state *s,
                      const struct ui_theme *t, bool focused);

#endif
