/* text: UTF-8 decoding, display widths and word wrapping (see text.h). */
#include "text.h"

#include <wchar.h>

size_t ui_utf8_decode(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    uint32_t c = u[0];
    size_t len;
    uint32_t min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2, min = 0x80, c &= 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, min = 0x800, c &= 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, min = 0x10000, c &= 0x07;
    } else {
        *cp = UI_REPLACEMENT;
        return 1;
    }
    if (len > n) {
        *cp = UI_REPLACEMENT;
        return 1;
    }
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xC0) != 0x80) {
            *cp = UI_REPLACEMENT;
            return 1;
        }
        c = (c << 6) | (u[i] & 0x3F);
    }
    /* overlong forms, surrogates and values past U+10FFFF are malformed */
    if (c < min || (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) {
        *cp = UI_REPLACEMENT;
        return 1;
    }
    *cp = c;
    return len;
}

size_t ui_utf8_encode(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

int ui_cp_width(uint32_t cp)
{
    if (cp < 0x20 || cp == 0x7F) return 1; /* drawn as a space */
    int w = wcwidth((wchar_t)cp);
    if (w < 0) return 1; /* unassigned or non-printable: one replacement cell */
    return w;
}

size_t ui_grapheme(const char *s, size_t n, int *w)
{
    uint32_t cp;
    size_t i = ui_utf8_decode(s, n, &cp);
    *w = ui_cp_width(cp);
    while (i < n) {
        size_t k = ui_utf8_decode(s + i, n - i, &cp);
        /* zero-width marks and joiners stay with their base; a newline never does */
        if (cp == '\n' || cp < 0x20 || ui_cp_width(cp) != 0) break;
        i += k;
    }
    return i;
}

int ui_text_width(const char *s, size_t n)
{
    int w = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += ui_utf8_decode(s + i, n - i, &cp);
        if (cp == '\n') continue;
        w += ui_cp_width(cp);
    }
    return w;
}

size_t ui_text_count(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; c++) {
        uint32_t cp;
        i += ui_utf8_decode(s + i, n - i, &cp);
    }
    return c;
}

size_t ui_text_next(const char *s, size_t n, size_t pos)
{
    int w;
    if (pos >= n) return n;
    return pos + ui_grapheme(s + pos, n - pos, &w);
}

size_t ui_text_prev(const char *s, size_t n, size_t pos)
{
    /* graphemes are found walking forward from the start of the line, the
     * only place where a cluster boundary is known for sure */
    size_t line = pos;
    while (line > 0 && s[line - 1] != '\n') line--;
    if (line == pos) return pos > 0 ? pos - 1 : 0; /* step over the '\n' */
    size_t prev = line;
    for (size_t i = line; i < pos && i < n;) {
        prev = i;
        i = ui_text_next(s, n, i);
    }
    return prev;
}

size_t ui_text_fit(const char *s, size_t n, int cols, int *used)
{
    size_t i = 0;
    int w = 0;
    while (i < n) {
        int gw;
        size_t k = ui_grapheme(s + i, n - i, &gw);
        if (s[i] == '\n' || w + gw > cols) break;
        w += gw;
        i += k;
    }
    if (used) *used = w;
    return i;
}

void ui_wrap_init(struct ui_wrap *w, const char *s, size_t n, int width)
{
    w->s = s;
    w->n = n;
    w->pos = 0;
    w->width = width < 1 ? 1 : width;
    w->done = false;
    w->soft = false;
}

/* Laying out one line is linear in its bytes; a break point is remembered as
 * the scan goes, so no position is visited twice. */
bool ui_wrap_next(struct ui_wrap *w, size_t *start, size_t *len, int *cols)
{
    if (w->done) return false;
    if (w->soft && w->pos >= w->n) { /* only spaces followed the last soft break */
        w->done = true;
        return false;
    }
    w->soft = true; /* every return below but the '\n' and end ones is a soft break */
    const char *s = w->s;
    size_t n = w->n, i = w->pos;
    size_t brk = 0, brk_next = 0; /* line end / next start at the last break chance */
    int brk_cols = 0, col = 0;
    bool prev_wide = false;
    *start = i;
    while (i < n) {
        if (s[i] == '\n') {
            *len = i - *start;
            *cols = col;
            w->pos = i + 1;
            w->soft = false;
            return true;
        }
        int gw;
        size_t k = ui_grapheme(s + i, n - i, &gw);
        bool space = s[i] == ' ' || s[i] == '\t';
        if (space) {
            /* a soft break may fall here: the space is dropped */
            brk = i, brk_next = i + k, brk_cols = col;
            if (col + gw <= w->width) {
                col += gw;
                i += k;
                prev_wide = false;
                continue;
            }
            /* the space itself overflows: break here */
            size_t j = i;
            while (j < n && (s[j] == ' ' || s[j] == '\t')) j++;
            *len = i - *start;
            *cols = col;
            w->pos = j;
            if (j < n && s[j] == '\n') w->pos = j + 1;
            return true;
        }
        bool wide = gw >= 2;
        if ((wide || prev_wide) && i > *start) brk = i, brk_next = i, brk_cols = col;
        if (col + gw > w->width && i > *start) {
            if (brk > *start) {
                size_t j = brk_next;
                while (j < n && (s[j] == ' ' || s[j] == '\t')) j++;
                *len = brk - *start;
                *cols = brk_cols;
                w->pos = j;
                /* a break before a wide character may follow spaces: hide them */
                while (*len > 0 && (s[*start + *len - 1] == ' ' || s[*start + *len - 1] == '\t'))
                    (*len)--, (*cols)--;
            } else {
                *len = i - *start;
                *cols = col;
                w->pos = i;
            }
            return true;
        }
        col += gw;
        i += k;
        prev_wide = wide;
    }
    *len = i - *start;
    *cols = col;
    w->pos = i;
    w->done = true;
    w->soft = false;
    return true;
}

int ui_wrap_count(const char *s, size_t n, int width)
{
    struct ui_wrap w;
    size_t st, len;
    int cols, c = 0;
    ui_wrap_init(&w, s, n, width);
    while (ui_wrap_next(&w, &st, &len, &cols)) c++;
    return c;
}
