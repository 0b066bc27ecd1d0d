/* bench_contract: 'tern bench --contract FILE' (run a contract's workload,
 * judge it, store it with its environment; --sweep raises the rate until a
 * target fails) and 'tern bench compare RUN_A RUN_B'. cmd_bench.c hands
 * over to these; argv as for cmd_bench. */
#ifndef TERN_BENCH_CONTRACT_H
#define TERN_BENCH_CONTRACT_H

int bench_contract_main(int argc, char **argv);
int bench_contract_compare_main(int argc, char **argv);
/* The --contract options' help (tern bench --help shows it too). */
const char *bench_contract_usage(void);

#endif
