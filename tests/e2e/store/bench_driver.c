/* bench_driver: runs the load-profile benchmark (app/bench_profiles.c) as
 * 'tern bench --profile' does, so the store tests exercise it directly.
 * usage: bench_driver bench --profile P [OPTIONS] */
#include "bench_profiles.h"

int main(int argc, char **argv)
{
    return bench_profiles_main(argc - 1, argv + 1);
}
