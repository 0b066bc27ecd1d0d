/* cmd_info: 'tern info' describes a model file: architecture, parameters,
 * tensor types, context, vocabulary, chat template family and the memory plan
 * (weights + KV cache per token, and how many KV tokens a budget holds).
 * Hyperparameters are read straight from the GGUF keys, so this works on any
 * file the reader accepts, even ones the engine cannot run; EOT and the
 * template family come from the tokenizer and template modules, so they are
 * what chat and run will use. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "textsafe.h"
#include "backend_cuda.h"
#include "cpu/cpu_isa.h"
#include "cpu/threadpool.h"
#include "gguf.h"
#include "model.h"
#include "model_info.h"
#include "quant.h"
#include "roofline.h"
#include "template.h"
#include "tok.h"

enum { OPT_MEM = CLI_OPT_CMD, OPT_JSON, OPT_KV_TYPE, OPT_GPU, OPT_LIMITS };

struct info_opts {
    struct cli *cli;
    unsigned long long mem; /* budget in bytes; 0 = physical memory */
    bool json;
    enum kv_type kv_type;   /* the KV cache type the plan counts with */
    int gpu;                /* --gpu[=N]: device index for the GPU plan; -1 = no plan */
    bool limits;            /* --limits: measure the machine's limits again, show only them */
};

/* ---- output -------------------------------------------------------------- */

static bool type_supported(uint32_t type)
{
    const struct qtype_info *qi = qtype_get(type);
    return qi && qi->supported;
}

static const char *human(uint64_t b, char *buf, size_t n)
{
    if (b >= 1ull << 30) snprintf(buf, n, "%.2f GiB", (double)b / (1 << 30));
    else if (b >= 1ull << 20) snprintf(buf, n, "%.1f MiB", (double)b / (1 << 20));
    else if (b >= 1ull << 10) snprintf(buf, n, "%.1f KiB", (double)b / (1 << 10));
    else snprintf(buf, n, "%llu B", (unsigned long long)b);
    return buf;
}

/* Token text for display: control bytes escaped, length capped. */
static const char *token_text(const struct gguf_ctx *g, int64_t id, char *buf, size_t n)
{
    const struct gguf_kv *tokens = gguf_get_arr(g, "tokenizer.ggml.tokens");
    size_t o = 0;
    buf[0] = 0;
    if (!tokens || !tokens->v.arr.strs || id < 0 || (uint64_t)id >= tokens->v.arr.n) return buf;
    const struct gguf_str *s = &tokens->v.arr.strs[id];
    for (uint64_t i = 0; i < s->len && o + 5 < n; i++) {
        unsigned char c = (unsigned char)s->ptr[i];
        if (c < 0x20 || c == 0x7f) o += (size_t)snprintf(buf + o, n - o, "\\x%02x", c);
        else buf[o++] = (char)c;
    }
    buf[o] = 0;
    return buf;
}

static void print_token(const struct gguf_ctx *g, const char *label, int64_t id)
{
    char t[128];
    if (id < 0) printf("  %s none", label);
    else printf("  %s %lld '%s'", label, (long long)id, token_text(g, id, t, sizeof t));
}

/* Mixture of experts: what one token reads (only its experts' rows). */
static void print_active(const struct model_info *mi)
{
    if (mi->active_params == mi->params) return;
    char a[32];
    printf("active        %.1fM per token (%u of %u experts), %s of weights read per token\n",
           (double)mi->active_params / 1e6, mi->n_expert_used, mi->n_expert,
           human(mi->active_weight_bytes, a, sizeof a));
}

