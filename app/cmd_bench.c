/* cmd_bench: 'tern bench' (its capability lands with a later change). */
#include <stdio.h>

#include "cli.h"
#include "commands.h"

int cmd_bench(int argc, char **argv)
{
    static const char use[] =
        "usage: tern bench [OPTIONS]\n"
        "\n"
        "Measures prompt processing and generation speed, and serving load profiles.\n";
    struct cli cli;
    int rc = cli_parse(&cli, argc, argv, "", NULL, NULL, NULL, use);
    if (rc < 0) rc = cli_not_yet("bench");
    cli_free(&cli);
    return rc;
}
