/* help: the key reference overlay (see help.h). */
#include "help.h"

#include <string.h>

#include "keymap.h"
#include "text.h"

static int str_w(const char *s)
{
    return ui_text_width(s, strlen(s));
}

/* What the instruments' short labels mean, after the keys. */
static const struct {
    const char *term, *what;
} gloss[] = {
    {"TTFT", "time to first token: Enter to the reply's first token"},
    {"TPOT", "time per output token after the first (tok/s is 1 / TPOT)"},
    {"pp", "prompt processing (prefill) speed, tokens a second"},
    {"p50 / p90", "median / 90th percentile over the session's replies"},
    {"sTTFT, sITL", "attached to a server: its own TTFT and inter-token latency (p50 / "
                    "p90 from its /metrics), beside what this client measured"},
    {"KV", "the key/value cache: blocks used, cached (prefixes kept for reuse), free"},
};
#define GLOSS_HEAD "the instruments (F2)"

struct lay {
    WINDOW *w;
    int y0, rows, top, x, kw, tw, line;
    const struct ui_theme *t;
};

/* One entry: keys (or a term) in the left column, what it does wrapped at
 * words on the right; a key list wider than its column takes a line of its own. */
static void lay_entry(struct lay *L, const char *keys, const char *what)
{
    struct ui_wrap wr;
    size_t st, len;
    int used;
    bool first = true;
    if (str_w(keys) > L->kw) {
        int y = L->line - L->top;
        if (L->w && y >= 0 && y < L->rows)
            ui_draw_str(L->w, L->y0 + y, L->x, L->kw + 2 + L->tw, L->t->a[UI_C_USER], keys);
        first = false;
        L->line++;
    }
    ui_wrap_init(&wr, what, strlen(what), L->tw);
    while (ui_wrap_next(&wr, &st, &len, &used)) {
        int y = L->line - L->top;
        if (L->w && y >= 0 && y < L->rows) {
            if (first) ui_draw_str(L->w, L->y0 + y, L->x, L->kw, L->t->a[UI_C_USER], keys);
            ui_draw_text(L->w, L->y0 + y, L->x + L->kw + 2, L->tw, L->t->a[UI_C_NORMAL],
                         what + st, len);
        }
        first = false;
        L->line++;
    }
}

/* One pass over the key table and the glossary: counts the lines at text
 * width tw and, with w set, draws those from top on into rows y0.. of the box. */
static int lay_out(WINDOW *w, int y0, int rows, int top, int x, int kw, int tw,
                   const struct ui_theme *t)
{
    struct lay L = {w, y0, rows, top, x, kw, tw, 0, t};
    for (size_t i = 0; i < ui_n_bindings; i++)
        if (ui_bindings[i].keys) lay_entry(&L, ui_bindings[i].keys, ui_bindings[i].what);
    int y = ++L.line - top; /* a blank line, then the glossary's heading */
    if (w && y >= 0 && y < rows) ui_draw_str(w, y0 + y, x, kw + 2 + tw, t->a[UI_C_TITLE], GLOSS_HEAD);
    L.line++;
    for (size_t i = 0; i < sizeof gloss / sizeof gloss[0]; i++)
        lay_entry(&L, gloss[i].term, gloss[i].what);
    return L.line;
}

bool ui_help_draw(WINDOW *w, struct ui_rect screen, const struct ui_theme *t, int *top,
                  struct ui_rect *box)
{
    /* the key column as wide as its widest entry, within a third of the box */
    int kw = 0;
    for (size_t i = 0; i < ui_n_bindings; i++)
        if (ui_bindings[i].keys && str_w(ui_bindings[i].keys) > kw) kw = str_w(ui_bindings[i].keys);
    int bw = screen.w < 84 ? screen.w : 84;
    if (kw > bw / 3) kw = bw / 3;
    int tw = bw - 4 - kw - 2;
    if (tw < 8) tw = 8;
    int lines = lay_out(NULL, 0, 0, 0, 0, kw, tw, t);
    int bh = lines + 2 < screen.h ? lines + 2 : screen.h;
    int rows = bh - 2;
    if (*top > lines - rows) *top = lines - rows;
    if (*top < 0) *top = 0;
    bool more = *top + rows < lines;
    struct ui_rect r = {screen.y + (screen.h - bh) / 2, screen.x + (screen.w - bw) / 2, bh, bw};
    *box = r;
    ui_draw_box(w, r, t->a[UI_C_TITLE],
                more || *top ? "keys · ↓/↑ scroll · other keys close" : "keys · any key closes");
    lay_out(w, r.y + 1, rows, *top, r.x + 2, kw, tw, t);
    return more;
}
