/* bench_profiles: serving load profiles of 'tern bench' (short, long-prompt,
 * long-reply, mixed-priority, cancel, slow-consumer, multi-turn, all).
 * cmd_bench.c calls this when --profile is given; argv as for cmd_bench. */
#ifndef TERN_BENCH_PROFILES_H
#define TERN_BENCH_PROFILES_H

int bench_profiles_main(int argc, char **argv);
/* The --profile options' help (tern bench --help shows it too). */
const char *bench_profiles_usage(void);

#endif
