/* tap.h: a tiny TAP producer for C unit tests (meson runs them with
 * protocol 'tap'). Each check prints "ok N - name" or "not ok N - name" with
 * the expected and actual values; tap_done() prints the plan and returns the
 * exit status. Header-only, state in one struct per test program. */
#ifndef TERN_TAP_H
#define TERN_TAP_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static struct {
    int n, failed;
} tap_state;

static inline int tap_ok(int cond, const char *fmt, ...)
{
    va_list ap;
    tap_state.n++;
    if (!cond) tap_state.failed++;
    printf("%sok %d - ", cond ? "" : "not ", tap_state.n);
    /* one line per check: a newline inside the name (a quoted stream, an
     * error message) is printed as \n, which TAP would otherwise not parse */
    char name[2048];
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    for (const char *p = name; *p; p++) {
        if (*p == '\n') fputs("\\n", stdout);
        else putchar(*p);
    }
    printf("\n");
    fflush(stdout);
    return cond;
}

static inline void tap_diag(const char *fmt, ...)
{
    va_list ap;
    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static inline void tap_skip(const char *why)
{
    tap_state.n++;
    printf("ok %d # SKIP %s\n", tap_state.n, why);
}

static inline int tap_done(void)
{
    printf("1..%d\n", tap_state.n);
    return tap_state.failed ? 1 : 0;
}

/* Bail out: the whole program cannot go on (missing data, crash-worthy setup). */
static inline int tap_bail(const char *fmt, ...)
{
    va_list ap;
    printf("Bail out! ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    return 1;
}

#define ok(cond, ...) tap_ok(!!(cond), __VA_ARGS__)
#define is_int(got, want, name)                                                        \
    do {                                                                               \
        long long g_ = (long long)(got), w_ = (long long)(want);                      \
        if (!tap_ok(g_ == w_, "%s", name)) tap_diag("  got %lld, want %lld", g_, w_); \
    } while (0)
#define is_str(got, want, name)                                                            \
    do {                                                                                   \
        const char *g_ = (got), *w_ = (want);                                              \
        int eq_ = g_ && w_ && strcmp(g_, w_) == 0;                                         \
        if (!tap_ok(eq_, "%s", name))                                                      \
            tap_diag("  got \"%s\", want \"%s\"", g_ ? g_ : "(null)", w_ ? w_ : "(null)"); \
    } while (0)
#define is_near(got, want, tol, name)                                                  \
    do {                                                                               \
        double g_ = (double)(got), w_ = (double)(want);                               \
        if (!tap_ok(fabs(g_ - w_) <= (tol), "%s", name))                               \
            tap_diag("  got %.9g, want %.9g (tolerance %g)", g_, w_, (double)(tol)); \
    } while (0)

#endif
