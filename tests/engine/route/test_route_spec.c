/* test_route_spec: the route's text form (route_parse) and which failures
 * move a request to the next target (route_classify), without servers. */
#include <string.h>

#include "route.h"
#include "tap.h"

static int parses(const char *spec, struct route_spec *s, char *err, size_t n)
{
    return route_parse(spec, s, err, n) == 0;
}

int main(void)
{
    struct route_spec s;
    char err[256];

    ok(parses("local, http://a:8080/v1 ,https://api.x.com/v1#key-env=X_KEY", &s, err, sizeof err),
       "local, a replica and an API with its key variable parse");
    is_int(s.n, 3, "three targets");
    ok(s.t[0].local && !s.t[1].local && !s.t[2].local, "the first is local");
    is_str(s.t[1].url, "http://a:8080/v1", "spaces around an item are dropped");
    is_str(s.t[2].url, "https://api.x.com/v1", "the URL stops at '#'");
    is_str(s.t[2].key_env, "X_KEY", "#key-env= names the key's variable");
    is_str(s.t[1].key_env, "", "no #key-env: the route's default key");

    ok(!parses("", &s, err, sizeof err) && strstr(err, "empty target"), "empty: %s", err);
    ok(!parses("local,", &s, err, sizeof err) && strstr(err, "empty target"),
       "trailing comma: %s", err);
    ok(!parses("ftp://x", &s, err, sizeof err) && strstr(err, "neither"), "not http: %s", err);
    ok(!parses("http://", &s, err, sizeof err), "a scheme alone is not a URL");
    ok(!parses("local,local", &s, err, sizeof err) && strstr(err, "twice"), "local twice: %s",
       err);
    ok(!parses("http://a#key=1", &s, err, sizeof err) && strstr(err, "key-env"),
       "unknown option: %s", err);
    ok(!parses("http://a#key-env=1BAD", &s, err, sizeof err), "a variable starting with a digit");
    ok(!parses("http://a#key-env=A-B", &s, err, sizeof err), "a variable with '-'");
    ok(!parses("http://a b", &s, err, sizeof err), "a URL with a space");
    ok(!parses("local,http://1,http://2,http://3,http://4,http://5,http://6,http://7,http://8",
               &s, err, sizeof err) && strstr(err, "at most"), "nine targets: %s", err);
    char big[400];
    memset(big, 'a', sizeof big);
    memcpy(big, "http://", 7);
    big[sizeof big - 1] = 0;
    ok(!parses(big, &s, err, sizeof err) && strstr(err, "longer"), "a too long URL: %s", err);

    /* which endings move a request, before its first token */
    is_int(route_classify(ENGINE_REJECTED, 0, false), ROUTE_R_REJECTED, "local queue full moves");
    is_int(route_classify(ENGINE_TIMEOUT, 0, false), ROUTE_R_REJECTED, "admission timeout moves");
    is_int(route_classify(ENGINE_REJECTED, 429, false), ROUTE_R_RATE_LIMITED, "429 moves");
    is_int(route_classify(ENGINE_REJECTED, 503, false), ROUTE_R_REJECTED, "503 moves");
    is_int(route_classify(ENGINE_ERROR, 500, false), ROUTE_R_ERROR, "500 moves");
    is_int(route_classify(ENGINE_ERROR, 0, false), ROUTE_R_ERROR,
           "no response (refused, reset) moves");
    is_int(route_classify(ENGINE_ERROR, 400, false), ROUTE_R_NONE, "400: the request is wrong");
    is_int(route_classify(ENGINE_ERROR, 401, false), ROUTE_R_NONE, "401 does not move");
    is_int(route_classify(ENGINE_ERROR, 408, false), ROUTE_R_ERROR, "408 (server timeout) moves");
    is_int(route_classify(ENGINE_ERROR, 500, true), ROUTE_R_NONE,
           "after the first token nothing moves");
    is_int(route_classify(ENGINE_STOP, 200, false), ROUTE_R_NONE, "a finished request stays");
    is_int(route_classify(ENGINE_CANCELLED, 0, false), ROUTE_R_NONE, "a cancelled one stays");
    is_int(route_classify(ENGINE_CONSUMER_STALLED, 0, false), ROUTE_R_NONE,
           "a stalled consumer is the client's doing");
    is_int(route_classify_submit(ENGINE_REJECTED), ROUTE_R_REJECTED, "a refused submit moves");
    is_int(route_classify_submit(ENGINE_ERROR), ROUTE_R_NONE, "a malformed request does not");
    is_str(route_reason_name(ROUTE_R_TTFT), "ttft-deadline", "reason names");
    is_str(route_reason_name(ROUTE_R_UNAVAILABLE), "unavailable", "reason names");
    return tap_done();
}
