/* bench_compare: 'tern bench compare RUN_A RUN_B' (see bench_compare.c);
 * argv[0] is "bench compare". */
#ifndef TERN_BENCH_COMPARE_H
#define TERN_BENCH_COMPARE_H

int bench_compare_main(int argc, char **argv);

#endif
