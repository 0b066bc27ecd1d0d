/* config: tern's configuration file, plain `key = value` lines whose keys are
 * the long option names of the commands (model, threads, kv-type, ...).
 * Default location: ${XDG_CONFIG_HOME:-$HOME/.config}/tern/tern.conf. */
#ifndef TERN_CONFIG_H
#define TERN_CONFIG_H

#include <stddef.h>

struct config_entry {
    char *key;
    char *value;
    int line;
};

struct config {
    char *path;
    struct config_entry *entries;
    size_t n;
};

/* Loads path; a missing file at the default location is not an error
 * (must_exist = 0 gives an empty config). Returns 0, or -1 with err naming
 * the file and line. */
int config_load(struct config *cfg, const char *path, int must_exist, char *err, size_t errlen);
void config_free(struct config *cfg);
const char *config_get(const struct config *cfg, const char *key);
/* Writes the default config path into buf. */
void config_default_path(char *buf, size_t n);

#endif
