/* cmd_chat: 'tern chat', the terminal UI (ui/app.h runs it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app.h"
#include "ctxfit.h"
#include "cli.h"
#include "cli_opts.h"
#include "commands.h"
#include "gguf.h"
#include "model_info.h"
#include "model_name.h"
#include "roofline.h"
#include "cpu/threadpool.h"
#include "quant.h"

enum {
    OPT_DB = CLI_OPT_CMD,
    OPT_NO_COLOR,
    OPT_HEADLESS,
    OPT_SIZE,
    OPT_KEYS,
    OPT_ATTACH,
    OPT_CTX_POLICY,
    OPT_CONTINUE,
    OPT_KV_DISK,
};

static const struct option longopts[] = {
    CLI_SHARED(CLI_O_THREADS),
    CLI_SHARED(CLI_O_CTX),
    CLI_SHARED(CLI_O_BACKEND),
    CLI_SHARED(CLI_O_KV_MEM),
    CLI_SHARED(CLI_O_KV_TYPE),
    CLI_SHARED(CLI_O_PROMPT_ATTN),
    CLI_SHARED(CLI_O_PREFILL_INT8),
    CLI_SHARED(CLI_O_STEP_TOKENS),
    CLI_SHARED(CLI_O_LOOKUP),
    CLI_SHARED(CLI_O_LOOKUP_K),
    CLI_SHARED(CLI_O_DRAFT_MODEL),
    {"db", required_argument, 0, OPT_DB},
    {"no-color", no_argument, 0, OPT_NO_COLOR},
    {"headless-frames", required_argument, 0, OPT_HEADLESS},
    {"size", required_argument, 0, OPT_SIZE},
    {"keys", required_argument, 0, OPT_KEYS},
    CLI_SHARED(CLI_O_TEMP),
    CLI_SHARED(CLI_O_TOP_P),
    CLI_SHARED(CLI_O_MAX_TOKENS),
    CLI_SHARED(CLI_O_SYSTEM),
    {"attach", optional_argument, 0, OPT_ATTACH},
    {"context-policy", required_argument, 0, OPT_CTX_POLICY},
    {"continue", no_argument, 0, OPT_CONTINUE},
    {"kv-disk", required_argument, 0, OPT_KV_DISK},
    CLI_SHARED(CLI_O_TOP_K),
    CLI_SHARED(CLI_O_MIN_P),
    CLI_SHARED(CLI_O_REPEAT_PENALTY),
    CLI_SHARED(CLI_O_SEED),
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

/* The picker's view of one file: its header read as tern models reads it,
 * the fit counted with KV cache type kv. */
static void describe(const char *dir, enum kv_type kv, struct ui_model_entry *e)
{
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, e->file);
    if (stat(path, &sb) == 0) e->size = (uint64_t)sb.st_size;
    struct gguf_ctx *g = gguf_open(path, e->err, sizeof e->err);
    if (!g) return;
    struct model_info mi;
    model_info_gather(g, kv, 0, &mi);
    e->ok = true;
    e->base = mi.tmpl_from_vocab; /* no template in the file: what the chat calls a base model */
    e->ctx = mi.ctx;
    e->fits = mi.kv_per_token > 0 && mi.weight_bytes + mi.kv_per_token * mi.ctx <= mi.budget;
    snprintf(e->quant, sizeof e->quant, "%s", mi.quant ? mi.quant : "");
    /* the cached limits only: the picker never waits on a measurement (the
     * model loader makes one when the cache lacks it) */
    struct limits lim;
    char lpath[4096], lerr[512];
    limits_default_path(cpu_isa_best(), lpath, sizeof lpath);
    if (limits_load(&lim, lpath, cpu_isa_best(), 0, lerr, sizeof lerr) == LIMITS_CACHE_OK) {
        const struct roofline_model c =
            roofline_model_cost(mi.active_weight_bytes, mi.active_params, mi.vocab_params);
        const struct roofline_fig f = roofline_predict(&lim, &c, tp_physical_cores());
        e->pp_tok_s = f.pp_pred_tok_s;
        e->tg_tok_s = f.tg_pred_tok_s;
    }
    gguf_close(g);
}

/* The models directory for the picker (F6), each file described. */
static int list_models(const char *dir, enum kv_type kv, struct ui_model_entry **out, char *err,
                       size_t errlen)
{
    char **files;
    int n = model_name_list(dir, &files, err, errlen);
    *out = NULL;
    if (n < 0) return -1;
    struct ui_model_entry *v = calloc(n > 0 ? (size_t)n : 1, sizeof *v);
    if (!v) {
        model_name_list_free(files);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        snprintf(v[i].file, sizeof v[i].file, "%s", files[i]);
        describe(dir, kv, &v[i]);
    }
    model_name_list_free(files);
    *out = v;
    return n;
}

#define CHAT_ATTACH_DEFAULT "http://127.0.0.1:8080"

struct chat_args {
    char *keys;
    const char *attach;          /* --attach URL (a local tern serve by default) */
    char draft_model[4096];      /* --draft-model, resolved */
    unsigned long long kv_disk;  /* --kv-disk: the disk prompt cache's cap */
    bool set_kv_disk;
    struct cli *cli;
    struct ui_app_opts o;
};

