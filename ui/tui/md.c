/* md: Markdown to chat blocks with md4c (see md.h). */
#include "md.h"

#include <md4c.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 16

struct list {
    bool ordered;
    unsigned next; /* number of the next item */
};

/* Table cells are collected, then laid out when the table ends. */
struct cell {
    char *text;
    uint8_t *style;
    size_t n;
    int row;
    bool head;
};

struct ctx {
    struct ui_md *md;
    /* the block being filled */
    char *buf;
    uint8_t *sty;
    size_t n, cap;
    unsigned style; /* span styles in force */
    int quote;      /* block quote depth */
    struct list lists[MAX_DEPTH];
    int n_lists;
    bool item_start; /* the next text starts a list item: its bullet goes first */
    char bullet[16];
    bool in_code;
    bool tight;      /* inside a tight list: no blank line between items */
    bool in_table;
    struct cell *cells;
    size_t n_cells, cap_cells;
    int row;
    bool oom;
};

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap * 2 : 64;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

static void put(struct ctx *c, const char *s, size_t n, unsigned style)
{
    size_t cap = c->cap;
    if (!grow((void **)&c->buf, &cap, c->n + n, 1) ||
        !grow((void **)&c->sty, &c->cap, c->n + n, 1)) {
        c->oom = true;
        return;
    }
    memcpy(c->buf + c->n, s, n);
    memset(c->sty + c->n, (int)style, n);
    c->n += n;
}

/* "│ │ " for the quotes, two spaces per list level. */
static void prefixes(const struct ctx *c, char *first, char *rest, size_t cap)
{
    size_t o = 0;
    for (int i = 0; i < c->quote && o + 4 < cap; i++) o += (size_t)snprintf(rest + o, cap - o, "│ ");
    for (int i = 1; i < c->n_lists && o + 3 < cap; i++) o += (size_t)snprintf(rest + o, cap - o, "  ");
    rest[o] = 0;
    snprintf(first, cap, "%s", rest);
    if (c->n_lists > 0 && c->item_start) {
        size_t bl = strlen(c->bullet);
        snprintf(first + o, cap - o, "%s", c->bullet);
        for (size_t i = 0; i < bl && o + 1 < cap; i++) rest[o++] = ' ';
        rest[o] = 0;
    } else if (c->n_lists > 0) {
        for (size_t i = 0; i < 3 && o + 1 < cap; i++) rest[o++] = ' ';
        rest[o] = 0;
        snprintf(first, cap, "%s", rest);
    }
}

static struct ui_md_block *add_block(struct ctx *c, enum ui_md_kind kind)
{
    struct ui_md *md = c->md;
    if (!grow((void **)&md->v, &md->cap, md->n + 1, sizeof *md->v)) {
        c->oom = true;
        return NULL;
    }
    struct ui_md_block *b = &md->v[md->n++];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    b->code_block = -1;
    prefixes(c, b->first, b->rest, sizeof b->first);
    return b;
}

static void blank(struct ctx *c)
{
    struct ui_md *md = c->md;
    if (md->n == 0 || md->v[md->n - 1].kind == UI_MD_BLANK) return;
    add_block(c, UI_MD_BLANK);
}

/* The filled text becomes a block (one per hard line break). */
static void flush(struct ctx *c, enum ui_md_kind kind)
{
    if (c->n == 0) return;
    size_t s = 0;
    for (size_t i = 0; i <= c->n; i++) {
        if (i < c->n && c->buf[i] != '\n') continue;
        struct ui_md_block *b = add_block(c, kind);
        if (!b) break;
        b->n = i - s;
        b->text = malloc(b->n + 1);
        b->style = malloc(b->n + 1);
        if (!b->text || !b->style) {
            c->oom = true;
            break;
        }
        memcpy(b->text, c->buf + s, b->n);
        memcpy(b->style, c->sty + s, b->n);
        b->text[b->n] = 0;
        c->item_start = false;
        s = i + 1;
    }
    c->n = 0;
}

