/* bench_resume: 'tern bench --resume N': how long reopening an N-token
 * conversation takes to its first new token with the disk prompt cache,
 * against a cold prefill of the same prompt. cmd_bench.c hands over to it;
 * argv as for cmd_bench. */
#ifndef TERN_BENCH_RESUME_H
#define TERN_BENCH_RESUME_H

int bench_resume_main(int argc, char **argv);
/* The --resume options' help (tern bench --help shows it too). */
const char *bench_resume_usage(void);

#endif
