/* dialog: modal question, prompt and parameters form (see dialog.h). */
#include "dialog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inputbox.h"
#include "text.h"

void ui_dialog_init(struct ui_dialog *d)
{
    memset(d, 0, sizeof *d);
    for (int i = 0; i < UI_DLG_FIELDS; i++) ui_input_init(&d->field[i]);
}

static void free_items(struct ui_dialog *d)
{
    for (int i = 0; i < d->n_items; i++) {
        free(d->items[i]);
        if (d->details) free(d->details[i]);
    }
    free(d->items);
    free(d->details);
    d->items = d->details = NULL;
    d->n_items = 0;
}

void ui_dialog_free(struct ui_dialog *d)
{
    for (int i = 0; i < UI_DLG_FIELDS; i++) ui_input_free(&d->field[i]);
    free_items(d);
}

void ui_dialog_list(struct ui_dialog *d, int action, const char *title, char *const *items,
                    char *const *details, const char *head, int n, int current)
{
    free_items(d);
    d->kind = UI_DLG_LIST;
    d->action = action;
    d->message[0] = d->error[0] = 0;
    snprintf(d->title, sizeof d->title, "%s", title);
    snprintf(d->head, sizeof d->head, "%s", head && details ? head : "");
    d->items = calloc(n > 0 ? (size_t)n : 1, sizeof *d->items);
    d->details = details ? calloc(n > 0 ? (size_t)n : 1, sizeof *d->details) : NULL;
    for (int i = 0; d->items && i < n; i++) {
        char *it = strdup(items[i]), *de = details ? strdup(details[i] ? details[i] : "") : NULL;
        if (!it || (details && (!d->details || !de))) {
            free(it);
            free(de);
            break;
        }
        d->items[d->n_items] = it;
        if (d->details) d->details[d->n_items] = de;
        d->n_items++;
    }
    d->focus = current >= 0 && current < d->n_items ? current : 0;
}

const char *ui_dialog_choice(const struct ui_dialog *d)
{
    return d->kind == UI_DLG_LIST && d->focus < d->n_items ? d->items[d->focus] : NULL;
}

static enum ui_dialog_result list_key(struct ui_dialog *d, const struct ui_key *k)
{
    if (k->fn == UI_KEY_ESC || k->fn == KEY_F(6)) return UI_DLG_CANCEL;
    if (k->fn == 0 && k->ch == '\r') return d->n_items ? UI_DLG_OK : UI_DLG_CANCEL;
    if (k->fn == KEY_UP && d->focus > 0) d->focus--;
    if (k->fn == KEY_DOWN && d->focus + 1 < d->n_items) d->focus++;
    return UI_DLG_OPEN;
}

static void open_kind(struct ui_dialog *d, enum ui_dialog_kind kind, int action, const char *title)
{
    d->kind = kind;
    d->action = action;
    d->focus = 0;
    d->n_fields = 0;
    d->message[0] = d->error[0] = 0;
    snprintf(d->title, sizeof d->title, "%s", title);
    for (int i = 0; i < UI_DLG_FIELDS; i++) ui_input_clear(&d->field[i]);
}

void ui_dialog_confirm(struct ui_dialog *d, int action, const char *title, const char *message)
{
    open_kind(d, UI_DLG_CONFIRM, action, title);
    snprintf(d->message, sizeof d->message, "%s", message);
    snprintf(d->keys, sizeof d->keys, " y: yes   n/Esc: no ");
    d->alt_key = 0;
    d->enter_ok = false; /* deleting and quitting take a deliberate y */
}

void ui_dialog_ask(struct ui_dialog *d, int action, const char *title, const char *message,
                   const char *keys, uint32_t alt)
{
    ui_dialog_confirm(d, action, title, message);
    snprintf(d->keys, sizeof d->keys, "%s", keys);
    d->alt_key = alt;
    d->enter_ok = true;
}

void ui_dialog_prompt(struct ui_dialog *d, int action, const char *title, const char *initial)
{
    open_kind(d, UI_DLG_PROMPT, action, title);
    d->n_fields = 1;
    ui_input_set(&d->field[0], initial ? initial : "");
}

static const char *const param_labels[UI_DLG_FIELDS] = {"temperature", "top-p", "max tokens",
                                                        "context full", "system prompt",
                                                        "lookup guesses"};

void ui_dialog_params(struct ui_dialog *d, int action, const struct ui_params *p)
{
    char buf[64];
    open_kind(d, UI_DLG_PARAMS, action, "generation parameters · Enter saves, Esc cancels");
    d->n_fields = 6;
    snprintf(buf, sizeof buf, "%.2f", p->temp);
    ui_input_set(&d->field[0], buf);
    snprintf(buf, sizeof buf, "%.2f", p->top_p);
    ui_input_set(&d->field[1], buf);
    snprintf(buf, sizeof buf, "%d", p->max_tokens);
    ui_input_set(&d->field[2], buf);
    ui_input_set(&d->field[3], ui_ctx_policy_name(p->ctx_policy));
    ui_input_set(&d->field[4], p->system);
    snprintf(buf, sizeof buf, "%d", p->lookup_k);
    ui_input_set(&d->field[5], buf);
}

