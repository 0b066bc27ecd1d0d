/* keymap: the one table of the chat's key bindings (as htop keeps one):
 * what a key does, the keys and slash commands that do it, the help pane's
 * line and the key bar's label in forms that shorten to fit ("F6 model",
 * "F6 mdl", "F6"). Dispatch, the F1 help and the key bar all read it, so a
 * key cannot be bound without being listed, nor listed without working. */
#ifndef TERN_UI_KEYMAP_H
#define TERN_UI_KEYMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ui_cmd {
    UI_CMD_NONE,
    UI_CMD_HELP,
    UI_CMD_SEND,
    UI_CMD_CANCEL,
    UI_CMD_INSTRUMENTS,
    UI_CMD_TIMELINE,
    UI_CMD_PARAMS,
    UI_CMD_SESSIONS,
    UI_CMD_MODEL,
    UI_CMD_NEW,
    UI_CMD_COPY,
    UI_CMD_COPY_CODE,
    UI_CMD_REGEN,
    UI_CMD_EDIT,
    UI_CMD_THINK,
    UI_CMD_REDRAW,
    UI_CMD_QUIT,
    UI_CMD_CACHE,
    UI_CMD_DOC, /* a line of the help only: keys the input or a pane handles */
};

/* A key as struct ui_key gives it: fn (KEY_*, UI_KEY_*), or fn 0 and ch. */
struct ui_keycode {
    int fn;
    uint32_t ch;
};

struct ui_binding {
    enum ui_cmd cmd;
    struct ui_keycode k[3]; /* the keys that run cmd ({0, 0} ends) */
    const char *slash;      /* "/help": the same typed as a message, or NULL */
    const char *keys;       /* the help's key column (NULL: a line above covers it) */
    const char *what;       /* the help's text */
    const char *bar_key;    /* on the key bar as this key, or NULL */
    const char *bar[3];     /* bar labels, longest first ("" at the end: the key alone) */
};

extern const struct ui_binding ui_bindings[];
extern const size_t ui_n_bindings;
/* The key bar while the sessions pane has the focus (same label forms). */
extern const struct ui_binding ui_list_bar[];
extern const size_t ui_n_list_bar;

/* The command bound to a key, UI_CMD_NONE when none. */
enum ui_cmd ui_keymap_find(int fn, uint32_t ch);
/* The command a slash command names ("/bye", "/model  "), UI_CMD_NONE when
 * the text is no known command. */
enum ui_cmd ui_keymap_slash(const char *text);

/* Key bar layout: the label level (index into bar[]) of each of n entries
 * so that the bar fits cols columns: every label one form shorter, right
 * to left, round after round; when even the shortest forms do not fit,
 * entries between the first and the last are left out (-1), leftmost
 * first. Returns the columns used. */
int ui_keybar_fit(const struct ui_binding *b, size_t n, int cols, int *level);
/* Columns of the entries that always stay on the bar (the first, help,
 * and the last, quit) at their shortest. */
int ui_keybar_min(const struct ui_binding *b, size_t n);

#endif
