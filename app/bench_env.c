/* bench_env: the baseline record of a run (see bench_env.h). */
#include "bench_env.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cli.h"
#include "cpu/cpu_isa.h"
#include "cpu/threadpool.h"
#include "engine.h"
#include "gguf.h"
#include "sha256.h"
#include "tern_commit.h"
#include "tern_config.h"

int bench_env_file_sha256(const char *path, char hex[65], char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct sha256 h;
    sha256_init(&h);
    const size_t cap = 1 << 20;
    unsigned char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf, 1, cap, f)) > 0) sha256_update(&h, buf, n);
    const char *why = !buf ? "out of memory" : ferror(f) ? "read error" : NULL;
    free(buf);
    fclose(f);
    if (why) {
        snprintf(err, errlen, "%s: %s", path, why);
        return -1;
    }
    sha256_final_hex(&h, hex);
    return 0;
}

/* A model file is hashed once: the digest is kept in the data folder's
 * sha256-cache, one line "DIGEST SIZE MTIME_NS PATH", and reused while the
 * file keeps its size and modification time (as git trusts its index). */
static void cache_path(char *buf, size_t n)
{
    char dir[4096];
    cli_data_dir(dir, sizeof dir);
    snprintf(buf, n, "%s/sha256-cache", dir);
}

static bool cache_get(const char *path, const struct stat *st, char hex[65])
{
    char cp[4200], line[4400];
    cache_path(cp, sizeof cp);
    FILE *f = fopen(cp, "r");
    bool hit = false;
    while (f && fgets(line, sizeof line, f)) {
        char h[65], p[4200];
        unsigned long long size, mt;
        line[strcspn(line, "\n")] = 0;
        if (sscanf(line, "%64s %llu %llu %4199[^\n]", h, &size, &mt, p) == 4 && !strcmp(p, path) &&
            size == (unsigned long long)st->st_size &&
            mt == (unsigned long long)st->st_mtim.tv_sec * 1000000000ull + (unsigned long long)st->st_mtim.tv_nsec) {
            memcpy(hex, h, 65);
            hit = true; /* the last matching line wins: keep reading */
        }
    }
    if (f) fclose(f);
    return hit;
}

static void cache_put(const char *path, const struct stat *st, const char *hex)
{
    char cp[4200];
    cache_path(cp, sizeof cp);
    /* the data folder and its parents may not exist yet (0700: it holds the history) */
    for (char *p = strchr(cp + 1, '/'); p; p = strchr(p + 1, '/')) {
        *p = 0;
        mkdir(cp, 0700);
        *p = '/';
    }
    FILE *f = fopen(cp, "a"); /* one short line per append: concurrent runs do not interleave */
    if (!f) return;           /* no cache: the next run hashes again */
    fprintf(f, "%s %llu %llu %s\n", hex, (unsigned long long)st->st_size,
            (unsigned long long)st->st_mtim.tv_sec * 1000000000ull + (unsigned long long)st->st_mtim.tv_nsec,
            path);
    fclose(f);
}

