/* input: the multi-line input buffer being edited (UTF-8 text and a cursor
 * byte offset) and the history of sent inputs. Pure editing logic; the
 * input box pane (inputbox.h) draws it. Every motion and deletion steps over
 * whole graphemes, so the buffer is always valid UTF-8. */
#ifndef TERN_UI_INPUT_H
#define TERN_UI_INPUT_H

#include <stdbool.h>
#include <stddef.h>

struct ui_input {
    char *buf;
    size_t len, cap;
    size_t cur;  /* cursor, byte offset at a grapheme boundary */
    char **hist; /* sent inputs, oldest first */
    size_t n_hist, cap_hist;
    size_t hist_pos; /* == n_hist when not recalling */
    char *draft;     /* the unsent text saved when recall starts */
    long tokens;     /* token count of buf (-1: unknown), set by the app */
    bool changed;    /* buf changed since the token count */
    long ctx_tokens; /* the session's next prompt with buf (-1: unknown), set by the app */
    long ctx_limit;  /* tokens a sequence holds (0: unknown) */
};

void ui_input_init(struct ui_input *in);
void ui_input_free(struct ui_input *in);

/* Inserts UTF-8 text (paste included) at the cursor. Returns 0 or -1 (OOM). */
int ui_input_insert(struct ui_input *in, const char *text, size_t len);
void ui_input_backspace(struct ui_input *in);
void ui_input_delete(struct ui_input *in);
void ui_input_left(struct ui_input *in);
void ui_input_right(struct ui_input *in);
void ui_input_word_left(struct ui_input *in);
void ui_input_word_right(struct ui_input *in);
void ui_input_home(struct ui_input *in); /* start of the cursor's line */
void ui_input_end(struct ui_input *in);  /* end of the cursor's line */
/* Moves one logical line up/down keeping the column; returns false when the
 * cursor is already on the first/last line (the caller then recalls history). */
bool ui_input_line_up(struct ui_input *in);
bool ui_input_line_down(struct ui_input *in);
void ui_input_clear(struct ui_input *in);
void ui_input_set(struct ui_input *in, const char *text);

/* History: take the text to send (caller frees; NULL when empty or OOM),
 * remembering it and clearing the buffer. */
char *ui_input_take(struct ui_input *in);
void ui_input_hist_prev(struct ui_input *in);
void ui_input_hist_next(struct ui_input *in);

/* Code points in the buffer. */
size_t ui_input_chars(const struct ui_input *in);

#endif
