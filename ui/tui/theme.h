/* theme: the attribute of each kind of thing drawn, in colour or, without
 * colour support or with NO_COLOR set, in monochrome (bold, reverse,
 * underline, dim), so nothing depends on colour alone. */
#ifndef TERN_UI_THEME_H
#define TERN_UI_THEME_H

#include <stdbool.h>

#include "uicurses.h"

enum ui_color {
    UI_C_NORMAL,
    UI_C_USER,   /* user turn header */
    UI_C_ASSIST, /* assistant turn header */
    UI_C_CODE,   /* code block text */
    UI_C_FENCE,  /* ``` lines */
    UI_C_NOTE,   /* cancelled / info notes */
    UI_C_ERROR,
    UI_C_WARN, /* a value past its SLO */
    UI_C_GOOD,
    UI_C_DIM,
    UI_C_TITLE, /* pane titles and borders */
    UI_C_SEL,   /* selected list row */
    UI_C_KV_USED,
    UI_C_KV_CACHED,
    UI_C_KV_FREE,
    UI_C_STATUS, /* status line background */
    UI_C_KEY,    /* key names in hints */
    UI_C_QUEUE,  /* timeline phases */
    UI_C_PREFILL,
    UI_C_DECODE,
    UI_C_N
};

struct ui_theme {
    bool color;
    attr_t a[UI_C_N];
};

/* color: whether to use colours (the caller checks has_colors() and
 * NO_COLOR); start_color() must already have been called when true. */
void ui_theme_init(struct ui_theme *t, bool color);
/* True when the environment asks for no colour (NO_COLOR set and non-empty). */
bool ui_theme_no_color_env(void);

#endif
