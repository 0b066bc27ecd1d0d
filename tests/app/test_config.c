/* Config file parsing and the shared option value parsers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "model_name.h"
#include "tap.h"

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

int main(void)
{
    char dir[] = "/tmp/tern-config-XXXXXX", path[256], err[512];
    if (!mkdtemp(dir)) return tap_bail("mkdtemp failed");
    snprintf(path, sizeof path, "%s/tern.conf", dir);

    write_file(path, "# comment\n\nthreads = 4\nmodel = \"/m/a b.gguf\"\nthreads=8\n");
    struct config cfg;
    ok(config_load(&cfg, path, 1, err, sizeof err) == 0, "config loads");
    is_str(config_get(&cfg, "model"), "/m/a b.gguf", "quoted value is unquoted");
    is_str(config_get(&cfg, "threads"), "8", "the last repeated key wins");
    ok(config_get(&cfg, "absent") == NULL, "absent key is NULL");
    config_free(&cfg);

    write_file(path, "ok = 1\n = 2\n");
    ok(config_load(&cfg, path, 1, err, sizeof err) != 0, "empty key is an error");
    ok(strstr(err, "tern.conf:2: empty key") != NULL, "error names file and line: %s", err);

    char missing[300];
    snprintf(missing, sizeof missing, "%s/none.conf", dir);
    ok(config_load(&cfg, missing, 0, err, sizeof err) == 0 && cfg.n == 0,
       "missing default config is empty, not an error");
    ok(config_load(&cfg, missing, 1, err, sizeof err) != 0, "missing explicit config is an error");

    struct cli cli = {.cmd = "test"};
    unsigned long long sz = 0;
    ok(cli_size(&cli, "--mem", "8G", &sz) == 0 && sz == 8ULL << 30, "8G parses");
    ok(cli_size(&cli, "--mem", "1.5GiB", &sz) == 0 && sz == 3ULL << 29, "1.5GiB parses");
    ok(cli_size(&cli, "--mem", "512M", &sz) == 0 && sz == 512ULL << 20, "512M parses");
    ok(cli_size(&cli, "--mem", "12XB", &sz) != 0, "12XB is rejected");
    long v = 0;
    ok(cli_int(&cli, "-t", "3", 1, 64, &v) == 0 && v == 3, "integer parses");
    ok(cli_int(&cli, "-t", "0", 1, 64, &v) != 0, "integer out of range is rejected");
    ok(cli_int(&cli, "-t", "4x", 1, 64, &v) != 0, "trailing garbage is rejected");

    /* --kv-type: every name parses and is named back the same; q4c is its own type */
    static const char *const kv_names[] = {"f16", "f32", "q8_0", "q4_0", "q4c"};
    for (size_t i = 0; i < sizeof kv_names / sizeof kv_names[0]; i++) {
        enum kv_type t = KV_F16;
        ok(cli_kv_type(&cli, kv_names[i], &t) == 0 && strcmp(cli_kv_type_name(t), kv_names[i]) == 0,
           "--kv-type %s parses and is named back", kv_names[i]);
    }
    enum kv_type kt = KV_F16;
    ok(cli_kv_type(&cli, "q4c", &kt) == 0 && kt == KV_Q4C, "--kv-type q4c is KV_Q4C");
    ok(cli_kv_type(&cli, "Q4C", &kt) != 0 && cli_kv_type(&cli, "q4", &kt) != 0 &&
           kt == KV_Q4C,
       "--kv-type Q4C and q4 are refused, the type left as it was");

    /* the history list's model column: no ".gguf", the quant kept whole */
    char sh[29];
    model_name_short("SmolLM2-135M-Instruct.Q4_1.gguf", sh, 28);
    is_str(sh, "SmolLM2-135M-Instruct.Q4_1", "a name that fits loses only .gguf");
    model_name_short("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", sh, 28);
    ok(strlen(sh) <= 28 && strstr(sh, "..") && strcmp(sh + strlen(sh) - 7, "-Q4_K_M") == 0 &&
           strncmp(sh, "Meta-Llama-3.1", 14) == 0,
       "a long name is cut in the middle, its quant whole: %s", sh);
    model_name_short("\xe6\xa8\xa1\xe5\x9e\x8b\xe6\xa8\xa1\xe5\x9e\x8b\xe6\xa8\xa1\xe5\x9e\x8b-Q8_0.gguf", sh, 12);
    ok(strlen(sh) <= 12 && sh[0] == '\xe6' && strstr(sh, "..-Q8_0") && (sh[2] & 0xC0) == 0x80 &&
           ((unsigned char)sh[strlen(sh) - 7 - 1] & 0xC0) == 0x80,
       "no UTF-8 sequence cut: %s", sh);

    unlink(path);
    rmdir(dir);
    return tap_done();
}
