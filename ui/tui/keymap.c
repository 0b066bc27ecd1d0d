/* keymap: the chat's key binding table (see keymap.h). */
#include "keymap.h"

#include <string.h>

#include "keys.h"
#include "text.h"

#define CTRL(c) ((uint32_t)((c) & 0x1f))
#define FK(n) {KEY_F(n), 0}
#define CH(c) {0, (c)}
#define FN(k) {(k), 0}

/* Help order. Every F-key action has a second key (Alt-digit, as mc's
 * Esc-digit) and the common ones a slash command, for terminals that keep
 * F1/F10 for themselves (GNOME Terminal's help and menu). */
const struct ui_binding ui_bindings[] = {
    {UI_CMD_HELP, {FK(1), FN(UI_KEY_ALT_1)}, "/help", "F1, Alt-1, /help", "this list of keys",
     "F1", {"help", "help", "help"}},
    {UI_CMD_SEND, {{0, 0}}, NULL, "Enter", "send the message",
     "Enter", {"send", "", ""}},
    {UI_CMD_DOC, {{0, 0}}, NULL, "Alt-Enter, Ctrl-J", "new line in the message", NULL, {0}},
    {UI_CMD_DOC, {{0, 0}}, NULL, "←/→, Ctrl-←/→", "move by character / word (Alt-B/F too)", NULL,
     {0}},
    {UI_CMD_DOC, {{0, 0}}, NULL, "Home/End, ^A/^E", "start / end of the line", NULL, {0}},
    {UI_CMD_DOC, {{0, 0}}, NULL, "Ctrl-U", "clear the message being typed", NULL, {0}},
    {UI_CMD_DOC, {{0, 0}}, NULL, "↑/↓", "earlier messages (history)", NULL, {0}},
    {UI_CMD_DOC, {{0, 0}}, NULL, "PgUp/PgDn, wheel", "scroll the chat", NULL, {0}},
    {UI_CMD_DOC, {{0, 0}}, NULL, "Ctrl-Home/End", "top / bottom (Home/End too when nothing is typed)",
     NULL, {0}},
    {UI_CMD_CANCEL, {{0, 0}}, NULL, "Esc", "cancel the reply being generated", "Esc",
     {"cancel", "", ""}},
    /* pairs share a help line (keys NULL: not listed on their own) */
    {UI_CMD_DOC, {{0, 0}}, NULL, "Ctrl-Y / Alt-Y", "copy the reply / its last code block", NULL, {0}},
    {UI_CMD_COPY, {CH(CTRL('Y'))}, NULL, NULL, NULL, NULL, {0}},
    {UI_CMD_COPY_CODE, {FN(UI_KEY_ALT_Y)}, NULL, NULL, NULL, NULL, {0}},
    {UI_CMD_DOC, {{0, 0}}, NULL, "Ctrl-R / Alt-E", "regenerate the reply / edit your last message",
     NULL, {0}},
    {UI_CMD_REGEN, {CH(CTRL('R'))}, NULL, NULL, NULL, NULL, {0}},
    {UI_CMD_EDIT, {FN(UI_KEY_ALT_E)}, NULL, NULL, NULL, NULL, {0}},
    {UI_CMD_INSTRUMENTS, {FK(2), FN(UI_KEY_ALT_2)}, NULL, "F2, Alt-2", "instruments panel (gauges)",
     "F2", {"gauges", "gau", ""}},
    {UI_CMD_TIMELINE, {FK(3), FN(UI_KEY_ALT_3)}, NULL, "F3, Alt-3",
     "phase timeline; Alt-↑/↓ picks a reply", "F3", {"timeline", "tl", ""}},
    {UI_CMD_PARAMS, {FK(4), FN(UI_KEY_ALT_4)}, NULL, "F4, Alt-4",
     "generation parameters of the session", "F4", {"params", "par", ""}},
    {UI_CMD_SESSIONS, {FK(5), FN(UI_KEY_ALT_5)}, NULL, "F5, Alt-5", "sessions pane; Tab focuses it",
     "F5", {"sessions", "sess", ""}},
    {UI_CMD_DOC, {{0, 0}}, NULL, "Enter / r / Del / a",
     "in the sessions pane: open / rename / delete / list one-shot runs too", NULL, {0}},
    {UI_CMD_MODEL, {FK(6), FN(UI_KEY_ALT_6)}, "/model", "F6, Alt-6, /model",
     "pick the model (reopens the engine on it)", "F6", {"model", "mdl", ""}},
    {UI_CMD_CACHE, {FK(7), FN(UI_KEY_ALT_7)}, "/cache", "F7, Alt-7, /cache",
     "the prompt cache: prefixes in memory and on disk", NULL, {0}},
    {UI_CMD_NEW, {CH(CTRL('N'))}, "/clear", "Ctrl-N, /clear",
     "new session (the old one stays under F5)", NULL, {0}},
    {UI_CMD_REDRAW, {CH(CTRL('L'))}, NULL, "Ctrl-L", "redraw the screen", NULL, {0}},
    {UI_CMD_QUIT, {FK(10), FN(UI_KEY_ALT_0), CH(CTRL('C'))}, "/bye", "F10, Alt-0, Ctrl-C, /bye",
     "quit (asks while a reply streams)", "F10", {"quit", "quit", ""}},
    {UI_CMD_THINK, {FN(UI_KEY_ALT_T)}, "/think", "Alt-T, /think",
     "show / fold the replies' thinking (<think>…</think>)", NULL, {0}},
};
const size_t ui_n_bindings = sizeof ui_bindings / sizeof ui_bindings[0];

