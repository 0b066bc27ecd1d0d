/* cmd_tokenize: 'tern tokenize' (its capability lands with a later change). */
#include <stdio.h>

#include "cli.h"
#include "commands.h"

int cmd_tokenize(int argc, char **argv)
{
    static const char use[] =
        "usage: tern tokenize [OPTIONS]\n"
        "\n"
        "Prints the token ids of a text.\n";
    struct cli cli;
    int rc = cli_parse(&cli, argc, argv, "", NULL, NULL, NULL, use);
    if (rc < 0) rc = cli_not_yet("tokenize");
    cli_free(&cli);
    return rc;
}
