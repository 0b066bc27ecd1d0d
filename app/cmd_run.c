/* cmd_run: 'tern run' (its capability lands with a later change). */
#include <stdio.h>

#include "cli.h"
#include "commands.h"

int cmd_run(int argc, char **argv)
{
    static const char use[] =
        "usage: tern run [OPTIONS]\n"
        "\n"
        "Generates one reply to a prompt and streams it to stdout.\n";
    struct cli cli;
    int rc = cli_parse(&cli, argc, argv, "", NULL, NULL, NULL, use);
    if (rc < 0) rc = cli_not_yet("run");
    cli_free(&cli);
    return rc;
}
