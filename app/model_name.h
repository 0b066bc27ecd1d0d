/* model_name: finding a model by name in the models directory, as `-m`
 * takes it. A path (with a '/', or a file that exists) is used as given;
 * otherwise NAME matches a .gguf file in the directory by file name, by
 * stem (without .gguf), or by a short alias: the name's letters and digits
 * (case ignored) beginning the file's, so "smollm2" finds
 * SmolLM2-135M-Instruct.Q4_1.gguf and "gemma3-270m" finds
 * gemma-3-270m-q4_k_m.gguf. More than one match is an error that lists them. */
#ifndef TERN_MODEL_NAME_H
#define TERN_MODEL_NAME_H

#include <stddef.h>

/* ${XDG_DATA_HOME:-$HOME/.local/share}/tern/models */
void model_name_dir(char *buf, size_t n);

/* The .gguf file names in dir, sorted; *out is a NULL-terminated array the
 * caller frees with model_name_list_free. Returns the count, or -1 with err
 * (the directory cannot be read). */
int model_name_list(const char *dir, char ***out, char *err, size_t errlen);
void model_name_list_free(char **list);

/* Resolves name to a path in buf. Returns 0, or -1 with err saying what was
 * looked for, where, and the candidates (ambiguous) or the files there. */
int model_name_resolve(const char *name, const char *dir, char *buf, size_t n, char *err,
                       size_t errlen);

/* name (a model file name) shortened for a column of width bytes: without
 * ".gguf", and when still too long cut in the middle ("..") so that its
 * quant, the part after the last '.' or '-', stays whole. out holds at
 * least width + 1 bytes. */
void model_name_short(const char *name, char *out, size_t width);

#endif