const struct ui_binding ui_list_bar[] = {
    {UI_CMD_DOC, {{0, 0}}, NULL, NULL, NULL, "Enter", {"open", "", ""}},
    {UI_CMD_NEW, {{0, 0}}, NULL, NULL, NULL, "^N", {"new", "", ""}},
    {UI_CMD_DOC, {{0, 0}}, NULL, NULL, NULL, "r", {"rename", "ren", ""}},
    {UI_CMD_DOC, {{0, 0}}, NULL, NULL, NULL, "Del", {"delete", "del", ""}},
    {UI_CMD_DOC, {{0, 0}}, NULL, NULL, NULL, "a", {"runs", "", ""}},
    {UI_CMD_DOC, {{0, 0}}, NULL, NULL, NULL, "Tab", {"chat", "", ""}},
    {UI_CMD_HELP, {{0, 0}}, NULL, NULL, NULL, "F1", {"help", "help", ""}},
    {UI_CMD_QUIT, {{0, 0}}, NULL, NULL, NULL, "F10", {"quit", "quit", ""}},
};
const size_t ui_n_list_bar = sizeof ui_list_bar / sizeof ui_list_bar[0];

enum ui_cmd ui_keymap_find(int fn, uint32_t ch)
{
    for (size_t i = 0; i < ui_n_bindings; i++)
        for (int j = 0; j < 3; j++) {
            const struct ui_keycode *k = &ui_bindings[i].k[j];
            if (!k->fn && !k->ch) break;
            if (k->fn == fn && (fn || k->ch == ch)) return ui_bindings[i].cmd;
        }
    return UI_CMD_NONE;
}

enum ui_cmd ui_keymap_slash(const char *text)
{
    if (!text || text[0] != '/') return UI_CMD_NONE;
    size_t n = strlen(text);
    while (n && (text[n - 1] == ' ' || text[n - 1] == '\n' || text[n - 1] == '\t')) n--;
    for (size_t i = 0; i < ui_n_bindings; i++) {
        const char *s = ui_bindings[i].slash;
        if (s && strlen(s) == n && !strncmp(s, text, n)) return ui_bindings[i].cmd;
    }
    return UI_CMD_NONE;
}

static int str_w(const char *s)
{
    return s ? ui_text_width(s, strlen(s)) : 0;
}

/* "F6 model " : the key, a space and the label when there is one, a gap */
static int entry_w(const struct ui_binding *b, int level)
{
    const char *l = b->bar[level];
    return str_w(b->bar_key) + (l && l[0] ? 1 + str_w(l) : 0) + 1;
}

int ui_keybar_min(const struct ui_binding *b, size_t n)
{
    int w = 0;
    for (size_t i = 0; i < n; i++)
        if (b[i].bar_key) {
            w += entry_w(&b[i], 2);
            break;
        }
    for (size_t i = n; i-- > 0;)
        if (b[i].bar_key) {
            w += entry_w(&b[i], 2);
            break;
        }
    return w;
}

int ui_keybar_fit(const struct ui_binding *b, size_t n, int cols, int *level)
{
    int total = 0;
    for (size_t i = 0; i < n; i++) {
        level[i] = b[i].bar_key ? 0 : -1;
        if (level[i] == 0) total += entry_w(&b[i], 0);
    }
    /* each round takes every label one form shorter, rightmost first, and
     * stops as soon as the bar fits */
    for (int round = 1; round < 3 && total > cols; round++)
        for (size_t i = n; i-- > 0 && total > cols;) {
            if (level[i] != round - 1) continue;
            total += entry_w(&b[i], round) - entry_w(&b[i], round - 1);
            level[i] = round;
        }
    /* keys alone too wide: those between the first (help, which keeps its
     * label: the way in for a new user) and the last (quit) give way,
     * leftmost first (Enter and Esc, which say themselves) */
    size_t first = 0, last = n;
    while (first < n && level[first] < 0) first++;
    while (last > 0 && level[last - 1] < 0) last--;
    for (size_t i = first + 1; i + 1 < last && total > cols; i++) {
        if (level[i] < 0) continue;
        total -= entry_w(&b[i], level[i]);
        level[i] = -1;
    }
    return total;
}
