/* tok_testutil: helpers shared by the tokenizer tests in tests/engine/model
 * (header-only, like tap.h): read a whole file, and get a model's path from
 * packaging/fetch-model. */
#ifndef TERN_TOK_TESTUTIL_H
#define TERN_TOK_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whole file, NUL-terminated (malloc'd), its length in *n when n is not NULL;
 * NULL when unreadable. */
static inline char *tt_slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = NULL;
    long sz = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (sz = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0)
        b = malloc((size_t)sz + 1);
    size_t r = b ? fread(b, 1, (size_t)sz, f) : 0;
    fclose(f);
    if (b) b[r] = 0;
    if (n) *n = r;
    return b;
}

/* `packaging/fetch-model --model NAME --print-path` under src; 0 or -1. */
static inline int tt_model_path(const char *src, const char *model, char *out, size_t n)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s/packaging/fetch-model' --model %s --print-path", src, model);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char *r = fgets(out, (int)n, p);
    int rc = pclose(p);
    if (!r || rc != 0) return -1;
    out[strcspn(out, "\n")] = 0;
    return 0;
}

#endif
