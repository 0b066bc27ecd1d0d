/* test_text: UTF-8 decoding, widths and word wrapping of ui/text on
 * Chinese, Russian, emoji and combining marks. Widths are checked against
 * text_widths.txt (made by the Python wcwidth package, gen_text_widths.py);
 * wrapping is checked by its invariants on every sample at every width. */
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "text.h"

static void check_widths(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[512];
    if (!ok(f != NULL, "open %s", path)) return;
    while (fgets(line, sizeof line, f)) {
        char *t1 = strchr(line, '\t');
        if (!t1) continue;
        *t1 = 0;
        int want_w = atoi(t1 + 1);
        char *t2 = strchr(t1 + 1, '\t');
        int want_n = t2 ? atoi(t2 + 1) : -1;
        size_t n = strlen(line);
        is_int(ui_text_width(line, n), want_w, line);
        is_int((long long)ui_text_count(line, n), want_n, "code points");
    }
    fclose(f);
}

/* Invariants of one wrapped text: every line fits, lines tile the input in
 * order (only spaces and newlines are dropped between them), no grapheme is
 * split, and a line is never broken earlier than needed when the next word
 * would have fitted. */
static int wrap_ok(const char *s, int width)
{
    size_t n = strlen(s), prev_end = 0, st, len;
    int cols;
    struct ui_wrap w;
    ui_wrap_init(&w, s, n, width);
    while (ui_wrap_next(&w, &st, &len, &cols)) {
        if (st < prev_end) return 0;
        for (size_t k = prev_end; k < st; k++)
            if (s[k] != ' ' && s[k] != '\n') return 0; /* text lost */
        if (cols != ui_text_width(s + st, len)) return 0;
        /* one grapheme may overflow a line narrower than itself */
        if (cols > width && ui_text_next(s, n, st) != st + len) return 0;
        if (st + len < n && ui_text_next(s, n, ui_text_prev(s, n, st + len)) != st + len)
            return 0; /* split inside a grapheme */
        prev_end = st + len;
    }
    return prev_end == n || strspn(s + prev_end, " \n") == n - prev_end;
}

static void check_wrap_invariants(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[512];
    int bad = 0, cases = 0;
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        char *t = strchr(line, '\t');
        if (!t) continue;
        *t = 0;
        for (int width = 1; width <= 30; width++, cases++)
            if (!wrap_ok(line, width)) {
                if (bad++ < 5) tap_diag("wrap invariant broken: \"%s\" width %d", line, width);
            }
    }
    fclose(f);
    ok(bad == 0, "wrap invariants hold on %d sample/width pairs", cases);
}

static void lines(const char *s, int width, char out[][64], int *count)
{
    struct ui_wrap w;
    size_t st, len;
    int cols;
    *count = 0;
    ui_wrap_init(&w, s, strlen(s), width);
    while (ui_wrap_next(&w, &st, &len, &cols) && *count < 16) {
        memcpy(out[*count], s + st, len);
        out[(*count)++][len] = 0;
    }
}

static void check_wrap_examples(void)
{
    char l[16][64];
    int c;
    lines("hello brave new world", 11, l, &c);
    is_int(c, 2, "latin: two lines at width 11");
    is_str(l[0], "hello brave", "latin: break after a word");
    is_str(l[1], "new world", "latin: leading space dropped");

    lines("Привет, как дела?", 8, l, &c);
    is_int(c, 3, "russian: three lines at width 8");
    is_str(l[0], "Привет,", "russian: first line");
    is_str(l[2], "дела?", "russian: last line");

    /* 5 ideographs of width 2 at width 5: two per line, no spaces needed */
    lines("你好世界啊", 5, l, &c);
    is_int(c, 3, "chinese: breaks between ideographs");
    is_str(l[0], "你好", "chinese: first line holds two");
    is_str(l[2], "啊", "chinese: remainder");

    lines("ok 😀😀 go", 4, l, &c);
    is_str(l[0], "ok", "emoji: word break before emoji");
    is_str(l[1], "😀😀", "emoji: two wide emoji fill 4 columns");

    lines("cafe\xcc\x81 cafe\xcc\x81", 5, l, &c);
    is_int(c, 2, "combining: 'café' (5 code points) fits 4 columns");
    is_str(l[0], "cafe\xcc\x81", "combining: mark stays on its base");

    lines("abcdefgh", 3, l, &c);
    is_int(c, 3, "long word is cut");
    is_str(l[2], "gh", "long word remainder");

    lines("hello world   ", 5, l, &c);
    is_int(c, 2, "trailing spaces after a soft break add no line");

    lines("a\n\nb\n", 10, l, &c);
    is_int(c, 4, "newlines: each ends a line (trailing one too)");
    is_str(l[1], "", "newlines: empty line kept");
}

static void check_editing_steps(void)
{
    const char *s = "a\xcc\x81\xe4\xbd\xa0"
                    "b"; /* a + acute, 你, b */
    size_t n = strlen(s);
    is_int((long long)ui_text_next(s, n, 0), 3, "next skips the base and its mark");
    is_int((long long)ui_text_next(s, n, 3), 6, "next skips a 3-byte ideograph");
    is_int((long long)ui_text_prev(s, n, 6), 3, "prev lands on the ideograph");
    is_int((long long)ui_text_prev(s, n, 3), 0, "prev lands on the base, not the mark");
    int used;
    is_int((long long)ui_text_fit(s, n, 2, &used), 3, "fit: ideograph does not fit in 1 col");
    is_int(used, 1, "fit: columns used");

    uint32_t cp;
    is_int((long long)ui_utf8_decode("\xc0\xaf", 2, &cp), 1, "overlong form: 1 byte");
    is_int(cp, UI_REPLACEMENT, "overlong form: U+FFFD");
    is_int((long long)ui_utf8_decode("\xe4\xbd", 2, &cp), 1, "truncated: 1 byte");
    is_int((long long)ui_utf8_decode("\xf0\x9f\x98\x80", 4, &cp), 4, "emoji: 4 bytes");
    is_int(cp, 0x1F600, "emoji: code point");
    char buf[4];
    is_int((long long)ui_utf8_encode(0x1F600, buf), 4, "encode emoji");
    ok(memcmp(buf, "\xf0\x9f\x98\x80", 4) == 0, "encode round trip");
}

int main(void)
{
    char path[1024];
    const char *src = getenv("TERN_SRC");
    if (!setlocale(LC_CTYPE, "C.UTF-8") && !setlocale(LC_CTYPE, "en_US.UTF-8"))
        return tap_bail("no UTF-8 locale");
    snprintf(path, sizeof path, "%s/tests/ui/tui/text_widths.txt", src ? src : ".");
    check_widths(path);
    check_wrap_invariants(path);
    check_wrap_examples();
    check_editing_steps();
    return tap_done();
}
