/* cachepane (prefix ui_cache_): the F7 overlay listing the prompt cache:
 * the recent prefixes held in the KV pool and the disk cache's entries
 * (engine_cache_list), by hash and counts; never their text. Any key
 * closes it. */
#ifndef TERN_UI_CACHEPANE_H
#define TERN_UI_CACHEPANE_H

#include <stdbool.h>
#include <stdint.h>

#include "draw.h"
#include "theme.h"

struct ui_cache_row {
    bool disk, usable;
    uint64_t hash;
    int32_t tokens;
    uint64_t bytes;
    uint32_t hits;
    double age_s;
    char made_by[40];
};

#define UI_CACHE_MAX 64

struct ui_cache_view {
    struct ui_cache_row rows[UI_CACHE_MAX];
    int n;
    bool remote;              /* the engine is a server's: its cache is not listed here */
};

/* Draws the overlay centred in screen; *box gets its rectangle. */
void ui_cache_draw(WINDOW *w, struct ui_rect screen, const struct ui_theme *t,
                   const struct ui_cache_view *c, struct ui_rect *box);

#endif
