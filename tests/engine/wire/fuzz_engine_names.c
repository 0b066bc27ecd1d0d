/* fuzz_engine_names: the two engine helpers the wire module calls
 * (engine_status_name, engine_sampling_default), copied from
 * engine/core/engine.c so that the libFuzzer binary need not compile the
 * engine and its kernels with clang (kernels/cpu/ops.c's cpu-feature
 * builtins do not build with Debian 12's clang). The corpus replay
 * (serve-fuzz-corpus) and test_wire link the real ones. */
#include <string.h>

#include "engine.h"

const char *engine_status_name(enum engine_status s)
{
    static const char *const names[ENGINE_N_STATUS] = {
        "ok", "stop", "length", "cancelled", "timeout", "rejected", "error", "consumer-stalled"};
    return (unsigned)s < ENGINE_N_STATUS ? names[s] : "?";
}

void engine_sampling_default(struct engine_sampling *s)
{
    memset(s, 0, sizeof *s);
    s->temp = 0.8f;
    s->top_k = 40;
    s->top_p = 0.95f;
    s->min_p = 0.05f;
    s->repeat_penalty = 1.0f;
    s->penalty_last_n = 64;
}
