#include <stdio.h>
#include "engine_ops.h"
struct engine *engine_remote_new(const struct engine_config *c, char *err, size_t errlen)
{
    snprintf(err, errlen, "remote: not built");
    return NULL;
}
