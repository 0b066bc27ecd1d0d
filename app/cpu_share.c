/* cpu_share: other processes' CPU time during a measurement (cpu_share.h). */
#include "cpu_share.h"

#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* The "cpu" line of /proc/stat: busy (user, nice, system, irq, softirq;
 * guest time is inside user) and steal, in seconds. */
static bool read_stat(double *busy, double *steal)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return false;
    unsigned long long v[8] = { 0 };
    const int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                         &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    const long hz = sysconf(_SC_CLK_TCK);
    if (n < 7 || hz <= 0) return false;
    *busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / (double)hz;
    *steal = n >= 8 ? (double)v[7] / (double)hz : 0.0;
    return true;
}

static double self_seconds(void)
{
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u)) return 0.0;
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec * 1e-6;
}

static double wall_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void cpu_share_begin(struct cpu_share *s)
{
    s->ok = read_stat(&s->busy, &s->steal);
    s->self = self_seconds();
    s->wall = wall_seconds();
}

int cpu_share_end(const struct cpu_share *s, struct cpu_share_fig *f)
{
    double busy, steal;
    const double wall = wall_seconds() - s->wall, self = self_seconds() - s->self;
    if (!s->ok || !read_stat(&busy, &steal) || wall <= 0.0) return -1;
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    f->cpus = cpus > 0 ? (int)cpus : 1;
    f->self = self / wall;
    /* /proc/stat counts in clock ticks: a few ticks of rounding either way */
    const double others = (busy - s->busy - self) / wall;
    f->others = others > 0.0 ? others : 0.0;
    f->steal = (steal - s->steal) / wall;
    if (f->steal < 0.0) f->steal = 0.0;
    return 0;
}

bool cpu_share_contended(const struct cpu_share_fig *f)
{
    return f->others + f->steal >= 0.1;
}
