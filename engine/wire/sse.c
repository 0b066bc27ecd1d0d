/* sse: text/event-stream writer and incremental reader. */
#include "sse.h"

#include <stdlib.h>
#include <string.h>

#include "growbuf.h"

void sse_buf_free(struct sse_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

void sse_buf_consume(struct sse_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
}

int sse_buf_add(struct sse_buf *b, const char *s, size_t n)
{
    if (growbuf_reserve(&b->p, &b->cap, b->len + n + 1, 256)) return -1;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0; /* always a C string too */
    return 0;
}

static int add_str(struct sse_buf *b, const char *s)
{
    return sse_buf_add(b, s, strlen(s));
}

int sse_event(struct sse_buf *b, const char *name, const char *data, size_t len)
{
    if (name && (add_str(b, "event: ") || add_str(b, name) || add_str(b, "\n"))) return -1;
    size_t i = 0;
    for (;;) {
        size_t j = i;
        while (j < len && data[j] != '\n' && data[j] != '\r') j++;
        if (add_str(b, "data: ") || sse_buf_add(b, data + i, j - i) || add_str(b, "\n"))
            return -1;
        if (j >= len) break;
        if (data[j] == '\r' && j + 1 < len && data[j + 1] == '\n') j++;
        i = j + 1;
    }
    return add_str(b, "\n");
}

int sse_comment(struct sse_buf *b, const char *text)
{
    return add_str(b, ": ") || add_str(b, text) || add_str(b, "\n\n") ? -1 : 0;
}

void sse_reader_init(struct sse_reader *r, size_t max_event)
{
    memset(r, 0, sizeof *r);
    r->max_event = max_event ? max_event : (16u << 20);
}

void sse_reader_free(struct sse_reader *r)
{
    sse_buf_free(&r->line);
    sse_buf_free(&r->data);
}

/* One complete line (without its end). */
static int on_line(struct sse_reader *r, sse_on_event cb, void *ud)
{
    const char *l = r->line.p ? r->line.p : "";
    size_t n = r->line.len;
    if (n == 0) { /* blank line: dispatch */
        int rc = 0;
        if (r->has_data) {
            if (r->data.len && r->data.p[r->data.len - 1] == '\n') r->data.p[--r->data.len] = 0;
            rc = cb(ud, r->name, r->data.p ? r->data.p : "", r->data.len);
        }
        r->data.len = 0;
        if (r->data.p) r->data.p[0] = 0;
        r->has_data = false;
        r->name[0] = 0;
        return rc;
    }
    if (l[0] == ':') return 0;
    const char *colon = memchr(l, ':', n);
    size_t fl = colon ? (size_t)(colon - l) : n;
    const char *v = colon ? colon + 1 : l + n;
    if (colon && *v == ' ') v++;
    size_t vl = (size_t)(l + n - v);
    if (fl == 4 && memcmp(l, "data", 4) == 0) {
        if (r->data.len + vl + 1 > r->max_event) return -1;
        if (sse_buf_add(&r->data, v, vl) || sse_buf_add(&r->data, "\n", 1)) return -1;
        r->has_data = true;
    } else if (fl == 5 && memcmp(l, "event", 5) == 0) {
        size_t k = vl < sizeof r->name - 1 ? vl : sizeof r->name - 1;
        memcpy(r->name, v, k);
        r->name[k] = 0;
    } /* id, retry and unknown fields: ignored */
    return 0;
}

int sse_reader_feed(struct sse_reader *r, const char *bytes, size_t n, sse_on_event cb,
                    void *ud)
{
    size_t i = 0;
    /* A UTF-8 BOM may open the stream, split over feeds like any bytes. */
    static const char bom[] = "\xEF\xBB\xBF";
    while (!r->bom_checked && i < n) {
        if (bytes[i] == bom[r->bom_seen]) {
            i++;
            if (++r->bom_seen == 3) r->bom_checked = true;
            continue;
        }
        r->bom_checked = true;
        /* a partial BOM was text after all: it opens the first line */
        if (r->bom_seen && sse_buf_add(&r->line, bom, r->bom_seen)) return -1;
    }
    for (; i < n; i++) {
        char c = bytes[i];
        if (c == '\n' && r->skip_lf) {
            r->skip_lf = false;
            continue;
        }
        r->skip_lf = false;
        if (c == '\n' || c == '\r') {
            r->skip_lf = c == '\r';
            int rc = on_line(r, cb, ud);
            r->line.len = 0;
            if (rc) return rc;
            continue;
        }
        /* Plain bytes up to the next line end in one copy. */
        size_t j = i;
        while (j < n && bytes[j] != '\n' && bytes[j] != '\r') j++;
        if (r->line.len + (j - i) + 1 > r->max_event) return -1;
        if (sse_buf_add(&r->line, bytes + i, j - i)) return -1;
        i = j - 1;
    }
    return 0;
}
