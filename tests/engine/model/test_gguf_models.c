/* test_gguf_models: the reader on the two real models, compared with what the
 * Python gguf package reads from them (fixtures/models.json, made by
 * make_fixtures.py --models): counts, offsets, keys, tensor types and bytes,
 * and the dequantized first row of every tensor (sum) against gguf-py. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"
#include "tap.h"

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) == (size_t)n) s[n] = 0;
    else {
        free(s);
        s = NULL;
    }
    fclose(f);
    return s;
}

/* Model path from packaging/fetch-model (downloads when missing). */
static bool model_path(const char *model, char *buf, size_t n)
{
    const char *src = getenv("TERN_SRC");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s/packaging/fetch-model' --model %s --print-path", src ? src : ".",
             model);
    FILE *p = popen(cmd, "r");
    if (!p) return false;
    bool got = fgets(buf, (int)n, p) != NULL;
    int rc = pclose(p);
    buf[strcspn(buf, "\n")] = 0;
    return got && rc == 0 && buf[0];
}

static double num(const cJSON *o, const char *k)
{
    return cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

static const char *str(const cJSON *o, const char *k)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

static void check_tensor(struct gguf_ctx *c, const cJSON *want, const char *tag)
{
    const struct gguf_tensor *t = gguf_find_tensor(c, str(want, "name"));
    const cJSON *ne = cJSON_GetObjectItemCaseSensitive(want, "ne");
    bool same = t && strcmp(qtype_name(t->type), str(want, "type")) == 0 &&
                t->n_dims == (uint32_t)cJSON_GetArraySize(ne) &&
                t->file_offset == (uint64_t)num(want, "offset");
    for (uint32_t d = 0; same && d < t->n_dims; d++)
        same = t->ne[d] == (uint64_t)cJSON_GetNumberValue(cJSON_GetArrayItem(ne, (int)d));
    ok(same, "%s: tensor %s type, shape and offset", tag, str(want, "name"));
}

static void check_metadata(struct gguf_ctx *c, const cJSON *m, const char *tag)
{
    char n[256];
#define T(s) (snprintf(n, sizeof n, "%s: %s", tag, s), n)
    const char *arch = str(m, "architecture");
    is_int(gguf_version(c), num(m, "version"), T("version"));
    is_int(gguf_n_kv(c), num(m, "n_kv"), T("key count"));
    is_int(gguf_n_tensors(c), num(m, "n_tensors"), T("tensor count"));
    is_int(gguf_alignment(c), num(m, "alignment"), T("alignment"));
    is_int(gguf_data_offset(c), num(m, "data_offset"), T("data offset"));
    is_str(gguf_get_str(c, "general.architecture"), arch, T("architecture"));
    is_str(gguf_get_str(c, "general.name"), str(m, "name"), T("name"));
    is_str(gguf_get_str(c, "tokenizer.ggml.model"), str(m, "tokenizer_model"), T("tokenizer model"));
    is_str(gguf_get_str(c, "tokenizer.ggml.pre"), str(m, "tokenizer_pre"), T("pre-tokenizer"));
    static const char *const keys[][2] = {
        {"context_length", "context_length"}, {"block_count", "block_count"},
        {"embedding_length", "embedding_length"}, {"attention.head_count", "head_count"},
        {"attention.head_count_kv", "head_count_kv"},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char key[128];
        uint32_t v = 0;
        snprintf(key, sizeof key, "%s.%s", arch, keys[i][0]);
        ok(gguf_get_u32(c, key, &v) && v == (uint32_t)num(m, keys[i][1]), "%s: %s", tag, key);
    }
    float fb = 0;
    snprintf(n, sizeof n, "%s.rope.freq_base", arch);
    ok(gguf_get_f32(c, n, &fb) && fb == (float)num(m, "rope_freq_base"), "%s: %s", tag, n);
    uint32_t bos = 0, eos = 0;
    ok(gguf_get_u32(c, "tokenizer.ggml.bos_token_id", &bos) && bos == num(m, "bos"), "%s", T("bos"));
    ok(gguf_get_u32(c, "tokenizer.ggml.eos_token_id", &eos) && eos == num(m, "eos"), "%s", T("eos"));
    const struct gguf_kv *tok = gguf_get_arr(c, "tokenizer.ggml.tokens");
    ok(tok && tok->v.arr.type == GGUF_VT_STRING && tok->v.arr.n == num(m, "vocab_size"), "%s",
       T("vocabulary size"));
    const char *t100 = str(m, "token_100");
    ok(tok && t100 && tok->v.arr.strs[100].len == strlen(t100) &&
       memcmp(tok->v.arr.strs[100].ptr, t100, strlen(t100)) == 0, "%s", T("token 100 text"));
    const char *tmpl = gguf_get_str(c, "tokenizer.chat_template");
    is_int(tmpl ? strlen(tmpl) : 0, num(m, "chat_template_len"), T("chat template length"));
#undef T
}

/* Per-type tensor counts and bytes, parameter count, first-row sum. */
static void check_tensors(struct gguf_ctx *c, const cJSON *m, const char *tag)
{
    uint64_t count[64] = {0}, bytes[64] = {0}, params = 0;
    double sum = 0;
    bool deq = true;
    float *row = NULL;
    for (uint64_t i = 0; i < gguf_n_tensors(c); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(c, i);
        count[t->type % 64]++;
        bytes[t->type % 64] += t->nbytes;
        params += t->n_elements;
        float *r = realloc(row, t->ne[0] * sizeof *row);
        if (!r || !dequant_row(t->type, t->data, r, (int64_t)t->ne[0])) deq = false;
        row = r ? r : row;
        for (uint64_t j = 0; deq && j < t->ne[0]; j++) sum += row[j];
    }
    free(row);
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(m, "tensor_types"), *ty;
    uint64_t listed = 0;
    cJSON_ArrayForEach(ty, types) {
        uint32_t id = 0;
        while (id < 64 && strcmp(qtype_name(id), ty->string) != 0) id++;
        listed += id < 64 ? count[id] : 0;
        ok(id < 64 && count[id] == num(ty, "count") && bytes[id] == num(ty, "bytes"),
           "%s: %s tensors: count and bytes", tag, ty->string);
    }
    is_int(listed, gguf_n_tensors(c), "every tensor type is listed");
    is_int(params, num(m, "parameters"), "parameter count");
    ok(deq, "%s: every tensor's first row dequantizes", tag);
    is_near(sum, num(m, "first_rows_sum"), 1e-9 * fabs(num(m, "first_rows_sum")),
            "sum of first rows equals gguf-py's");
    check_tensor(c, cJSON_GetObjectItemCaseSensitive(m, "first_tensor"), tag);
    check_tensor(c, cJSON_GetObjectItemCaseSensitive(m, "last_tensor"), tag);
}

int main(int argc, char **argv)
{
    if (argc < 2) return tap_bail("usage: test_gguf_models FIXTURE_DIR");
    char path[2048];
    snprintf(path, sizeof path, "%s/models.json", argv[1]);
    char *text = read_text(path);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!root) return tap_bail("cannot read %s", path);
    const cJSON *m;
    cJSON_ArrayForEach(m, root) {
        char mp[4096], err[512] = "";
        if (!ok(model_path(m->string, mp, sizeof mp), "%s: fetch-model gives a path", m->string)) continue;
        struct gguf_ctx *c = gguf_open(mp, err, sizeof err);
        if (!ok(c != NULL, "%s: opens", m->string)) {
            tap_diag("  %s", err);
            continue;
        }
        check_metadata(c, m, m->string);
        check_tensors(c, m, m->string);
        gguf_close(c);
    }
    cJSON_Delete(root);
    return tap_done();
}
