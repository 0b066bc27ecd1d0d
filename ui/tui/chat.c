/* chat: laying out and drawing the transcript (see chat.h). */
#include "chat.h"

#include <stdio.h>
#include <string.h>

#include "instruments.h"
#include "md.h"
#include "text.h"
#include "think.h"

enum line_kind {
    L_HEAD, L_TEXT, L_CODE, L_FENCE, L_NOTE, L_BLANK, L_MD, L_RULE,
    L_THINKHEAD, /* a reply's thinking folded to one line (or heading it, shown) */
    L_THINK      /* a line of the thinking, shown (Alt-T) */
};

struct line {
    enum line_kind kind;
    const char *s;
    size_t n;
    bool last_text;        /* the message's last text line (streaming cursor) */
    const uint8_t *st;     /* L_MD: a UI_MD_* style per byte of s */
    const char *prefix;    /* L_MD: bullet / quote bar / indent drawn before s */
};

typedef void (*emit_fn)(void *ctx, const struct line *l);

#define INDENT 2
#define RIGHT_MARGIN 1 /* a reply never touches the border */

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

/* An assistant reply's Markdown blocks (text[0..text_len), its answer) as
 * display lines; returns the count or -1 when it could not be parsed (then
 * it is laid out as plain text). */
static int md_lines(const char *text, size_t text_len, int tw, emit_fn f, void *ctx)
{
    struct ui_md md;
    if (ui_md_parse(&md, text, text_len) < 0) return -1;
    int count = 0;
    struct line l;
    for (size_t i = 0; i < md.n; i++) {
        const struct ui_md_block *b = &md.v[i];
        bool last = i + 1 == md.n;
        switch (b->kind) {
        case UI_MD_BLANK:
            l = (struct line){L_TEXT, "", 0, false, NULL, NULL};
            if (f) f(ctx, &l);
            count++;
            break;
        case UI_MD_RULE:
            l = (struct line){L_RULE, "", 0, last, NULL, NULL};
            if (f) f(ctx, &l);
            count++;
            break;
        case UI_MD_FENCE:
            l = (struct line){L_FENCE, b->text, b->n, false, NULL, NULL};
            if (f) f(ctx, &l);
            count++;
            break;
        default: {
            int pw = ui_text_width(b->first, strlen(b->first));
            int w = tw - pw > 4 ? tw - pw : 4;
            struct ui_wrap wr;
            size_t st, len;
            int cols;
            bool first = true;
            ui_wrap_init(&wr, b->text, b->n, w);
            if (b->n == 0) {
                l = (struct line){b->kind == UI_MD_CODE ? L_CODE : L_MD, "", 0, last, b->style,
                                  b->first};
                if (f) f(ctx, &l);
                count++;
            }
            while (ui_wrap_next(&wr, &st, &len, &cols)) {
                bool code = b->kind == UI_MD_CODE;
                l = (struct line){code ? L_CODE : L_MD, b->text + st, len,
                                  last && wr.pos >= b->n, b->style + st,
                                  first ? b->first : b->rest};
                if (f) f(ctx, &l);
                count++;
                first = false;
            }
        }
        }
    }
    ui_md_free(&md);
    return count;
}

/* A reply's thinking: its one-line head, then (shown) its lines, wrapped
 * under a bar. Returns the count. */
static int think_lines(const struct ui_msg *m, const struct ui_think *th, bool shown, int tw,
                       emit_fn f, void *ctx)
{
    struct line l = {L_THINKHEAD, NULL, 0, false, NULL, NULL};
    int count = 1;
    if (f) f(ctx, &l);
    if (!shown) return count;
    const char *s = m->text + th->from;
    size_t n = th->to - th->from;
    for (size_t ls = 0; ls < n;) {
        size_t le = ls;
        while (le < n && s[le] != '\n') le++;
        struct ui_wrap w;
        size_t st, len;
        int cols;
        ui_wrap_init(&w, s + ls, le - ls, tw - 2 > 1 ? tw - 2 : 1);
        if (le == ls) { /* a blank line of the thought */
            l = (struct line){L_THINK, "", 0, false, NULL, NULL};
            if (f) f(ctx, &l);
            count++;
        }
        while (ui_wrap_next(&w, &st, &len, &cols)) {
            l = (struct line){L_THINK, s + ls + st, len, false, NULL, NULL};
            if (f) f(ctx, &l);
            count++;
        }
        ls = le + 1;
    }
    return count;
}