static int on_opt(int c, const char *arg, void *ud)
{
    struct chat_args *a = ud;
    long v;
    switch (c) {
    case OPT_DB:
        a->o.db_path = arg;
        return 0;
    case OPT_KV_DISK:
        a->set_kv_disk = true;
        return cli_size(a->cli, "--kv-disk", arg, &a->kv_disk);
    case CLI_O_TEMP:
        if (cli_opt_double(a->cli, CLI_O_TEMP, arg, &a->o.temp) < 0) return -1;
        a->o.set_temp = true;
        return 0;
    case CLI_O_TOP_P:
        if (cli_opt_double(a->cli, CLI_O_TOP_P, arg, &a->o.top_p) < 0) return -1;
        if (a->o.top_p == 0) a->o.top_p = 1e-6; /* the UI reads 0 as unset; this keeps the top token */
        return 0;
    case CLI_O_MAX_TOKENS:
        if (cli_opt_long(a->cli, CLI_O_MAX_TOKENS, arg, &v) < 0) return -1;
        a->o.max_tokens = (int32_t)v;
        return 0;
    case CLI_O_SYSTEM:
        a->o.system = arg;
        return 0;
    case OPT_ATTACH:
        a->attach = arg ? arg : CHAT_ATTACH_DEFAULT;
        return 0;
    case CLI_O_TOP_K: return cli_opt_long(a->cli, CLI_O_TOP_K, arg, &a->o.top_k);
    case CLI_O_MIN_P: return cli_opt_double(a->cli, CLI_O_MIN_P, arg, &a->o.min_p);
    case CLI_O_REPEAT_PENALTY:
        return cli_opt_double(a->cli, CLI_O_REPEAT_PENALTY, arg, &a->o.repeat_penalty);
    case CLI_O_SEED: return cli_opt_long(a->cli, CLI_O_SEED, arg, &a->o.seed);
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
    case 'c':
    case OPT_CONTINUE:
        a->o.resume = true;
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
    }
    /* the engine options every command shares; anything else is not chat's */
    int rc = cli_engine_opt(a->cli, c, arg, &a->o.engine, a->draft_model, sizeof a->draft_model);
    return rc == 0 ? 0 : -1;
}

/* The TUI's engine: a route when --route names one. */
static struct engine *open_engine(const struct engine_config *c, void *ud, char *err,
                                  size_t errlen)
{
    return cli_engine_open(ud, c, err, errlen);
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
        "tern chat starts a new session; -c continues the newest chat session, and F5\n"
        "lists the earlier ones (Enter opens one). One-shot tern run exchanges are kept\n"
        "apart: tern history lists them, F5 then a shows them too.\n"
        "\n"
        "options:\n"
        "  -c, --continue           continue the newest chat session\n"
        "@threads physical cores\n"
        "@ctx the model's\n"
        "@backend auto\n"
        "@kv-mem planned\n"
        "@kv-type f16\n"
        "@step-tokens\n"
        "@lookup\n"
        "@lookup-k 6; 4 with --draft-model\n"
        "@draft-model\n"
        "      --db PATH            history database (default $XDG_DATA_HOME/tern/history.db)\n"
        "      --kv-disk SIZE       disk prompt cache: a session's KV is kept at exit so that\n"
        "                           reopening it (-c, F5) skips its prefill; at most SIZE in\n"
        "                           $XDG_DATA_HOME/tern/kvcache (default 2G; 0 = off)\n"
        "sampling of new sessions (F4 changes them for the open session):\n"
        "@temp 0.8\n"
        "@top-p 0.95\n"
        "@top-k 40\n"
        "@min-p 0.05\n"
        "@repeat-penalty 1\n"
        "@seed a new one per reply\n"
        "@max-tokens 512; within a server's cap per request with --url\n"
        "@system\n"
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
    int rc = cli_parse(&cli, argc, argv, "c", longopts, on_opt, &a, use);
    if (rc >= 0) goto done;
    /* F4's guesses a step (the TUI asks them per request) */
    if (a.o.engine.draft_model && !a.o.engine.lookup_k) a.o.engine.lookup_k = ENGINE_DRAFT_K;
    char kvdir[4200];
    cli_data_dir(kvdir, sizeof kvdir - 16);
    strcat(kvdir, "/kvcache");
    FILE *kvlog = NULL;
    if (!a.set_kv_disk || a.kv_disk) { /* the disk prompt cache: on unless 0 */
        a.o.engine.kv_disk_dir = kvdir;
        a.o.engine.kv_disk_cap = a.kv_disk;
        /* Its notes (an entry ignored) are said after the screen is restored. */
        kvlog = tmpfile();
        a.o.engine.kv_disk_log = kvlog;
    }
    if (cli.argc > 0) {
        fprintf(stderr, "tern chat: unexpected argument '%s' (see 'tern chat --help')\n",
                cli.argv[0]);
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    char path[4096], merr[1024], err[1024], mdir[2048];
    model_name_dir(mdir, sizeof mdir);
    a.o.models_dir = mdir;
    a.o.list_models = list_models;
    if (a.attach && cli.n_urls < ENGINE_MAX_ENDPOINTS) /* the server's engine, over HTTP */
        cli.urls[cli.n_urls++] = a.attach;
    if (cli_engine_remote(&cli, &a.o.engine))
        ; /* the remote engine: no model file needed */
    else if (cli_model_path(&cli, path, sizeof path, merr, sizeof merr) == 0)
        a.o.engine.model_path = path;
    else
        a.o.model_error = merr;
    a.o.open_engine = open_engine;
    a.o.open_ud = &cli;
    rc = ui_app_run(&a.o, err, sizeof err);
    if (rc != 0) fprintf(stderr, "tern chat: %s\n", err);
    if (kvlog) {
        char line[512];
        rewind(kvlog);
        while (fgets(line, sizeof line, kvlog)) fprintf(stderr, "tern chat: %s", line);
        fclose(kvlog);
    }
done:
    free(a.keys);
    cli_free(&cli);
    return rc;
}
