/* text: UTF-8 decoding, display widths and word wrapping for the terminal UI.
 *
 * Widths follow the C library's wcwidth() (the same table ncursesw uses to
 * place cells), so a line laid out here fills exactly the columns ncurses
 * draws. The caller must have set an UTF-8 LC_CTYPE (setlocale). A grapheme
 * here is a base code point followed by its zero-width marks; wrapping never
 * splits one. */
#ifndef TERN_UI_TEXT_H
#define TERN_UI_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UI_REPLACEMENT 0xFFFDu

/* Decodes one code point from s[0..n) (n > 0). Returns the bytes consumed
 * (1..4); malformed or truncated input consumes 1 byte and gives U+FFFD. */
size_t ui_utf8_decode(const char *s, size_t n, uint32_t *cp);
/* Encodes cp into out (4 bytes room); returns the byte count. */
size_t ui_utf8_encode(uint32_t cp, char *out);

/* Columns a code point takes: 0 for combining marks and other zero-width
 * characters, 2 for wide (CJK, most emoji), 1 otherwise; control characters
 * and tab count 1 (they are drawn as a space). */
int ui_cp_width(uint32_t cp);
/* Bytes of the grapheme starting at s[0] (base plus following zero-width
 * code points), and its width in *w. */
size_t ui_grapheme(const char *s, size_t n, int *w);
/* Display width of s[0..n). */
int ui_text_width(const char *s, size_t n);
/* Number of code points in s[0..n). */
size_t ui_text_count(const char *s, size_t n);
/* Byte offset of the start of the grapheme before offset pos (0 at start). */
size_t ui_text_prev(const char *s, size_t n, size_t pos);
/* Byte offset just after the grapheme at pos (n at end). */
size_t ui_text_next(const char *s, size_t n, size_t pos);
/* Longest prefix of s[0..n) that fits in cols columns, in bytes. */
size_t ui_text_fit(const char *s, size_t n, int cols, int *used);

/* Word wrapping: iterates the display lines of s[0..n) at a given width.
 * Every '\n' ends a line (so "a\n" gives "a" and ""); long lines break
 * after spaces, or on either side of a wide character (CJK text has no
 * spaces), and a word longer than the width is cut between graphemes.
 * Spaces at a soft break are not shown at the start of the next line. */
struct ui_wrap {
    const char *s;
    size_t n;
    size_t pos; /* next byte to lay out */
    int width;  /* columns, >= 1 */
    bool done;
    bool soft; /* the last line ended at a soft break */
};

void ui_wrap_init(struct ui_wrap *w, const char *s, size_t n, int width);
/* Gives the next line as s[*start .. *start+*len) of *cols columns; returns
 * false when no lines are left. */
bool ui_wrap_next(struct ui_wrap *w, size_t *start, size_t *len, int *cols);
/* Number of display lines s takes at width. */
int ui_wrap_count(const char *s, size_t n, int width);

#endif
