/* tern: entry point. Dispatches to a subcommand; `tern` alone (or with only
 * options) starts the chat TUI. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "tern_config.h"

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"chat", cmd_chat, "chat in the terminal UI (the default)"},
    {"run", cmd_run, "generate one reply and stream it to stdout"},
    {"bench", cmd_bench, "measure speed: raw pp/tg and serving load profiles"},
    {"eval", cmd_eval, "perplexity and prompt-set evaluation"},
    {"history", cmd_history, "list, show, search and export stored sessions"},
    {"info", cmd_info, "describe a model file and its memory plan"},
    {"models", cmd_models, "list the models in the models directory"},
    {"pull", cmd_pull, "download a model (URL or hf:ORG/REPO/FILE.gguf)"},
    {"tokenize", cmd_tokenize, "show the token ids of a text"},
    {"embed", cmd_embed, "print embedding vectors of texts"},
    {"serve", cmd_serve, "serve the model over an OpenAI-compatible HTTP API"},
    {"version", cmd_version, "print version and build features"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f,
            "tern %s: LLM inference in your terminal, with every phase of every request timed.\n"
            "\n"
            "usage: tern [COMMAND] [OPTIONS] [ARGS]\n"
            "\n"
            "commands:\n",
            TERN_VERSION);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\n"
            "global options (every command):\n"
            "  -m, --model NAME   model file (GGUF path), or a name in the models directory\n"
            "                     (file, stem or unique start: smollm2; see 'tern models');\n"
            "                     default: $TERN_MODEL, or the fetched SmolLM2-135M-Instruct\n"
            "      --config PATH  configuration file (default ~/.config/tern/tern.conf)\n"
            "  -h, --help         help for tern or for a command\n"
            "      --version      print the version\n"
            "\n"
            "'tern help COMMAND' (or 'tern COMMAND --help') describes a command's options.\n");
}

int cmd_version(int argc, char **argv)
{
    struct cli cli;
    static const char use[] = "usage: tern version\n\nPrints the version and build features.\n";
    int rc = cli_parse(&cli, argc, argv, "", NULL, NULL, NULL, use);
    if (rc < 0) {
        printf("tern %s (CUDA backend: %s)\n", TERN_VERSION,
               TERN_HAVE_CUDA ? "compiled in" : "not built");
        rc = 0;
    }
    cli_free(&cli);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        char *def[] = {"chat", NULL};
        return cmd_chat(1, def);
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        /* tern help CMD: that command's help */
        if (argc > 2 && strcmp(name, "help") == 0) {
            for (size_t i = 0; i < N_COMMANDS; i++)
                if (strcmp(commands[i].name, argv[2]) == 0) {
                    char *h[] = {argv[2], "--help", NULL};
                    return commands[i].fn(2, h);
                }
            fprintf(stderr, "tern help: unknown command '%s' (see 'tern --help')\n", argv[2]);
            return CLI_EXIT_USAGE;
        }
        usage(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0) {
        printf("tern %s\n", TERN_VERSION);
        return 0;
    }
    if (name[0] == '-') {
        /* Options without a command: they belong to the default command. */
        argv[0] = "chat";
        return cmd_chat(argc, argv);
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "tern: unknown command '%s' (see 'tern --help')\n", name);
    return CLI_EXIT_USAGE;
}
