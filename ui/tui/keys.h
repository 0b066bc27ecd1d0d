/* keys: reads the keyboard through ncurses and turns it into key events:
 * characters, function keys, Alt-combinations (ESC prefix), Ctrl-arrows
 * (by their terminfo names) and bracketed paste (text between ESC[200~ and
 * ESC[201~ arrives as pasted characters, escape sequences and control
 * characters included, with its newlines as inserted newlines, never as
 * Enter or as keys). */
#ifndef TERN_UI_KEYS_H
#define TERN_UI_KEYS_H

#include <stdbool.h>
#include <stdint.h>

#include "uicurses.h"

enum {
    UI_KEY_BASE = KEY_MAX + 1,
    UI_KEY_ESC = UI_KEY_BASE,
    UI_KEY_NEWLINE, /* Alt-Enter, Ctrl-J, a newline inside a paste */
    UI_KEY_CTRL_LEFT,
    UI_KEY_CTRL_RIGHT,
    UI_KEY_CTRL_HOME,
    UI_KEY_CTRL_END,
    UI_KEY_ALT_UP,
    UI_KEY_ALT_DOWN,
    UI_KEY_WORD_LEFT,  /* Alt-B */
    UI_KEY_WORD_RIGHT, /* Alt-F */
    UI_KEY_ALT_Y,      /* copy the reply's last code block */
    UI_KEY_ALT_E,      /* edit and resend the last message */
    UI_KEY_ALT_T,      /* show / fold the replies' thinking */
    UI_KEY_WHEEL_UP,
    UI_KEY_WHEEL_DOWN,
    /* Alt-0..Alt-9 (ESC then the digit, as mc reads them): the F-keys for
     * terminals that keep F1/F10 for themselves */
    UI_KEY_ALT_0,
    UI_KEY_ALT_1,
    UI_KEY_ALT_2,
    UI_KEY_ALT_3,
    UI_KEY_ALT_4,
    UI_KEY_ALT_5,
    UI_KEY_ALT_6,
    UI_KEY_ALT_7,
    UI_KEY_ALT_8,
    UI_KEY_ALT_9,
};

struct ui_key {
    int fn;      /* KEY_* / UI_KEY_*, or 0 for a character */
    uint32_t ch; /* the character when fn == 0 */
    bool pasted; /* a character of a bracketed paste: text, never a command */
};

struct ui_keys {
    WINDOW *w;
    bool paste;                                             /* inside a bracketed paste */
    uint32_t pend[8];                                       /* pasted bytes read ahead */
    int n_pend, i_pend;
    int k_cleft, k_cright, k_chome, k_cend, k_aup, k_adown; /* terminfo codes, 0 if unknown */
};

void ui_keys_init(struct ui_keys *k, WINDOW *w);
/* Reads one key without blocking. Returns true when *out is set. */
bool ui_keys_read(struct ui_keys *k, struct ui_key *out);

#endif
