/* engine_ops: the seam between the engine API (engine.h) and its
 * implementations. engine_open picks one once, like the backend choice:
 * the local engine (engine/core: model, scheduler, backend in this process)
 * or the remote engine (engine/remote: an OpenAI-compatible HTTP server).
 * Every public engine_* call that takes an engine goes through e->ops; code
 * above the engine API never learns which one it has. Not a public header. */
#ifndef TERN_ENGINE_OPS_H
#define TERN_ENGINE_OPS_H

#include "engine.h"

struct engine_ops {
    const char *name;                /* "local", "remote" */
    uint64_t (*submit)(struct engine *e, const struct engine_request *r, enum engine_status *why,
                       char *err, size_t errlen);
    int (*cancel)(struct engine *e, uint64_t id);
    void (*pause)(struct engine *e, bool paused);
    int (*poll_events)(struct engine *e, struct engine_event *out, int max);
    int (*poll_request)(struct engine *e, uint64_t id, struct engine_event *out, int max);
    int (*event_fd)(const struct engine *e);
    bool (*wait_events)(struct engine *e, uint64_t id, double timeout_s);
    void (*snapshot)(struct engine *e, struct engine_stats *out);
    int (*requests)(struct engine *e, struct engine_req_info *out, int max);
    void (*info)(const struct engine *e, struct engine_info *out);
    int64_t (*count_tokens)(const struct engine *e, const char *text, size_t len, char *err,
                            size_t errlen);
    int64_t (*count_chat_tokens)(const struct engine *e, const struct engine_message *msgs,
                                 int32_t n, char *err, size_t errlen);
    int (*token_bytes)(const struct engine *e, int32_t id, char *out, size_t cap);
    int (*cache_list)(struct engine *e, struct engine_cache_entry *out, int max, bool with_text);
    int (*cache_save)(struct engine *e, char *err, size_t errlen);   /* NULL: not supported */
    void (*close)(struct engine *e);
};

/* The head of every implementation's state (its first member). */
struct engine {
    const struct engine_ops *ops;
};

/* The two implementations' constructors (engine_api.c chooses). */
struct engine *engine_local_new(const struct engine_config *c, char *err, size_t errlen);
struct engine *engine_remote_new(const struct engine_config *c, char *err, size_t errlen);

#endif
