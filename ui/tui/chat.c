/* chat: laying out and drawing the transcript (see chat.h). */
#include "chat.h"

#include <stdio.h>
#include <string.h>

#include "instruments.h"
#include "text.h"

enum line_kind { L_HEAD, L_TEXT, L_CODE, L_FENCE, L_NOTE, L_BLANK };

struct line {
    enum line_kind kind;
    const char *s;
    size_t n;
    bool last_text; /* the message's last text line (streaming cursor) */
};

typedef void (*emit_fn)(void *ctx, const struct line *l);

#define INDENT 2

static bool is_fence(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && i < 3 && s[i] == ' ') i++;
    return n - i >= 3 && memcmp(s + i, "```", 3) == 0;
}

static const char *note_text(const struct ui_msg *m)
{
    if (m->note) return m->note;
    switch (m->status) {
    case UI_MSG_CANCELLED:
        return "[cancelled: partial reply kept]";
    case UI_MSG_INTERRUPTED:
        return "[interrupted: the app stopped while this streamed]";
    case UI_MSG_ERROR:
        return "[failed]";
    default:
        return NULL;
    }
}

/* Emits (when f is set) and counts the display lines of one message at
 * text width tw. Code state is carried from fence to fence. */
static int msg_lines(const struct ui_msg *m, int tw, emit_fn f, void *ctx)
{
    int count = 0;
    struct line l = {L_HEAD, NULL, 0, false};
    if (m->role == UI_ROLE_NOTE) goto body;
    if (f) f(ctx, &l);
    count++;
body:;
    const char *s = m->text;
    size_t n = m->len;
    bool code = false;
    if (n == 0 && m->role != UI_ROLE_NOTE && m->status != UI_MSG_ERROR) {
        l = (struct line){L_TEXT, "", 0, true};
        if (f) f(ctx, &l);
        count++;
    }
    for (size_t ls = 0; ls < n;) {
        size_t le = ls;
        while (le < n && s[le] != '\n') le++;
        bool fence = is_fence(s + ls, le - ls);
        enum line_kind k = fence                     ? L_FENCE
                           : code                    ? L_CODE
                           : m->role == UI_ROLE_NOTE ? L_NOTE
                                                     : L_TEXT;
        if (fence) code = !code;
        struct ui_wrap w;
        size_t st, len;
        int cols;
        ui_wrap_init(&w, s + ls, le - ls, tw);
        while (ui_wrap_next(&w, &st, &len, &cols)) {
            l = (struct line){k, s + ls + st, len, le >= n && w.pos >= le - ls};
            if (f) f(ctx, &l);
            count++;
        }
        if (le >= n) break;
        ls = le + 1;
        if (ls == n) { /* a trailing newline shows as an empty line */
            l = (struct line){code ? L_CODE : L_TEXT, "", 0, true};
            if (f) f(ctx, &l);
            count++;
        }
    }
    const char *note = note_text(m);
    if (note) {
        struct ui_wrap w;
        size_t st, len;
        int cols;
        ui_wrap_init(&w, note, strlen(note), tw);
        while (ui_wrap_next(&w, &st, &len, &cols)) {
            l = (struct line){L_NOTE, note + st, len, false};
            if (f) f(ctx, &l);
            count++;
        }
    }
    l = (struct line){L_BLANK, NULL, 0, false};
    if (f) f(ctx, &l);
    return count + 1;
}

static int text_width(int pane_w)
{
    int tw = pane_w - 2 - INDENT;
    return tw < 1 ? 1 : tw;
}

static int msg_count(struct ui_msg *m, int tw)
{
    if (m->lay_w != tw || m->lay_len != m->len || m->lay_status != m->status) {
        m->lay_lines = msg_lines(m, tw, NULL, NULL);
        m->lay_w = tw;
        m->lay_len = m->len;
        m->lay_status = m->status;
    }
    return m->lay_lines;
}

int ui_chat_lines(struct ui_state *s, int pane_w)
{
    int tw = text_width(pane_w), total = 0;
    for (size_t i = 0; i < s->n_msgs; i++) total += msg_count(&s->msgs[i], tw);
    return total;
}

