/* bench_contract: 'tern bench --contract FILE': run a contract's workload,
 * judge it, store it with its environment; --sweep raises the rate until a
 * target fails. cmd_bench.c hands over to it; argv as for cmd_bench. */
#ifndef TERN_BENCH_CONTRACT_H
#define TERN_BENCH_CONTRACT_H

#include <stddef.h>

int bench_contract_main(int argc, char **argv);
/* The --contract options' help (tern bench --help shows it too). */
const char *bench_contract_usage(void);
/* A figure in its unit ("s": ms or s; "share": %; "req/s"; "": plain), as
 * the verdict and compare print it; "-" when not a number. */
void bench_contract_fmt(double v, const char *unit, char *buf, size_t n);

#endif
