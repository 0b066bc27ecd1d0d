/* cli: shared option parsing for all subcommands (see cli.h). */
#include "cli.h"
#include "cli_opts.h"
#include "model_name.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tern_config.h"

static const struct option global_longopts[] = {
    {"model", required_argument, 0, 'm'},
    {"config", required_argument, 0, CLI_OPT_CONFIG},
    {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, CLI_OPT_VERSION},
    {"url", required_argument, 0, CLI_OPT_URL},
    {"api-key", required_argument, 0, CLI_OPT_API_KEY},
    {"insecure", no_argument, 0, CLI_OPT_INSECURE},
    {"balance", required_argument, 0, CLI_OPT_BALANCE},
    {"read-timeout", required_argument, 0, CLI_OPT_READ_TIMEOUT},
    {"route", required_argument, 0, CLI_OPT_ROUTE},
    {"route-ttft", required_argument, 0, CLI_OPT_ROUTE_TTFT},
};
#define N_GLOBAL (sizeof global_longopts / sizeof global_longopts[0])

static size_t count_opts(const struct option *o)
{
    size_t n = 0;
    while (o && o[n].name) n++;
    return n;
}

/* The config path must be known before the other options are parsed. */
static const char *find_config_arg(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) return argv[i + 1];
        if (strncmp(argv[i], "--config=", 9) == 0) return argv[i] + 9;
    }
    return NULL;
}

/* Every command's long options: a config key outside this list is a typo
 * worth a warning (a key of another command is not). */
static const char *const known_keys[] = {
    "all", "backend", "bos", "chunks", "concurrency", "config", "context-policy", "ctx", "db",
    "file", "gpu", "headless-frames", "help", "ids", "ignore-eos", "json", "keys", "kv-mem",
    "kv-type", "limit", "markdown", "max-tokens", "mem", "min-p", "model", "no-color",
    "no-history", "no-save", "out", "perplexity", "pieces", "profile", "prompt", "prompts",
    "quiet", "rate", "raw", "repeat-penalty", "requests", "requests-out", "save", "scale", "seed",
    "size", "slo-tpot", "slo-ttft", "special", "step-tokens", "stop", "stride", "system", "temp",
    "texts", "threads", "timings", "top-k", "top-p", "trace", "verbose", "version", "continue",
    "url", "host", "port", "sha256", "dir", "dry-run"};

static bool known_key(const char *k)
{
    for (size_t i = 0; i < sizeof known_keys / sizeof *known_keys; i++)
        if (!strcmp(known_keys[i], k)) return true;
    return cli_opt_by_name(k) != NULL;
}

static const struct option *find_long(const struct option *o, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(o[i].name, name) == 0) return &o[i];
    return NULL;
}

/* Config entries become "--key=value" (or "--key" for flags set to true)
 * placed before the real arguments. */
static int expand_argv(struct cli *cli, int argc, char **argv, const struct option *all,
                       size_t n_all)
{
    size_t cap = (size_t)argc + cli->config.n + 1;
    char **out = calloc(cap, sizeof *out);
    cli->config_line = calloc(cli->config.n + 1, sizeof *cli->config_line);
    if (!out || !cli->config_line) {
        free(out);
        return -1;
    }
    size_t k = 0, made = 0;
    out[k++] = argv[0];
    for (size_t i = 0; i < cli->config.n; i++) {
        const struct config_entry *e = &cli->config.entries[i];
        const struct option *o = find_long(all, n_all, e->key);
        if (!o && !known_key(e->key))
            fprintf(stderr, "tern %s: %s:%d: unknown key '%s' (not an option of any command)\n",
                    cli->cmd, cli->config.path, e->line, e->key);
        if (!o || strcmp(e->key, "config") == 0) continue; /* other commands' keys */
        char *s;
        if (o->has_arg == no_argument) {
            if (strcmp(e->value, "true") && strcmp(e->value, "1") && strcmp(e->value, "yes"))
                continue;
            s = malloc(strlen(e->key) + 3);
            if (s) sprintf(s, "--%s", e->key);
        } else {
            s = malloc(strlen(e->key) + strlen(e->value) + 4);
            if (s) sprintf(s, "--%s=%s", e->key, e->value);
        }
        if (!s) goto oom;
        cli->config_line[made] = e->line; /* for a bad value's message */
        out[k++] = s;
        made++;
    }
    for (int i = 1; i < argc; i++) out[k++] = argv[i];
    cli->owned_argv = out;
    cli->argc = (int)k;
    cli->argv = out;
    cli->owned_strs = calloc(made + 1, sizeof *cli->owned_strs);
    if (!cli->owned_strs) goto oom;
    memcpy(cli->owned_strs, out + 1, made * sizeof *out);
    cli->n_owned = made;
    return 0;
oom:
    for (size_t i = 1; i <= made; i++) free(out[i]);
    free(out);
    cli->owned_argv = NULL;
    return -1;
}