struct draw_ctx {
    WINDOW *w;
    struct ui_rect r; /* inside of the box */
    const struct ui_theme *t;
    const struct ui_msg *m;
    bool selected;
    int line;  /* index of the next emitted line */
    int first; /* first visible line index */
};

static const char *status_word(const struct ui_msg *m)
{
    switch (m->status) {
    case UI_MSG_QUEUED:
        return "waiting";
    case UI_MSG_STREAMING:
        return "streaming";
    case UI_MSG_CANCELLED:
        return "cancelled";
    case UI_MSG_ERROR:
        return "failed";
    case UI_MSG_INTERRUPTED:
        return "interrupted";
    default:
        return NULL;
    }
}

/* Seconds left of a prefill at the rate of its chunks so far, or -1. */
static double prefill_eta(const struct ui_phase *ph)
{
    int32_t computed = ph->pf_done - ph->n_cached;
    double spent = ph->pf_t - ph->admit_t;
    if (computed <= 0 || spent <= 0) return -1;
    return (double)(ph->pf_total - ph->pf_done) * spent / computed;
}

/* " · prefill ▕███░░░▏ 1.2k/3.0k · 4 s left": a long prompt never looks frozen. */
static int draw_prefill(struct draw_ctx *c, int y, int x)
{
    const struct ui_phase *ph = &c->m->ph;
    const struct ui_theme *t = c->t;
    int end = c->r.x + c->r.w;
    char a[16], b[16], eta[40] = "";
    ui_fmt_count(a, sizeof a, ph->pf_done);
    ui_fmt_count(b, sizeof b, ph->pf_total);
    double left = prefill_eta(ph);
    if (left >= 0) {
        char d[24];
        ui_fmt_dur(d, sizeof d, left);
        snprintf(eta, sizeof eta, " · %s left", d);
    }
    int x0 = x;
    x += ui_draw_str(c->w, y, x, end - x, t->a[UI_C_DIM], " · prefill ");
    const int bw = end - x >= 40 ? 10 : 5;
    if (end - x > bw + 2) {
        int fill = (int)((int64_t)bw * ph->pf_done / (ph->pf_total > 0 ? ph->pf_total : 1));
        x += ui_draw_str(c->w, y, x, 1, t->a[UI_C_DIM], "▕");
        for (int i = 0; i < bw; i++)
            x += ui_draw_str(c->w, y, x, 1, i < fill ? t->a[UI_C_PREFILL] : t->a[UI_C_DIM],
                             i < fill ? "█" : "░");
        x += ui_draw_str(c->w, y, x, 1, t->a[UI_C_DIM], "▏");
    }
    x += ui_draw_fmt(c->w, y, x, end - x, t->a[UI_C_NORMAL], " %s/%s tok%s", a, b, eta);
    return x - x0;
}

static bool prefilling(const struct ui_msg *m)
{
    return m->status == UI_MSG_QUEUED && m->ph.pf_total > 0 && m->ph.pf_done < m->ph.pf_total;
}

static void draw_head(struct draw_ctx *c, int y)
{
    const struct ui_msg *m = c->m;
    const struct ui_theme *t = c->t;
    const char *who = m->role == UI_ROLE_USER     ? "you"
                      : m->role == UI_ROLE_SYSTEM ? "system"
                                                  : "assistant";
    attr_t a = m->role == UI_ROLE_USER ? t->a[UI_C_USER] : t->a[UI_C_ASSIST];
    int x = c->r.x;
    x += ui_draw_str(c->w, y, x, c->r.w, a, c->selected ? "▶ " : "▌ ");
    x += ui_draw_str(c->w, y, x, c->r.x + c->r.w - x, a, who);
    if (prefilling(m)) {
        draw_prefill(c, y, x);
        return;
    }
    const char *st = status_word(m);
    if (st)
        x += ui_draw_fmt(c->w, y, x, c->r.x + c->r.w - x,
                         m->status == UI_MSG_ERROR ? t->a[UI_C_WARN] : t->a[UI_C_DIM], " · %s", st);
    if (m->role == UI_ROLE_ASSISTANT && m->ph.have && m->ph.n_generated > 0 &&
        m->status != UI_MSG_STREAMING)
        ui_draw_fmt(c->w, y, x, c->r.x + c->r.w - x, t->a[UI_C_DIM], " · %d tok · %.2f s",
                    m->ph.n_generated, m->ph.e2e_s);
}

