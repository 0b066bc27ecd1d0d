/* layout: where each pane goes for a screen size and the panes shown.
 * From 80x24 up: sessions on the left, instruments on the right, the
 * timeline under the chat, the input box under both, the status line last.
 * Side panes give way first when the chat would get too narrow. */
#ifndef TERN_UI_LAYOUT_H
#define TERN_UI_LAYOUT_H

#include <stdbool.h>

#include "draw.h"

struct ui_layout {
    bool sessions, instruments, timeline; /* shown (after giving way) */
    struct ui_rect r_sessions, r_chat, r_instruments, r_timeline, r_input, r_status;
};

/* input_lines: text lines the input box wants (its height is that plus its
 * border, capped to a third of the screen). */
void ui_layout_compute(struct ui_layout *L, int rows, int cols, bool sessions, bool instruments,
                       bool timeline, int input_lines);

#define UI_MIN_COLS 40
#define UI_MIN_ROWS 12

#endif