int cli_parse(struct cli *cli, int argc, char **argv, const char *shortopts,
              const struct option *longopts, cli_opt_fn on_opt, void *ud, const char *usage)
{
    char err[512];
    memset(cli, 0, sizeof *cli);
    cli->cmd = argv[0];

    const char *cfg_path = find_config_arg(argc, argv);
    char def_path[1024];
    if (!cfg_path) config_default_path(def_path, sizeof def_path);
    if (config_load(&cli->config, cfg_path ? cfg_path : def_path, cfg_path != NULL, err,
                    sizeof err) != 0) {
        fprintf(stderr, "tern %s: %s\n", cli->cmd, err);
        return CLI_EXIT_USAGE;
    }

    size_t n_cmd = count_opts(longopts), n_all = n_cmd + N_GLOBAL;
    struct option *all = calloc(n_all + 1, sizeof *all);
    char *shorts = malloc(strlen(shortopts ? shortopts : "") + 8 + 2 * (CLI_O_END - CLI_O_FIRST));
    if (!all || !shorts) {
        free(all);
        free(shorts);
        fprintf(stderr, "tern %s: out of memory\n", cli->cmd);
        return CLI_EXIT_FAIL;
    }
    /* A command's own option of the same name wins over a global one (serve's
     * --insecure is about binding, not TLS). */
    size_t n_glob = 0;
    for (size_t i = 0; i < N_GLOBAL; i++)
        if (!find_long(longopts, n_cmd, global_longopts[i].name)) all[n_glob++] = global_longopts[i];
    if (n_cmd) memcpy(all + n_glob, longopts, n_cmd * sizeof *all);
    n_all = n_glob + n_cmd;
    sprintf(shorts, ":m:h%s", shortopts ? shortopts : "");
    /* Shared options take name, argument and short form from the one table;
     * their short form returns their code as the long form does. */
    int short_id[128] = {0};
    for (size_t i = n_glob; i < n_all; i++) {
        const struct cli_optdef *d = cli_opt_def(all[i].val);
        if (!d) continue;
        all[i].name = d->name;
        all[i].has_arg = d->arg ? required_argument : no_argument;
        if (d->short_name) {
            size_t k = strlen(shorts);
            shorts[k++] = d->short_name;
            if (d->arg) shorts[k++] = ':';
            shorts[k] = 0;
            short_id[(unsigned char)d->short_name] = d->id;
        }
    }

    int rc = -1;
    if (expand_argv(cli, argc, argv, all, n_all) != 0) {
        fprintf(stderr, "tern %s: out of memory\n", cli->cmd);
        rc = CLI_EXIT_FAIL;
        goto done;
    }

    optind = 0; /* full re-initialisation of getopt between commands */
    opterr = 0;
    int c;
    while ((c = getopt_long(cli->argc, cli->argv, shorts, all, NULL)) != -1) {
        if (c > 0 && c < 128 && short_id[c]) c = short_id[c];
        switch (c) {
        case 'm': cli->model = optarg; break;
        case CLI_OPT_CONFIG: cli->config_path = optarg; break;
        case 'h': cli_opt_usage(stdout, usage); rc = CLI_EXIT_OK; goto done;
        case CLI_OPT_VERSION: printf("tern %s\n", TERN_VERSION); rc = CLI_EXIT_OK; goto done;
        case CLI_OPT_URL:
            if (cli->n_urls == ENGINE_MAX_ENDPOINTS) {
                fprintf(stderr, "tern %s: --url: at most %d endpoints\n", cli->cmd,
                        ENGINE_MAX_ENDPOINTS);
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            cli->urls[cli->n_urls++] = optarg;
            break;
        case CLI_OPT_API_KEY: cli->api_key = optarg; break;
        case CLI_OPT_INSECURE: cli->insecure = true; break;
        case CLI_OPT_READ_TIMEOUT:
            if (cli_opt_double(cli, CLI_O_READ_TIMEOUT, optarg, &cli->read_timeout_s) != 0) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            break;
        case CLI_OPT_ROUTE: cli->route = optarg; break; /* checked by cli_engine_open */
        case CLI_OPT_ROUTE_TTFT: {
            double ms;
            if (cli_double(cli, "--route-ttft", optarg, 1, 3.6e6, &ms) != 0) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            cli->route_ttft_s = ms / 1000.0;
            break;
        }
        case CLI_OPT_BALANCE:
            if (strcmp(optarg, "round-robin") == 0) {
                cli->balance = ENGINE_BALANCE_ROUND_ROBIN;
            } else if (strcmp(optarg, "least-outstanding") == 0) {
                cli->balance = ENGINE_BALANCE_LEAST_OUTSTANDING;
            } else {
                fprintf(stderr, "tern %s: --balance: round-robin or least-outstanding, not '%s'\n",
                        cli->cmd, optarg);
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            break;
        case '?':
            if (optopt)
                fprintf(stderr, "tern %s: unknown option '-%c' (see 'tern %s --help')\n",
                        cli->cmd, optopt, cli->cmd);
            else
                fprintf(stderr, "tern %s: unknown option '%s' (see 'tern %s --help')\n",
                        cli->cmd, cli->argv[optind - 1], cli->cmd);
            rc = CLI_EXIT_USAGE;
            goto done;
        case ':':
            fprintf(stderr, "tern %s: option '%s' needs a value (see 'tern %s --help')\n",
                    cli->cmd, cli->argv[optind - 1], cli->cmd);
            rc = CLI_EXIT_USAGE;
            goto done;
        default:
            if (!on_opt || on_opt(c, optarg, ud) != 0) {
                if (!on_opt)
                    fprintf(stderr, "tern %s: unhandled option\n", cli->cmd);
                /* a value from the config file: say where it is */
                int at = optind - 1;
                for (size_t k = 0; at >= 1 && k < cli->n_owned; k++)
                    if (cli->argv[at] == cli->owned_strs[k])
                        fprintf(stderr, "tern %s: (that value is set in %s:%d)\n", cli->cmd,
                                cli->config.path, cli->config_line[k]);
                rc = CLI_EXIT_USAGE;
                goto done;
            }
        }
    }
    cli->argv += optind;
    cli->argc -= optind;
    if (cli->route && cli->n_urls > 0) {
        fprintf(stderr, "tern %s: --route and --url: name the URLs in the route\n", cli->cmd);
        rc = CLI_EXIT_USAGE;
    }
done:
    free(all);
    free(shorts);
    return rc;
}

void cli_free(struct cli *cli)
{
    if (cli->owned_argv) {
        for (size_t i = 0; i < cli->n_owned; i++) free(cli->owned_strs[i]);
        free(cli->owned_strs);
        free(cli->owned_argv);
        cli->owned_argv = NULL;
    }
    free(cli->config_line);
    cli->config_line = NULL;
    config_free(&cli->config);
}

void cli_data_dir(char *buf, size_t n)
{
    const char *xdg = getenv("XDG_DATA_HOME");
    const char *home = getenv("HOME");
    if (xdg && *xdg)
        snprintf(buf, n, "%s/tern", xdg);
    else
        snprintf(buf, n, "%s/.local/share/tern", home ? home : ".");
}

int cli_draft_model(const struct cli *cli, const char *name, char *buf, size_t n)
{
    char dir[1024], err[1024];
    model_name_dir(dir, sizeof dir);
    if (model_name_resolve(name, dir, buf, n, err, sizeof err) == 0) return 0;
    fprintf(stderr, "tern %s: --draft-model: %s\n", cli->cmd, err);
    return -1;
}

int cli_model_path(const struct cli *cli, char *buf, size_t n, char *err, size_t errlen)
{
    const char *p = cli->model;
    if (!p || !*p) p = getenv("TERN_MODEL");
    char dir[1024];
    if (p && *p) {
        model_name_dir(dir, sizeof dir);
        return model_name_resolve(p, dir, buf, n, err, errlen);
    }
    cli_data_dir(dir, sizeof dir);
    snprintf(buf, n, "%s/models/%s", dir, TERN_DEFAULT_MODEL_FILE);
    if (access(buf, R_OK) == 0) return 0;
    /* an installed tern names its installed fetcher, a build tree its source one */
    char fetch[4300] = "packaging/fetch-model' (or 'make run')";
    char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            char probe[4200];
            snprintf(probe, sizeof probe, "%s/../share/tern/fetch-model", exe);
            if (access(probe, X_OK) == 0) snprintf(fetch, sizeof fetch, "%s'", probe);
        }
    }
    snprintf(err, errlen,
             "no model: %s is absent. Run '%s to fetch the default model, 'tern pull URL' for "
             "another, or pass -m PATH / set TERN_MODEL",
             buf, fetch);
    return -1;
}

