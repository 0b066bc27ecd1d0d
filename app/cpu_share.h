/* cpu_share: how much of the machine other processes took while a
 * measurement ran, so a speed read on a shared machine says so (the guide:
 * a figure comes with its environment). From /proc/stat (every CPU's busy
 * and stolen time) less this process's own CPU time (getrusage), over the
 * same wall-clock interval. Linux only; elsewhere cpu_share_end says it
 * cannot tell. */
#ifndef TERN_CPU_SHARE_H
#define TERN_CPU_SHARE_H

#include <stdbool.h>

struct cpu_share {
    double wall;          /* CLOCK_MONOTONIC seconds */
    double busy, steal;   /* all CPUs' busy and stolen seconds (/proc/stat) */
    double self;          /* this process's user + system seconds */
    bool ok;
};

struct cpu_share_fig {
    int cpus;             /* online CPUs */
    double others;        /* CPUs other processes kept busy, on average */
    double steal;         /* CPUs the hypervisor gave to other guests */
    double self;          /* CPUs this process used */
};

void cpu_share_begin(struct cpu_share *s);
/* The interval since cpu_share_begin; 0, or -1 when it cannot be read. */
int cpu_share_end(const struct cpu_share *s, struct cpu_share_fig *f);
/* Whether the others (and steal) took enough to lower the figures: at
 * least a tenth of a CPU. */
bool cpu_share_contended(const struct cpu_share_fig *f);

#endif
