/* test_model_load: model_open on the two real models (hyperparameters as
 * the Python gguf package reads them from the files) and on small generated
 * files that lack a key, name an unknown architecture, carry an unsupported
 * weight type or a wrong shape: each must be a load error naming the cause. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_util.h"
#include "gguf_writer.h"
#include "quant.h"
#include "tap.h"

enum { DIM = 32, FF = 64, VOCAB = 64, NH = 2, NKV = 1 };

struct tiny_opts {
    const char *arch;
    const char *drop_key;      /* hyperparameter left out */
    const char *bad_tensor;    /* tensor given bad_type */
    uint32_t bad_type;
    const char *short_tensor;  /* tensor given half its rows */
};

struct tspec {
    const char *name;
    uint64_t ne0, ne1;
};

static void kv_f32(struct gw *w, const char *key, float v)
{
    gw_str(w, key);
    gw_u32(w, 6); /* GGUF_VT_F32 */
    gw_f32(w, v);
}

/* Writes a one-layer F32 model to path. */
static int write_tiny(const char *path, const struct tiny_opts *o)
{
    const struct tspec t[] = {
        { "token_embd.weight", DIM, VOCAB }, { "output_norm.weight", DIM, 1 },
        { "blk.0.attn_norm.weight", DIM, 1 }, { "blk.0.attn_q.weight", DIM, DIM },
        { "blk.0.attn_k.weight", DIM, DIM / NH * NKV }, { "blk.0.attn_v.weight", DIM, DIM / NH * NKV },
        { "blk.0.attn_output.weight", DIM, DIM }, { "blk.0.ffn_norm.weight", DIM, 1 },
        { "blk.0.ffn_gate.weight", DIM, FF }, { "blk.0.ffn_up.weight", DIM, FF },
        { "blk.0.ffn_down.weight", FF, DIM },
    };
    const size_t nt = sizeof t / sizeof t[0];
    struct { const char *k; uint32_t v; } ints[] = {
        { "context_length", 128 }, { "embedding_length", DIM }, { "block_count", 1 },
        { "feed_forward_length", FF }, { "attention.head_count", NH },
        { "attention.head_count_kv", NKV },
    };
    const size_t ni = sizeof ints / sizeof ints[0];
    char key[96];
    int n_kv = 2; /* architecture + epsilon */
    for (size_t i = 0; i < ni; i++) n_kv += !(o->drop_key && !strcmp(o->drop_key, ints[i].k));
    struct gw w;
    gw_init(&w);
    gw_header(&w, 3, nt, (uint64_t)n_kv);
    gw_kv_str(&w, "general.architecture", o->arch);
    for (size_t i = 0; i < ni; i++) {
        if (o->drop_key && !strcmp(o->drop_key, ints[i].k)) continue;
        snprintf(key, sizeof key, "%s.%s", o->arch, ints[i].k);
        gw_kv_u32(&w, key, ints[i].v);
    }
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", o->arch);
    kv_f32(&w, key, 1e-5f);
    uint64_t off = 0, sizes[16];
    for (size_t i = 0; i < nt; i++) {
        uint64_t ne[2] = { t[i].ne0, t[i].ne1 };
        uint32_t type = 0;
        if (o->bad_tensor && !strcmp(o->bad_tensor, t[i].name)) type = o->bad_type;
        if (o->short_tensor && !strcmp(o->short_tensor, t[i].name)) ne[1] /= 2;
        gw_tensor(&w, t[i].name, 2, ne, type, off);
        sizes[i] = ne[0] * ne[1] * 4;
        off += (sizes[i] + 31) / 32 * 32;
    }
    gw_pad(&w, 32);
    for (size_t i = 0; i < nt; i++) {
        for (uint64_t j = 0; j < sizes[i] / 4; j++) gw_f32(&w, 0.01f * (float)(j % 7));
        gw_pad(&w, 32);
    }
    FILE *f = fopen(path, "wb");
    int rc = f && !w.oom && fwrite(w.p, 1, w.n, f) == w.n ? 0 : -1;
    if (f) fclose(f);
    gw_free(&w);
    return rc;
}

static void expect_error(const char *what, const struct tiny_opts *o, const char *needle)
{
    char path[] = "/tmp/tern-model-load-XXXXXX", err[512] = "";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    if (!ok(fd >= 0 && write_tiny(path, o) == 0, "%s: file written", what)) return;
    struct model *m = model_open(path, err, sizeof err);
    ok(m == NULL && strstr(err, needle) != NULL, "%s: load error names '%s': %s", what, needle,
       err);
    model_close(m);
    unlink(path);
}

