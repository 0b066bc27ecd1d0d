/* trace: Chrome trace-event JSON writer (see trace.h). Events are written
 * as they end, so a crash still leaves a readable prefix (the format
 * tolerates a missing closing bracket). */
#include "trace.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Writes s as the inside of a JSON string into dst (cap bytes, NUL kept),
 * at most max_in input bytes; returns the length written. Control bytes
 * become \u00XX; other bytes pass (the callers' strings are validated
 * UTF-8 or printable ASCII). */
static size_t json_esc(char *dst, size_t cap, const char *s, size_t max_in)
{
    size_t o = 0;
    for (size_t i = 0; s[i] && i < max_in; i++) {
        unsigned char c = (unsigned char)s[i];
        char tmp[8];
        size_t n;
        if (c == '"' || c == '\\') { tmp[0] = '\\'; tmp[1] = (char)c; n = 2; }
        else if (c < 0x20) {
            static const char hex[] = "0123456789abcdef";
            memcpy(tmp, "\\u00", 4);
            tmp[4] = hex[c >> 4];
            tmp[5] = hex[c & 15];
            n = 6;
        }
        else { tmp[0] = (char)c; n = 1; }
        if (o + n >= cap) break;
        memcpy(dst + o, tmp, n);
        o += n;
    }
    dst[o] = 0;
    return o;
}

char *trace_tags_new(const char *request_id, const char *tenant)
{
    enum { MAX_IN = 128 };
    bool has_id = request_id && request_id[0], has_tenant = tenant && tenant[0];
    if (!has_id && !has_tenant) return NULL;
    size_t cap = 2 * (6 * MAX_IN + 32);   /* every byte escaped to \u00XX at worst */
    char *out = malloc(cap), *p = out;
    if (!out) return NULL;
    if (has_id) {
        static const char k[] = "\"request_id\":\"";
        memcpy(p, k, sizeof k - 1);
        p += sizeof k - 1;
        p += json_esc(p, 6 * MAX_IN + 1, request_id, MAX_IN);
        *p++ = '"';
    }
    if (has_tenant) {
        static const char k[] = ",\"tenant\":\"";
        size_t skip = has_id ? 0 : 1;   /* no comma when it comes first */
        memcpy(p, k + skip, sizeof k - 1 - skip);
        p += sizeof k - 1 - skip;
        p += json_esc(p, 6 * MAX_IN + 1, tenant, MAX_IN);
        *p++ = '"';
    }
    *p = 0;
    return out;
}

int trace_open(struct trace *t, const char *path, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->f = fopen(path, "w");
    if (!t->f) {
        snprintf(err, errlen, "trace: cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", t->f);
    return 0;
}

static void sep(struct trace *t)
{
    if (t->n_events++) fputs(",\n", t->f);
}

void trace_track(struct trace *t, uint64_t tid, const char *name)
{
    if (!t->f) return;
    char esc[1024];
    json_esc(esc, sizeof esc, name, sizeof esc);
    sep(t);
    fprintf(t->f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%llu,"
                  "\"args\":{\"name\":\"%s\"}}",
            (unsigned long long)tid, esc);
}

void trace_span(struct trace *t, uint64_t tid, const char *name, double t0, double t1,
                const char *args, const char *tags)
{
    if (!t->f) return;
    sep(t);
    fprintf(t->f, "{\"name\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%llu,\"ts\":%.3f,\"dur\":%.3f",
            name, (unsigned long long)tid, t0 * 1e6, (t1 > t0 ? t1 - t0 : 0) * 1e6);
    if (args || tags)
        fprintf(t->f, ",\"args\":{%s%s%s}", args ? args : "", args && tags ? "," : "",
                tags ? tags : "");
    fputs("}", t->f);
}

void trace_close(struct trace *t)
{
    if (!t->f) return;
    fputs("\n]}\n", t->f);
    fclose(t->f);
    t->f = NULL;
}
