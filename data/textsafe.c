/* textsafe: escaping untrusted text where it leaves (see textsafe.h). */
#include "textsafe.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t textsafe_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC) len = 3;
    else if (c == 0xED) len = 3, hi = 0x9F; /* no surrogates */
    else if (c >= 0xEE && c <= 0xEF) len = 3;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) len = 4, hi = 0x8F;
    else return 0;
    if (len > n || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return len;
}

/* Worst case per input byte: "\u009b" (6) for 2 bytes, "\x1b" (4) or
 * U+FFFD (3) for 1: 4 output bytes per input byte, plus the NUL. */
static char *escape(const char *s, size_t n, int term)
{
    char *out = malloc(n * 4 + 1), *o = out;
    if (!out) return NULL;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = textsafe_seq(u + i, n - i);
        if (k == 0) {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3, i++;
        } else if (term && k == 1 && (u[i] < 0x20 || u[i] == 0x7F) && u[i] != '\n' &&
                   u[i] != '\t') {
            o += sprintf(o, "\\x%02x", u[i]);
            i++;
        } else if (term && k == 2 && u[i] == 0xC2 && u[i + 1] < 0xA0) {
            o += sprintf(o, "\\u%04x", u[i + 1]); /* C1: 8-bit CSI, OSC, ... */
            i += 2;
        } else {
            memcpy(o, u + i, k);
            o += k, i += k;
        }
    }
    *o = 0;
    return out;
}

char *textsafe_term(const char *s)
{
    return escape(s ? s : "", s ? strlen(s) : 0, 1);
}

char *textsafe_term_n(const char *s, size_t n)
{
    return escape(s, n, 1);
}

char *textsafe_utf8(const char *s)
{
    return escape(s ? s : "", s ? strlen(s) : 0, 0);
}

static int valid(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = textsafe_seq(u + i, n - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

int textsafe_json(cJSON *root)
{
    for (cJSON *c = root; c; c = c->next) {
        if (cJSON_IsString(c) && c->valuestring && !valid(c->valuestring)) {
            char *t = textsafe_utf8(c->valuestring);
            if (!t || !cJSON_SetValuestring(c, t)) {
                free(t);
                return -1;
            }
            free(t);
        }
        if (c->child && textsafe_json(c->child) < 0) return -1;
    }
    return 0;
}
