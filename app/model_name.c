/* model_name: models by name in the models directory (see model_name.h). */
#include "model_name.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

void model_name_dir(char *buf, size_t n)
{
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
        snprintf(buf, n, "%s/tern/models", xdg);
    else
        snprintf(buf, n, "%s/.local/share/tern/models", home ? home : ".");
}

static bool is_gguf(const char *f)
{
    size_t l = strlen(f);
    return l > 5 && strcmp(f + l - 5, ".gguf") == 0 && f[0] != '.';
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void model_name_list_free(char **list)
{
    for (size_t i = 0; list && list[i]; i++) free(list[i]);
    free(list);
}

int model_name_list(const char *dir, char ***out, char *err, size_t errlen)
{
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return -1;
    }
    size_t n = 0, cap = 8;
    char **v = calloc(cap + 1, sizeof *v);
    struct dirent *e;
    while (v && (e = readdir(d))) {
        if (!is_gguf(e->d_name)) continue;
        if (n == cap) {
            char **nv = realloc(v, (cap * 2 + 1) * sizeof *v);
            if (!nv) break;
            v = nv;
            cap *= 2;
        }
        if (!(v[n] = strdup(e->d_name))) break;
        v[++n] = NULL;
    }
    closedir(d);
    if (!v) {
        snprintf(err, errlen, "out of memory listing %s", dir);
        return -1;
    }
    qsort(v, n, sizeof *v, cmp_str);
    *out = v;
    return (int)n;
}

/* Letters and digits, lower-cased: "Gemma-3_270M" -> "gemma3270m". */
static void squash(const char *s, char *o, size_t n)
{
    size_t k = 0;
    for (; *s && k + 1 < n; s++)
        if (isalnum((unsigned char)*s)) o[k++] = (char)tolower((unsigned char)*s);
    o[k] = 0;
}

/* 3: file name, 2: stem, 1: alias prefix, 0: no match. */
static int match(const char *name, const char *file)
{
    size_t nl = strlen(name), fl = strlen(file);
    if (strcmp(name, file) == 0) return 3;
    if (fl == nl + 5 && strncmp(name, file, nl) == 0) return 2;
    char a[256], b[256];
    squash(name, a, sizeof a);
    squash(file, b, sizeof b);
    return a[0] && strncmp(a, b, strlen(a)) == 0 ? 1 : 0;
}

/* Appends "a, b, c" (the files, or those matching name at level) to err. */
static void list_into(char *err, size_t errlen, char **files, const char *name, int level)
{
    size_t at = strlen(err);
    for (size_t i = 0, k = 0; files[i] && at + 4 < errlen; i++)
        if (!name || match(name, files[i]) == level)
            at += (size_t)snprintf(err + at, errlen - at, "%s%s", k++ ? ", " : "", files[i]);
}

int model_name_resolve(const char *name, const char *dir, char *buf, size_t n, char *err,
                       size_t errlen)
{
    if (strchr(name, '/') || access(name, F_OK) == 0) {
        snprintf(buf, n, "%s", name);
        return 0;
    }
    char **files;
    char lerr[512];
    if (model_name_list(dir, &files, lerr, sizeof lerr) < 0) {
        snprintf(err, errlen, "model '%s' is not a file, and the models directory cannot be read (%s)",
                 name, lerr);
        return -1;
    }
    int best = 0, n_best = 0;
    const char *found = NULL;
    for (size_t i = 0; files[i]; i++) {
        int m = match(name, files[i]);
        if (m > best) best = m, n_best = 0;
        if (m == best && m > 0) n_best++, found = files[i];
    }
    int rc = -1;
    if (n_best == 1) {
        snprintf(buf, n, "%s/%s", dir, found);
        rc = 0;
    } else if (n_best > 1) {
        snprintf(err, errlen, "model '%s' is ambiguous in %s: ", name, dir);
        list_into(err, errlen, files, name, best);
        size_t at = strlen(err);
        if (at + 40 < errlen) snprintf(err + at, errlen - at, " (give more of the name)");
    } else {
        snprintf(err, errlen, "no model '%s': not a file, and not in %s (%s", name, dir,
                 files[0] ? "there: " : "empty: packaging/fetch-model fetches one");
        list_into(err, errlen, files, NULL, 0);
        size_t at = strlen(err);
        if (at + 2 < errlen) snprintf(err + at, errlen - at, ")");
    }
    model_name_list_free(files);
    return rc;
}

void model_name_short(const char *name, char *out, size_t width)
{
    size_t n = strlen(name);
    if (n > 5 && strcasecmp(name + n - 5, ".gguf") == 0) n -= 5;
    if (n <= width) {
        memcpy(out, name, n);
        out[n] = 0;
        return;
    }
    if (width < 8) { /* no room for an ellipsis worth having */
        memcpy(out, name, width);
        out[width] = 0;
        return;
    }
    /* the tail: from the last separator when it is short (the quant), else
     * the last few bytes */
    size_t tail = width / 3;
    for (size_t i = n; i-- > 0;)
        if (name[i] == '.' || name[i] == '-') {
            if (n - i <= width / 2) tail = n - i;
            break;
        }
    size_t head = width - 2 - tail;
    /* neither cut inside a UTF-8 sequence */
    while (head > 0 && ((unsigned char)name[head] & 0xC0) == 0x80) head--;
    while (tail > 0 && ((unsigned char)name[n - tail] & 0xC0) == 0x80) tail--;
    memcpy(out, name, head);
    memcpy(out + head, "..", 2);
    memcpy(out + head + 2, name + n - tail, tail);
    out[head + 2 + tail] = 0;
}
