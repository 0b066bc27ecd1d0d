/* cmd_embed: 'tern embed' — embedding vectors of texts (arguments, or one
 * per line of standard input) through the engine API, as /v1/embeddings
 * computes them: each text is a prefill-only request whose final hidden
 * state is pooled (the model's pooling_type, or --pooling), truncated to
 * --dimensions and L2-normalised. Output: OpenAI's JSON shape, or one
 * vector per line (--format text). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "commands.h"
#include "engine.h"

enum { OPT_POOLING = CLI_OPT_CMD, OPT_DIMENSIONS, OPT_FORMAT };

#define EMBED_WINDOW 32  /* texts in the engine at once */

struct embed_opts {
    const struct cli *cli;
    long dims;
    struct engine_config eng;   /* the shared engine options (cli_engine_opt) */
    enum engine_pooling pooling;
    bool text;
};

static int on_opt(int c, const char *arg, void *ud)
{
    struct embed_opts *o = ud;
    switch (c) {
    case OPT_DIMENSIONS: return cli_int(o->cli, "--dimensions", arg, 1, 1 << 20, &o->dims);
    case OPT_POOLING:
        for (int p = ENGINE_POOL_MODEL; p <= ENGINE_POOL_LAST; p++)
            if (strcmp(arg, engine_pooling_name((enum engine_pooling)p)) == 0) {
                o->pooling = (enum engine_pooling)p;
                return 0;
            }
        fprintf(stderr, "tern embed: --pooling: '%s' is not one of model, mean, cls, last\n", arg);
        return -1;
    case OPT_FORMAT:
        if (strcmp(arg, "json") == 0 || strcmp(arg, "text") == 0) {
            o->text = arg[0] == 't';
            return 0;
        }
        fprintf(stderr, "tern embed: --format: '%s' is not json or text\n", arg);
        return -1;
    }
    /* the engine options every command shares */
    return cli_engine_opt(o->cli, c, arg, &o->eng, NULL, 0) == 0 ? 0 : -1;
}

/* The texts: the arguments, or the non-empty lines of standard input. */
struct texts {
    char **v;
    int n, cap;
    bool owned;
};

static int texts_push(struct texts *t, char *s)
{
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 64;
        char **nv = realloc(t->v, (size_t)cap * sizeof *nv);
        if (!nv) return -1;
        t->v = nv;
        t->cap = cap;
    }
    t->v[t->n++] = s;
    return 0;
}

static int read_lines(struct texts *t)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    t->owned = true;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n == 0) continue;
        char *s = strdup(line);
        if (!s || texts_push(t, s) != 0) {
            free(s);
            free(line);
            return -1;
        }
    }
    free(line);
    return 0;
}

static void texts_free(struct texts *t)
{
    if (t->owned)
        for (int i = 0; i < t->n; i++) free(t->v[i]);
    free(t->v);
}

static struct engine *open_engine(const struct cli *cli, const struct embed_opts *o)
{
    char path[4096], err[1024];
    struct engine_config c = o->eng;
    /* --url / --route: the server's /v1/embeddings computes them */
    bool remote = cli_engine_remote(cli, &c);
    if (!remote && cli_model_path(cli, path, sizeof path, err, sizeof err) != 0) {
        fprintf(stderr, "tern embed: %s\n", err);
        return NULL;
    }
    if (!remote) c.model_path = path;
    struct engine *e = cli_engine_open(cli, &c, err, sizeof err);
    if (!e) fprintf(stderr, "tern embed: %s\n", err);
    return e;
}

struct result {
    uint64_t id;
    bool done;
    struct engine_event fin;
};

/* Runs every text through the engine, a window at a time; returns 0 when
 * all gave a vector, else 1 after saying which failed. */
static int run_all(struct engine *e, const struct embed_opts *o, const struct texts *t,
                   struct result *res)
{
    int next = 0, live = 0, rc = 0;
    while (next < t->n || live > 0) {
        while (rc == 0 && live < EMBED_WINDOW && next < t->n) {
            struct engine_request q = {.prompt = t->v[next], .embed = true,
                                       .pooling = o->pooling, .dimensions = (int32_t)o->dims,
                                       .priority = ENGINE_PRIO_BATCH};
            char err[512];
            enum engine_status why;
            res[next].id = engine_submit(e, &q, &why, err, sizeof err);
            if (!res[next].id) {
                fprintf(stderr, "tern embed: text %d: %s\n", next + 1, err);
                rc = 1;
                break;
            }
            next++;
            live++;
        }
        if (rc != 0 && live == 0) break;
        if (rc != 0 && next < t->n) next = t->n; /* stop submitting; drain what runs */
        struct engine_event ev;
        engine_wait_events(e, 0, 0.5);
        while (engine_poll_events(e, &ev, 1) == 1) {
            int i = -1;
            for (int k = 0; k < t->n && i < 0; k++)
                if (res[k].id == ev.id) i = k;
            if (i < 0 || ev.type != ENGINE_EV_FINISHED) {
                engine_event_free(&ev);
                continue;
            }
            res[i].fin = ev;
            res[i].done = true;
            live--;
            if (ev.status != ENGINE_OK || !ev.embedding) {
                fprintf(stderr, "tern embed: text %d: %s: %s\n", i + 1,
                        engine_status_name(ev.status), ev.message ? ev.message : "no vector");
                rc = 1;
            }
        }
    }
    return rc;
}

