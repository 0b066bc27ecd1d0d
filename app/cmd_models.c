/* cmd_models: 'tern models' lists the model files in the models directory
 * with what a user picks by: architecture, parameters (total and active per
 * token), quantization, file size, context length, chat template (a base
 * model has none), and whether weights + the KV cache of the default
 * context fit in this machine's memory (the memory plan of `tern info`).
 * The NAME column is what -m accepts. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend_cuda.h"
#include "cli.h"
#include "commands.h"
#include "textsafe.h"
#include "gguf.h"
#include "model_info.h"
#include "model.h"
#include "model_name.h"
#include "quant.h"
#include "roofline.h"
#include "cpu/threadpool.h"

enum { OPT_JSON = CLI_OPT_CMD, OPT_KV_TYPE };

struct entry {
    char file[512], path[4096];
    bool ok;
    char err[512];
    uint64_t size;
    struct model_info mi;
    const char *arch, *quant, *tmpl; /* copies below outlive the gguf */
    char arch_s[64], quant_s[32], tmpl_s[32], name_s[128];
    uint64_t need; /* weights + KV of the default context */
    bool fits;
    int gpu;           /* 1 fits on GPU 0, 0 does not, -1 no usable GPU */
    char gpu_note[600];
    struct roofline_model cost; /* bytes and operations per token */
    struct roofline_fig pred;   /* predicted tok/s from the machine limits (threads 0: none) */
};

/* What the machine's limits predict for every model, at the default thread
 * count (the physical cores, as tern run and bench use). */
static void predict_all(struct entry *v, int n, const struct limits *lim)
{
    for (int i = 0; i < n; i++) {
        if (!v[i].ok) continue;
        v[i].cost = roofline_model_cost(v[i].mi.active_weight_bytes, v[i].mi.active_params,
                                          v[i].mi.vocab_params);
        if (lim) v[i].pred = roofline_predict(lim, &v[i].cost, tp_physical_cores());
    }
}

static void copy(char *d, size_t n, const char *s)
{
    snprintf(d, n, "%s", s ? s : "");
}

static void describe(struct entry *e, uint64_t mem, enum kv_type kv)
{
    struct stat sb;
    if (stat(e->path, &sb) == 0) e->size = (uint64_t)sb.st_size;
    struct gguf_ctx *g = gguf_open(e->path, e->err, sizeof e->err);
    if (!g) return;
    model_info_gather(g, kv, mem, &e->mi);   /* the KV type's real bytes per token */
    copy(e->arch_s, sizeof e->arch_s, e->mi.arch);
    copy(e->quant_s, sizeof e->quant_s, e->mi.quant);
    copy(e->name_s, sizeof e->name_s, e->mi.name);
    /* a file without a template is a base model: no chat template */
    copy(e->tmpl_s, sizeof e->tmpl_s,
         e->mi.tmpl_from_vocab ? "none (base)" : e->mi.tmpl_fallback ? "chatml?" : e->mi.tmpl_family);
    e->need = e->mi.weight_bytes + e->mi.kv_per_token * e->mi.ctx;
    e->fits = e->mi.kv_per_token > 0 && e->need <= e->mi.budget;
    e->ok = true;
    gguf_close(g);
    /* GPU 0's plan with the full context's KV cache (the CUDA backend's own
     * numbers), or why there is no usable GPU */
    e->gpu = -1;
    char err[512];
    struct model *m = model_open(e->path, err, sizeof err);
    if (!m) {
        snprintf(e->gpu_note, sizeof e->gpu_note, "%s", err);
        return;
    }
    /* the CUDA pool holds f16, q8_0 or q4_0 blocks (f32 is planned as f16);
     * q4c is CPU only: the backend's plan says so */
    struct backend_config cfg = {.kind = BACKEND_CUDA, .gpu = 0, .kv_block_tokens = 16,
                                 .kv_type = kv == KV_F32 ? KV_F16 : kv,
                                 .kv_bytes = e->mi.kv_per_token * e->mi.ctx};
    int rc = backend_cuda_plan(m, &cfg, e->gpu_note, sizeof e->gpu_note);
    e->gpu = rc == 0 ? 1 : strncmp(e->gpu_note, "no usable GPU", 13) == 0 ? -1 : 0;
    model_close(m);
}

static void fmt_params(char *b, size_t n, uint64_t p)
{
    if (p >= 1000000000ull) snprintf(b, n, "%.1fB", (double)p / 1e9);
    else snprintf(b, n, "%.0fM", (double)p / 1e6);
}

static void fmt_bytes(char *b, size_t n, uint64_t v)
{
    if (v >= 1ull << 30) snprintf(b, n, "%.1f GiB", (double)v / (1 << 30));
    else snprintf(b, n, "%.0f MiB", (double)v / (1 << 20));
}

