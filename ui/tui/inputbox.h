/* inputbox: the input box pane. Draws the input buffer wrapped to the box,
 * scrolled so the cursor line shows, with the character and token counts
 * in its border; tells where the terminal cursor belongs. Also the editing
 * keys every text field shares (the input box and the dialogs' fields). */
#ifndef TERN_UI_INPUTBOX_H
#define TERN_UI_INPUTBOX_H

#include <stdbool.h>

#include "draw.h"
#include "input.h"
#include "keys.h"
#include "theme.h"

/* Display lines the buffer takes at box width w (for the layout). */
int ui_inputbox_lines(const struct ui_input *in, int box_w);
/* Draws; *cy, *cx receive the cursor's screen position. hint is shown
 * dimmed when the buffer is empty. */
void ui_inputbox_draw(WINDOW *w, struct ui_rect r, const struct ui_input *in,
                      const struct ui_theme *t, bool focused, const char *hint, int *cy, int *cx);

/* Applies an editing key to in: a character typed, Backspace, Delete, the
 * arrows, word motions (Ctrl-arrows, Alt-B/F), Home/End, Ctrl-A/E (line start
 * and end), Ctrl-U (clear). Returns false for any other key (the caller's:
 * Enter, Tab, Up/Down, ...). */
bool ui_inputbox_edit_key(struct ui_input *in, const struct ui_key *k);

#endif
