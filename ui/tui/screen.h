/* screen: composes one frame from every pane for a screen size: layout,
 * panes, overlays (help, dialog) and where the terminal cursor goes. Draws
 * into any window (the real screen or an off-screen one in tests); the
 * caller refreshes. */
#ifndef TERN_UI_SCREEN_H
#define TERN_UI_SCREEN_H

#include <stdbool.h>

#include "dialog.h"
#include "input.h"
#include "cachepane.h"
#include "layout.h"
#include "state.h"
#include "theme.h"

struct ui_view {
    struct ui_state *st;
    struct ui_input *in;
    struct ui_dialog *dlg;
    const struct ui_theme *theme;
    bool show_sessions, show_instruments, show_timeline, show_help;
    bool show_cache;                    /* the F7 overlay */
    const struct ui_cache_view *cache;  /* what it lists (the app fills it) */
    bool focus_sessions;
    /* filled by ui_screen_draw */
    struct ui_layout layout;
    int cur_y, cur_x;
    bool cursor;
    int help_top;   /* first line of the help shown */
    bool help_more; /* help lines below the box (filled by ui_screen_draw) */
    /* the popup box drawn over the panes (help or dialog; h 0: none), filled
     * by ui_screen_draw: the caller repaints what a box covered when it goes */
    struct ui_rect overlay;
};

void ui_screen_draw(WINDOW *w, int rows, int cols, struct ui_view *v);

#endif
