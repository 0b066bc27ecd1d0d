/* clock: seconds on CLOCK_MONOTONIC, for the commands' own timings (load,
 * tokenize, benchmark loops, progress). One definition for all of app/. */
#ifndef TERN_APP_CLOCK_H
#define TERN_APP_CLOCK_H

#include <time.h>

static inline double app_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