static void print_text(const struct gguf_ctx *g, const struct model_info *mi,
                       const struct info_opts *o)
{
    char a[32], b[32];
    printf("file          %s (%s, GGUF v%u)\n", gguf_path(g), human(gguf_file_size(g), a, sizeof a),
           gguf_version(g));
    if (mi->name) printf("name          %s\n", mi->name);
    printf("architecture  %s\n", mi->arch);
    unsigned long long np = (unsigned long long)mi->params;
    if (np >= 1000000000) printf("parameters    %.2fB (%llu)\n", (double)np / 1e9, np);
    else if (np >= 1000000) printf("parameters    %.1fM (%llu)\n", (double)np / 1e6, np);
    else printf("parameters    %llu\n", np);
    print_active(mi);
    printf("tensors       %llu, %s\n", (unsigned long long)gguf_n_tensors(g),
           human(mi->weight_bytes, a, sizeof a));
    for (uint64_t i = 0; i < mi->n_types; i++)
        printf("  %-8s %5llu tensors %12llu bytes (%s)%s\n", qtype_name(mi->types[i].type),
               (unsigned long long)mi->types[i].count, (unsigned long long)mi->types[i].bytes,
               human(mi->types[i].bytes, b, sizeof b),
               type_supported(mi->types[i].type) ? "" : "  not supported by tern's engine");
    if (mi->ctx) printf("context       %u tokens\n", mi->ctx);
    else printf("context       unknown (no %s.context_length)\n", mi->arch);
    if (mi->layers)
        printf("layers        %u, embedding %u, heads %u (kv %u), head dim %u\n", mi->layers,
               mi->embd, mi->heads, mi->kv_heads, mi->key_len);
    else printf("layers        unknown (no %s.block_count)\n", mi->arch);
    if (mi->pooling >= 0) {
        static const char *const pools[] = {"none", "mean", "cls", "last", "rank"};
        printf("pooling       %s (embeddings: tern embed, /v1/embeddings)\n", pools[mi->pooling]);
    }
    printf("vocabulary    %llu tokens, model %s, pre-tokenizer %s\n", (unsigned long long)mi->vocab,
           mi->tok_model ? mi->tok_model : "none", mi->tok_pre ? mi->tok_pre : "default");
    print_token(g, "BOS", mi->bos);
    print_token(g, "EOS", mi->eos);
    print_token(g, "EOT", mi->eot);
    printf("\n");
    if (mi->tok_err[0]) printf("  tokenizer unusable: %s\n", mi->tok_err);
    printf("chat template %s%s\n", mi->tmpl_fallback ? "unknown, using ChatML fallback" : mi->tmpl_family,
           mi->tmpl_from_vocab ? " (the file has no template; chosen from its vocabulary)" : "");
    printf("memory plan   weights %s (%llu bytes)\n", human(mi->weight_bytes, a, sizeof a),
           (unsigned long long)mi->weight_bytes);
    printf("  decode reads %s (%llu bytes) of them per token%s\n",
           human(mi->active_weight_bytes, b, sizeof b), (unsigned long long)mi->active_weight_bytes,
           mi->active_params != mi->params ? " (its experts' rows; every expert stays resident)"
                                           : "");
    if (o->kv_type == KV_Q4C) /* K: an f16 min and step and 16 4-bit codes per channel */
        printf("  KV cache %s: %llu bytes per token (%u layers x %u kv heads x (%u x 12/16 + %u x "
               "22/32) B)\n  (K per channel over %d-token blocks, V per token as q5_0; CPU only)\n",
               model_info_kv_name(o->kv_type), (unsigned long long)mi->kv_per_token, mi->layers,
               mi->kv_heads, mi->key_len, mi->val_len, MODEL_INFO_KV_BLOCK_TOKENS);
    else
        printf("  KV cache %s: %llu bytes per token (%u layers x %u kv heads x (%u + %u) x %s)\n",
               model_info_kv_name(o->kv_type), (unsigned long long)mi->kv_per_token, mi->layers,
               mi->kv_heads, mi->key_len, mi->val_len,
               o->kv_type == KV_F32    ? "4 B"
               : o->kv_type == KV_F16  ? "2 B"
               : o->kv_type == KV_Q4_0 ? "18/32 B"
                                       : "34/32 B");
    if (mi->swa)
        printf("  (layers with a %u-token sliding window need less: this is an upper bound)\n",
               mi->swa);
    printf("  budget %s%s: ", human(mi->budget, a, sizeof a), o->mem ? "" : " (physical memory)");
    if (mi->budget <= mi->weight_bytes) printf("the weights alone do not fit\n");
    else if (!mi->kv_per_token) printf("KV size unknown (hyperparameters missing)\n");
    else {
        printf("%llu KV tokens fit beside the weights", (unsigned long long)mi->kv_tokens);
        if (mi->ctx) printf(" (%.1f x the %u-token context)", (double)mi->kv_tokens / mi->ctx, mi->ctx);
        printf("\n");
    }
}

