/* bench_env: the environment a bench or contract run ran in, written down
 * so a later run can be compared with it (the guide's "baseline record"):
 * tern's version and commit, the engine (local, or the remote server's own
 * version from /version, /props, /v1/models, /v1/tern/status), the model
 * file's SHA-256 and its tokenizer and chat-template hashes, the batching
 * policy, threads, ISA and GPU. docs/CONTRACT.md lists the keys. */
#ifndef TERN_BENCH_ENV_H
#define TERN_BENCH_ENV_H

#include <stddef.h>

struct cJSON;
struct cli;
struct engine;

/* The record of engine e, opened from cli's options with `threads` CPU
 * threads asked for (0 = the default: physical cores). Never NULL but when
 * out of memory; what cannot be learnt is null in it, never guessed. The
 * caller frees it with cJSON_Delete. */
struct cJSON *bench_env_collect(struct engine *e, const struct cli *cli, long threads);

/* The same for 'tern bench --pp/--tg', which runs a backend without an
 * engine: engine.kind "raw", batching null. model_path NULL for a
 * synthetic model. */
struct backend_info;
struct cJSON *bench_env_collect_raw(const char *model_name, const char *model_path,
                                    const struct backend_info *be, long threads);

/* SHA-256 of a file as 64 hex digits; 0, or -1 with err naming the file. */
int bench_env_file_sha256(const char *path, char hex[65], char *err, size_t errlen);

#endif
