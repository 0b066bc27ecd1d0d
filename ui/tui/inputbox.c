/* inputbox: drawing the input box (see inputbox.h). */
#include "inputbox.h"

#include <stdio.h>
#include <string.h>

#include "instruments.h"
#include "text.h"

static int text_w(int box_w)
{
    return box_w - 2 > 1 ? box_w - 2 : 1;
}

/* Hard wrap (every grapheme kept, spaces included) so the cursor can sit on
 * any byte boundary: an input being edited is laid out without soft breaks
 * dropping spaces. Returns the line count; fills the cursor's line/col. */
static int layout(const char *s, size_t n, size_t cur, int tw, int *cl, int *cc,
                  void (*emit)(void *, int, const char *, size_t), void *ctx)
{
    int line = 0, col = 0;
    size_t ls = 0;
    *cl = 0, *cc = 0;
    for (size_t i = 0; i <= n;) {
        if (i == cur) *cl = line, *cc = col;
        if (i == n) break;
        if (s[i] == '\n') {
            if (emit) emit(ctx, line, s + ls, i - ls);
            line++, col = 0, ls = ++i;
            continue;
        }
        int gw;
        size_t k = ui_grapheme(s + i, n - i, &gw);
        if (col + gw > tw && col > 0) {
            if (emit) emit(ctx, line, s + ls, i - ls);
            line++, col = 0, ls = i;
            if (i == cur) *cl = line, *cc = 0;
        }
        col += gw;
        i += k;
    }
    if (emit) emit(ctx, line, s + ls, n - ls);
    /* a cursor at the very end of a full line goes to the next line */
    if (*cc >= tw) *cl += 1, *cc = 0;
    return line + 1 + (*cl > line);
}

int ui_inputbox_lines(const struct ui_input *in, int box_w)
{
    int cl, cc;
    return layout(in->buf ? in->buf : "", in->len, in->cur, text_w(box_w), &cl, &cc, NULL, NULL);
}

struct emit_ctx {
    WINDOW *w;
    struct ui_rect in;
    int first;
    attr_t a;
};

static void emit_line(void *p, int line, const char *s, size_t n)
{
    struct emit_ctx *c = p;
    int y = line - c->first;
    if (y < 0 || y >= c->in.h) return;
    ui_draw_text(c->w, c->in.y + y, c->in.x, c->in.w, c->a, s, n);
}

void ui_inputbox_draw(WINDOW *w, struct ui_rect r, const struct ui_input *in,
                      const struct ui_theme *t, bool focused, const char *hint, int *cy, int *cx)
{
    char title[96];
    size_t chars = ui_input_chars(in);
    /* nothing typed is no token (a model that adds BOS would count it) */
    long tok = chars ? in->tokens : 0;
    if (in->tokens >= 0)
        snprintf(title, sizeof title, "message · %zu char%s · %ld token%s", chars,
                 chars == 1 ? "" : "s", tok, tok == 1 ? "" : "s");
    else
        snprintf(title, sizeof title, "message · %zu char%s", chars, chars == 1 ? "" : "s");
    ui_draw_box(w, r, focused ? t->a[UI_C_USER] : t->a[UI_C_DIM], title);
    /* the context gauge after the title, in the warning colour near the limit */
    if (in->ctx_limit > 0 && in->ctx_tokens >= 0) {
        char a[16], b[16];
        ui_fmt_count(a, sizeof a, (double)in->ctx_tokens);
        ui_fmt_count(b, sizeof b, (double)in->ctx_limit);
        bool warn = (double)in->ctx_tokens >= UI_CTX_WARN * (double)in->ctx_limit;
        int x = r.x + 2 + ui_text_width(title, strlen(title)) + 2;
        ui_draw_fmt(w, r.y, x, r.x + r.w - 2 - x, warn ? t->a[UI_C_WARN] | A_BOLD : t->a[UI_C_DIM],
                    "· context %s/%s ", a, b);
    }
    struct ui_rect inr = {r.y + 1, r.x + 1, r.h - 2, r.w - 2};
    if (inr.h <= 0 || inr.w <= 0) return;
    const char *s = in->buf ? in->buf : "";
    int cl, cc;
    int lines = layout(s, in->len, in->cur, inr.w, &cl, &cc, NULL, NULL);
    int first = cl - inr.h + 1 > 0 ? cl - inr.h + 1 : 0;
    if (lines - first < inr.h && lines > inr.h) first = lines - inr.h;
    if (first > cl) first = cl;
    struct emit_ctx c = {w, inr, first, t->a[UI_C_NORMAL]};
    layout(s, in->len, in->cur, inr.w, &cl, &cc, emit_line, &c);
    if (in->len == 0 && hint) ui_draw_str(w, inr.y, inr.x + 1, inr.w - 1, t->a[UI_C_DIM], hint);
    if (first > 0) ui_draw_fmt(w, r.y, r.x + r.w - 10, 8, t->a[UI_C_DIM], " ↑%d ", first);
    *cy = inr.y + cl - first;
    *cx = inr.x + cc;
}

bool ui_inputbox_edit_key(struct ui_input *in, const struct ui_key *k)
{
    char b[4];
    switch (k->fn) {
    case 0:
        if (k->ch == 127 || k->ch == 8)
            ui_input_backspace(in);
        else if (k->ch == 1)
            ui_input_home(in); /* Ctrl-A */
        else if (k->ch == 5)
            ui_input_end(in); /* Ctrl-E */
        else if (k->ch == 21)
            ui_input_clear(in); /* Ctrl-U */
        else if (k->ch >= 0x20)
            ui_input_insert(in, b, ui_utf8_encode(k->ch, b));
        else
            return false;
        return true;
    case KEY_BACKSPACE: ui_input_backspace(in); return true;
    case KEY_DC: ui_input_delete(in); return true;
    case KEY_LEFT: ui_input_left(in); return true;
    case KEY_RIGHT: ui_input_right(in); return true;
    case UI_KEY_CTRL_LEFT:
    case UI_KEY_WORD_LEFT: ui_input_word_left(in); return true;
    case UI_KEY_CTRL_RIGHT:
    case UI_KEY_WORD_RIGHT: ui_input_word_right(in); return true;
    case KEY_HOME: ui_input_home(in); return true;
    case KEY_END: ui_input_end(in); return true;
    }
    return false;
}