static cJSON *json_types(const struct model_info *mi)
{
    cJSON *arr = cJSON_CreateArray();
    for (uint64_t i = 0; arr && i < mi->n_types; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "type", qtype_name(mi->types[i].type));
        cJSON_AddNumberToObject(t, "count", (double)mi->types[i].count);
        cJSON_AddNumberToObject(t, "bytes", (double)mi->types[i].bytes);
        cJSON_AddBoolToObject(t, "supported", type_supported(mi->types[i].type));
        cJSON_AddItemToArray(arr, t);
    }
    return arr;
}

static cJSON *json_vocab(const struct gguf_ctx *g, const struct model_info *mi)
{
    cJSON *v = cJSON_CreateObject();
    char t[128];
    cJSON_AddNumberToObject(v, "size", (double)mi->vocab);
    cJSON_AddStringToObject(v, "model", mi->tok_model ? mi->tok_model : "none");
    cJSON_AddStringToObject(v, "pre", mi->tok_pre ? mi->tok_pre : "default");
    const int64_t ids[] = {mi->bos, mi->eos, mi->eot};
    static const char *const names[] = {"bos", "eos", "eot"};
    for (int i = 0; i < 3; i++) {
        cJSON_AddNumberToObject(v, names[i], (double)ids[i]);
        char key[16];
        snprintf(key, sizeof key, "%s_text", names[i]);
        if (ids[i] >= 0) cJSON_AddStringToObject(v, key, token_text(g, ids[i], t, sizeof t));
    }
    if (mi->tok_err[0]) cJSON_AddStringToObject(v, "tokenizer_error", mi->tok_err);
    return v;
}

static cJSON *json_memory(const struct model_info *mi, const struct info_opts *o)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddNumberToObject(m, "weight_bytes", (double)mi->weight_bytes);
    cJSON_AddNumberToObject(m, "active_weight_bytes", (double)mi->active_weight_bytes);
    cJSON_AddNumberToObject(m, "params", (double)mi->params);
    cJSON_AddNumberToObject(m, "active_params", (double)mi->active_params);
    cJSON_AddStringToObject(m, "kv_type", model_info_kv_name(o->kv_type));
    cJSON_AddNumberToObject(m, "kv_bytes_per_token", (double)mi->kv_per_token);
    cJSON_AddNumberToObject(m, "budget_bytes", (double)mi->budget);
    cJSON_AddNumberToObject(m, "kv_tokens", (double)mi->kv_tokens);
    return m;
}

/* The machine's limits (the rooflines of tern bench and tern models) and,
 * with a model, what they predict for it at the default thread count. */
