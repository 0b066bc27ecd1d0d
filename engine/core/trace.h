/* trace: Chrome trace-event JSON (opens in Perfetto / chrome://tracing),
 * streamed to a file as spans end: one track (tid) per request with its
 * queue, prefill chunks and decode spans, and track 0 for engine steps.
 * Not thread-safe: the engine thread writes it. */
#ifndef TERN_TRACE_H
#define TERN_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct trace {
    FILE *f;
    int n_events;
};

/* Opens path for writing; returns 0 or -1 with err. */
int trace_open(struct trace *t, const char *path, char *err, size_t errlen);
/* Names a track ("engine steps", "req 3 (interactive) soak-17"); the name
 * is JSON-escaped. */
void trace_track(struct trace *t, uint64_t tid, const char *name);
/* A complete span [t0, t1] (seconds) on track tid. args and tags are JSON
 * object bodies without braces (e.g. "\"tokens\":64"), each or both NULL:
 * args are the span's own figures, tags the request's (trace_tags_new). */
void trace_span(struct trace *t, uint64_t tid, const char *name, double t0, double t1,
                const char *args, const char *tags);
/* The tags of a request, so one request can be followed from an access log
 * to its spans: "\"request_id\":\"...\",\"tenant\":\"...\"" with both strings
 * JSON-escaped (they come from clients) and cut at 128 bytes; either may be
 * NULL or empty (left out). Returns a malloc'd string, or NULL when there is
 * nothing to tag (or no memory). */
char *trace_tags_new(const char *request_id, const char *tenant);
/* Closes the JSON array and the file. Safe on a trace never opened. */
void trace_close(struct trace *t);

#endif
