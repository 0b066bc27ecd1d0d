/* cli: one way to parse options for every subcommand.
 *
 * Global options (-m/--model, --config, -h/--help, --version) are accepted by
 * every command. Values from the config file are applied first as if given on
 * the command line (keys = long option names), so command-line options win.
 * Options shared by several commands (engine, sampling, remote) come from
 * the one table of cli_opts.h. */
#ifndef TERN_CLI_H
#define TERN_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

#include "backend.h"
#include "config.h"
#include "engine.h"

struct cli {
    const char *cmd;         /* "info", "run", ... */
    const char *model;       /* -m/--model (or config "model"), NULL if absent */
    const char *config_path; /* --config */
    struct config config;
    int argc;                /* positional arguments after the options */
    char **argv;
    char **owned_argv;       /* expanded argv (config + command line) */
    char **owned_strs;       /* "--key=value" strings made from config (getopt permutes argv) */
    size_t n_owned;
    /* Remote engine (global options, or config keys url / api-key / insecure /
     * balance): --url may repeat (several endpoints). */
    const char *urls[ENGINE_MAX_ENDPOINTS];
    int n_urls;
    const char *api_key;     /* --api-key, else $TERN_API_KEY */
    bool insecure;
    enum engine_balance balance;
    double read_timeout_s;   /* --read-timeout; 0 = the engine's default (60 s) */
    /* Fallback route (global --route SPEC / config "route", route.h):
     * "local,URL1,URL2#key-env=VAR"; NULL = none. --route-ttft: seconds a
     * target may take to its first token before the request moves on. */
    const char *route;
    double route_ttft_s;
    int *config_line;        /* config file line of each owned string */
};

/* Called for each command-specific option; returns 0, or -1 after printing
 * an error (the command then exits with status 2). */
typedef int (*cli_opt_fn)(int c, const char *arg, void *ud);

enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2 };
/* Long-option codes from here up are free for commands. */
enum { CLI_OPT_CONFIG = 0x1000, CLI_OPT_VERSION, CLI_OPT_URL, CLI_OPT_API_KEY, CLI_OPT_INSECURE,
       CLI_OPT_BALANCE, CLI_OPT_READ_TIMEOUT, CLI_OPT_ROUTE, CLI_OPT_ROUTE_TTFT,
       CLI_OPT_CMD = 0x1100 };

/* Parses argv (argv[0] is the command name). `usage` is printed for -h.
 * Returns -1 to continue (options parsed into cli and via on_opt), or an exit
 * status to return at once (0 after --help/--version, 2 on a usage error). */
int cli_parse(struct cli *cli, int argc, char **argv, const char *shortopts,
              const struct option *longopts, cli_opt_fn on_opt, void *ud,
              const char *usage);
void cli_free(struct cli *cli);

/* Resolves the model path: -m, then TERN_MODEL, then config, then the default
 * model in the data directory. Returns 0, or -1 with a message saying how to
 * get one. */
int cli_model_path(const struct cli *cli, char *buf, size_t n, char *err, size_t errlen);
/* --draft-model NAME resolved as -m resolves a name into buf (a path, an
 * alias, a file in the models folder); says what failed and returns -1. */
int cli_draft_model(const struct cli *cli, const char *name, char *buf, size_t n);
/* With --url: sets c->remote from the options and lends c only an explicit
 * -m model file (its tokenizer); prints "insecure" loudly. Returns true when
 * the engine is remote. Without --url: does nothing, returns false. */
bool cli_engine_remote(const struct cli *cli, struct engine_config *c);
/* Opens the engine the options name: with --route, a route over c (its
 * local target runs c's model; its remote ones get the remote options);
 * otherwise engine_open(c). Returns NULL with err. */
struct engine *cli_engine_open(const struct cli *cli, const struct engine_config *c, char *err,
                               size_t errlen);
/* Usage lines of the remote options (rows of cli_opts.c's table). */
#define CLI_REMOTE_USAGE \
    "remote engine (any OpenAI-compatible server: vLLM, SGLang, llama-server, tern serve):\n" \
    "@url\n@api-key\n@balance round-robin\n@insecure\n@read-timeout 60\n" \
    "  --route T1,T2,...      fallback route: local and/or URLs (URL#key-env=VAR for\n" \
    "                         its key); a request moves on when rejected, failed or\n" \
    "                         late before its first token\n" \
    "  --route-ttft MS        route: move on when no first token after MS ms\n"

/* ${XDG_DATA_HOME:-$HOME/.local/share}/tern */
void cli_data_dir(char *buf, size_t n);

/* Shared value parsers: print "tern CMD: --opt: ..." and return -1 on bad input. */
int cli_int(const struct cli *cli, const char *opt, const char *arg, long lo, long hi, long *out);
int cli_double(const struct cli *cli, const char *opt, const char *arg, double lo, double hi,
               double *out);
/* Sizes like 512M, 8G, 1.5GiB. */
int cli_size(const struct cli *cli, const char *opt, const char *arg, unsigned long long *out);

/* --kv-type f16|f32|q8_0|q4_0|q4c and --backend auto|cpu|cuda, shared by run and bench. */
int cli_kv_type(const struct cli *cli, const char *arg, enum kv_type *out);
/* The --kv-type spelling of t ("f16", "q8_0", ...). */
const char *cli_kv_type_name(enum kv_type t);
/* --prompt-attn: f32 or bf16 (backend_config.prompt_attn_bf16). */
int cli_prompt_attn(const struct cli *cli, const char *arg, bool *bf16);
/* --prefill-int8: exact or w8a8 (backend_config.prefill_w8a8). */
int cli_prefill_int8(const struct cli *cli, const char *arg, bool *w8a8);
int cli_backend(const struct cli *cli, const char *arg, enum backend_kind *out);

/* The engine options run, serve, chat, eval and bench share (--threads, --ctx,
 * --backend, --kv-mem, --kv-type, --prompt-attn, --prefill-int8, --step-tokens, --lookup,
 * --lookup-k, --draft-model), read straight into the engine_config the
 * command opens with, so each option is read in one place. draft (n bytes)
 * keeps --draft-model's resolved path, which c->draft_model then names
 * (NULL: the command takes no draft model).
 * Returns 0, -1 after saying what is wrong with the value, or 1 when id is
 * not one of them (the command's own option). */
int cli_engine_opt(const struct cli *cli, int id, const char *arg, struct engine_config *c,
                   char *draft, size_t n);

/* For subcommands whose capability lands in a later change. */
int cli_not_yet(const char *cmd);

#define TERN_DEFAULT_MODEL_FILE "SmolLM2-135M-Instruct.Q4_1.gguf"

#endif