static void print_limits(const struct limits *l, const struct model_info *mi)
{
    printf("\nmachine limits (%s, %s; %s)\n", l->cpu, cpu_isa_name(l->isa),
           l->cached ? "cached; --limits measures again" : "measured now");
    printf("  streaming read");
    for (int i = 0; i < l->n_read; i++)
        printf("%s %.1f GB/s with %d thread%s", i ? "," : "", l->read_gbs[i], l->read_threads[i],
               l->read_threads[i] == 1 ? "" : "s");
    printf("\n  int8 peak %.2f TOP/s, %d threads %.2f (%s)\n", l->int8_tops[0], l->cpus,
           l->int8_tops[1], l->int8_unit);
    printf("  bf16 peak %.2f TFLOP/s, %d threads %.2f (%s)\n", l->bf16_tflops[0], l->cpus,
           l->bf16_tflops[1], l->bf16_unit);
    printf("  f32 peak %.2f TFLOP/s, %d threads %.2f (%s: prompt attention)\n", l->f32_tflops[0],
           l->cpus, l->f32_tflops[1], l->f32_unit);
    if (!mi) return;
    const struct roofline_model c =
        roofline_model_cost(mi->active_weight_bytes, mi->active_params, mi->vocab_params);
    const int t = tp_physical_cores();
    const struct roofline_fig f = roofline_predict(l, &c, t);
    printf("  this model, %d thread%s: decode <= %.1f tok/s (%.1f MB per token), prefill <= %.0f "
           "tok/s (%.2f GOP per token)\n", t, t == 1 ? "" : "s", f.tg_pred_tok_s,
           c.bytes_per_token / 1e6, f.pp_pred_tok_s, c.ops_per_token / 1e9);
}

static cJSON *json_limits(const struct limits *l)
{
    cJSON *j = cJSON_CreateObject(), *r = cJSON_AddArrayToObject(j, "read_gb_s");
    cJSON_AddStringToObject(j, "cpu", l->cpu);
    cJSON_AddStringToObject(j, "isa", cpu_isa_name(l->isa));
    cJSON_AddNumberToObject(j, "cpus", l->cpus);
    for (int i = 0; r && i < l->n_read; i++) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddNumberToObject(p, "threads", l->read_threads[i]);
        cJSON_AddNumberToObject(p, "gb_s", l->read_gbs[i]);
        cJSON_AddItemToArray(r, p);
    }
    cJSON_AddNumberToObject(j, "int8_tops_1_thread", l->int8_tops[0]);
    cJSON_AddNumberToObject(j, "int8_tops_all_threads", l->int8_tops[1]);
    cJSON_AddStringToObject(j, "int8_unit", l->int8_unit);
    cJSON_AddNumberToObject(j, "bf16_tflops_1_thread", l->bf16_tflops[0]);
    cJSON_AddNumberToObject(j, "bf16_tflops_all_threads", l->bf16_tflops[1]);
    cJSON_AddStringToObject(j, "bf16_unit", l->bf16_unit);
    cJSON_AddNumberToObject(j, "f32_tflops_1_thread", l->f32_tflops[0]);
    cJSON_AddNumberToObject(j, "f32_tflops_all_threads", l->f32_tflops[1]);
    cJSON_AddStringToObject(j, "f32_unit", l->f32_unit);
    cJSON_AddBoolToObject(j, "cached", l->cached);
    return j;
}

static int print_json(const struct gguf_ctx *g, const struct model_info *mi,
                      const struct info_opts *o, const struct limits *lim)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "file", gguf_path(g));
    cJSON_AddNumberToObject(j, "file_size", (double)gguf_file_size(g));
    cJSON_AddNumberToObject(j, "gguf_version", gguf_version(g));
    cJSON_AddStringToObject(j, "architecture", mi->arch);
    if (mi->name) cJSON_AddStringToObject(j, "name", mi->name);
    cJSON_AddNumberToObject(j, "parameters", (double)mi->params);
    cJSON_AddNumberToObject(j, "tensors", (double)gguf_n_tensors(g));
    cJSON_AddItemToObject(j, "tensor_types", json_types(mi));
    cJSON_AddNumberToObject(j, "context_length", mi->ctx);
    cJSON_AddNumberToObject(j, "block_count", mi->layers);
    cJSON_AddNumberToObject(j, "embedding_length", mi->embd);
    cJSON_AddNumberToObject(j, "head_count", mi->heads);
    cJSON_AddNumberToObject(j, "head_count_kv", mi->kv_heads);
    cJSON_AddNumberToObject(j, "key_length", mi->key_len);
    cJSON_AddNumberToObject(j, "value_length", mi->val_len);
    cJSON_AddNumberToObject(j, "sliding_window", mi->swa);
    if (mi->pooling >= 0) cJSON_AddNumberToObject(j, "pooling_type", mi->pooling);
    cJSON_AddItemToObject(j, "vocabulary", json_vocab(g, mi));
    cJSON *t = cJSON_AddObjectToObject(j, "chat_template");
    cJSON_AddStringToObject(t, "family", mi->tmpl_family);
    cJSON_AddBoolToObject(t, "chatml_fallback", mi->tmpl_fallback);
    cJSON_AddBoolToObject(t, "from_vocabulary", mi->tmpl_from_vocab);
    cJSON_AddItemToObject(j, "memory", json_memory(mi, o));
    if (lim) cJSON_AddItemToObject(j, "limits", json_limits(lim));
    textsafe_json(j); /* names and token texts come from the file */
    char *s = cJSON_Print(j);
    cJSON_Delete(j);
    if (!s) {
        fprintf(stderr, "tern info: out of memory\n");
        return CLI_EXIT_FAIL;
    }
    printf("%s\n", s);
    free(s);
    return CLI_EXIT_OK;
}