static void code_line_blocks(struct ctx *c)
{
    /* a code block's text: one block per line, verbatim */
    size_t s = 0;
    size_t end = c->n;
    if (end > 0 && c->buf[end - 1] == '\n') end--;
    for (size_t i = 0; i <= end; i++) {
        if (i < end && c->buf[i] != '\n') continue;
        struct ui_md_block *b = add_block(c, UI_MD_CODE);
        if (!b) break;
        b->code_block = c->md->n_code - 1;
        b->n = i - s;
        b->text = malloc(b->n + 1);
        b->style = calloc(b->n + 1, 1);
        if (!b->text || !b->style) {
            c->oom = true;
            break;
        }
        memcpy(b->text, c->buf + s, b->n);
        b->text[b->n] = 0;
        s = i + 1;
    }
    c->n = 0;
}

static void table_done(struct ctx *c)
{
    int cols = 0, rows = c->row;
    for (size_t i = 0; i < c->n_cells; i++) {
        int k = 0;
        for (size_t j = 0; j < i; j++) k += c->cells[j].row == c->cells[i].row;
        if (k + 1 > cols) cols = k + 1;
    }
    int *w = calloc((size_t)(cols > 0 ? cols : 1), sizeof *w);
    if (!w) {
        c->oom = true;
        return;
    }
    /* column widths in bytes of display: counted as characters (UTF-8 starts) */
    for (size_t i = 0, col = 0; i < c->n_cells; i++) {
        col = (i > 0 && c->cells[i].row == c->cells[i - 1].row) ? col + 1 : 0;
        int cw = 0;
        for (size_t b = 0; b < c->cells[i].n; b++) cw += ((unsigned char)c->cells[i].text[b] & 0xC0) != 0x80;
        if (cw > w[col]) w[col] = cw;
    }
    for (int r = 0; r < rows; r++) {
        int col = 0;
        bool head = false;
        for (size_t i = 0; i < c->n_cells; i++) {
            struct cell *ce = &c->cells[i];
            if (ce->row != r) continue;
            if (col > 0) put(c, " │ ", strlen(" │ "), 0);
            put(c, ce->text, ce->n, 0);
            if (ce->n) memcpy(c->sty + c->n - ce->n, ce->style, ce->n);
            int cw = 0;
            for (size_t b = 0; b < ce->n; b++) cw += ((unsigned char)ce->text[b] & 0xC0) != 0x80;
            for (int p = cw; p < w[col]; p++) put(c, " ", 1, 0);
            head |= ce->head;
            col++;
        }
        flush(c, UI_MD_PARA);
        if (head) { /* a rule under the header row */
            for (int k = 0; k < cols; k++) {
                if (k) put(c, "─┼─", strlen("─┼─"), 0);
                for (int p = 0; p < w[k]; p++) put(c, "─", strlen("─"), 0);
            }
            flush(c, UI_MD_PARA);
        }
    }
    free(w);
    for (size_t i = 0; i < c->n_cells; i++) {
        free(c->cells[i].text);
        free(c->cells[i].style);
    }
    c->n_cells = 0;
    c->row = 0;
}

