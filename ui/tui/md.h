/* md: a reply's Markdown (parsed with md4c) as blocks the chat pane wraps
 * and draws: paragraphs and headings with bold/italic/inline-code spans,
 * list items with their bullet or number, block quotes, fenced code with
 * its language, rules and simple tables (columns padded to their widest
 * cell). Text is kept byte for byte apart from the Markdown syntax; each
 * byte has a style. No drawing here: the chat pane maps styles to colours. */
#ifndef TERN_UI_MD_H
#define TERN_UI_MD_H

#include <stddef.h>
#include <stdint.h>

enum { UI_MD_BOLD = 1, UI_MD_ITALIC = 2, UI_MD_MONO = 4, UI_MD_HEAD = 8, UI_MD_LINK = 16 };

enum ui_md_kind {
    UI_MD_PARA,  /* wrapped text (paragraph, heading, list item, quote, table row) */
    UI_MD_CODE,  /* one verbatim line of a code block */
    UI_MD_FENCE, /* the line that opens a code block: its language */
    UI_MD_RULE,  /* a horizontal rule */
    UI_MD_BLANK  /* space between blocks */
};

struct ui_md_block {
    enum ui_md_kind kind;
    char *text;      /* UTF-8, not NUL-terminated inside (n bytes) */
    uint8_t *style;  /* [n] UI_MD_* bits per byte */
    size_t n;
    char first[48];  /* prefix of the first line ("• ", "2. ", "│ "...) */
    char rest[48];   /* prefix of the following lines */
    int code_block;  /* index of the code block it belongs to (CODE/FENCE), else -1 */
};

struct ui_md {
    struct ui_md_block *v;
    size_t n, cap;
    int n_code; /* code blocks seen */
};

/* Parses text[0..len). Returns 0, or -1 when out of memory (md is then
 * empty). Free with ui_md_free. */
int ui_md_parse(struct ui_md *md, const char *text, size_t len);
void ui_md_free(struct ui_md *md);
/* The text of code block k (its lines joined by newlines), malloc'd; NULL
 * when there is none. */
char *ui_md_code_text(const struct ui_md *md, int k);

#endif
