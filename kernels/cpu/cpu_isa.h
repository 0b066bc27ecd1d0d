/* cpu_isa: the SIMD level the CPU kernels run at. Detection (cpuid and the
 * OS's register-state support) and a cap from the environment, TERN_ISA =
 * scalar | avx2 | avxvnni | avx512 | amx, which runs a lower path on a CPU that has
 * a higher one: bug reports from AVX2-only machines can be reproduced on
 * AVX-512 ones, and the tests run every path on every machine. avxvnni is
 * AVX2 plus the VEX-encoded vpdpbusd on ymm (Alder Lake and later, Zen 5),
 * which some AVX-512 CPUs (Ice Lake, Zen 4) lack: cpu_isa_runs says whether
 * a level can run here; a cap of avxvnni on such a CPU gives avx2. amx is
 * AVX-512 plus Intel AMX's int8 and bf16 tiles (Sapphire Rapids and later)
 * for the prefill products; Linux faults tile instructions until the process asks
 * for them (arch_prctl ARCH_REQ_XCOMP_PERM), which detection does once. */
#ifndef TERN_CPU_ISA_H
#define TERN_CPU_ISA_H

#include <stdbool.h>
#include <stddef.h>

/* Ordered: each level may use everything of the levels below it, except
 * that AVX512 does not imply AVXVNNI (see cpu_isa_runs). */
enum cpu_isa { CPU_ISA_SCALAR = 0, CPU_ISA_AVX2 = 1, CPU_ISA_AVXVNNI = 2, CPU_ISA_AVX512 = 3,
               CPU_ISA_AMX = 4 };

/* Best ISA this CPU supports (cpuid + OS support of the register state). */
enum cpu_isa cpu_isa_detect(void);
/* Whether this CPU can run the kernels of level isa (every level up to
 * cpu_isa_detect(), AVXVNNI only where cpuid reports AVX-VNNI). */
bool cpu_isa_runs(enum cpu_isa isa);
const char *cpu_isa_name(enum cpu_isa isa);
/* "scalar", "avx2", "avxvnni", "avx512", "amx" -> *out; false for anything else. */
bool cpu_isa_parse(const char *name, enum cpu_isa *out);
/* cpu_isa_detect() capped by cap (a name as above; NULL or "" = no cap).
 * False, with *out = the detected ISA, when cap is not a valid name. */
bool cpu_isa_capped(const char *cap, enum cpu_isa *out);
/* cpu_isa_capped(getenv("TERN_ISA")), an invalid value ignored (the
 * backend reports it; tests and benchmarks just need the level). */
enum cpu_isa cpu_isa_best(void);
/* Whether AMX int8 and bf16 tiles run here; if not, why (one line into why: no AMX in
 * this CPU, the kernel does not enable its state, or the permission request
 * was refused). Asks the kernel for the tile state once per process. */
bool cpu_amx_usable(char *why, size_t whylen);
/* Whether AVX512_BF16 (vdpbf16ps, cpuid leaf 7 subleaf 1 EAX bit 5) runs
 * here, besides the AVX-512 level: Cooper Lake, Sapphire Rapids, Zen 4 have
 * it, Skylake-X and Ice Lake do not. */
bool cpu_avx512bf16(void);

#endif
