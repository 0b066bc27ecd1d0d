/* cli_opts: the shared option table (see cli_opts.h). */
#include "cli_opts.h"
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct cli_optdef table[] = {
    {CLI_O_THREADS, "threads", 't', "N", CLI_K_INT, 1, 1024, NULL,
     "CPU threads"},
    {CLI_O_CTX, "ctx", 0, "N", CLI_K_INT, 16, 1 << 22, NULL,
     "context per sequence"},
    {CLI_O_BACKEND, "backend", 0, "B", CLI_K_CHOICE, 0, 0, "auto, cpu or cuda",
     "compute backend (auto: CUDA when usable)"},
    {CLI_O_KV_MEM, "kv-mem", 0, "SIZE", CLI_K_SIZE, 0, 0, "e.g. 512M, 8G", "KV cache budget"},
    {CLI_O_KV_TYPE, "kv-type", 0, "T", CLI_K_CHOICE, 0, 0, "f16, f32, q8_0, q4_0 or q4c",
     "KV cache type (q4c: CPU only)"},
    {CLI_O_STEP_TOKENS, "step-tokens", 0, "N", CLI_K_INT, 1, 1 << 16, NULL,
     "scheduler token budget per step"},
    {CLI_O_MAX_TOKENS, "max-tokens", 'n', "N", CLI_K_INT, 1, 1 << 24, NULL, "reply length limit"},
    {CLI_O_TEMP, "temp", 0, "T", CLI_K_DOUBLE, 0, 100, NULL, "temperature (0 = greedy)"},
    {CLI_O_TOP_K, "top-k", 0, "K", CLI_K_INT, 0, 1 << 24, NULL, "top-k sampling (0 = off)"},
    {CLI_O_TOP_P, "top-p", 0, "P", CLI_K_DOUBLE, 0, 1, NULL, "top-p sampling (1 = off)"},
    {CLI_O_MIN_P, "min-p", 0, "P", CLI_K_DOUBLE, 0, 1, NULL, "min-p sampling (0 = off)"},
    {CLI_O_REPEAT_PENALTY, "repeat-penalty", 0, "R", CLI_K_DOUBLE, 0, 10, NULL,
     "repetition penalty (1 = off)"},
    {CLI_O_SEED, "seed", 0, "N", CLI_K_INT, 0, 0x7fffffffL, NULL,
     "sampling seed"},
    {CLI_O_SYSTEM, "system", 0, "TEXT", CLI_K_TEXT, 0, 0, NULL, "system prompt"},
    {CLI_O_URL, "url", 0, "URL", CLI_K_TEXT, 0, 0, NULL,
     "remote server base URL, e.g. http://host:8000/v1 (repeat for several)"},
    {CLI_O_API_KEY, "api-key", 0, "KEY", CLI_K_TEXT, 0, 0, NULL,
     "remote Bearer key (default $TERN_API_KEY)"},
    {CLI_O_BALANCE, "balance", 0, "B", CLI_K_CHOICE, 0, 0, "round-robin or least-outstanding",
     "several --url: how requests are spread"},
    {CLI_O_INSECURE, "insecure", 0, NULL, CLI_K_FLAG, 0, 0, NULL,
     "remote: do not verify TLS certificates (loudly)"},
    {CLI_O_READ_TIMEOUT, "read-timeout", 0, "S", CLI_K_DOUBLE, 0.01, 86400, NULL,
     "remote: end a stream silent for S seconds"},
    {CLI_O_LOOKUP, "lookup", 0, NULL, CLI_K_FLAG, 0, 0, NULL,
     "speculative decoding: guess tokens from the prompt and reply (n-gram lookup), verify "
     "them in one pass; same output, faster on editing and summaries"},
    {CLI_O_LOOKUP_K, "lookup-k", 0, "N", CLI_K_INT, 1, 32, NULL,
     "tokens guessed per step (implies --lookup)"},
    {CLI_O_DRAFT_MODEL, "draft-model", 0, "M", CLI_K_TEXT, 0, 0, NULL,
     "speculative decoding: a smaller model with the same vocabulary guesses tokens, "
     "verified in one pass; same output (named as -m names)"},
    {CLI_O_PROMPT_ATTN, "prompt-attn", 0, "A", CLI_K_CHOICE, 0, 0, "f32 or bf16",
     "prompt attention: f32 (default) or bf16 on AMX tiles (long prompts about 3x faster, "
     "within bf16's rounding; batching and speculation may then change a reply)"},
    {CLI_O_PREFILL_INT8, "prefill-int8", 0, "Q", CLI_K_CHOICE, 0, 0, "exact or w8a8",
     "prefill matmuls: exact (default) or w8a8 on AMX int8 tiles (weights per row and "
     "activations per token to int8: faster, not the exact numbers)"},
};
#define N_TABLE (sizeof table / sizeof table[0])

const struct cli_optdef *cli_opt_def(int id)
{
    for (size_t i = 0; i < N_TABLE; i++)
        if ((int)table[i].id == id) return &table[i];
    return NULL;
}