/* The name -m takes: the file name without .gguf. */
static void stem(const char *file, char *b, size_t n)
{
    size_t l = strlen(file);
    snprintf(b, n, "%.*s", (int)(l > 5 ? l - 5 : l), file);
}

static void print_text(const struct entry *v, int n, const char *dir, uint64_t mem,
                       enum kv_type kv)
{
    char a[32], b[32];
    printf("%-32s %-8s %7s %-7s %8s %6s %-11s %-3s %-14s %s\n", "NAME", "ARCH", "PARAMS", "QUANT",
           "SIZE", "CTX", "TEMPLATE", "GPU", "FITS IN RAM", "PREDICTED TOK/S PP / TG");
    for (int i = 0; i < n; i++) {
        const struct entry *e = &v[i];
        char nm[512];
        stem(e->file, nm, sizeof nm);
        if (!e->ok) {
            printf("%-32s unreadable: %s\n", nm, e->err);
            continue;
        }
        fmt_params(a, sizeof a, e->mi.params);
        if (e->mi.active_params != e->mi.params) {
            char act[16];
            fmt_params(act, sizeof act, e->mi.active_params);
            snprintf(a + strlen(a), sizeof a - strlen(a), "/%s", act);
        }
        fmt_bytes(b, sizeof b, e->size);
        char need[32], fit[48], pp[16], tg[16];
        fmt_bytes(need, sizeof need, e->need);
        snprintf(fit, sizeof fit, "%s (%s)", e->fits ? "yes" : "no", need);
        roofline_fmt_rate(pp, sizeof pp, e->pred.pp_pred_tok_s);
        roofline_fmt_rate(tg, sizeof tg, e->pred.tg_pred_tok_s);
        const char *gpu = e->gpu > 0 ? "yes" : e->gpu == 0 ? "no " : "–  ";
        printf("%-32s %-8s %7s %-7s %8s %6u %-11s %s %-14s %6s / %s\n", nm, e->arch_s, a,
               e->quant_s, b, e->mi.ctx, e->tmpl_s, gpu, fit, pp, tg);
    }
    char m[32];
    fmt_bytes(m, sizeof m, mem);
    printf("\n%d model%s in %s; fits: weights + %s KV cache of the full context in %s of "
           "memory\n",
           n, n == 1 ? "" : "s", dir, model_info_kv_name(kv), m);
    for (int i = 0; i < n; i++)
        if (v[i].ok && v[i].pred.threads) {
            printf("predicted: the CPU's bound at %d thread%s from this machine's limits "
                   "(tern info --limits): decode = %.1f GB/s read / bytes per token, "
                   "prefill = %.2f TOP/s peak / operations per token\n",
                   v[i].pred.threads, v[i].pred.threads == 1 ? "" : "s", v[i].pred.read_gbs,
                   v[i].pred.peak_tops);
            break;
        }
    for (int i = 0; i < n; i++)
        if (v[i].ok && v[i].gpu_note[0]) {
            printf("GPU: %s\n", v[i].gpu_note); /* the same reason for every model: once */
            break;
        }
}

static int print_json(const struct entry *v, int n, const char *dir, uint64_t mem,
                      enum kv_type kv)
{
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "models");
    cJSON_AddStringToObject(root, "dir", dir);
    cJSON_AddNumberToObject(root, "memory_bytes", (double)mem);
    cJSON_AddStringToObject(root, "kv_type", model_info_kv_name(kv));
    for (int i = 0; i < n && arr; i++) {
        const struct entry *e = &v[i];
        cJSON *o = cJSON_CreateObject();
        char nm[512];
        stem(e->file, nm, sizeof nm);
        cJSON_AddStringToObject(o, "name", nm);
        cJSON_AddStringToObject(o, "file", e->file);
        cJSON_AddStringToObject(o, "path", e->path);
        cJSON_AddNumberToObject(o, "file_bytes", (double)e->size);
        if (!e->ok) {
            cJSON_AddStringToObject(o, "error", e->err);
        } else {
            cJSON_AddStringToObject(o, "model_name", e->name_s);
            cJSON_AddStringToObject(o, "architecture", e->arch_s);
            cJSON_AddNumberToObject(o, "params", (double)e->mi.params);
            cJSON_AddNumberToObject(o, "active_params", (double)e->mi.active_params);
            cJSON_AddStringToObject(o, "quant", e->quant_s);
            cJSON_AddNumberToObject(o, "context", e->mi.ctx);
            cJSON_AddBoolToObject(o, "chat_template", !e->mi.tmpl_from_vocab);
            cJSON_AddStringToObject(o, "template_family", e->mi.tmpl_family ? e->mi.tmpl_family : "");
            cJSON_AddNumberToObject(o, "memory_needed_bytes", (double)e->need);
            cJSON_AddBoolToObject(o, "fits_in_ram", e->fits);
            cJSON_AddNumberToObject(o, "kv_bytes_per_token", (double)e->mi.kv_per_token);
            cJSON_AddNumberToObject(o, "kv_tokens_fit", (double)e->mi.kv_tokens);
            if (e->gpu >= 0)
                cJSON_AddBoolToObject(o, "fits_in_gpu", e->gpu > 0);
            else
                cJSON_AddNullToObject(o, "fits_in_gpu");
            cJSON_AddStringToObject(o, "gpu_plan", e->gpu_note);
            cJSON_AddNumberToObject(o, "bytes_per_token", e->cost.bytes_per_token);
            cJSON_AddNumberToObject(o, "ops_per_token", e->cost.ops_per_token);
            if (e->pred.threads) {
                cJSON_AddNumberToObject(o, "predicted_threads", e->pred.threads);
                cJSON_AddNumberToObject(o, "predicted_pp_tok_s", e->pred.pp_pred_tok_s);
                cJSON_AddNumberToObject(o, "predicted_tg_tok_s", e->pred.tg_pred_tok_s);
            }
        }
        cJSON_AddItemToArray(arr, o);
    }
    textsafe_json(root);
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    if (!s) return CLI_EXIT_FAIL;
    puts(s);
    free(s);
    return CLI_EXIT_OK;
}

