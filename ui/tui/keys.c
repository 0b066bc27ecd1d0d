/* keys: keyboard decoding (see keys.h). */
#include "keys.h"

#include <string.h>

/* The key code ncurses gives the sequence of terminfo capability name. */
static int code_of(const char *name)
{
    char *seq = tigetstr(name);
    if (!seq || seq == (char *)-1) return 0;
    int c = key_defined(seq);
    return c > 0 ? c : 0;
}

void ui_keys_init(struct ui_keys *k, WINDOW *w)
{
    memset(k, 0, sizeof *k);
    k->w = w;
    /* xterm-style modified keys: 5 = Ctrl, 3 = Alt */
    k->k_cleft = code_of("kLFT5");
    k->k_cright = code_of("kRIT5");
    k->k_chome = code_of("kHOM5");
    k->k_cend = code_of("kEND5");
    k->k_aup = code_of("kUP3");
    k->k_adown = code_of("kDN3");
    /* Home/End as the other common terminals send them (vt220 style inside
     * tmux/screen, xterm's normal and application modes), whatever TERM says */
    static const char *const home[] = {"\033[1~", "\033[7~", "\033[H", "\033OH"};
    static const char *const end[] = {"\033[4~", "\033[8~", "\033[F", "\033OF"};
    for (size_t i = 0; i < 4; i++) {
        if (key_defined(home[i]) <= 0) define_key(home[i], KEY_HOME);
        if (key_defined(end[i]) <= 0) define_key(end[i], KEY_END);
    }
}

static int next(struct ui_keys *k, wint_t *c)
{
    return wget_wch(k->w, c);
}

/* Inside a paste, keypad decoding is off (ncurses would turn a pasted
 * "ESC [ A" into the Up key): every byte comes raw and is text. */
static void paste_mode(struct ui_keys *k, bool on)
{
    k->paste = on;
    keypad(k->w, on ? FALSE : TRUE);
}

static bool pasted(struct ui_key *out, uint32_t ch)
{
    *out = (struct ui_key){0, ch, true};
    return true;
}

/* ESC inside a paste: the end marker ESC[201~, or text (the ESC and the
 * bytes read after it, returned one by one). */
static bool paste_esc(struct ui_keys *k, struct ui_key *out)
{
    wint_t c;
    k->n_pend = k->i_pend = 0;
    if (next(k, &c) != OK) return pasted(out, 27);
    k->pend[k->n_pend++] = (uint32_t)c;
    if (c == '[') {
        while (k->n_pend < 6 && next(k, &c) == OK) {
            k->pend[k->n_pend++] = (uint32_t)c;
            if (c == '~' || (c >= 0x40 && c <= 0x7E)) break;
        }
        static const uint32_t end[] = {'[', '2', '0', '1', '~'};
        if (k->n_pend == 5 && memcmp(k->pend, end, sizeof end) == 0) {
            k->n_pend = 0;
            paste_mode(k, false);
            return false;
        }
    }
    return pasted(out, 27);
}

/* After ESC: Alt-x, or a CSI sequence ncurses did not know (bracketed
 * paste markers). Bytes already queued belong to the same key press. */
static bool after_esc(struct ui_keys *k, struct ui_key *out)
{
    wint_t c;
    if (k->paste) return paste_esc(k, out);
    int r = next(k, &c);
    if (r == ERR) {
        *out = (struct ui_key){UI_KEY_ESC, 0, false};
        return true;
    }
    if (r == OK && (c == '\r' || c == '\n')) {
        *out = (struct ui_key){UI_KEY_NEWLINE, 0, false};
        return true;
    }
    if (r == OK && (c == 'b' || c == 'f')) {
        *out = (struct ui_key){c == 'b' ? UI_KEY_WORD_LEFT : UI_KEY_WORD_RIGHT, 0, false};
        return true;
    }
    if (r == OK && (c == 'y' || c == 'e' || c == 't')) {
        *out = (struct ui_key){c == 'y' ? UI_KEY_ALT_Y : c == 'e' ? UI_KEY_ALT_E : UI_KEY_ALT_T, 0,
                               false};
        return true;
    }
    if (r == OK && c >= '0' && c <= '9') {
        *out = (struct ui_key){UI_KEY_ALT_0 + (int)(c - '0'), 0, false};
        return true;
    }
    if (r == KEY_CODE_YES && (c == KEY_UP || c == KEY_DOWN)) {
        *out = (struct ui_key){c == KEY_UP ? UI_KEY_ALT_UP : UI_KEY_ALT_DOWN, 0, false};
        return true;
    }
    if (r == OK && c == '[') {
        char seq[8];
        int n = 0;
        while (n < 7 && next(k, &c) == OK) {
            seq[n++] = (char)c;
            if (c == '~' || (c >= 'A' && c <= 'Z')) break;
        }
        seq[n] = 0;
        if (strcmp(seq, "200~") == 0)
            paste_mode(k, true);
        else if (strcmp(seq, "201~") == 0)
            paste_mode(k, false);
        return false;
    }
    return false; /* other Alt keys are not bound */
}

bool ui_keys_read(struct ui_keys *k, struct ui_key *out)
{
    wint_t c;
    if (k->i_pend < k->n_pend) return pasted(out, k->pend[k->i_pend++]);
    int r = next(k, &c);
    if (r == ERR) return false;
    if (r == KEY_CODE_YES) {
        int code = (int)c;
        if (code == KEY_MOUSE) {
            MEVENT ev;
            if (getmouse(&ev) != OK) return false;
            if (ev.bstate & BUTTON4_PRESSED) *out = (struct ui_key){UI_KEY_WHEEL_UP, 0, false};
#ifdef BUTTON5_PRESSED
            else if (ev.bstate & BUTTON5_PRESSED)
                *out = (struct ui_key){UI_KEY_WHEEL_DOWN, 0, false};
#endif
            else
                return false;
            return true;
        }
        if (code == KEY_ENTER) code = k->paste ? UI_KEY_NEWLINE : '\r';
        if (code == '\r') {
            *out = (struct ui_key){0, '\r', false};
            return true;
        }
        if (k->k_cleft && code == k->k_cleft)
            code = UI_KEY_CTRL_LEFT;
        else if (k->k_cright && code == k->k_cright)
            code = UI_KEY_CTRL_RIGHT;
        else if (k->k_chome && code == k->k_chome)
            code = UI_KEY_CTRL_HOME;
        else if (k->k_cend && code == k->k_cend)
            code = UI_KEY_CTRL_END;
        else if (k->k_aup && code == k->k_aup)
            code = UI_KEY_ALT_UP;
        else if (k->k_adown && code == k->k_adown)
            code = UI_KEY_ALT_DOWN;
        *out = (struct ui_key){code, 0, false};
        return true;
    }
    if (c == 27) return after_esc(k, out);
    if (k->paste && (c == '\r' || c == '\n')) {
        *out = (struct ui_key){UI_KEY_NEWLINE, 0, false};
        return true;
    }
    if (k->paste) return pasted(out, (uint32_t)c);
    if (c == '\n') { /* Ctrl-J (Enter arrives as '\r' with nonl) */
        *out = (struct ui_key){UI_KEY_NEWLINE, 0, false};
        return true;
    }
    *out = (struct ui_key){0, (uint32_t)c, false};
    return true;
}