/* The file's SHA-256 from the cache, or hashed (and cached). */
static int model_sha256(const char *path, char hex[65], char *err, size_t errlen)
{
    char real[PATH_MAX];
    struct stat st;
    if (!realpath(path, real) || stat(real, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (cache_get(real, &st, hex)) return 0;
    if (bench_env_file_sha256(real, hex, err, errlen) != 0) return -1;
    cache_put(real, &st, hex);
    return 0;
}

static void hash_str(struct sha256 *h, const char *p, uint64_t len)
{
    /* length first: ["ab","c"] and ["a","bc"] must differ */
    sha256_update(h, &len, sizeof len);
    sha256_update(h, p, (size_t)len);
}

/* The tokenizer as the file defines it: model, pre-tokenizer, vocabulary,
 * merges, token types and special ids (a changed vocabulary or merge list
 * changes every token count). */
static void tokenizer_hash(const struct gguf_ctx *g, char hex[65])
{
    static const char *const strs[] = {"tokenizer.ggml.model", "tokenizer.ggml.pre"};
    static const char *const arrs[] = {"tokenizer.ggml.tokens", "tokenizer.ggml.merges"};
    static const char *const ids[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                      "tokenizer.ggml.eot_token_id"};
    struct sha256 h;
    sha256_init(&h);
    for (size_t i = 0; i < 2; i++) {
        const char *s = gguf_get_str(g, strs[i]);
        hash_str(&h, s ? s : "", s ? strlen(s) : 0);
    }
    for (size_t i = 0; i < 2; i++) {
        const struct gguf_kv *a = gguf_get_arr(g, arrs[i]);
        uint64_t n = a && a->v.arr.strs ? a->v.arr.n : 0;
        sha256_update(&h, &n, sizeof n);
        for (uint64_t k = 0; k < n; k++) hash_str(&h, a->v.arr.strs[k].ptr, a->v.arr.strs[k].len);
    }
    const struct gguf_kv *tt = gguf_get_arr(g, "tokenizer.ggml.token_type");
    for (uint64_t k = 0; tt && k < tt->v.arr.n; k++) {
        int64_t x = 0;
        if (gguf_arr_i64(tt, k, &x)) sha256_update(&h, &x, sizeof x);
    }
    for (size_t i = 0; i < 3; i++) {
        uint32_t x = 0xffffffffu;
        gguf_get_u32(g, ids[i], &x);
        sha256_update(&h, &x, sizeof x);
    }
    sha256_final_hex(&h, hex);
}

static void add_str_or_null(cJSON *o, const char *k, const char *v)
{
    if (v && *v)
        cJSON_AddStringToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static cJSON *model_json(const struct engine_info *info)
{
    cJSON *m = cJSON_CreateObject();
    add_str_or_null(m, "name", info->model_name);
    add_str_or_null(m, "file", info->model_path && access(info->model_path, R_OK) == 0
                                   ? info->model_path : NULL);
    add_str_or_null(m, "template_family", info->chat_template);
    char hex[65], err[512];
    /* remote without -m: model_path is the server's URL, nothing to hash */
    const char *path = info->model_path && access(info->model_path, R_OK) == 0 ? info->model_path
                                                                             : NULL;
    if (path && *path && model_sha256(path, hex, err, sizeof err) == 0)
        cJSON_AddStringToObject(m, "sha256", hex);
    else
        cJSON_AddNullToObject(m, "sha256");
    struct gguf_ctx *g = path && *path ? gguf_open(path, err, sizeof err) : NULL;
    if (g) {
        tokenizer_hash(g, hex);
        cJSON_AddStringToObject(m, "tokenizer_sha256", hex);
        const char *t = gguf_get_str(g, "tokenizer.chat_template");
        if (t) {
            struct sha256 h;
            sha256_init(&h);
            sha256_update(&h, t, strlen(t));
            sha256_final_hex(&h, hex);
        }
        add_str_or_null(m, "chat_template_sha256", t ? hex : NULL);
        add_str_or_null(m, "revision", gguf_get_str(g, "general.version"));
        gguf_close(g);
    } else {
        cJSON_AddNullToObject(m, "tokenizer_sha256");
        cJSON_AddNullToObject(m, "chat_template_sha256");
        cJSON_AddNullToObject(m, "revision");
    }
    return m;
}

/* ---- a remote server's own words about itself ---- */

struct body {
    char *p;
    size_t n;
};

static size_t on_body(char *p, size_t sz, size_t nm, void *ud)
{
    struct body *b = ud;
    size_t k = sz * nm;
    if (b->n + k > (1u << 20)) return 0; /* a status page, not a download */
    char *q = realloc(b->p, b->n + k + 1);
    if (!q) return 0;
    memcpy(q + b->n, p, k);
    b->p = q;
    b->n += k;
    q[b->n] = 0;
    return k;
}

/* GET root+path as JSON; NULL when it does not answer 2xx with JSON. */
static cJSON *get_json(const struct cli *cli, const char *root, const char *path)
{
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    char url[600];
    snprintf(url, sizeof url, "%s%s", root, path);
    struct body b = {0};
    struct curl_slist *hd = NULL;
    char auth[512];
    if (cli->api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", cli->api_key);
        hd = curl_slist_append(hd, auth);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (cli->insecure) {
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    long code = 0;
    cJSON *j = NULL;
    if (curl_easy_perform(c) == CURLE_OK &&
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code / 100 == 2 && b.p)
        j = cJSON_Parse(b.p);
    curl_slist_free_all(hd);
    curl_easy_cleanup(c);
    free(b.p);
    return j;
}

static void copy_item(cJSON *to, const char *as, const cJSON *from, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(from, key);
    if (v) cJSON_AddItemToObject(to, as, cJSON_Duplicate(v, 1));
}

/* The server root of a base URL (".../v1" and a trailing slash dropped). */
static void server_root(const char *url, char *out, size_t n)
{
    snprintf(out, n, "%s", url);
    size_t l = strlen(out);
    while (l && out[l - 1] == '/') out[--l] = 0;
    if (l >= 3 && strcmp(out + l - 3, "/v1") == 0) out[l - 3] = 0;
}

/* What the server says: vLLM/SGLang /version, llama-server /props (build,
 * slots, context, its model file), /v1/models, and a tern serve's engine
 * configuration from /v1/tern/status. */
static cJSON *server_json(const struct cli *cli, const char *url)
{
    char root[512];
    server_root(url, root, sizeof root);
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "url", url);
    cJSON *v = get_json(cli, root, "/version");
    if (v) copy_item(s, "version", v, "version");
    cJSON_Delete(v);
    cJSON *p = get_json(cli, root, "/props");
    if (p) {
        cJSON *o = cJSON_AddObjectToObject(s, "props");
        copy_item(o, "build_info", p, "build_info");
        copy_item(o, "model_path", p, "model_path");
        copy_item(o, "total_slots", p, "total_slots");
        const cJSON *d = cJSON_GetObjectItem(p, "default_generation_settings");
        if (d) copy_item(o, "n_ctx", d, "n_ctx");
        const cJSON *t = cJSON_GetObjectItem(p, "chat_template");
        if (cJSON_IsString(t)) {
            struct sha256 h;
            char hex[65];
            sha256_init(&h);
            sha256_update(&h, t->valuestring, strlen(t->valuestring));
            sha256_final_hex(&h, hex);
            cJSON_AddStringToObject(o, "chat_template_sha256", hex);
        }
    }
    cJSON_Delete(p);
    cJSON *m = get_json(cli, root, "/v1/models");
    const cJSON *it;
    if (m) {
        cJSON *a = cJSON_AddArrayToObject(s, "models");
        cJSON_ArrayForEach(it, cJSON_GetObjectItem(m, "data")) {
            cJSON *e = cJSON_CreateObject();
            copy_item(e, "id", it, "id");
            copy_item(e, "owned_by", it, "owned_by");
            copy_item(e, "meta", it, "meta");
            cJSON_AddItemToArray(a, e);
        }
    }
    cJSON_Delete(m);
    cJSON *st = get_json(cli, root, "/v1/tern/status");
    const cJSON *eng = st ? cJSON_GetObjectItem(st, "engine") : NULL;
    if (eng) {
        cJSON *o = cJSON_AddObjectToObject(s, "tern_engine");
        static const char *const keys[] = {"step_tokens_budget", "max_running", "max_queue",
                                           "n_ctx"};
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) copy_item(o, keys[k], eng, keys[k]);
        const cJSON *kv = cJSON_GetObjectItem(eng, "kv"), *be = cJSON_GetObjectItem(eng, "backend");
        copy_item(o, "kv_blocks", kv, "total");
        copy_item(o, "kv_block_tokens", kv, "block_tokens");
        copy_item(o, "backend", be, "name");
        copy_item(o, "device", be, "device");
        const cJSON *mi = cJSON_GetObjectItem(cJSON_GetObjectItem(st, "model_info"), "tern");
        if (mi) cJSON_AddItemToObject(s, "tern_model", cJSON_Duplicate(mi, 1));
    }
    cJSON_Delete(st);
    return s;
}

/* ---- GPU: what the driver says without loading CUDA ---- */

static cJSON *gpu_json(const struct engine_info *info)
{
    if (!info->backend.name || strcmp(info->backend.name, "cuda") != 0) return cJSON_CreateNull();
    cJSON *g = cJSON_CreateObject();
    cJSON_AddStringToObject(g, "name", info->backend.device);
    cJSON_AddNumberToObject(g, "mem_total", (double)info->backend.mem_total);
    char line[256] = "";
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
        line[strcspn(line, "\n")] = 0;
    }
    add_str_or_null(g, "driver", line);
    /* The runtime's and driver's versions as the CUDA backend asked them
     * when it opened (CUDA is loaded only where it runs). */
    add_str_or_null(g, "runtime", info->backend.runtime[0] ? info->backend.runtime : NULL);
    return g;
}

static void add_tern(cJSON *env)
{
    cJSON *t = cJSON_AddObjectToObject(env, "tern");
    cJSON_AddStringToObject(t, "version", TERN_VERSION);
    cJSON_AddStringToObject(t, "commit", TERN_COMMIT);
    cJSON_AddBoolToObject(t, "cuda_built", TERN_HAVE_CUDA);
}

/* The machine tern runs on (with --url: the client); threads < 0: not ours. */
static void add_host(cJSON *env, long threads)
{
    cJSON *h = cJSON_AddObjectToObject(env, "host");
    struct utsname u;
    char host[512] = "";
    if (uname(&u) == 0) snprintf(host, sizeof host, "%s %s %s", u.sysname, u.release, u.machine);
    cJSON_AddStringToObject(h, "os", host);
    cJSON_AddNumberToObject(h, "cpus_online", (double)sysconf(_SC_NPROCESSORS_ONLN));
    if (threads < 0)
        cJSON_AddNullToObject(h, "threads");
    else
        cJSON_AddNumberToObject(h, "threads", (double)(threads > 0 ? threads : tp_physical_cores()));
    cJSON_AddStringToObject(h, "isa", cpu_isa_name(cpu_isa_best()));
}

static void add_batching(cJSON *env, const struct engine_info *info, const struct engine_stats *st,
                         bool remote)
{
    cJSON *bp = cJSON_AddObjectToObject(env, "batching");
    if (remote) { /* the server's own, under engine.servers when it says */
        cJSON_AddNullToObject(bp, "step_tokens");
    } else {
        cJSON_AddNumberToObject(bp, "step_tokens", st->step_tokens_budget);
        /* chunked prefill: a prompt is cut to what the step budget leaves */
        cJSON_AddNumberToObject(bp, "prefill_chunk_tokens", st->step_tokens_budget);
        cJSON_AddNumberToObject(bp, "max_running", st->max_running);
        cJSON_AddNumberToObject(bp, "max_queue", st->max_queue);
        cJSON_AddNumberToObject(bp, "kv_blocks", st->kv_total);
        cJSON_AddNumberToObject(bp, "kv_block_tokens", st->kv_block_tokens);
        cJSON_AddNumberToObject(bp, "kv_bytes", (double)info->backend.kv_bytes);
    }
    cJSON_AddNumberToObject(bp, "n_ctx", info->n_ctx);
}

cJSON *bench_env_collect(struct engine *e, const struct cli *cli, long threads)
{
    struct engine_info info;
    engine_info(e, &info);
    struct engine_stats st;
    engine_snapshot(e, &st);
    cJSON *env = cJSON_CreateObject();
    if (!env) return NULL;
    add_tern(env);
    bool remote = info.remote_url != NULL;
    cJSON *en = cJSON_AddObjectToObject(env, "engine");
    cJSON_AddStringToObject(en, "kind", remote ? "remote" : "local");
    cJSON_AddStringToObject(en, "backend", info.backend.name ? info.backend.name : "");
    cJSON_AddStringToObject(en, "device", info.backend.device);
    if (remote) {
        cJSON *ss = cJSON_AddArrayToObject(en, "servers");
        for (int i = 0; i < cli->n_urls; i++) cJSON_AddItemToArray(ss, server_json(cli, cli->urls[i]));
    } else {
        cJSON_AddStringToObject(en, "version", TERN_VERSION);
    }
    cJSON *model = model_json(&info);
    cJSON_AddItemToObject(env, "model", model);
    /* No template file here (--url): the server's, hashed the same way, so a
     * local and a remote run of one model compare equal. */
    const cJSON *srv0 = cJSON_GetArrayItem(cJSON_GetObjectItem(en, "servers"), 0);
    const cJSON *tsha = cJSON_GetObjectItem(cJSON_GetObjectItem(srv0, "props"), "chat_template_sha256");
    if (cJSON_IsNull(cJSON_GetObjectItem(model, "chat_template_sha256")) && cJSON_IsString(tsha))
        cJSON_ReplaceItemInObject(model, "chat_template_sha256", cJSON_CreateString(tsha->valuestring));
    add_batching(env, &info, &st, remote);
    add_host(env, remote ? -1 : threads);
    cJSON_AddItemToObject(env, "gpu", gpu_json(&info));
    return env;
}

cJSON *bench_env_collect_raw(const char *model_name, const char *model_path,
                             const struct backend_info *be, long threads)
{
    struct engine_info info = {.model_name = model_name, .model_path = model_path,
                               .backend = *be};
    cJSON *env = cJSON_CreateObject();
    if (!env) return NULL;
    add_tern(env);
    cJSON *en = cJSON_AddObjectToObject(env, "engine");
    cJSON_AddStringToObject(en, "kind", "raw");
    cJSON_AddStringToObject(en, "backend", be->name ? be->name : "");
    cJSON_AddStringToObject(en, "device", be->device);
    cJSON_AddStringToObject(en, "version", TERN_VERSION);
    cJSON_AddItemToObject(env, "model", model_json(&info));
    cJSON_AddNullToObject(env, "batching"); /* one sequence, no scheduler */
    add_host(env, threads);
    cJSON_AddItemToObject(env, "gpu", gpu_json(&info));
    return env;
}
