/* cmd_chat: 'tern chat' (its capability lands with a later change). */
#include <stdio.h>

#include "cli.h"
#include "commands.h"

int cmd_chat(int argc, char **argv)
{
    static const char use[] =
        "usage: tern chat [OPTIONS]\n"
        "\n"
        "Chat with the model in the terminal UI.\n";
    struct cli cli;
    int rc = cli_parse(&cli, argc, argv, "", NULL, NULL, NULL, use);
    if (rc < 0) rc = cli_not_yet("chat");
    cli_free(&cli);
    return rc;
}
