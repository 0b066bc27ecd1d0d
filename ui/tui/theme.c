/* theme: colour pairs and their monochrome stand-ins (see theme.h). */
#include "theme.h"

#include <stdlib.h>

bool ui_theme_no_color_env(void)
{
    const char *v = getenv("NO_COLOR");
    return v && *v;
}

struct pair_def {
    short fg, bg;
    attr_t extra; /* added to the colour pair */
    attr_t mono;  /* used alone without colour */
};

/* -1 = the terminal's default colour (use_default_colors) */
static const struct pair_def defs[UI_C_N] = {
    [UI_C_NORMAL] = {-1, -1, 0, A_NORMAL},
    [UI_C_USER] = {COLOR_CYAN, -1, A_BOLD, A_BOLD | A_UNDERLINE},
    [UI_C_ASSIST] = {COLOR_GREEN, -1, A_BOLD, A_BOLD},
    [UI_C_CODE] = {COLOR_YELLOW, -1, 0, A_NORMAL},
    [UI_C_FENCE] = {COLOR_YELLOW, -1, A_DIM, A_DIM},
    [UI_C_NOTE] = {COLOR_MAGENTA, -1, 0, A_DIM},
    [UI_C_ERROR] = {COLOR_WHITE, COLOR_RED, A_BOLD, A_REVERSE | A_BOLD},
    [UI_C_WARN] = {COLOR_RED, -1, A_BOLD, A_BOLD | A_UNDERLINE},
    [UI_C_GOOD] = {COLOR_GREEN, -1, 0, A_NORMAL},
    [UI_C_DIM] = {-1, -1, A_DIM, A_DIM},
    [UI_C_TITLE] = {COLOR_BLUE, -1, A_BOLD, A_BOLD},
    [UI_C_SEL] = {COLOR_BLACK, COLOR_CYAN, 0, A_REVERSE},
    [UI_C_KV_USED] = {COLOR_GREEN, -1, 0, A_BOLD},
    [UI_C_KV_CACHED] = {COLOR_BLUE, -1, 0, A_NORMAL},
    [UI_C_KV_FREE] = {-1, -1, A_DIM, A_DIM},
    [UI_C_STATUS] = {COLOR_BLACK, COLOR_WHITE, 0, A_REVERSE},
    [UI_C_KEY] = {COLOR_BLUE, COLOR_WHITE, A_BOLD, A_REVERSE | A_BOLD},
    [UI_C_QUEUE] = {COLOR_MAGENTA, -1, 0, A_DIM},
    [UI_C_PREFILL] = {COLOR_YELLOW, -1, A_BOLD, A_BOLD},
    [UI_C_DECODE] = {COLOR_GREEN, -1, 0, A_NORMAL},
};

void ui_theme_init(struct ui_theme *t, bool color)
{
    t->color = color;
    for (int i = 0; i < UI_C_N; i++) {
        if (!color) {
            t->a[i] = defs[i].mono;
            continue;
        }
        init_pair((short)(i + 1), defs[i].fg, defs[i].bg);
        t->a[i] = COLOR_PAIR(i + 1) | defs[i].extra;
    }
}