/* Emits (when f is set) and counts the display lines of one message at
 * text width tw; a reply's thinking folded unless show_think. Code state is
 * carried from fence to fence. */
static int msg_lines(const struct ui_msg *m, int tw, bool show_think, emit_fn f, void *ctx)
{
    int count = 0;
    struct line l = {L_HEAD, NULL, 0, false, NULL, NULL};
    if (m->role == UI_ROLE_NOTE) goto body;
    if (f) f(ctx, &l);
    count++;
body:;
    const char *s = m->text;
    size_t n = m->len;
    bool code = false;
    if (m->role == UI_ROLE_ASSISTANT) { /* the thinking apart, then the answer */
        struct ui_think th;
        ui_think_split(s, n, &th);
        if (th.has) {
            count += think_lines(m, &th, show_think, tw, f, ctx);
            s += th.answer;
            n -= th.answer;
        } else if (ui_think_pending(s, n)) {
            n = 0; /* "<thi": not shown until it is known to be no tag */
        }
    }
    /* replies are Markdown: rendered; the user's text shows as typed */
    int mdn = m->role == UI_ROLE_ASSISTANT && n > 0 ? md_lines(s, n, tw, f, ctx) : -1;
    if (mdn >= 0) {
        count += mdn;
        n = 0; /* the text is laid out; the note follows */
    }
    if (n == 0 && mdn <= 0 && m->role != UI_ROLE_NOTE && m->status != UI_MSG_ERROR) {
        l = (struct line){L_TEXT, "", 0, true, NULL, NULL};
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
            l = (struct line){k, s + ls + st, len, le >= n && w.pos >= le - ls, NULL, NULL};
            if (f) f(ctx, &l);
            count++;
        }
        if (le >= n) break;
        ls = le + 1;
        if (ls == n) { /* a trailing newline shows as an empty line */
            l = (struct line){code ? L_CODE : L_TEXT, "", 0, true, NULL, NULL};
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
            l = (struct line){L_NOTE, note + st, len, false, NULL, NULL};
            if (f) f(ctx, &l);
            count++;
        }
    }
    l = (struct line){L_BLANK, NULL, 0, false, NULL, NULL};
    if (f) f(ctx, &l);
    return count + 1;
}

static int text_width(int pane_w)
{
    int tw = pane_w - 2 - INDENT - RIGHT_MARGIN;
    return tw < 1 ? 1 : tw;
}

static int msg_count(struct ui_msg *m, int tw, bool show_think)
{
    if (m->lay_w != tw || m->lay_len != m->len || m->lay_status != m->status ||
        m->lay_think != show_think) {
        m->lay_lines = msg_lines(m, tw, show_think, NULL, NULL);
        m->lay_w = tw;
        m->lay_think = show_think;
        m->lay_len = m->len;
        m->lay_status = m->status;
    }
    return m->lay_lines;
}

int ui_chat_lines(struct ui_state *s, int pane_w)
{
    int tw = text_width(pane_w), total = 0;
    for (size_t i = 0; i < s->n_msgs; i++) total += msg_count(&s->msgs[i], tw, s->show_thinking);
    return total;
}

