/* config: `key = value` configuration file reader. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void config_default_path(char *buf, size_t n)
{
    const char *xdg = getenv("XDG_CONFIG_HOME");
    const char *home = getenv("HOME");
    if (xdg && *xdg)
        snprintf(buf, n, "%s/tern/tern.conf", xdg);
    else
        snprintf(buf, n, "%s/.config/tern/tern.conf", home ? home : ".");
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

static int add_entry(struct config *cfg, const char *key, const char *value, int line)
{
    struct config_entry *e = realloc(cfg->entries, (cfg->n + 1) * sizeof *e);
    if (!e) return -1;
    cfg->entries = e;
    e[cfg->n].key = strdup(key);
    e[cfg->n].value = strdup(value);
    e[cfg->n].line = line;
    if (!e[cfg->n].key || !e[cfg->n].value) {
        free(e[cfg->n].key);
        free(e[cfg->n].value);
        return -1;
    }
    cfg->n++;
    return 0;
}

int config_load(struct config *cfg, const char *path, int must_exist, char *err, size_t errlen)
{
    memset(cfg, 0, sizeof *cfg);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT && !must_exist) return 0;
        snprintf(err, errlen, "%s: cannot open config: %s", path, strerror(errno));
        return -1;
    }
    cfg->path = strdup(path);
    char line[4096];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = trim(line);
        if (!*s || *s == '#' || *s == ';') continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "%s:%d: expected 'key = value'", path, lineno);
            goto fail;
        }
        *eq = 0;
        char *key = trim(s), *value = trim(eq + 1);
        size_t vl = strlen(value);
        if (vl >= 2 && value[0] == '"' && value[vl - 1] == '"') {
            value[vl - 1] = 0;
            value++;
        }
        if (!*key) {
            snprintf(err, errlen, "%s:%d: empty key", path, lineno);
            goto fail;
        }
        if (add_entry(cfg, key, value, lineno) != 0) {
            snprintf(err, errlen, "%s:%d: out of memory", path, lineno);
            goto fail;
        }
    }
    fclose(f);
    return 0;
fail:
    fclose(f);
    config_free(cfg);
    return -1;
}

void config_free(struct config *cfg)
{
    for (size_t i = 0; i < cfg->n; i++) {
        free(cfg->entries[i].key);
        free(cfg->entries[i].value);
    }
    free(cfg->entries);
    free(cfg->path);
    memset(cfg, 0, sizeof *cfg);
}

const char *config_get(const struct config *cfg, const char *key)
{
    /* Last one wins, as with repeated command-line options. */
    for (size_t i = cfg->n; i-- > 0;)
        if (strcmp(cfg->entries[i].key, key) == 0) return cfg->entries[i].value;
    return NULL;
}
