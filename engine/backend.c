/* backend: opens the compute backend a configuration asks for. AUTO tries
 * CUDA first and falls back to the CPU, keeping the reason in info.note so
 * the app can say why it runs on the CPU. */
#include "backend.h"

#include <stdio.h>

#include "backend_cpu.h"

struct backend *backend_open(const struct model *m, const struct backend_config *cfg,
                             char *err, size_t errlen)
{
    if (cfg->kind == BACKEND_CPU) return backend_cpu_open(m, cfg, err, errlen);
    char why[256] = "";
    struct backend *be = backend_cuda_open(m, cfg, why, sizeof why);
    if (be) return be;
    if (cfg->kind == BACKEND_CUDA) {
        snprintf(err, errlen, "cuda backend: %s", why[0] ? why : "not available");
        return NULL;
    }
    be = backend_cpu_open(m, cfg, err, errlen);
    if (!be) return NULL;
    char note[256];
    snprintf(note, sizeof note, "no usable GPU: %s; running on CPU",
             why[0] ? why : "CUDA backend unavailable");
    backend_cpu_set_note(be, note);
    return be;
}

void backend_close(struct backend *be)
{
    if (be) be->ops->close(be);
}
