/* term: the terminal itself: ncursesw set-up in raw mode with mouse wheel
 * and bracketed paste, or a headless screen (fixed size, output thrown
 * away, keys from a pipe) for tests and sanitizer runs; and the guarantee
 * that the terminal is restored on exit, on SIGINT/SIGTERM/SIGHUP (reported
 * through a pipe the event loop polls) and on a crash (restored from the
 * signal handler, then the default action runs). */
#ifndef TERN_UI_TERM_H
#define TERN_UI_TERM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "uicurses.h"

struct ui_term {
    SCREEN *scr;
    FILE *out, *in;
    int in_fd;  /* poll() this for keys */
    int key_wr; /* headless: write keys here; -1 otherwise */
    bool headless, color, active;
    int rows, cols;
};

/* Opens the terminal (headless: rows x cols off-screen). Returns 0 or -1
 * with err (no terminal, unknown TERM). */
int ui_term_open(struct ui_term *t, bool headless, int rows, int cols, bool no_color, char *err,
                 size_t errlen);
/* Restores the terminal; safe to call twice. */
void ui_term_close(struct ui_term *t);
/* Readable when SIGINT, SIGTERM or SIGHUP arrived; ui_term_signal() then
 * returns the signal number (0 if none). */
int ui_term_signal_fd(void);
int ui_term_signal(void);
/* Picks up a new size after KEY_RESIZE (headless: unchanged). */
void ui_term_resize(struct ui_term *t);

#endif