void ui_dialog_close(struct ui_dialog *d)
{
    d->kind = UI_DLG_NONE;
}

const char *ui_dialog_text(const struct ui_dialog *d)
{
    return d->field[0].buf ? d->field[0].buf : "";
}

static int parse_float(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int ui_dialog_get_params(struct ui_dialog *d, struct ui_params *p)
{
    double t, tp, mt;
    const char *f0 = d->field[0].buf ? d->field[0].buf : "";
    const char *f1 = d->field[1].buf ? d->field[1].buf : "";
    const char *f2 = d->field[2].buf ? d->field[2].buf : "";
    if (parse_float(f0, 0, 5, &t) < 0) {
        snprintf(d->error, sizeof d->error, "temperature: a number from 0 to 5");
        d->focus = 0;
        return -1;
    }
    if (parse_float(f1, 0, 1, &tp) < 0 || tp <= 0) {
        snprintf(d->error, sizeof d->error, "top-p: a number above 0, at most 1");
        d->focus = 1;
        return -1;
    }
    if (parse_float(f2, 1, 1 << 20, &mt) < 0 || mt != (double)(int32_t)mt) {
        snprintf(d->error, sizeof d->error, "max tokens: a whole number from 1");
        d->focus = 2;
        return -1;
    }
    enum ui_ctx_policy cp;
    if (ui_ctx_policy_parse(d->field[3].buf ? d->field[3].buf : "", &cp) < 0) {
        snprintf(d->error, sizeof d->error, "context full: truncate (drop oldest turns) or reject");
        d->focus = 3;
        return -1;
    }
    double lk;
    if (parse_float(d->field[5].buf ? d->field[5].buf : "", 0, 32, &lk) < 0 ||
        lk != (double)(int32_t)lk) {
        snprintf(d->error, sizeof d->error, "lookup guesses: 0 (off) to 32 a step (--lookup-k)");
        d->focus = 5;
        return -1;
    }
    p->lookup_k = (int32_t)lk;
    p->ctx_policy = cp;
    p->temp = (float)t;
    p->top_p = (float)tp;
    p->max_tokens = (int32_t)mt;
    snprintf(p->system, sizeof p->system, "%s", d->field[4].buf ? d->field[4].buf : "");
    return 0;
}

static enum ui_dialog_result field_key(struct ui_dialog *d, const struct ui_key *k)
{
    struct ui_input *in = &d->field[d->focus];
    switch (k->fn) {
    case 0:
        if (k->ch == '\r') return UI_DLG_OK;
        if (k->ch == '\t') d->focus = (d->focus + 1) % d->n_fields;
        break;
    case UI_KEY_ESC:
        return UI_DLG_CANCEL;
    case KEY_UP:
    case KEY_BTAB:
        d->focus = (d->focus + d->n_fields - 1) % d->n_fields;
        break;
    case KEY_DOWN:
        d->focus = (d->focus + 1) % d->n_fields;
        break;
    case KEY_F(4):
        return UI_DLG_OK;
    }
    ui_inputbox_edit_key(in, k); /* the input box's editing keys */
    return UI_DLG_OPEN;
}

enum ui_dialog_result ui_dialog_key(struct ui_dialog *d, const struct ui_key *k)
{
    if (d->kind == UI_DLG_LIST) return list_key(d, k);
    if (d->kind == UI_DLG_CONFIRM) {
        if (k->fn == 0 && (k->ch == 'y' || k->ch == 'Y' || (d->enter_ok && k->ch == '\r')))
            return UI_DLG_OK;
        if (k->fn == 0 && d->alt_key && (k->ch == d->alt_key || k->ch == (d->alt_key ^ 0x20)))
            return UI_DLG_ALT;
        if (k->fn == UI_KEY_ESC || (k->fn == 0 && (k->ch == 'n' || k->ch == 'N')))
            return UI_DLG_CANCEL;
        return UI_DLG_OPEN;
    }
    return field_key(d, k);
}

static int str_w(const char *s)
{
    return ui_text_width(s, strlen(s));
}

/* Draws s wrapped at words into rows y.. (at most rows of them). */
static void draw_wrapped(WINDOW *w, int y, int rows, int x, int width, attr_t a, const char *s)
{
    struct ui_wrap wr;
    size_t st, len;
    int used;
    ui_wrap_init(&wr, s, strlen(s), width);
    for (int k = 0; k < rows && ui_wrap_next(&wr, &st, &len, &used); k++)
        ui_draw_text(w, y + k, x, width, a, s + st, len);
}

/* The list's rows: the name (shortened in the middle, so its quant shows)
 * and, where there is room, its details right-aligned under the heads. */
static void draw_list(WINDOW *w, struct ui_rect r, int rows, const struct ui_dialog *d,
                      const struct ui_theme *t, int *cy, int *cx)
{
    int iw = r.w - 6, first = d->focus >= rows ? d->focus - rows + 1 : 0, dw = 0;
    for (int i = 0; d->details && i < d->n_items; i++)
        if (str_w(d->details[i]) > dw) dw = str_w(d->details[i]);
    if (d->head[0] && str_w(d->head) > dw) dw = str_w(d->head);
    if (iw - dw - 2 < 12) dw = 0; /* too narrow: names alone */
    int nw = dw ? iw - dw - 2 : iw;
    if (dw && d->head[0] && rows > 0 && d->n_items)
        ui_draw_str(w, r.y + 1, r.x + 3 + iw - dw, dw, t->a[UI_C_DIM], d->head);
    for (int i = first; i < d->n_items && i - first < rows; i++) {
        int y = r.y + 2 + i - first;
        attr_t a = i == d->focus ? t->a[UI_C_SEL] : t->a[UI_C_NORMAL];
        ui_draw_fill(w, y, r.x + 2, r.w - 4, a, " ");
        ui_draw_mid(w, y, r.x + 3, nw, a, d->items[i]);
        if (dw) ui_draw_str(w, y, r.x + 3 + iw - dw, dw, a, d->details[i]);
    }
    *cy = r.y + 2 + d->focus - first;
    *cx = r.x + 2;
}

void ui_dialog_draw(WINDOW *w, struct ui_rect screen, const struct ui_dialog *d,
                    const struct ui_theme *t, int *cy, int *cx, struct ui_rect *box)
{
    int bw = screen.w - 4 < 64 ? screen.w - 4 : 64;
    int mlines = d->message[0] ? ui_wrap_count(d->message, strlen(d->message), bw - 4) : 0;
    /* a list's footer (its message) goes first when the window is short */
    int foot = d->kind == UI_DLG_LIST && d->n_items ? mlines : 0;
    int bh = d->kind == UI_DLG_CONFIRM  ? 4 + (mlines ? mlines : 1)
             : d->kind == UI_DLG_PROMPT ? 5
             : d->kind == UI_DLG_LIST   ? 4 + (d->n_items ? d->n_items + foot : mlines)
                                        : 4 + 2 * d->n_fields;
    if (bh > screen.h) bh = screen.h;
    if (d->kind == UI_DLG_LIST && d->n_items && bh - 4 - foot < 1) foot = 0;
    struct ui_rect r = {screen.y + (screen.h - bh) / 2, screen.x + (screen.w - bw) / 2, bh, bw};
    *box = r;
    ui_draw_box(w, r, t->a[UI_C_TITLE], d->title);
    if (d->kind == UI_DLG_CONFIRM) {
        draw_wrapped(w, r.y + 1, bh - 4, r.x + 2, bw - 4, t->a[UI_C_NORMAL], d->message);
        ui_draw_str(w, r.y + bh - 2, r.x + 2, bw - 4, t->a[UI_C_KEY], d->keys);
        return;
    }
    if (d->kind == UI_DLG_LIST) {
        /* rows that do not fit scroll with the selection */
        int rows = bh - 4 - foot > 0 ? bh - 4 - foot : 0;
        draw_list(w, r, rows, d, t, cy, cx);
        if (!d->n_items) /* the empty list's hint (a command to copy), wrapped whole */
            draw_wrapped(w, r.y + 2, bh - 3, r.x + 2, bw - 4, t->a[UI_C_DIM], d->message);
        else if (foot)
            draw_wrapped(w, r.y + 3 + rows, foot, r.x + 2, bw - 4, t->a[UI_C_DIM], d->message);
        return;
    }
    int lw = d->kind == UI_DLG_PARAMS ? 15 : 0;
    for (int i = 0; i < d->n_fields; i++) {
        int y = r.y + 1 + (d->kind == UI_DLG_PARAMS ? 2 * i : 1);
        const struct ui_input *in = &d->field[i];
        if (lw) ui_draw_str(w, y, r.x + 2, lw, t->a[UI_C_DIM], param_labels[i]);
        int fx = r.x + 2 + lw, fw = bw - 4 - lw;
        attr_t a = i == d->focus ? t->a[UI_C_SEL] : t->a[UI_C_NORMAL];
        ui_draw_fill(w, y, fx, fw, a, " ");
        /* a field longer than its box shows its end, where the cursor is */
        const char *s = in->buf ? in->buf : "";
        size_t from = 0;
        while (ui_text_width(s + from, in->cur - from) >= fw && from < in->cur)
            from = ui_text_next(s, in->len, from);
        ui_draw_text(w, y, fx, fw, a, s + from, in->len - from);
        if (i == d->focus) *cy = y, *cx = fx + ui_text_width(s + from, in->cur - from);
    }
    if (d->error[0]) ui_draw_str(w, r.y + bh - 2, r.x + 2, bw - 4, t->a[UI_C_WARN], d->error);
}