static int enter_block(MD_BLOCKTYPE t, void *detail, void *ud)
{
    struct ctx *c = ud;
    switch (t) {
    case MD_BLOCK_QUOTE:
        flush(c, UI_MD_PARA);
        c->quote++;
        break;
    case MD_BLOCK_UL:
    case MD_BLOCK_OL:
        flush(c, UI_MD_PARA);
        if (c->n_lists < MAX_DEPTH) {
            struct list *l = &c->lists[c->n_lists++];
            l->ordered = t == MD_BLOCK_OL;
            l->next = t == MD_BLOCK_OL ? ((MD_BLOCK_OL_DETAIL *)detail)->start : 0;
            c->tight = t == MD_BLOCK_OL ? ((MD_BLOCK_OL_DETAIL *)detail)->is_tight
                                        : ((MD_BLOCK_UL_DETAIL *)detail)->is_tight;
        }
        break;
    case MD_BLOCK_LI: {
        flush(c, UI_MD_PARA);
        struct list *l = c->n_lists ? &c->lists[c->n_lists - 1] : NULL;
        if (l && l->ordered)
            snprintf(c->bullet, sizeof c->bullet, "%u. ", l->next++);
        else
            snprintf(c->bullet, sizeof c->bullet, "• ");
        c->item_start = true;
        break;
    }
    case MD_BLOCK_H:
        flush(c, UI_MD_PARA);
        blank(c);
        c->style |= UI_MD_HEAD | UI_MD_BOLD;
        break;
    case MD_BLOCK_CODE: {
        flush(c, UI_MD_PARA);
        MD_BLOCK_CODE_DETAIL *d = detail;
        c->md->n_code++;
        struct ui_md_block *b = add_block(c, UI_MD_FENCE);
        if (b) {
            b->code_block = c->md->n_code - 1;
            size_t n = d->lang.size < 40 ? d->lang.size : 40;
            b->text = malloc(n + 1);
            b->style = calloc(n + 1, 1);
            if (b->text && b->style) {
                memcpy(b->text, d->lang.text ? d->lang.text : "", n);
                b->text[n] = 0;
                b->n = n;
            } else {
                c->oom = true;
            }
        }
        c->in_code = true;
        break;
    }
    case MD_BLOCK_HR:
        flush(c, UI_MD_PARA);
        add_block(c, UI_MD_RULE);
        break;
    case MD_BLOCK_TABLE:
        flush(c, UI_MD_PARA);
        c->in_table = true;
        c->row = 0;
        break;
    case MD_BLOCK_TH:
    case MD_BLOCK_TD:
        c->n = 0;
        if (t == MD_BLOCK_TH) c->style |= UI_MD_BOLD;
        break;
    default:
        break;
    }
    return 0;
}

static int leave_block(MD_BLOCKTYPE t, void *detail, void *ud)
{
    struct ctx *c = ud;
    (void)detail;
    switch (t) {
    case MD_BLOCK_QUOTE:
        flush(c, UI_MD_PARA);
        if (c->quote > 0) c->quote--;
        blank(c);
        break;
    case MD_BLOCK_UL:
    case MD_BLOCK_OL:
        flush(c, UI_MD_PARA);
        if (c->n_lists > 0) c->n_lists--;
        if (c->n_lists == 0) blank(c);
        break;
    case MD_BLOCK_LI:
        flush(c, UI_MD_PARA);
        if (!c->tight) blank(c);
        break;
    case MD_BLOCK_P:
        flush(c, UI_MD_PARA);
        if (c->n_lists == 0 || !c->tight) blank(c);
        break;
    case MD_BLOCK_H:
        flush(c, UI_MD_PARA);
        c->style &= ~(unsigned)(UI_MD_HEAD | UI_MD_BOLD);
        blank(c);
        break;
    case MD_BLOCK_CODE:
        code_line_blocks(c);
        c->in_code = false;
        blank(c);
        break;
    case MD_BLOCK_TH:
    case MD_BLOCK_TD: {
        if (t == MD_BLOCK_TH) c->style &= ~(unsigned)UI_MD_BOLD;
        if (!grow((void **)&c->cells, &c->cap_cells, c->n_cells + 1, sizeof *c->cells)) {
            c->oom = true;
            break;
        }
        struct cell *ce = &c->cells[c->n_cells++];
        ce->n = c->n;
        ce->text = malloc(c->n + 1);
        ce->style = malloc(c->n + 1);
        if (ce->text && ce->style) {
            memcpy(ce->text, c->buf, c->n);
            memcpy(ce->style, c->sty, c->n);
        } else {
            ce->n = 0;
        }
        ce->row = c->row;
        ce->head = t == MD_BLOCK_TH;
        c->n = 0;
        break;
    }
    case MD_BLOCK_TR:
        c->row++;
        break;
    case MD_BLOCK_TABLE:
        c->in_table = false;
        table_done(c);
        blank(c);
        break;
    default:
        break;
    }
    return 0;
}

static int enter_span(MD_SPANTYPE t, void *detail, void *ud)
{
    struct ctx *c = ud;
    (void)detail;
    if (t == MD_SPAN_EM) c->style |= UI_MD_ITALIC;
    if (t == MD_SPAN_STRONG) c->style |= UI_MD_BOLD;
    if (t == MD_SPAN_CODE) c->style |= UI_MD_MONO;
    if (t == MD_SPAN_A) c->style |= UI_MD_LINK;
    return 0;
}