const struct cli_optdef *cli_opt_by_name(const char *name)
{
    for (size_t i = 0; i < N_TABLE; i++)
        if (strcmp(table[i].name, name) == 0) return &table[i];
    return NULL;
}

const struct cli_optdef *cli_opt_table(size_t *n)
{
    *n = N_TABLE;
    return table;
}

void cli_opt_range(const struct cli_optdef *d, char *buf, size_t n)
{
    if (d->kind == CLI_K_INT || d->kind == CLI_K_DOUBLE)
        snprintf(buf, n, "%.15g-%.15g", d->lo, d->hi);
    else
        snprintf(buf, n, "%s", d->range ? d->range : "");
}

/* Words of text, wrapped at 79 columns, continuation lines at column 27. */
static void wrap(FILE *f, int col, const char *text)
{
    const char *p = text;
    bool first = true;
    while (*p) {
        size_t w = strcspn(p, " ");
        if (!first && col + 1 + (int)w > 79) {
            fprintf(f, "\n%27s", "");
            col = 27;
        } else if (!first) {
            fputc(' ', f);
            col++;
        }
        first = false;
        fwrite(p, 1, w, f);
        col += (int)w;
        p += w;
        while (*p == ' ') p++;
    }
    fputc('\n', f);
}

static void print_row(FILE *f, const struct cli_optdef *d, const char *dflt)
{
    char left[64], range[96], text[512];
    int k = snprintf(left, sizeof left, "  %c%c%s--%s%s%s", d->short_name ? '-' : ' ',
                     d->short_name ? d->short_name : ' ', d->short_name ? ", " : "  ", d->name,
                     d->arg ? " " : "", d->arg ? d->arg : "");
    cli_opt_range(d, range, sizeof range);
    snprintf(text, sizeof text, "%s%s%s%s%s%s", d->help, range[0] ? " [" : "", range,
             range[0] ? "]" : "", dflt && *dflt ? " (default: " : "", dflt && *dflt ? dflt : "");
    if (dflt && *dflt) strncat(text, ")", sizeof text - strlen(text) - 1);
    fputs(left, f);
    if (k > 26) { /* a long flag: the help starts on the next line */
        fprintf(f, "\n%27s", "");
        k = 27;
    } else {
        fprintf(f, "%*s", 27 - k, "");
        k = 27;
    }
    wrap(f, k, text);
}

void cli_opt_usage(FILE *f, const char *usage)
{
    const char *p = usage;
    while (*p) {
        size_t n = strcspn(p, "\n");
        if (p[0] == '@') {
            char name[64];
            size_t w = strcspn(p + 1, " \n");
            if (w >= sizeof name) w = sizeof name - 1;
            memcpy(name, p + 1, w);
            name[w] = 0;
            const struct cli_optdef *d = cli_opt_by_name(name);
            char dflt[256] = "";
            if (1 + w < n) {
                size_t dn = n - 2 - w;
                if (dn >= sizeof dflt) dn = sizeof dflt - 1;
                memcpy(dflt, p + 2 + w, dn);
                dflt[dn] = 0;
            }
            if (d) print_row(f, d, dflt);
        } else {
            fwrite(p, 1, n, f);
            if (p[n] == '\n') fputc('\n', f);
        }
        p += n;
        if (*p == '\n') p++;
    }
}

static void bad(const struct cli *cli, const struct cli_optdef *d, const char *arg,
                const char *what)
{
    char range[96];
    cli_opt_range(d, range, sizeof range);
    fprintf(stderr, "tern %s: --%s: '%s' is not %s in [%s]\n", cli->cmd, d->name, arg, what,
            range);
}

int cli_opt_long(const struct cli *cli, enum cli_opt_id id, const char *arg, long *out)
{
    const struct cli_optdef *d = cli_opt_def(id);
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (!d || errno || end == arg || *end || v < (long)d->lo || v > (long)d->hi) {
        if (d) bad(cli, d, arg, "an integer");
        return -1;
    }
    if (id == CLI_O_THREADS) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        if (cores > 0 && v > cores) {
            fprintf(stderr, "tern %s: --threads %ld is more than the %ld cores here: using %ld\n",
                    cli->cmd, v, cores, cores);
            v = cores;
        }
    }
    *out = v;
    return 0;
}

int cli_opt_double(const struct cli *cli, enum cli_opt_id id, const char *arg, double *out)
{
    const struct cli_optdef *d = cli_opt_def(id);
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (!d || errno || end == arg || *end || !(v >= d->lo && v <= d->hi)) {
        if (d) bad(cli, d, arg, "a number");
        return -1;
    }
    *out = v;
    return 0;
}

int cli_opt_float(const struct cli *cli, enum cli_opt_id id, const char *arg, float *out)
{
    double v;
    if (cli_opt_double(cli, id, arg, &v) != 0) return -1;
    *out = (float)v;
    return 0;
}

void cli_opt_warn_ctx(const struct cli *cli, long requested, long trained)
{
    if (requested > 0 && trained > 0 && requested > trained)
        fprintf(stderr,
                "tern %s: warning: --ctx %ld is more than the model was trained on (%ld); "
                "replies past that may degrade\n",
                cli->cmd, requested, trained);
}
