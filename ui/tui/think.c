/* think: splitting a reply's thinking from its answer (see think.h). */
#include "think.h"

#include <string.h>

static const char OPEN[] = "<think>", CLOSE[] = "</think>";

static bool blank(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static size_t skip_blank(const char *s, size_t i, size_t len)
{
    while (i < len && blank(s[i])) i++;
    return i;
}

/* The first occurrence of CLOSE in s[from..len), or len. */
static size_t find_close(const char *s, size_t from, size_t len)
{
    const size_t n = sizeof CLOSE - 1;
    for (size_t i = from; i + n <= len; i++)
        if (s[i] == '<' && memcmp(s + i, CLOSE, n) == 0) return i;
    return len;
}

bool ui_think_pending(const char *text, size_t len)
{
    size_t i = skip_blank(text, 0, len), rest = len - i;
    return rest < sizeof OPEN - 1 && memcmp(text + i, OPEN, rest) == 0;
}

void ui_think_split(const char *text, size_t len, struct ui_think *t)
{
    const size_t no = sizeof OPEN - 1, nc = sizeof CLOSE - 1;
    size_t i = skip_blank(text, 0, len);
    memset(t, 0, sizeof *t);
    t->answer = 0;
    if (len - i < no || memcmp(text + i, OPEN, no) != 0) return;
    t->has = true;
    t->from = skip_blank(text, i + no, len);
    size_t c = find_close(text, t->from, len);
    t->open = c == len;
    t->to = c;
    while (t->to > t->from && blank(text[t->to - 1])) t->to--;
    t->answer = t->open ? len : skip_blank(text, c + nc, len);
}