static void generated_files(void)
{
    char path[] = "/tmp/tern-model-load-XXXXXX", err[512] = "";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    struct tiny_opts good = { .arch = "llama" };
    if (ok(fd >= 0 && write_tiny(path, &good) == 0, "valid tiny model written")) {
        struct model *m = model_open(path, err, sizeof err);
        if (ok(m != NULL, "valid tiny model loads: %s", err)) {
            is_int(m->hp.head_dim, DIM / NH, "head_dim defaults to dim / n_head");
            is_int(m->hp.n_rot, DIM / NH, "n_rot defaults to head_dim");
            ok(m->output.data == m->tok_embd.data, "missing output.weight ties to token_embd");
            ok(!m->hp.rope_neox, "llama uses normal (interleaved) RoPE");
            /* and runs: a forward pass through the CPU backend */
            struct backend *be = eu_cpu(m, 1, 1, KV_F16, 0, err, sizeof err);
            int32_t table[1] = { 0 }, tok[3] = { 1, 2, 3 };
            float logits[3 * VOCAB];
            ok(be && eu_feed(be, table, 1, tok, 3, 0, 3, 1, NULL, NULL, logits, err,
                             sizeof err) == 0, "tiny model runs a forward pass: %s", err);
            backend_close(be);
            model_close(m);
        }
    }
    unlink(path);
    expect_error("missing key", &(struct tiny_opts){ .arch = "llama",
                 .drop_key = "embedding_length" }, "llama.embedding_length");
    expect_error("missing head count", &(struct tiny_opts){ .arch = "llama",
                 .drop_key = "attention.head_count" }, "llama.attention.head_count");
    expect_error("unknown architecture", &(struct tiny_opts){ .arch = "mamba" }, "mamba");
    expect_error("unsupported weight type", &(struct tiny_opts){ .arch = "llama",
                 .bad_tensor = "blk.0.ffn_up.weight", .bad_type = 39 }, "blk.0.ffn_up.weight");
    expect_error("wrong shape", &(struct tiny_opts){ .arch = "llama",
                 .short_tensor = "blk.0.attn_k.weight" }, "blk.0.attn_k.weight");
    expect_error("qwen2 without biases", &(struct tiny_opts){ .arch = "qwen2" },
                 "blk.0.attn_q.bias");
    expect_error("qwen3 without q/k norms", &(struct tiny_opts){ .arch = "qwen3" },
                 "blk.0.attn_q_norm.weight");
    char e2[256];
    ok(model_open("/nonexistent/model.gguf", e2, sizeof e2) == NULL &&
       strstr(e2, "/nonexistent/model.gguf"), "a missing file names the path: %s", e2);
}

/* Hyperparameters of the real files as the Python gguf package reads them. */
static void real_models(void)
{
    char path[1024], err[512];
    if (!ok(eu_model_path("smollm2", path, sizeof path) == 0, "fetch-model: smollm2")) return;
    struct model *m = model_open(path, err, sizeof err);
    if (ok(m != NULL, "SmolLM2 loads: %s", m ? "" : err)) {
        const struct model_hparams *h = &m->hp;
        ok(h->arch == ARCH_LLAMA && h->dim == 576 && h->n_layer == 30 && h->n_head == 9 &&
           h->n_head_kv == 3 && h->head_dim == 64 && h->n_ff == 1536 && h->n_vocab == 49152 &&
           h->n_ctx_train == 8192 && h->rope_base == 100000.0f && !h->rope_neox,
           "SmolLM2 hyperparameters");
        ok(m->output.data == m->tok_embd.data && m->tok_embd.type == QT_Q8_0,
           "SmolLM2: tied Q8_0 embeddings");
        model_close(m);
    }
    if (!ok(eu_model_path("gemma3-270m", path, sizeof path) == 0, "fetch-model: gemma3")) return;
    m = model_open(path, err, sizeof err);
    if (ok(m != NULL, "Gemma 3 loads: %s", m ? "" : err)) {
        const struct model_hparams *h = &m->hp;
        ok(h->arch == ARCH_GEMMA3 && h->dim == 640 && h->n_layer == 18 && h->n_head == 4 &&
           h->n_head_kv == 1 && h->head_dim == 256 && h->n_ff == 2048 && h->n_vocab == 262144 &&
           h->sliding_window == 512 && h->rope_base == 1000000.0f && h->rope_neox,
           "Gemma 3 hyperparameters");
        ok(h->rope_base_local == 10000.0f && h->swa_period == 6, "Gemma 3: local RoPE base "
           "10000 and 5 local : 1 global (reference defaults)");
        ok(model_layer_is_swa(m, 0) && model_layer_is_swa(m, 4) && !model_layer_is_swa(m, 5) &&
           !model_layer_is_swa(m, 17), "Gemma 3: layers 5, 11, 17 are global");
        ok(fabsf(h->query_scale - 0.0625f) < 1e-7f && fabsf(h->embd_scale - sqrtf(640.0f)) < 1e-4f,
           "Gemma 3: query scale 1/sqrt(256), embeddings x sqrt(640)");
        ok(m->layers[3].q_norm.data && m->layers[3].post_ffn_norm.data, "Gemma 3: q-norm and "
           "post-FFN norm bound");
        model_close(m);
    }
}

int main(void)
{
    generated_files();
    real_models();
    return tap_done();
}
