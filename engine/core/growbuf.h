/* growbuf: the one way a growable byte buffer grows (the engine's held text,
 * SSE output, the remote engine's replies, the chat's input line): room for
 * `need` bytes, the capacity doubled from `first`, the old contents kept.
 * Returns 0, or -1 when realloc fails (the buffer is then unchanged). */
#ifndef TERN_GROWBUF_H
#define TERN_GROWBUF_H

#include <stdlib.h>

static inline int growbuf_reserve(char **p, size_t *cap, size_t need, size_t first)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : first;
    while (c < need) c *= 2;
    char *np = realloc(*p, c);
    if (!np) return -1;
    *p = np;
    *cap = c;
    return 0;
}

#endif
