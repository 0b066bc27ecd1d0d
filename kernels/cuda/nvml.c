/* nvml: NVML through dlopen; only the few entry points tern reads. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "nvml.h"

typedef struct { unsigned long long total, free, used; } nvml_memory_t;
typedef struct { unsigned gpu, memory; } nvml_util_t;
typedef void *nvml_device_t;

typedef int (*nvml_init_fn)(void);
typedef int (*nvml_shutdown_fn)(void);
typedef int (*nvml_by_pci_fn)(const char *, nvml_device_t *);
typedef int (*nvml_mem_fn)(nvml_device_t, nvml_memory_t *);
typedef int (*nvml_util_fn)(nvml_device_t, nvml_util_t *);
typedef int (*nvml_temp_fn)(nvml_device_t, int, unsigned *);

struct nvml {
    void *lib;
    nvml_device_t dev;
    nvml_shutdown_fn shutdown;
    nvml_mem_fn mem;
    nvml_util_fn util;
    nvml_temp_fn temp;
};

struct nvml *nvml_open(const char *pci_bus_id)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib) return NULL;
    struct nvml *n = calloc(1, sizeof *n);
    if (!n) goto fail;
    n->lib = lib;
    nvml_init_fn init = (nvml_init_fn)dlsym(lib, "nvmlInit_v2");
    nvml_by_pci_fn by_pci = (nvml_by_pci_fn)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    n->shutdown = (nvml_shutdown_fn)dlsym(lib, "nvmlShutdown");
    n->mem = (nvml_mem_fn)dlsym(lib, "nvmlDeviceGetMemoryInfo");
    n->util = (nvml_util_fn)dlsym(lib, "nvmlDeviceGetUtilizationRates");
    n->temp = (nvml_temp_fn)dlsym(lib, "nvmlDeviceGetTemperature");
    if (!init || !by_pci || !n->shutdown || !n->mem || !n->util || !n->temp) goto fail;
    if (init() != 0) goto fail;
    if (by_pci(pci_bus_id, &n->dev) != 0) {
        n->shutdown();
        goto fail;
    }
    return n;
fail:
    free(n);
    dlclose(lib);
    return NULL;
}

bool nvml_read(struct nvml *n, struct nvml_health *out)
{
    nvml_memory_t mem;
    nvml_util_t util;
    unsigned temp = 0;
    memset(out, 0, sizeof *out);
    if (!n || n->mem(n->dev, &mem) != 0) return false;
    out->mem_used = mem.used;
    out->mem_total = mem.total;
    if (n->util(n->dev, &util) == 0) out->util_pct = util.gpu;
    if (n->temp(n->dev, 0 /* NVML_TEMPERATURE_GPU */, &temp) == 0) out->temp_c = temp;
    return true;
}

void nvml_close(struct nvml *n)
{
    if (!n) return;
    n->shutdown();
    dlclose(n->lib);
    free(n);
}
