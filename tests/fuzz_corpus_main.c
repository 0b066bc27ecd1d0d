/* fuzz_corpus_main: runs every file of the seed corpus (and any files given)
 * through the fuzz target once, so `meson test` replays the corpus under the
 * sanitizers without libFuzzer. TAP: one line per file. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) n = -1;
    }
    if (f) fclose(f);
    /* An exact-size copy, so reads past the end trip ASan. */
    uint8_t *exact = n >= 0 ? malloc(n ? (size_t)n : 1) : NULL;
    if (exact && n > 0) memcpy(exact, buf, (size_t)n);
    if (exact) LLVMFuzzerTestOneInput(exact, (size_t)n);
    ok(exact != NULL, "%s", path);
    free(exact);
    free(buf);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
    if (argc < 2) return tap_bail("usage: fuzz_corpus DIR|FILE...");
    for (int i = 1; i < argc; i++) {
        struct dirent **ents;
        int n = scandir(argv[i], &ents, NULL, by_name);
        if (n < 0) {
            run_file(argv[i]);
            continue;
        }
        int files = 0;
        for (int j = 0; j < n; j++) {
            if (ents[j]->d_name[0] != '.') {
                char path[4096];
                snprintf(path, sizeof path, "%s/%s", argv[i], ents[j]->d_name);
                run_file(path);
                files++;
            }
            free(ents[j]);
        }
        free(ents);
        ok(files > 0, "%s holds corpus files", argv[i]);
    }
    return tap_done();
}