int cli_int(const struct cli *cli, const char *opt, const char *arg, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v < lo || v > hi) {
        fprintf(stderr, "tern %s: %s: '%s' is not an integer in [%ld, %ld]\n", cli->cmd, opt,
                arg, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_double(const struct cli *cli, const char *opt, const char *arg, double lo, double hi,
               double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "tern %s: %s: '%s' is not a number in [%g, %g]\n", cli->cmd, opt, arg,
                lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_size(const struct cli *cli, const char *opt, const char *arg, unsigned long long *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    double mult = 1;
    if (!errno && end != arg && v >= 0) {
        char u = (char)toupper((unsigned char)*end);
        if (u == 'K') mult = 1024.0;
        else if (u == 'M') mult = 1024.0 * 1024;
        else if (u == 'G') mult = 1024.0 * 1024 * 1024;
        else if (u == 'T') mult = 1024.0 * 1024 * 1024 * 1024;
        if (mult > 1) {
            end++;
            if (*end == 'i' || *end == 'I') end++;
            if (*end == 'B' || *end == 'b') end++;
        } else if (u == 'B') {
            end++;
        }
        if (!*end && v * mult < 1.8e19) {
            *out = (unsigned long long)(v * mult);
            return 0;
        }
    }
    fprintf(stderr, "tern %s: %s: '%s' is not a size (e.g. 512M, 8G)\n", cli->cmd, opt, arg);
    return -1;
}

int cli_kv_type(const struct cli *cli, const char *arg, enum kv_type *out)
{
    if (strcmp(arg, "f16") == 0) *out = KV_F16;
    else if (strcmp(arg, "f32") == 0) *out = KV_F32;
    else if (strcmp(arg, "q8_0") == 0) *out = KV_Q8_0;
    else if (strcmp(arg, "q4_0") == 0) *out = KV_Q4_0;
    else if (strcmp(arg, "q4c") == 0) *out = KV_Q4C;
    else {
        fprintf(stderr, "tern %s: --kv-type: '%s' is not f16, f32, q8_0, q4_0 or q4c\n", cli->cmd,
                arg);
        return -1;
    }
    return 0;
}

const char *cli_kv_type_name(enum kv_type t)
{
    switch (t) {
    case KV_F32: return "f32";
    case KV_Q8_0: return "q8_0";
    case KV_Q4_0: return "q4_0";
    case KV_Q4C: return "q4c";
    case KV_F16: break;
    }
    return "f16";
}

int cli_prompt_attn(const struct cli *cli, const char *arg, bool *bf16)
{
    if (strcmp(arg, "f32") == 0) *bf16 = false;
    else if (strcmp(arg, "bf16") == 0) *bf16 = true;
    else {
        fprintf(stderr, "tern %s: --prompt-attn: '%s' is not f32 or bf16\n", cli->cmd, arg);
        return -1;
    }
    return 0;
}

int cli_prefill_int8(const struct cli *cli, const char *arg, bool *w8a8)
{
    if (strcmp(arg, "exact") == 0) *w8a8 = false;
    else if (strcmp(arg, "w8a8") == 0) *w8a8 = true;
    else {
        fprintf(stderr, "tern %s: --prefill-int8: '%s' is not exact or w8a8\n", cli->cmd, arg);
        return -1;
    }
    return 0;
}

int cli_backend(const struct cli *cli, const char *arg, enum backend_kind *out)
{
    if (strcmp(arg, "auto") == 0) *out = BACKEND_AUTO;
    else if (strcmp(arg, "cpu") == 0) *out = BACKEND_CPU;
    else if (strcmp(arg, "cuda") == 0) *out = BACKEND_CUDA;
    else {
        fprintf(stderr, "tern %s: --backend: '%s' is not auto, cpu or cuda\n", cli->cmd, arg);
        return -1;
    }
    return 0;
}

int cli_engine_opt(const struct cli *cli, int id, const char *arg, struct engine_config *c,
                   char *draft, size_t n)
{
    long v;
    unsigned long long bytes;
    switch (id) {
    case CLI_O_THREADS:
        if (cli_opt_long(cli, CLI_O_THREADS, arg, &v) != 0) return -1;
        c->backend.threads = (int)v;
        return 0;
    case CLI_O_CTX:
        if (cli_opt_long(cli, CLI_O_CTX, arg, &v) != 0) return -1;
        c->n_ctx = (int32_t)v;
        return 0;
    case CLI_O_STEP_TOKENS:
        if (cli_opt_long(cli, CLI_O_STEP_TOKENS, arg, &v) != 0) return -1;
        c->step_tokens = (int32_t)v;
        return 0;
    case CLI_O_BACKEND: return cli_backend(cli, arg, &c->backend.kind);
    case CLI_O_KV_MEM:
        if (cli_size(cli, "--kv-mem", arg, &bytes) != 0) return -1;
        c->backend.kv_bytes = bytes;
        return 0;
    case CLI_O_KV_TYPE: return cli_kv_type(cli, arg, &c->backend.kv_type);
    case CLI_O_PROMPT_ATTN: return cli_prompt_attn(cli, arg, &c->backend.prompt_attn_bf16);
    case CLI_O_PREFILL_INT8: return cli_prefill_int8(cli, arg, &c->backend.prefill_w8a8);
    case CLI_O_LOOKUP:
        if (!c->lookup_k) c->lookup_k = CLI_LOOKUP_K_DEFAULT;
        return 0;
    case CLI_O_LOOKUP_K:
        if (cli_opt_long(cli, CLI_O_LOOKUP_K, arg, &v) != 0) return -1;
        c->lookup_k = (int32_t)v;
        return 0;
    case CLI_O_DRAFT_MODEL:
        if (!draft) return 1; /* a command without a draft model */
        if (cli_draft_model(cli, arg, draft, n) != 0) return -1;
        c->draft_model = draft;
        return 0;
    }
    return 1;
}

int cli_not_yet(const char *cmd)
{
    fprintf(stderr, "tern %s: not available yet\n", cmd);
    return CLI_EXIT_USAGE;
}
