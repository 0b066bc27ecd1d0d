/* test_trace_tags: the trace's request tags are valid JSON for any id or
 * tenant bytes (quotes, backslashes, control bytes escaped; long ones cut),
 * and trace_span writes args and tags into one args object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "trace.h"

static void tags_is(const char *id, const char *tenant, const char *want, const char *name)
{
    char *got = trace_tags_new(id, tenant);
    if (!want) ok(got == NULL, "%s", name);
    else is_str(got, want, name);
    free(got);
}

int main(void)
{
    tags_is("req-1", "editor", "\"request_id\":\"req-1\",\"tenant\":\"editor\"", "id and tenant");
    tags_is("req-1", NULL, "\"request_id\":\"req-1\"", "id only");
    tags_is(NULL, "batch", "\"tenant\":\"batch\"", "tenant only (no leading comma)");
    tags_is("", "", NULL, "nothing to tag: NULL");
    tags_is("a\"b\\c", "t\n\x01", "\"request_id\":\"a\\\"b\\\\c\",\"tenant\":\"t\\u000a\\u0001\"",
            "quotes, backslashes and control bytes escaped");
    char longid[400];
    memset(longid, 'x', sizeof longid - 1);
    longid[sizeof longid - 1] = 0;
    char *t = trace_tags_new(longid, NULL);
    ok(t && strlen(t) == strlen("\"request_id\":\"\"") + 128, "a 399-byte id is cut at 128");
    free(t);
    memset(longid, '"', sizeof longid - 1);
    t = trace_tags_new(longid, longid);
    ok(t && strlen(t) == 2 * 2 * 128 + strlen("\"request_id\":\"\",\"tenant\":\"\""),
       "128 quotes each side: all escaped, nothing overflows");
    free(t);

    char path[] = "/tmp/tern-trace-tags-XXXXXX";
    int fd = mkstemp(path);
    ok(fd >= 0, "temp file");
    close(fd);
    struct trace tr;
    char err[256];
    ok(trace_open(&tr, path, err, sizeof err) == 0, "trace_open");
    char *tags = trace_tags_new("r\"1", "ten");
    trace_track(&tr, 7, "req 7 (batch) r\"1");
    trace_span(&tr, 7, "queue", 1.0, 1.5, NULL, tags);
    trace_span(&tr, 7, "prefill", 1.5, 2.0, "\"tokens\":3", tags);
    trace_span(&tr, 0, "step", 1.5, 2.0, "\"tokens\":3", NULL);
    trace_span(&tr, 0, "idle", 2.0, 2.0, NULL, NULL);
    trace_close(&tr);
    free(tags);
    FILE *f = fopen(path, "r");
    char buf[2048] = "";
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    ok(strstr(buf, "\"args\":{\"name\":\"req 7 (batch) r\\\"1\"}") != NULL, "track name escaped");
    ok(strstr(buf, "\"args\":{\"request_id\":\"r\\\"1\",\"tenant\":\"ten\"}") != NULL,
       "tags alone make the args");
    ok(strstr(buf, "\"args\":{\"tokens\":3,\"request_id\":\"r\\\"1\",\"tenant\":\"ten\"}") != NULL,
       "args then tags in one object");
    ok(strstr(buf, "\"name\":\"idle\",\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":2000000.000,\"dur\":0.000}") != NULL,
       "no args object without args or tags");
    unlink(path);
    return tap_done();
}
