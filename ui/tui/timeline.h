/* timeline: the F3 phase timeline of the selected reply: one bar of
 * queue | prefill chunks | decode scaled to the reply's time, with the
 * durations, prompt tokens (cached vs computed), generated tokens and
 * status under it. */
#ifndef TERN_UI_TIMELINE_H
#define TERN_UI_TIMELINE_H

#include "draw.h"
#include "state.h"
#include "theme.h"

void ui_timeline_draw(WINDOW *w, struct ui_rect r, const struct ui_state *s,
                      const struct ui_theme *t);

#endif
