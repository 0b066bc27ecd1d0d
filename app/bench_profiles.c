/* bench_profiles: serving load profiles for 'tern bench --profile' (lands with the history/tools work). */
#include <stdio.h>

#include "bench_profiles.h"
#include "cli.h"

int bench_profiles_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_not_yet("bench --profile");
}
