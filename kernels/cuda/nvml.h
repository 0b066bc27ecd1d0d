/* nvml: GPU health (memory, utilisation, temperature) from NVML, loaded with
 * dlopen("libnvidia-ml.so.1") at run time so tern neither links nor needs it. */
#ifndef TERN_NVML_H
#define TERN_NVML_H

#include <stdbool.h>
#include <stdint.h>

struct nvml;

struct nvml_health {
    uint64_t mem_used, mem_total; /* bytes */
    unsigned util_pct;            /* GPU utilisation over the last sample period */
    unsigned temp_c;
};

/* pci_bus_id as from cudaDeviceGetPCIBusId. NULL when NVML is absent or the
 * device is unknown to it (not an error: health is then simply not shown). */
struct nvml *nvml_open(const char *pci_bus_id);
bool nvml_read(struct nvml *n, struct nvml_health *out);
void nvml_close(struct nvml *n);

#endif
