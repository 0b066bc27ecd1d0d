/* input: editing the input buffer and its history (see input.h). */
#include "input.h"

#include <stdlib.h>
#include <string.h>

#include "growbuf.h"

#include "text.h"

void ui_input_init(struct ui_input *in)
{
    memset(in, 0, sizeof *in);
    in->tokens = 0;
}

void ui_input_free(struct ui_input *in)
{
    free(in->buf);
    for (size_t i = 0; i < in->n_hist; i++) free(in->hist[i]);
    free(in->hist);
    free(in->draft);
    memset(in, 0, sizeof *in);
}

static void touched(struct ui_input *in)
{
    in->changed = true;
}

int ui_input_insert(struct ui_input *in, const char *text, size_t len)
{
    if (growbuf_reserve(&in->buf, &in->cap, in->len + len + 1, 64)) return -1;
    memmove(in->buf + in->cur + len, in->buf + in->cur, in->len - in->cur);
    memcpy(in->buf + in->cur, text, len);
    in->len += len;
    in->cur += len;
    in->buf[in->len] = 0;
    touched(in);
    return 0;
}

static void cut(struct ui_input *in, size_t from, size_t to)
{
    memmove(in->buf + from, in->buf + to, in->len - to);
    in->len -= to - from;
    in->buf[in->len] = 0;
    in->cur = from;
    touched(in);
}

void ui_input_backspace(struct ui_input *in)
{
    if (in->cur == 0) return;
    cut(in, ui_text_prev(in->buf, in->len, in->cur), in->cur);
}

void ui_input_delete(struct ui_input *in)
{
    if (in->cur >= in->len) return;
    size_t end = ui_text_next(in->buf, in->len, in->cur);
    size_t keep = in->cur;
    cut(in, in->cur, end);
    in->cur = keep;
}

void ui_input_left(struct ui_input *in)
{
    if (in->cur > 0) in->cur = ui_text_prev(in->buf, in->len, in->cur);
}

void ui_input_right(struct ui_input *in)
{
    if (in->cur < in->len) in->cur = ui_text_next(in->buf, in->len, in->cur);
}

static bool is_space_at(const struct ui_input *in, size_t i)
{
    char c = in->buf[i];
    return c == ' ' || c == '\n' || c == '\t';
}

/* Words are runs of non-space bytes; multi-byte characters are never spaces,
 * so byte steps inside them are skipped by the grapheme steps below. */
void ui_input_word_left(struct ui_input *in)
{
    while (in->cur > 0 && is_space_at(in, ui_text_prev(in->buf, in->len, in->cur)))
        ui_input_left(in);
    while (in->cur > 0 && !is_space_at(in, ui_text_prev(in->buf, in->len, in->cur)))
        ui_input_left(in);
}

void ui_input_word_right(struct ui_input *in)
{
    while (in->cur < in->len && is_space_at(in, in->cur)) ui_input_right(in);
    while (in->cur < in->len && !is_space_at(in, in->cur)) ui_input_right(in);
}

static size_t line_start(const struct ui_input *in, size_t pos)
{
    while (pos > 0 && in->buf[pos - 1] != '\n') pos--;
    return pos;
}

static size_t line_end(const struct ui_input *in, size_t pos)
{
    while (pos < in->len && in->buf[pos] != '\n') pos++;
    return pos;
}

void ui_input_home(struct ui_input *in)
{
    in->cur = line_start(in, in->cur);
}

void ui_input_end(struct ui_input *in)
{
    in->cur = line_end(in, in->cur);
}

/* Puts the cursor at display column col of the line starting at ls. */
static void goto_col(struct ui_input *in, size_t ls, int col)
{
    size_t le = line_end(in, ls);
    in->cur = ls + ui_text_fit(in->buf + ls, le - ls, col, NULL);
}

bool ui_input_line_up(struct ui_input *in)
{
    size_t ls = line_start(in, in->cur);
    if (ls == 0) return false;
    int col = ui_text_width(in->buf + ls, in->cur - ls);
    goto_col(in, line_start(in, ls - 1), col);
    return true;
}

bool ui_input_line_down(struct ui_input *in)
{
    size_t le = line_end(in, in->cur);
    if (le >= in->len) return false;
    size_t ls = line_start(in, in->cur);
    int col = ui_text_width(in->buf + ls, in->cur - ls);
    goto_col(in, le + 1, col);
    return true;
}

void ui_input_clear(struct ui_input *in)
{
    in->len = in->cur = 0;
    if (in->buf) in->buf[0] = 0;
    touched(in);
}

void ui_input_set(struct ui_input *in, const char *text)
{
    ui_input_clear(in);
    ui_input_insert(in, text, strlen(text));
}

char *ui_input_take(struct ui_input *in)
{
    if (in->len == 0) return NULL;
    char *t = strdup(in->buf);
    if (!t) return NULL;
    if (in->n_hist + 1 > in->cap_hist) {
        size_t nc = in->cap_hist ? in->cap_hist * 2 : 16;
        char **h = realloc(in->hist, nc * sizeof *h);
        if (h) in->hist = h, in->cap_hist = nc;
    }
    if (in->n_hist < in->cap_hist) {
        char *copy = strdup(t);
        if (copy) in->hist[in->n_hist++] = copy;
    }
    in->hist_pos = in->n_hist;
    free(in->draft);
    in->draft = NULL;
    ui_input_clear(in);
    return t;
}

void ui_input_hist_prev(struct ui_input *in)
{
    if (in->hist_pos == 0 || in->n_hist == 0) return;
    if (in->hist_pos > in->n_hist) in->hist_pos = in->n_hist;
    if (in->hist_pos == in->n_hist) {
        free(in->draft);
        in->draft = strdup(in->len ? in->buf : "");
    }
    in->hist_pos--;
    ui_input_set(in, in->hist[in->hist_pos]);
}

void ui_input_hist_next(struct ui_input *in)
{
    if (in->hist_pos >= in->n_hist) return;
    in->hist_pos++;
    if (in->hist_pos == in->n_hist)
        ui_input_set(in, in->draft ? in->draft : "");
    else
        ui_input_set(in, in->hist[in->hist_pos]);
}

size_t ui_input_chars(const struct ui_input *in)
{
    return ui_text_count(in->buf ? in->buf : "", in->len);
}
