/* inputbox: the input box pane. Draws the input buffer wrapped to the box,
 * scrolled so the cursor line shows, with the character and token counts
 * in its border; tells where the terminal cursor belongs. */
#ifndef TERN_UI_INPUTBOX_H
#define TERN_UI_INPUTBOX_H

#include <stdbool.h>

#include "draw.h"
#include "input.h"
#include "theme.h"

/* Display lines the buffer takes at box width w (for the layout). */
int ui_inputbox_lines(const struct ui_input *in, int box_w);
/* Draws; *cy, *cx receive the cursor's screen position. hint is shown
 * dimmed when the buffer is empty. */
void ui_inputbox_draw(WINDOW *w, struct ui_rect r, const struct ui_input *in,
                      const struct ui_theme *t, bool focused, const char *hint, int *cy, int *cx);

#endif