struct models_opts {
    struct cli *cli;
    bool json;
    enum kv_type kv;  /* the KV cache type the fit counts with */
};

static int on_opt(int c, const char *arg, void *ud)
{
    struct models_opts *o = ud;
    if (c == OPT_JSON) {
        o->json = true;
        return 0;
    }
    if (c != OPT_KV_TYPE) return -1;
    return cli_kv_type(o->cli, arg, &o->kv);
}

int cmd_models(int argc, char **argv)
{
    static const char use[] =
        "usage: tern models [--kv-type f16|f32|q8_0|q4_0|q4c] [--json]\n"
        "\n"
        "Lists the models in the models directory ($XDG_DATA_HOME/tern/models):\n"
        "architecture, parameters (total/active for mixtures of experts), quantization,\n"
        "file size, context length, chat template ('none (base)': a base model, which\n"
        "continues text) and whether weights + KV cache of the full context fit in\n"
        "memory, and the prefill and decode tokens/s this machine's limits predict\n"
        "(tern info shows them). NAME, or any unique start of it (letters and digits,\n"
        "e.g. smollm2), is what -m takes.\n"
        "\n"
        "  --kv-type T   KV cache type the fit counts with (default f16; q8_0, q4c and\n"
        "                q4_0 hold about 1.9x, 3x and 3.6x the tokens in the same memory;\n"
        "                q4c: K per channel over 16-token blocks, V as q5_0, CPU only)\n"
        "  --json        the same as one JSON object\n";
    static const struct option longopts[] = {{"json", no_argument, 0, OPT_JSON},
                                              {"kv-type", required_argument, 0, OPT_KV_TYPE},
                                              {0, 0, 0, 0}};
    struct cli cli;
    struct models_opts o = {.cli = &cli, .json = false, .kv = KV_F16};
    int rc = cli_parse(&cli, argc, argv, "", longopts, on_opt, &o, use);
    if (rc >= 0) goto done;
    rc = CLI_EXIT_USAGE;
    if (cli.argc > 0) {
        fprintf(stderr, "tern models: unexpected argument '%s'\n", cli.argv[0]);
        goto done;
    }
    char dir[2048], err[1024];
    char **files;
    model_name_dir(dir, sizeof dir);
    int n = model_name_list(dir, &files, err, sizeof err);
    rc = CLI_EXIT_FAIL;
    if (n < 0) {
        fprintf(stderr, "tern models: %s (packaging/fetch-model fetches the default model)\n", err);
        goto done;
    }
    struct entry *v = calloc((size_t)n + 1, sizeof *v);
    uint64_t mem = model_info_physical_memory();
    for (int i = 0; v && i < n; i++) {
        copy(v[i].file, sizeof v[i].file, files[i]);
        snprintf(v[i].path, sizeof v[i].path, "%s/%s", dir, files[i]);
        describe(&v[i], mem, o.kv);
    }
    struct limits lim;
    bool have_lim = n > 0 && roofline_limits(&lim, -1, false, err, sizeof err) == 0;
    if (n > 0 && !have_lim) fprintf(stderr, "tern models: limits: %s\n", err);
    if (v) predict_all(v, n, have_lim ? &lim : NULL);
    if (v) {
        if (o.json) rc = print_json(v, n, dir, mem, o.kv);
        else {
            print_text(v, n, dir, mem, o.kv);
            rc = CLI_EXIT_OK;
        }
    }
    free(v);
    model_name_list_free(files);
done:
    cli_free(&cli);
    return rc;
}
