/* sse: server-sent events (the text/event-stream format), both ways, no sockets.
 *
 * Writer: sse_event appends one event to a growable byte buffer; a data text
 * with newlines becomes several "data:" lines (the reader joins them back).
 * Reader: sse_reader_feed takes the stream's bytes in any split (one byte at a
 * time, or many events at once) and calls on_event once per complete event,
 * per the WHATWG rules: lines end in \n, \r\n or \r; ":" lines are comments;
 * "data:" lines are joined with \n; an event is dispatched at a blank line;
 * events with no data line are not dispatched. */
#ifndef TERN_SSE_H
#define TERN_SSE_H

#include <stdbool.h>
#include <stddef.h>

/* A growable byte buffer (the writer's output). */
struct sse_buf {
    char *p;
    size_t len, cap;
};
void sse_buf_free(struct sse_buf *b);
/* Drops the first n bytes (what a socket took). */
void sse_buf_consume(struct sse_buf *b, size_t n);
/* Appends raw bytes; returns 0, or -1 on out-of-memory. */
int sse_buf_add(struct sse_buf *b, const char *s, size_t n);

/* Appends "event: NAME\n" (when name is not NULL), "data: LINE\n" per line of
 * data, and the blank line. Returns 0, or -1 on out-of-memory. */
int sse_event(struct sse_buf *b, const char *name, const char *data, size_t len);
/* Appends a ": text\n\n" comment (a keep-alive). */
int sse_comment(struct sse_buf *b, const char *text);

/* name: the "event:" field or "" ("message"); data: the joined data lines
 * (NUL-terminated, valid until the callback returns). Return 0 to go on,
 * non-zero to stop feeding (sse_reader_feed returns that value). */
typedef int (*sse_on_event)(void *ud, const char *name, const char *data, size_t len);

struct sse_reader {
    struct sse_buf line;  /* the line being read */
    struct sse_buf data;  /* data lines of the event being read */
    char name[64];
    bool has_data;
    bool skip_lf;         /* last byte was \r: a following \n ends nothing */
    bool bom_checked;
    unsigned char bom_seen; /* bytes of a UTF-8 BOM read so far (it may arrive split) */
    size_t max_event;     /* bytes; an event over it is an error */
};
/* max_event 0: 16 MiB. */
void sse_reader_init(struct sse_reader *r, size_t max_event);
void sse_reader_free(struct sse_reader *r);
/* Returns 0, the callback's non-zero value, or -1 (out of memory, or an
 * event over max_event). */
int sse_reader_feed(struct sse_reader *r, const char *bytes, size_t n, sse_on_event cb,
                    void *ud);

#endif
