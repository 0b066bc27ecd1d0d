/* trace: Chrome trace-event JSON writer (see trace.h). Events are written
 * as they end, so a crash still leaves a readable prefix (the format
 * tolerates a missing closing bracket). */
#include "trace.h"

#include <errno.h>
#include <string.h>

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
    sep(t);
    fprintf(t->f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%llu,"
                  "\"args\":{\"name\":\"%s\"}}",
            (unsigned long long)tid, name);
}

void trace_span(struct trace *t, uint64_t tid, const char *name, double t0, double t1,
                const char *args)
{
    if (!t->f) return;
    sep(t);
    fprintf(t->f, "{\"name\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%llu,\"ts\":%.3f,\"dur\":%.3f",
            name, (unsigned long long)tid, t0 * 1e6, (t1 > t0 ? t1 - t0 : 0) * 1e6);
    if (args) fprintf(t->f, ",\"args\":{%s}", args);
    fputs("}", t->f);
}

void trace_close(struct trace *t)
{
    if (!t->f) return;
    fputs("\n]}\n", t->f);
    fclose(t->f);
    t->f = NULL;
}
