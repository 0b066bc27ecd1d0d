/* bench_drill: 'tern bench --drill NAME': the failure drills of the
 * deployment guide (issue 37), each a few seconds on loopback. A drill
 * starts its own `tern serve` replicas (this binary, ephemeral ports),
 * sends a handful of requests through a fallback route (engine/route),
 * injects its failure, and reports the requests lost, the time to fall
 * back, the time to recover, and whether every request has a history row
 * with the right status. Drills: bad-model, invalid-config,
 * replica-killed, queue-saturation, stalled-dependency, client-disconnect,
 * all. cmd_bench.c hands over to it; argv as for cmd_bench. */
#ifndef TERN_BENCH_DRILL_H
#define TERN_BENCH_DRILL_H

int bench_drill_main(int argc, char **argv);
/* The --drill options' help (tern bench --help shows it too). */
const char *bench_drill_usage(void);

#endif
