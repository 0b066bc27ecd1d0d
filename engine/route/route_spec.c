/* route_spec: a route's text form and which failures move a request (see
 * route.h). No engine here, so the rules are tested alone. */
#include "route.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

const char *route_reason_name(enum route_reason r)
{
    static const char *const names[ROUTE_N_REASON] = {
        "none", "rejected", "rate-limited", "ttft-deadline", "error", "unavailable"};
    return (unsigned)r < ROUTE_N_REASON ? names[r] : "?";
}

static int parse_option(const char *opt, size_t n, struct route_target *t, char *err,
                        size_t errlen)
{
    static const char key[] = "key-env=";
    if (n <= sizeof key - 1 || strncmp(opt, key, sizeof key - 1) != 0) {
        snprintf(err, errlen, "route: '#%.*s': the only option is #key-env=VARIABLE", (int)n, opt);
        return -1;
    }
    const char *v = opt + sizeof key - 1;
    size_t vn = n - (sizeof key - 1);
    bool ok = vn < sizeof t->key_env && !isdigit((unsigned char)v[0]);
    for (size_t i = 0; ok && i < vn; i++)
        ok = isalnum((unsigned char)v[i]) || v[i] == '_';
    if (!ok) {
        snprintf(err, errlen, "route: '%.*s' is not an environment variable name", (int)vn, v);
        return -1;
    }
    memcpy(t->key_env, v, vn);
    t->key_env[vn] = 0;
    return 0;
}

static int parse_item(const char *s, size_t n, struct route_target *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (n == 5 && strncmp(s, "local", 5) == 0) {
        t->local = true;
        return 0;
    }
    const char *hash = memchr(s, '#', n);
    size_t un = hash ? (size_t)(hash - s) : n;
    bool scheme = (un > 7 && strncmp(s, "http://", 7) == 0) ||
                  (un > 8 && strncmp(s, "https://", 8) == 0);
    if (!scheme) {
        snprintf(err, errlen, "route: '%.*s' is neither 'local' nor an http:// or https:// URL",
                 (int)n, s);
        return -1;
    }
    if (un >= sizeof t->url) {
        snprintf(err, errlen, "route: URL longer than %zu bytes", sizeof t->url - 1);
        return -1;
    }
    for (size_t i = 0; i < un; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f) {
            snprintf(err, errlen, "route: '%.*s': a URL has no spaces or control bytes", (int)un,
                     s);
            return -1;
        }
    memcpy(t->url, s, un);
    t->url[un] = 0;
    return hash ? parse_option(hash + 1, n - un - 1, t, err, errlen) : 0;
}

int route_parse(const char *spec, struct route_spec *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *p = spec ? spec : "";
    bool local = false;
    for (;;) {
        size_t n = strcspn(p, ",");
        const char *s = p, *e = p + n;
        while (s < e && isspace((unsigned char)*s)) s++;
        while (e > s && isspace((unsigned char)e[-1])) e--;
        if (e == s) {
            snprintf(err, errlen, "route: empty target (item %d of '%s')", out->n + 1,
                     spec ? spec : "");
            return -1;
        }
        if (out->n == ROUTE_MAX_TARGETS) {
            snprintf(err, errlen, "route: at most %d targets", ROUTE_MAX_TARGETS);
            return -1;
        }
        struct route_target *t = &out->t[out->n];
        if (parse_item(s, (size_t)(e - s), t, err, errlen) != 0) return -1;
        if (t->local && local) {
            snprintf(err, errlen, "route: 'local' is named twice");
            return -1;
        }
        local |= t->local;
        out->n++;
        if (!p[n]) break;
        p += n + 1;
    }
    return 0;
}

enum route_reason route_classify(enum engine_status st, int32_t http_status, bool had_token)
{
    if (had_token) return ROUTE_R_NONE;
    if (http_status == 429) return ROUTE_R_RATE_LIMITED;
    switch (st) {
    case ENGINE_REJECTED:
    case ENGINE_TIMEOUT: return ROUTE_R_REJECTED;
    case ENGINE_ERROR:
        /* the request itself is wrong: every target would say so */
        if (http_status >= 400 && http_status < 500 && http_status != 408) return ROUTE_R_NONE;
        return ROUTE_R_ERROR;
    default: return ROUTE_R_NONE;
    }
}

enum route_reason route_classify_submit(enum engine_status why)
{
    /* engine_submit's ERROR is a malformed request (or one this target
     * cannot take, e.g. log-probabilities remotely): not a target failure */
    return why == ENGINE_REJECTED ? ROUTE_R_REJECTED : ROUTE_R_NONE;
}