/* ---- command ------------------------------------------------------------- */

static int on_opt(int c, const char *arg, void *ud)
{
    struct info_opts *o = ud;
    switch (c) {
    case OPT_MEM: return cli_size(o->cli, "--mem", arg, &o->mem);
    case OPT_JSON: o->json = true; return 0;
    case OPT_LIMITS: o->limits = true; return 0;
    case OPT_KV_TYPE: return cli_kv_type(o->cli, arg, &o->kv_type);
    case OPT_GPU: {
        long v = 0;
        if (arg && cli_int(o->cli, "--gpu", arg, 0, 255, &v) != 0) return -1;
        o->gpu = (int)v;
        return 0;
    }
    default: return -1;
    }
}

/* The CUDA backend's plan for this model on device o->gpu: weights + KV pool +
 * workspace from the device's free memory, or why no GPU can be used. */
static int gpu_plan(const char *path, const struct info_opts *o, char *out, size_t n)
{
    char err[1024];
    struct model *m = model_open(path, err, sizeof err);
    if (!m) {
        snprintf(out, n, "%s", err);
        return -1;
    }
    /* f32 is planned as f16; q4c is CPU only: the backend's plan says so */
    struct backend_config cfg = {.kind = BACKEND_CUDA, .gpu = o->gpu, .kv_block_tokens = 16,
                                 .kv_type = o->kv_type == KV_F32 ? KV_F16 : o->kv_type,
                                 .kv_bytes = o->mem};
    int rc = backend_cuda_plan(m, &cfg, out, n);
    model_close(m);
    return rc;
}