static void draw_line(void *ctx, const struct line *l)
{
    struct draw_ctx *c = ctx;
    int idx = c->line++;
    if (idx < c->first || idx - c->first >= c->r.h) return;
    int y = c->r.y + idx - c->first;
    const struct ui_theme *t = c->t;
    switch (l->kind) {
    case L_HEAD:
        draw_head(c, y);
        break;
    case L_NOTE:
        ui_draw_text(c->w, y, c->r.x + INDENT, c->r.w - INDENT,
                     c->m->status == UI_MSG_ERROR ? t->a[UI_C_WARN] : t->a[UI_C_NOTE], l->s, l->n);
        break;
    case L_BLANK:
        break;
    default: {
        attr_t a = l->kind == L_CODE    ? t->a[UI_C_CODE]
                   : l->kind == L_FENCE ? t->a[UI_C_FENCE]
                                        : t->a[UI_C_NORMAL];
        if (l->kind == L_CODE) ui_draw_str(c->w, y, c->r.x, 1, t->a[UI_C_FENCE], "┊");
        int x = c->r.x + INDENT;
        x += ui_draw_text(c->w, y, x, c->r.w - INDENT, a, l->s, l->n);
        bool live = c->m->status == UI_MSG_STREAMING || c->m->status == UI_MSG_QUEUED;
        if (live && l->last_text && x < c->r.x + c->r.w)
            ui_draw_str(c->w, y, x, 1, t->a[UI_C_ASSIST],
                        c->m->status == UI_MSG_QUEUED ? "…" : "▍");
    }
    }
}

void ui_chat_draw(WINDOW *w, struct ui_rect r, struct ui_state *s, const struct ui_theme *t,
                  const char *title, bool mark_selected)
{
    ui_draw_box(w, r, t->a[UI_C_TITLE], title);
    struct ui_rect in = {r.y + 1, r.x + 1, r.h - 2, r.w - 2};
    if (in.h <= 0 || in.w <= 0) return;
    int tw = text_width(r.w), total = ui_chat_lines(s, r.w);
    int max_scroll = total > in.h ? total - in.h : 0;
    if (s->scroll > max_scroll) s->scroll = max_scroll;
    if (s->scroll < 0) s->scroll = 0;
    struct draw_ctx c = {w, in, t, NULL, false, 0, total > in.h ? total - in.h - s->scroll : 0};
    if (s->n_msgs == 0) {
        ui_draw_str(w, in.y + in.h / 2, in.x + 2, in.w - 2, t->a[UI_C_DIM],
                    "Type a message and press Enter. F1 shows every key.");
        if (s->base_model)
            ui_draw_str(w, in.y + in.h / 2 + 2, in.x + 2, in.w - 2, t->a[UI_C_NOTE],
                        "A base model (no chat template): it continues the text you write.");
        return;
    }
    for (size_t i = 0; i < s->n_msgs; i++) {
        struct ui_msg *m = &s->msgs[i];
        int n = msg_count(m, tw);
        if (c.line + n <= c.first || c.line - c.first >= in.h) {
            c.line += n; /* wholly outside the view: only its cached height matters */
            continue;
        }
        c.m = m;
        c.selected = mark_selected && i == s->timeline_msg;
        msg_lines(m, tw, draw_line, &c);
    }
    if (s->scroll > 0)
        ui_draw_fmt(w, r.y + r.h - 1, r.x + r.w - 16 > r.x ? r.x + r.w - 16 : r.x, 15,
                    t->a[UI_C_TITLE], " ↓ %d more ", s->scroll);
}
