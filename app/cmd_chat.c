/* cmd_chat: 'tern chat', the terminal UI (ui/app.h runs it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "ctxfit.h"
#include "cli.h"
#include "commands.h"
#include "model_name.h"

enum {
    OPT_THREADS = CLI_OPT_CMD,
    OPT_CTX,
    OPT_BACKEND,
    OPT_DB,
    OPT_NO_COLOR,
    OPT_HEADLESS,
    OPT_SIZE,
    OPT_KEYS,
    OPT_TEMP,
    OPT_TOP_P,
    OPT_MAX_TOKENS,
    OPT_SYSTEM,
    OPT_ATTACH,
    OPT_CTX_POLICY,
    OPT_TOP_K,
    OPT_MIN_P,
    OPT_REPEAT,
    OPT_SEED,
};

static const struct option longopts[] = {
    {"threads", required_argument, 0, OPT_THREADS},
    {"ctx", required_argument, 0, OPT_CTX},
    {"backend", required_argument, 0, OPT_BACKEND},
    {"db", required_argument, 0, OPT_DB},
    {"no-color", no_argument, 0, OPT_NO_COLOR},
    {"headless-frames", required_argument, 0, OPT_HEADLESS},
    {"size", required_argument, 0, OPT_SIZE},
    {"keys", required_argument, 0, OPT_KEYS},
    {"temp", required_argument, 0, OPT_TEMP},
    {"top-p", required_argument, 0, OPT_TOP_P},
    {"max-tokens", required_argument, 0, OPT_MAX_TOKENS},
    {"system", required_argument, 0, OPT_SYSTEM},
    {"attach", optional_argument, 0, OPT_ATTACH},
    {"context-policy", required_argument, 0, OPT_CTX_POLICY},
    {"top-k", required_argument, 0, OPT_TOP_K},
    {"min-p", required_argument, 0, OPT_MIN_P},
    {"repeat-penalty", required_argument, 0, OPT_REPEAT},
    {"seed", required_argument, 0, OPT_SEED},
    {0, 0, 0, 0},
};

/* Turns \r \n \t \e \\ and \xHH escapes of --keys into bytes, in place. */
static void unescape(char *s)
{
    char *o = s;
    while (*s) {
        if (*s != '\\' || !s[1]) {
            *o++ = *s++;
            continue;
        }
        s++;
        switch (*s) {
        case 'r':
            *o++ = '\r';
            s++;
            break;
        case 'n':
            *o++ = '\n';
            s++;
            break;
        case 't':
            *o++ = '\t';
            s++;
            break;
        case 'e':
            *o++ = 27;
            s++;
            break;
        case 'x': {
            unsigned v = 0;
            int n = 0;
            s++;
            while (n < 2 && ((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f') ||
                             (*s >= 'A' && *s <= 'F'))) {
                v = v * 16 + (unsigned)(*s <= '9' ? *s - '0' : (*s | 32) - 'a' + 10);
                s++, n++;
            }
            *o++ = (char)v;
            break;
        }
        default:
            *o++ = *s++;
            break;
        }
    }
    *o = 0;
}

#define CHAT_ATTACH_DEFAULT "http://127.0.0.1:8080"

struct chat_args {
    char *keys;
    const char *attach;          /* --attach URL (a local tern serve by default) */
    struct cli *cli;
    struct ui_app_opts o;
};

static int on_opt(int c, const char *arg, void *ud)
{
    struct chat_args *a = ud;
    long v;
    switch (c) {
    case OPT_THREADS:
        if (cli_threads(a->cli, arg, &v) < 0) return -1;
        a->o.engine.backend.threads = (int)v;
        return 0;
    case OPT_CTX:
        if (cli_int(a->cli, "--ctx", arg, 16, 1 << 22, &v) < 0) return -1;
        a->o.engine.n_ctx = (int32_t)v;
        return 0;
    case OPT_BACKEND:
        if (!strcmp(arg, "auto"))
            a->o.engine.backend.kind = BACKEND_AUTO;
        else if (!strcmp(arg, "cpu"))
            a->o.engine.backend.kind = BACKEND_CPU;
        else if (!strcmp(arg, "cuda"))
            a->o.engine.backend.kind = BACKEND_CUDA;
        else {
            fprintf(stderr, "tern chat: --backend: '%s' is not auto, cpu or cuda\n", arg);
            return -1;
        }
        return 0;
    case OPT_DB:
        a->o.db_path = arg;
        return 0;
    case OPT_TEMP:
        if (cli_double(a->cli, "--temp", arg, 0, 5, &a->o.temp) < 0) return -1;
        a->o.set_temp = true;
        return 0;
    case OPT_TOP_P:
        if (cli_double(a->cli, "--top-p", arg, 1e-6, 1, &a->o.top_p) < 0) return -1;
        return 0;
    case OPT_MAX_TOKENS:
        if (cli_int(a->cli, "--max-tokens", arg, 1, 1 << 20, &v) < 0) return -1;
        a->o.max_tokens = (int32_t)v;
        return 0;
    case OPT_SYSTEM:
        a->o.system = arg;
        return 0;
    case OPT_ATTACH:
        a->attach = arg ? arg : CHAT_ATTACH_DEFAULT;
        return 0;
    case OPT_TOP_K:
        return cli_int(a->cli, "--top-k", arg, 0, 1 << 24, &a->o.top_k);
    case OPT_MIN_P:
        return cli_double(a->cli, "--min-p", arg, 0, 1, &a->o.min_p);
    case OPT_REPEAT:
        return cli_double(a->cli, "--repeat-penalty", arg, 0, 10, &a->o.repeat_penalty);
    case OPT_SEED:
        return cli_int(a->cli, "--seed", arg, 0, 0x7fffffffL, &a->o.seed);
    case OPT_CTX_POLICY: {
        enum ui_ctx_policy p;
        if (ui_ctx_policy_parse(arg, &p) < 0) {
            fprintf(stderr, "tern chat: --context-policy: '%s' is not truncate or reject\n", arg);
            return -1;
        }
        a->o.ctx_policy = (int)p;
        a->o.set_ctx_policy = true;
        return 0;
    }
    case OPT_NO_COLOR:
        a->o.no_color = true;
        return 0;
    case OPT_HEADLESS:
        if (cli_int(a->cli, "--headless-frames", arg, 1, 1L << 30, &v) < 0) return -1;
        a->o.headless = true;
        a->o.max_frames = v;
        return 0;
    case OPT_SIZE:
        if (sscanf(arg, "%dx%d", &a->o.cols, &a->o.rows) != 2 || a->o.cols < 1 || a->o.rows < 1 ||
            a->o.cols > 1000 || a->o.rows > 1000) {
            fprintf(stderr, "tern chat: --size: '%s' is not COLSxROWS\n", arg);
            return -1;
        }
        return 0;
    case OPT_KEYS:
        free(a->keys);
        a->keys = strdup(arg);
        if (!a->keys) return -1;
        unescape(a->keys);
        a->o.keys = a->keys;
        return 0;
    default:
        return -1;
    }
}

int cmd_chat(int argc, char **argv)
{
    static const char use[] =
        "usage: tern chat [OPTIONS]\n"
        "\n"
        "Chat with the model in the terminal UI: streamed replies, sessions kept in the\n"
        "history database, live TTFT/TPOT and KV-cache gauges (F2), each reply's phase\n"
        "timeline (F3). F1 inside lists every key.\n"
        "\n"
        "options:\n"
        "      --threads N          CPU threads (default: physical cores)\n"
        "      --ctx N              context per sequence (default: the model's)\n"
        "      --backend B          auto, cpu or cuda (default auto: CUDA when usable)\n"
        "      --db PATH            history database (default $XDG_DATA_HOME/tern/history.db)\n"
        "      --temp T             temperature of new sessions (default 0.8; 0 = greedy)\n"
        "      --top-p P            top-p of new sessions (default 0.95)\n"
        "      --top-k K            top-k (default 40; 0 = off)\n"
        "      --min-p P            min-p (default 0.05; 0 = off)\n"
        "      --repeat-penalty R   (default 1 = off)\n"
        "      --seed N             sampling seed (default: a new one per reply)\n"
        "      --max-tokens N       reply length limit of new sessions (default 512;\n"
        "                           within a server's cap per request with --url)\n"
        "      --system TEXT        system prompt of new sessions\n"
        "      --context-policy P   when a session outgrows the context: truncate (drop\n"
        "                           the oldest turns, the default) or reject\n"
        "                           (F4 changes these for the open session)\n"
        "      --attach[=URL]       chat through a running tern serve and watch its engine\n"
        "                           (default " CHAT_ATTACH_DEFAULT "; any --url server works too)\n"
        "      --no-color           monochrome (also when NO_COLOR is set)\n"
        "      --headless-frames N  run off-screen for at most N frames, print the last\n"
        "                           frame (tests, sanitizer runs)\n"
        "      --size COLSxROWS     headless screen size (default 80x24)\n"
        "      --keys STR           headless key presses: \\r Enter, \\e Esc, \\xHH,\n"
        "                           {wait} until idle, {resize CxR}\n"
        "\n" CLI_REMOTE_USAGE;
    struct cli cli;
    struct chat_args a;
    memset(&a, 0, sizeof a);
    a.cli = &cli;
    engine_config_default(&a.o.engine);
    a.o.top_k = a.o.seed = -1;
    a.o.min_p = a.o.repeat_penalty = -1;
    int rc = cli_parse(&cli, argc, argv, "", longopts, on_opt, &a, use);
    if (rc >= 0) goto done;
    if (cli.argc > 0) {
        fprintf(stderr, "tern chat: unexpected argument '%s' (see 'tern chat --help')\n",
                cli.argv[0]);
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    char path[4096], merr[1024], err[1024], mdir[2048];
    model_name_dir(mdir, sizeof mdir);
    a.o.models_dir = mdir;
    a.o.list_models = model_name_list;
    a.o.free_models = model_name_list_free;
    if (a.attach && cli.n_urls < ENGINE_MAX_ENDPOINTS) /* the server's engine, over HTTP */
        cli.urls[cli.n_urls++] = a.attach;
    if (cli_engine_remote(&cli, &a.o.engine))
        ; /* the remote engine: no model file needed */
    else if (cli_model_path(&cli, path, sizeof path, merr, sizeof merr) == 0)
        a.o.engine.model_path = path;
    else
        a.o.model_error = merr;
    rc = ui_app_run(&a.o, err, sizeof err);
    if (rc != 0) fprintf(stderr, "tern chat: %s\n", err);
done:
    free(a.keys);
    cli_free(&cli);
    return rc;
}
