/* cmd_info: 'tern info' (its capability lands with a later change). */
#include <stdio.h>

#include "cli.h"
#include "commands.h"

int cmd_info(int argc, char **argv)
{
    static const char use[] =
        "usage: tern info [OPTIONS]\n"
        "\n"
        "Describes a model file: architecture, tensors, vocabulary, memory plan.\n";
    struct cli cli;
    int rc = cli_parse(&cli, argc, argv, "", NULL, NULL, NULL, use);
    if (rc < 0) rc = cli_not_yet("info");
    cli_free(&cli);
    return rc;
}
