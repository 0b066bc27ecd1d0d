/* cli_opts: the one table of options shared by several commands (engine,
 * sampling, remote), so that every command spells, limits, documents and
 * rejects them alike (issue 35).
 *
 * A command lists a shared option in its getopt table as CLI_SHARED(id):
 * cli_parse fills in the name, argument and short form from the table. Its
 * usage text names it as a line "@name" or "@name DEFAULT", which --help
 * prints as the table's line (flag, help, range, then the command's
 * default). Values are read with cli_opt_long / cli_opt_double, whose
 * errors are the same everywhere. */
#ifndef TERN_CLI_OPTS_H
#define TERN_CLI_OPTS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

struct cli;

/* Codes above the globals (0x1000...) and below the commands' (0x1100...). */
enum cli_opt_id {
    CLI_O_FIRST = 0x1080,
    CLI_O_THREADS = CLI_O_FIRST,
    CLI_O_CTX,
    CLI_O_BACKEND,
    CLI_O_KV_MEM,
    CLI_O_KV_TYPE,
    CLI_O_STEP_TOKENS,
    CLI_O_MAX_TOKENS,
    CLI_O_TEMP,
    CLI_O_TOP_K,
    CLI_O_TOP_P,
    CLI_O_MIN_P,
    CLI_O_REPEAT_PENALTY,
    CLI_O_SEED,
    CLI_O_SYSTEM,
    CLI_O_URL,          /* remote: parsed by cli_parse for every command */
    CLI_O_API_KEY,
    CLI_O_BALANCE,
    CLI_O_INSECURE,
    CLI_O_READ_TIMEOUT,
    CLI_O_LOOKUP,       /* speculative decoding by n-gram prompt lookup */
    CLI_O_LOOKUP_K,
    CLI_O_DRAFT_MODEL,  /* speculative decoding with a draft model */
    CLI_O_PROMPT_ATTN,  /* prompt attention's arithmetic: f32 or bf16 (AMX tiles) */
    CLI_O_PREFILL_INT8, /* prefill matmuls: exact or w8a8 (AMX int8 tiles) */
    CLI_O_END
};

enum cli_opt_kind { CLI_K_INT, CLI_K_DOUBLE, CLI_K_SIZE, CLI_K_CHOICE, CLI_K_TEXT, CLI_K_FLAG };

struct cli_optdef {
    enum cli_opt_id id;
    const char *name;   /* long form, also the config file key */
    char short_name;    /* 0: none */
    const char *arg;    /* metavariable, NULL for a flag */
    enum cli_opt_kind kind;
    double lo, hi;      /* CLI_K_INT / CLI_K_DOUBLE */
    const char *range;  /* CLI_K_CHOICE: the choices in words */
    const char *help;
};

/* --lookup without --lookup-k: tokens guessed per decode step. */
#define CLI_LOOKUP_K_DEFAULT 6

/* A getopt entry for a shared option; cli_parse fills it in. */
#define CLI_SHARED(id) { "*", no_argument, 0, (id) }

/* The table row of id (NULL if id is not shared) and its row by long name. */
const struct cli_optdef *cli_opt_def(int id);
const struct cli_optdef *cli_opt_by_name(const char *name);
/* All rows, in table order; *n gets their count. */
const struct cli_optdef *cli_opt_table(size_t *n);

/* The range in words as --help and the errors say it: "16-4194304". */
void cli_opt_range(const struct cli_optdef *d, char *buf, size_t n);

/* Prints usage with each "@name [DEFAULT]" line replaced by the row's help
 * line, wrapped at 79 columns. */
void cli_opt_usage(FILE *f, const char *usage);

/* Value readers: check the row's range; on bad input print
 * "tern CMD: --name: 'ARG' is not ... in RANGE" and return -1.
 * --threads over the machine's cores is warned about and capped. */
int cli_opt_long(const struct cli *cli, enum cli_opt_id id, const char *arg, long *out);
int cli_opt_double(const struct cli *cli, enum cli_opt_id id, const char *arg, double *out);
int cli_opt_float(const struct cli *cli, enum cli_opt_id id, const char *arg, float *out);

/* --ctx beyond the model's trained context: a warning (as llama.cpp gives),
 * since quality falls off past it. requested or trained 0: nothing to say. */
void cli_opt_warn_ctx(const struct cli *cli, long requested, long trained);

#endif
