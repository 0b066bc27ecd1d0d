/* cmd_eval: 'tern eval' (its capability lands with a later change). */
#include <stdio.h>

#include "cli.h"
#include "commands.h"

int cmd_eval(int argc, char **argv)
{
    static const char use[] =
        "usage: tern eval [OPTIONS]\n"
        "\n"
        "Perplexity over a text file, or a prompt set in JSONL.\n";
    struct cli cli;
    int rc = cli_parse(&cli, argc, argv, "", NULL, NULL, NULL, use);
    if (rc < 0) rc = cli_not_yet("eval");
    cli_free(&cli);
    return rc;
}