struct draw_ctx {
    WINDOW *w;
    struct ui_rect r; /* inside of the box */
    const struct ui_theme *t;
    const struct ui_msg *m;
    bool selected;
    bool show_think;
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

/* "▸ thought for 2.1 s · 34 tok" (folded; ▾ shown), "thinking… 1.2 s · 20 tok" while it
 * streams; a reply read back from the history has no figures. */
static void draw_think_head(struct draw_ctx *c, int y)
{
    const struct ui_msg *m = c->m;
    const struct ui_theme *t = c->t;
    int x = c->r.x + INDENT, end = c->r.x + c->r.w - RIGHT_MARGIN;
    bool live = m->status == UI_MSG_STREAMING && m->think == UI_THINK_OPEN;
    x += ui_draw_str(c->w, y, x, end - x, t->a[UI_C_NOTE], c->show_think ? "▾ " : "▸ ");
    char dur[24] = "";
    double secs = live ? m->ph.e2e_s - m->ph.prefill_end : m->think_s;
    if (m->think_tokens > 0) ui_fmt_dur(dur, sizeof dur, secs > 0 ? secs : 0);
    if (live)
        x += ui_draw_fmt(c->w, y, x, end - x, t->a[UI_C_NOTE], "thinking… %s · %d tok", dur,
                         m->think_tokens);
    else if (m->think_tokens > 0)
        x += ui_draw_fmt(c->w, y, x, end - x, t->a[UI_C_NOTE], "thought for %s · %d tok", dur,
                         m->think_tokens);
    else
        x += ui_draw_str(c->w, y, x, end - x, t->a[UI_C_NOTE], "thought");
    ui_draw_str(c->w, y, x, end - x, t->a[UI_C_DIM], c->show_think ? "  (Alt-T folds it)"
                                                                  : "  (Alt-T shows it)");
}

static attr_t md_attr(const struct ui_theme *t, uint8_t st)
{
    attr_t a = t->a[UI_C_NORMAL];
    if (st & UI_MD_MONO) a = t->a[UI_C_CODE];
    if (st & UI_MD_HEAD) a = t->a[UI_C_ASSIST];
    if (st & UI_MD_BOLD) a |= A_BOLD;
    if (st & UI_MD_ITALIC) a |= A_ITALIC;
    if (st & UI_MD_LINK) a |= A_UNDERLINE;
    return a;
}

/* A Markdown line: its prefix, then runs of one style each. */
static void draw_md(struct draw_ctx *c, int y, const struct line *l)
{
    const struct ui_theme *t = c->t;
    int x = c->r.x + INDENT, end = c->r.x + c->r.w - RIGHT_MARGIN;
    if (l->prefix) x += ui_draw_str(c->w, y, x, end - x, t->a[UI_C_DIM], l->prefix);
    for (size_t i = 0; i < l->n;) {
        size_t j = i + 1;
        while (j < l->n && l->st[j] == l->st[i]) j++;
        x += ui_draw_text(c->w, y, x, end - x, md_attr(t, l->st[i]), l->s + i, j - i);
        i = j;
    }
    bool live = c->m->status == UI_MSG_STREAMING || c->m->status == UI_MSG_QUEUED;
    if (live && l->last_text && x < c->r.x + c->r.w) ui_draw_str(c->w, y, x, 1, t->a[UI_C_ASSIST], "▍");
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
    case L_THINKHEAD:
        draw_think_head(c, y);
        break;
    case L_THINK: {
        int x = c->r.x + INDENT;
        x += ui_draw_str(c->w, y, x, c->r.w - INDENT, t->a[UI_C_DIM], "│ ");
        ui_draw_text(c->w, y, x, c->r.x + c->r.w - RIGHT_MARGIN - x, t->a[UI_C_DIM], l->s, l->n);
        break;
    }
    case L_RULE:
        ui_draw_fill(c->w, y, c->r.x + INDENT, c->r.w - INDENT - RIGHT_MARGIN, t->a[UI_C_DIM], "─");
        break;
    case L_MD:
        draw_md(c, y, l);
        break;
    case L_FENCE:
        if (c->m->role == UI_ROLE_ASSISTANT) { /* a code block's head: its language */
            int x = c->r.x + INDENT;
            x += ui_draw_str(c->w, y, x, c->r.w - INDENT, t->a[UI_C_FENCE], "┌─ ");
            x += ui_draw_text(c->w, y, x, c->r.x + c->r.w - x, t->a[UI_C_FENCE], l->s, l->n);
            if (l->n) x += ui_draw_str(c->w, y, x, c->r.x + c->r.w - x, t->a[UI_C_FENCE], " ");
            ui_draw_fill(c->w, y, x, c->r.x + c->r.w - RIGHT_MARGIN - x, t->a[UI_C_FENCE], "─");
            break;
        }
        /* a user's ``` line is drawn as typed */
        __attribute__((fallthrough));
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

/* Draws s wrapped at words into rows y..end-1; returns the row after it. */
static int draw_wrapped(WINDOW *w, int y, int end, int x, int width, attr_t a, const char *s)
{
    struct ui_wrap wr;
    size_t st, len;
    int used;
    if (width < 1) return y;
    ui_wrap_init(&wr, s, strlen(s), width);
    while (y < end && ui_wrap_next(&wr, &st, &len, &used)) ui_draw_text(w, y++, x, width, a, s + st, len);
    return y;
}

void ui_chat_draw(WINDOW *w, struct ui_rect r, struct ui_state *s, const struct ui_theme *t,
                  const char *title, bool mark_selected)
{
    ui_draw_box(w, r, t->a[UI_C_TITLE], title);
    struct ui_rect in = {r.y + 1, r.x + 1, r.h - 2, r.w - 2};
    if (in.h <= 0 || in.w <= 0) return;
    /* lasting problems (no model, no history) take the box's top rows, so
     * the box stays in line with the panes beside it; wrapped at words, at
     * most half of the box beside a conversation, all of an empty one (the
     * fix they name must show whole even with the panes beside it) */
    int keep = s->n_msgs ? (r.h - 2) / 2 : 0;
    for (int i = 0; i < 2; i++) {
        struct ui_wrap wr;
        size_t st, len;
        int used;
        if (!s->alert[i][0]) continue;
        ui_wrap_init(&wr, s->alert[i], strlen(s->alert[i]), in.w - 2);
        while (in.h > keep && ui_wrap_next(&wr, &st, &len, &used)) {
            ui_draw_fill(w, in.y, in.x, in.w, t->a[UI_C_ERROR], " ");
            ui_draw_text(w, in.y, in.x + 1, in.w - 2, t->a[UI_C_ERROR], s->alert[i] + st, len);
            in.y++, in.h--;
        }
    }
    int tw = text_width(r.w), total = ui_chat_lines(s, r.w);
    int max_scroll = total > in.h ? total - in.h : 0;
    if (s->scroll > max_scroll) s->scroll = max_scroll;
    if (s->scroll < 0) s->scroll = 0;
    struct draw_ctx c = {w, in, t, NULL, false, s->show_thinking, 0,
                         total > in.h ? total - in.h - s->scroll : 0};
    if (s->n_msgs == 0) {
        static const char hello[] = "Type a message and press Enter. F1 (or /help) lists every key.";
        static const char base[] = "A base model (no chat template): it continues the text you write.";
        int y = in.y + in.h / 2, end = in.y + in.h;
        y = draw_wrapped(w, y, end, in.x + 2, in.w - 3, t->a[UI_C_DIM], hello);
        if (s->base_model) draw_wrapped(w, y + 1, end, in.x + 2, in.w - 3, t->a[UI_C_NOTE], base);
        return;
    }
    for (size_t i = 0; i < s->n_msgs; i++) {
        struct ui_msg *m = &s->msgs[i];
        int n = msg_count(m, tw, s->show_thinking);
        if (c.line + n <= c.first || c.line - c.first >= in.h) {
            c.line += n; /* wholly outside the view: only its cached height matters */
            continue;
        }
        c.m = m;
        c.selected = mark_selected && i == s->timeline_msg;
        msg_lines(m, tw, s->show_thinking, draw_line, &c);
    }
    if (s->scroll > 0)
        ui_draw_fmt(w, r.y + r.h - 1, r.x + r.w - 16 > r.x ? r.x + r.w - 16 : r.x, 15,
                    t->a[UI_C_TITLE], " ↓ %d more ", s->scroll);
}