int cmd_info(int argc, char **argv)
{
    static const char use[] =
        "usage: tern info [-m MODEL] [--mem SIZE] [--kv-type f16|f32|q8_0|q4_0|q4c] [--json]\n"
        "\n"
        "Describes a model file: architecture, parameters, tensor types, context,\n"
        "vocabulary, chat template family and the memory plan.\n"
        "\n"
        "  --mem SIZE       memory budget for weights + KV cache (e.g. 8G; default:\n"
        "                   physical memory)\n"
        "  --kv-type TYPE   KV cache type for the plan (default f16; q4c: K per channel\n"
        "                   over 16-token blocks, V as q5_0, CPU only)\n"
        "  --gpu[=N]        also plan GPU N (default 0): weights + KV pool + workspace\n"
        "                   from the device's free memory\n"
        "  --limits         measure this machine's limits again (streaming read, int8\n"
        "                   and bf16 peak; cached in ~/.local/state/tern) and show them\n"
        "  --json           the same as one JSON object\n";
    static const struct option longopts[] = {
        {"mem", required_argument, 0, OPT_MEM},
        {"json", no_argument, 0, OPT_JSON},
        {"kv-type", required_argument, 0, OPT_KV_TYPE},
        {"gpu", optional_argument, 0, OPT_GPU},
        {"limits", no_argument, 0, OPT_LIMITS},
        {0, 0, 0, 0},
    };
    struct cli cli;
    struct info_opts o = {&cli, 0, false, KV_F16, -1, false};
    int rc = cli_parse(&cli, argc, argv, "", longopts, on_opt, &o, use);
    if (rc >= 0) goto done;
    char path[4096], err[1024];
    rc = CLI_EXIT_FAIL;
    if (cli.argc > 0) {
        fprintf(stderr, "tern info: unexpected argument '%s' (the model is given with -m)\n",
                cli.argv[0]);
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    struct limits lim;
    bool have_lim = false;
    if (o.limits) { /* the limits alone, measured again: no model needed */
        have_lim = roofline_limits(&lim, -1, true, err, sizeof err) == 0;
        if (!have_lim) fprintf(stderr, "tern info: limits: %s\n", err);
        if (have_lim && o.json) {
            cJSON *jl = json_limits(&lim);
            char *js = cJSON_Print(jl);
            printf("%s\n", js ? js : "{}");
            free(js);
            cJSON_Delete(jl);
        } else if (have_lim) {
            print_limits(&lim, NULL);
        }
        rc = have_lim ? CLI_EXIT_OK : CLI_EXIT_FAIL;
        goto done;
    }
    if (cli_model_path(&cli, path, sizeof path, err, sizeof err) != 0) {
        fprintf(stderr, "tern info: %s\n", err);
        goto done;
    }
    struct gguf_ctx *g = gguf_open(path, err, sizeof err);
    if (!g) {
        fprintf(stderr, "tern info: %s\n", err);
        goto done;
    }
    struct model_info mi;
    model_info_gather(g, o.kv_type, o.mem, &mi);
    /* the machine's limits (cached; measured once when missing) */
    have_lim = roofline_limits(&lim, -1, false, err, sizeof err) == 0;
    if (!have_lim) fprintf(stderr, "tern info: limits: %s\n", err);
    if (o.json) rc = print_json(g, &mi, &o, have_lim ? &lim : NULL);
    else {
        print_text(g, &mi, &o);
        /* the CPU kernels' ISA in force: the detected one, capped by TERN_ISA */
        enum cpu_isa isa;
        const char *cap = getenv("TERN_ISA");
        bool ok = cpu_isa_capped(cap, &isa);
        printf("\nCPU kernels: %s (detected %s%s%s)\n", cpu_isa_name(isa),
               cpu_isa_name(cpu_isa_detect()), cap && cap[0] ? ok ? ", TERN_ISA=" : ", invalid TERN_ISA=" : "",
               cap && cap[0] ? cap : "");
        /* AMX: said once, calmly, whether prefill uses the tiles and if not why */
        char why[160];
        if (!cpu_amx_usable(why, sizeof why))
            printf("AMX int8 tiles: not used (%s)\n", why);
        else
            printf("AMX int8 tiles: %s\n", isa == CPU_ISA_AMX ? "used for prefill products"
                                                             : "available, not used (TERN_ISA caps below amx)");
        /* F16 / BF16 weights from 32 tokens on: bf16 products where the ISA has them */
        printf("F16/BF16 prefill: %s\n", isa == CPU_ISA_AMX ? "AMX-BF16 tiles"
                                          : isa == CPU_ISA_AVX512 && cpu_avx512bf16() ? "AVX512_BF16 vdpbf16ps"
                                                                                      : "f32 FMA");
        if (have_lim) print_limits(&lim, &mi);
        rc = CLI_EXIT_OK;
    }
    gguf_close(g);
    if (o.gpu >= 0) {
        char plan[1024];
        int prc = gpu_plan(path, &o, plan, sizeof plan);
        if (o.json) fprintf(stderr, "gpu plan: %s\n", plan);
        else printf("\nGPU plan (device %d)\n  %s\n", o.gpu, plan);
        if (prc != 0 && rc == CLI_EXIT_OK) rc = CLI_EXIT_FAIL;
    }
done:
    cli_free(&cli);
    return rc;
}