static void print_vec(const float *v, int32_t n, const char *sep)
{
    for (int32_t i = 0; i < n; i++) printf("%s%.9g", i ? sep : "", isfinite(v[i]) ? v[i] : 0.0f);
}

static void print_results(const struct embed_opts *o, const struct texts *t,
                          const struct result *res, const struct engine_info *in)
{
    if (o->text) {
        for (int i = 0; i < t->n; i++) {
            print_vec(res[i].fin.embedding, res[i].fin.n_embedding, " ");
            putchar('\n');
        }
        return;
    }
    long long np = 0;
    printf("{\"object\":\"list\",\"data\":[");
    for (int i = 0; i < t->n; i++) {
        printf("%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":[", i ? "," : "", i);
        print_vec(res[i].fin.embedding, res[i].fin.n_embedding, ",");
        printf("]}");
        if (res[i].fin.metrics) np += res[i].fin.metrics->n_prompt;
    }
    /* the model name is a file name: quoted as JSON, escaping what a name may hold */
    printf("],\"model\":\"");
    for (const char *p = in->model_name ? in->model_name : ""; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if ((unsigned char)*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    printf("\",\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld}}\n", np, np);
}

int cmd_embed(int argc, char **argv)
{
    static const char use[] =
        "usage: tern embed [-m MODEL] [OPTIONS] TEXT...\n"
        "       ... | tern embed [-m MODEL] [OPTIONS]\n"
        "\n"
        "Embedding vectors of the texts (or of each non-empty line of standard input), as\n"
        "tern serve's /v1/embeddings computes them: the final hidden state (after the\n"
        "output norm) pooled over each text, then L2-normalised. The pooling is the\n"
        "model's (GGUF <arch>.pooling_type: last token for Qwen3-Embedding); a model\n"
        "without one gets mean pooling. Prints OpenAI's JSON shape, or one vector per\n"
        "line with --format text. With --url (or --route) the server computes them:\n"
        "its /v1/embeddings, its pooling (tern serve, vLLM, llama-server --embeddings).\n"
        "\n"
        "options:\n"
        "      --pooling P       model, mean, cls or last (default: model)\n"
        "      --dimensions N    keep the first N dimensions, then re-normalise\n"
        "                        (Matryoshka-trained models such as Qwen3-Embedding)\n"
        "      --format F        json (default) or text: one vector per line\n"
        "@ctx the model's\n"
        "@threads physical cores\n"
        "@backend auto\n"
        "@kv-type f16\n";
    static const struct option longopts[] = {
        {"pooling", required_argument, 0, OPT_POOLING},
        {"dimensions", required_argument, 0, OPT_DIMENSIONS},
        {"format", required_argument, 0, OPT_FORMAT},
        CLI_SHARED(CLI_O_CTX),
        CLI_SHARED(CLI_O_THREADS),
        CLI_SHARED(CLI_O_BACKEND),
        CLI_SHARED(CLI_O_KV_TYPE),
        {0, 0, 0, 0},
    };
    struct cli cli;
    struct embed_opts o = {.cli = &cli};
    engine_config_default(&o.eng);
    struct texts t = {0};
    struct result *res = NULL;
    int rc = cli_parse(&cli, argc, argv, "", longopts, on_opt, &o, use);
    if (rc >= 0) goto out;
    rc = CLI_EXIT_USAGE;
    rc = CLI_EXIT_FAIL;
    if (cli.argc > 0) {
        for (int i = 0; i < cli.argc; i++)
            if (texts_push(&t, cli.argv[i]) != 0) goto oom;
    } else if (read_lines(&t) != 0) {
        goto oom;
    }
    if (t.n == 0) {
        fprintf(stderr, "tern embed: no text (give TEXT arguments or lines on standard input)\n");
        rc = CLI_EXIT_USAGE;
        goto out;
    }
    res = calloc((size_t)t.n, sizeof *res);
    if (!res) goto oom;
    struct engine *e = open_engine(&cli, &o);
    if (!e) goto out;
    struct engine_info in;
    engine_info(e, &in);
    if (in.n_embd == 0) {
        fprintf(stderr, "tern embed: %s\n", in.embd_why && in.embd_why[0] ? in.embd_why
                                                                          : "embeddings not supported");
    } else if (in.n_embd > 0 && o.dims > in.n_embd) {
        fprintf(stderr, "tern embed: --dimensions %ld is over the model's embedding size %d\n",
                o.dims, in.n_embd);
        rc = CLI_EXIT_USAGE;
    } else {
        rc = run_all(e, &o, &t, res);
        if (rc == 0) print_results(&o, &t, res, &in);
    }
    engine_close(e);
    goto out;
oom:
    fprintf(stderr, "tern embed: out of memory\n");
out:
    if (res)
        for (int i = 0; i < t.n; i++) engine_event_free(&res[i].fin);
    free(res);
    texts_free(&t);
    cli_free(&cli);
    return rc;
}
