/* dialog: the modal boxes: a yes/no question (delete a session, quit while
 * streaming), a question with a third answer (switching to a model of
 * another kind mid-chat), a one-line text prompt (rename), a list to pick
 * from (the model picker: a name and its details per row) and the generation
 * parameters form (temperature, top-p, max tokens, context policy, system
 * prompt). Fields are edited with the same editor as the input box. */
#ifndef TERN_UI_DIALOG_H
#define TERN_UI_DIALOG_H

#include <stdbool.h>
#include <stdint.h>

#include "draw.h"
#include "input.h"
#include "keys.h"
#include "state.h"
#include "theme.h"

enum ui_dialog_kind { UI_DLG_NONE, UI_DLG_CONFIRM, UI_DLG_PROMPT, UI_DLG_PARAMS, UI_DLG_LIST };
enum ui_dialog_result { UI_DLG_OPEN, UI_DLG_OK, UI_DLG_CANCEL, UI_DLG_ALT };

#define UI_DLG_FIELDS 6

struct ui_dialog {
    enum ui_dialog_kind kind;
    int action; /* what the caller does on OK */
    char title[96];
    char message[512]; /* a question's text (wrapped); a list's footer, or its hint when empty */
    char error[128]; /* validation message of the params form */
    char keys[96];   /* a question's answers, as shown */
    uint32_t alt_key; /* a question's third answer (UI_DLG_ALT); 0: none */
    bool enter_ok;    /* Enter answers yes (a question asked with ui_dialog_ask) */
    struct ui_input field[UI_DLG_FIELDS];
    int n_fields, focus;
    char **items;   /* list: choices (owned copies), the chosen one at focus */
    char **details; /* list: each choice's details, right-aligned (NULL: none) */
    char head[96];  /* list: the details' column heads */
    int n_items;
};

void ui_dialog_init(struct ui_dialog *d);
void ui_dialog_free(struct ui_dialog *d);
void ui_dialog_confirm(struct ui_dialog *d, int action, const char *title, const char *message);
/* A question Enter (or y) answers yes, alt its third answer (UI_DLG_ALT),
 * Esc (or n) no; keys says so in the box ("Enter: new session  k: keep"). */
void ui_dialog_ask(struct ui_dialog *d, int action, const char *title, const char *message,
                   const char *keys, uint32_t alt);
void ui_dialog_prompt(struct ui_dialog *d, int action, const char *title, const char *initial);
void ui_dialog_params(struct ui_dialog *d, int action, const struct ui_params *p);
/* A list to pick one of (the model picker); current is selected at first.
 * details (may be NULL) are drawn right-aligned beside each item, under the
 * column heads head (may be NULL). */
void ui_dialog_list(struct ui_dialog *d, int action, const char *title, char *const *items,
                    char *const *details, const char *head, int n, int current);
/* The chosen item of a list, or NULL. */
const char *ui_dialog_choice(const struct ui_dialog *d);
void ui_dialog_close(struct ui_dialog *d);

/* Handles one key; OK and CANCEL leave the dialog open for the caller to
 * read, then close. For the params form OK means the values parsed. */
enum ui_dialog_result ui_dialog_key(struct ui_dialog *d, const struct ui_key *k);
/* The prompt's text (field 0). */
const char *ui_dialog_text(const struct ui_dialog *d);
/* Parses the params form into p; returns 0, or -1 with d->error set. */
int ui_dialog_get_params(struct ui_dialog *d, struct ui_params *p);

/* Draws the box centred in screen; *box is where it went, (*cy, *cx) the
 * cursor. */
void ui_dialog_draw(WINDOW *w, struct ui_rect screen, const struct ui_dialog *d,
                    const struct ui_theme *t, int *cy, int *cx, struct ui_rect *box);

#endif