static int leave_span(MD_SPANTYPE t, void *detail, void *ud)
{
    struct ctx *c = ud;
    (void)detail;
    if (t == MD_SPAN_EM) c->style &= ~(unsigned)UI_MD_ITALIC;
    if (t == MD_SPAN_STRONG) c->style &= ~(unsigned)UI_MD_BOLD;
    if (t == MD_SPAN_CODE) c->style &= ~(unsigned)UI_MD_MONO;
    if (t == MD_SPAN_A) c->style &= ~(unsigned)UI_MD_LINK;
    return 0;
}

static int text(MD_TEXTTYPE t, const MD_CHAR *s, MD_SIZE n, void *ud)
{
    struct ctx *c = ud;
    switch (t) {
    case MD_TEXT_SOFTBR:
        put(c, " ", 1, c->style);
        break;
    case MD_TEXT_BR:
        put(c, "\n", 1, c->style);
        break;
    case MD_TEXT_NULLCHAR:
        put(c, "\xEF\xBF\xBD", 3, c->style);
        break;
    case MD_TEXT_ENTITY:
        /* the common ones; others stay as written */
        if (n == 5 && !memcmp(s, "&amp;", 5)) put(c, "&", 1, c->style);
        else if (n == 4 && !memcmp(s, "&lt;", 4)) put(c, "<", 1, c->style);
        else if (n == 4 && !memcmp(s, "&gt;", 4)) put(c, ">", 1, c->style);
        else if (n == 6 && !memcmp(s, "&quot;", 6)) put(c, "\"", 1, c->style);
        else put(c, s, n, c->style);
        break;
    default:
        put(c, s, n, c->in_code ? 0 : c->style);
        break;
    }
    return 0;
}

int ui_md_parse(struct ui_md *md, const char *s, size_t len)
{
    memset(md, 0, sizeof *md);
    struct ctx c;
    memset(&c, 0, sizeof c);
    c.md = md;
    MD_PARSER p = {0};
    p.flags = MD_FLAG_TABLES | MD_FLAG_STRIKETHROUGH | MD_FLAG_NOHTML | MD_FLAG_PERMISSIVEAUTOLINKS;
    p.enter_block = enter_block;
    p.leave_block = leave_block;
    p.enter_span = enter_span;
    p.leave_span = leave_span;
    p.text = text;
    md_parse(s, (MD_SIZE)len, &p, &c);
    if (c.in_code) code_line_blocks(&c); /* a fence still streaming */
    flush(&c, UI_MD_PARA);
    for (size_t i = 0; i < c.n_cells; i++) {
        free(c.cells[i].text);
        free(c.cells[i].style);
    }
    free(c.cells);
    free(c.buf);
    free(c.sty);
    /* no trailing blank */
    while (md->n && md->v[md->n - 1].kind == UI_MD_BLANK) md->n--;
    if (c.oom) {
        ui_md_free(md);
        return -1;
    }
    return 0;
}

void ui_md_free(struct ui_md *md)
{
    for (size_t i = 0; i < md->cap && i < md->n + 1 && md->v; i++) {
        if (i >= md->n) break;
        free(md->v[i].text);
        free(md->v[i].style);
    }
    free(md->v);
    memset(md, 0, sizeof *md);
}

char *ui_md_code_text(const struct ui_md *md, int k)
{
    size_t len = 1;
    int lines = 0;
    for (size_t i = 0; i < md->n; i++)
        if (md->v[i].kind == UI_MD_CODE && md->v[i].code_block == k) len += md->v[i].n + 1, lines++;
    bool fence = false;
    for (size_t i = 0; i < md->n; i++) fence |= md->v[i].kind == UI_MD_FENCE && md->v[i].code_block == k;
    if (!fence) return NULL;
    char *out = malloc(len), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < md->n; i++) {
        const struct ui_md_block *b = &md->v[i];
        if (b->kind != UI_MD_CODE || b->code_block != k) continue;
        memcpy(o, b->text, b->n);
        o += b->n;
        *o++ = '\n';
    }
    *o = 0;
    (void)lines;
    return out;
}
