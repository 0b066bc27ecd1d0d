/* clip: OSC 52 clipboard writes (see clip.h). */
#include "clip.h"

#include <stdint.h>
#include <stdlib.h>

void ui_clip_base64(const char *s, size_t n, char *out)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)u[i] << 16;
        if (i + 1 < n) v |= (uint32_t)u[i + 1] << 8;
        if (i + 2 < n) v |= u[i + 2];
        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? tab[v & 63] : '=';
    }
    out[o] = 0;
}

int ui_clip_osc52(FILE *out, const char *text, size_t n)
{
    char *b = malloc(4 * ((n + 2) / 3) + 1);
    if (!b) return -1;
    ui_clip_base64(text, n, b);
    int rc = fprintf(out, "\033]52;c;%s\a", b) < 0 || fflush(out) != 0 ? -1 : 0;
    free(b);
    return rc;
}
