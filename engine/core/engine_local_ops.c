/* engine_local_ops: the in-process engine behind the engine_ops seam. Each
 * entry only converts the public handle to the local state (its first
 * member) and calls the implementation in engine.c / engine_loop.c /
 * engine_submit.c, so the local behaviour is exactly what it was. */
#include "engine_impl.h"

static struct engine_local *L(struct engine *e) { return (struct engine_local *)e; }
static const struct engine_local *CL(const struct engine *e)
{
    return (const struct engine_local *)e;
}

static uint64_t op_submit(struct engine *e, const struct engine_request *r,
                          enum engine_status *why, char *err, size_t errlen)
{
    return engine_local_submit(L(e), r, why, err, errlen);
}
static int op_cancel(struct engine *e, uint64_t id) { return engine_local_cancel(L(e), id); }
static void op_pause(struct engine *e, bool p) { engine_local_pause(L(e), p); }
static int op_poll_events(struct engine *e, struct engine_event *out, int max)
{
    return engine_local_poll_events(L(e), out, max);
}
static int op_poll_request(struct engine *e, uint64_t id, struct engine_event *out, int max)
{
    return engine_local_poll_request(L(e), id, out, max);
}
static int op_event_fd(const struct engine *e) { return engine_local_event_fd(CL(e)); }
static bool op_wait_events(struct engine *e, uint64_t id, double t)
{
    return engine_local_wait_events(L(e), id, t);
}
static void op_snapshot(struct engine *e, struct engine_stats *out)
{
    engine_local_snapshot(L(e), out);
}
static int op_requests(struct engine *e, struct engine_req_info *out, int max)
{
    return engine_local_requests(L(e), out, max);
}
static void op_info(const struct engine *e, struct engine_info *out)
{
    engine_local_info(CL(e), out);
}
static int64_t op_count_tokens(const struct engine *e, const char *text, size_t len, char *err,
                               size_t errlen)
{
    return engine_local_count_tokens(CL(e), text, len, err, errlen);
}
static int64_t op_count_chat_tokens(const struct engine *e, const struct engine_message *m,
                                    int32_t n, char *err, size_t errlen)
{
    return engine_local_count_chat_tokens(CL(e), m, n, err, errlen);
}
static int op_token_bytes(const struct engine *e, int32_t id, char *out, size_t cap)
{
    const struct engine_local *l = CL(e);
    if (!l->tok || id < 0 || id >= tok_n_vocab(l->tok)) return -1;
    return (int)tok_decode_token_special(l->tok, id, out, cap);
}
static void op_close(struct engine *e) { engine_local_close(L(e)); }

const struct engine_ops engine_local_ops = {
    .name = "local",
    .submit = op_submit,
    .cancel = op_cancel,
    .pause = op_pause,
    .poll_events = op_poll_events,
    .poll_request = op_poll_request,
    .event_fd = op_event_fd,
    .wait_events = op_wait_events,
    .snapshot = op_snapshot,
    .requests = op_requests,
    .info = op_info,
    .count_tokens = op_count_tokens,
    .count_chat_tokens = op_count_chat_tokens,
    .token_bytes = op_token_bytes,
    .close = op_close,
};

struct engine *engine_local_new(const struct engine_config *c, char *err, size_t errlen)
{
    struct engine_local *e = engine_local_open(c, err, errlen);
    return e ? &e->base : NULL;
}
