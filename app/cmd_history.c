/* cmd_history: 'tern history' (its capability lands with a later change). */
#include <stdio.h>

#include "cli.h"
#include "commands.h"

int cmd_history(int argc, char **argv)
{
    static const char use[] =
        "usage: tern history [OPTIONS]\n"
        "\n"
        "Lists, shows, searches and exports stored sessions.\n";
    struct cli cli;
    int rc = cli_parse(&cli, argc, argv, "", NULL, NULL, NULL, use);
    if (rc < 0) rc = cli_not_yet("history");
    cli_free(&cli);
    return rc;
}
