/* cpu_isa: which SIMD path this CPU can run, from cpuid (the instructions)
 * and xgetbv (whether the OS saves the wider registers on context switch). */
#include "cpu/cpu_isa.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

/* AVX-VNNI: CPUID.(EAX=7, ECX=1):EAX bit 4 (the ymm state is checked by
 * the caller, as for AVX2). */
static bool has_avxvnni(void)
{
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
}

/* AMX-TILE, AMX-INT8 and AMX-BF16 in cpuid (every AMX CPU so far has all
 * three; the level uses int8 and bf16 tiles), the tile state in XCR0 (bits 17-18), and
 * the process's permission to use it (Linux 5.16 and later grant it on
 * request; the request is idempotent, so asking every time is harmless). */
bool cpu_amx_usable(char *why, size_t whylen)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) { /* xgetbv needs OSXSAVE */
        if (why) snprintf(why, whylen, "this CPU has no AMX int8 and bf16 tiles");
        return false;
    }
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25)) ||
        !(d & (1u << 22))) {
        if (why) snprintf(why, whylen, "this CPU has no AMX int8 and bf16 tiles");
        return false;
    }
    if ((xgetbv0() & 0x60000) != 0x60000) {
        if (why) snprintf(why, whylen, "the kernel does not enable the AMX tile state (XCR0)");
        return false;
    }
#if defined(__linux__) && defined(SYS_arch_prctl)
    /* ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18) */
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
        if (why) snprintf(why, whylen, "the kernel refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM)");
        return false;
    }
    if (why && whylen) why[0] = 0;
    return true;
#else
    if (why) snprintf(why, whylen, "AMX tiles are only asked for on Linux");
    return false;
#endif
}

bool cpu_avx512bf16(void)
{
    unsigned a, b, c, d;
    return cpu_isa_detect() >= CPU_ISA_AVX512 && __get_cpuid_count(7, 1, &a, &b, &c, &d) &&
           (a & (1u << 5));
}

enum cpu_isa cpu_isa_detect(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return CPU_ISA_SCALAR;
    bool osxsave = c & (1u << 27), avx = c & (1u << 28);
    bool fma = c & (1u << 12), f16c = c & (1u << 29);
    if (!osxsave || !avx || !fma || !f16c) return CPU_ISA_SCALAR;
    uint64_t xcr0 = xgetbv0();
    if ((xcr0 & 0x6) != 0x6) return CPU_ISA_SCALAR;   /* XMM + YMM state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return CPU_ISA_SCALAR;
    bool avx2 = b & (1u << 5);
    if (!avx2) return CPU_ISA_SCALAR;
    bool f = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30), vl = b & (1u << 31);
    bool vnni = c & (1u << 11);
    bool zmm_state = (xcr0 & 0xE0) == 0xE0;           /* opmask + ZMM state */
    if (f && dq && bw && vl && vnni && zmm_state) return cpu_amx_usable(NULL, 0) ? CPU_ISA_AMX : CPU_ISA_AVX512;
    return has_avxvnni() ? CPU_ISA_AVXVNNI : CPU_ISA_AVX2;
}

bool cpu_isa_runs(enum cpu_isa isa)
{
    enum cpu_isa best = cpu_isa_detect();
    if (isa > best) return false;
    return isa != CPU_ISA_AVXVNNI || best == CPU_ISA_AVXVNNI || has_avxvnni();
}
#else
enum cpu_isa cpu_isa_detect(void)
{
    return CPU_ISA_SCALAR;
}

bool cpu_isa_runs(enum cpu_isa isa)
{
    return isa == CPU_ISA_SCALAR;
}

bool cpu_amx_usable(char *why, size_t whylen)
{
    if (why) snprintf(why, whylen, "not an x86-64 CPU");
    return false;
}

bool cpu_avx512bf16(void)
{
    return false;
}
#endif

const char *cpu_isa_name(enum cpu_isa isa)
{
    switch (isa) {
    case CPU_ISA_SCALAR: return "scalar";
    case CPU_ISA_AVX2: return "avx2";
    case CPU_ISA_AVXVNNI: return "avxvnni";
    case CPU_ISA_AVX512: return "avx512";
    case CPU_ISA_AMX: return "amx";
    }
    return "unknown";
}

bool cpu_isa_parse(const char *name, enum cpu_isa *out)
{
    static const enum cpu_isa all[] = { CPU_ISA_SCALAR, CPU_ISA_AVX2, CPU_ISA_AVXVNNI,
                                         CPU_ISA_AVX512, CPU_ISA_AMX };
    for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(name, cpu_isa_name(all[i])) == 0) {
            *out = all[i];
            return true;
        }
    }
    return false;
}

bool cpu_isa_capped(const char *cap, enum cpu_isa *out)
{
    *out = cpu_isa_detect();
    if (!cap || !cap[0]) return true;
    enum cpu_isa c;
    if (!cpu_isa_parse(cap, &c)) return false;
    if (c < *out) *out = c;
    if (!cpu_isa_runs(*out)) *out = CPU_ISA_AVX2;   /* avxvnni on an AVX-512 CPU without it */
    return true;
}

enum cpu_isa cpu_isa_best(void)
{
    enum cpu_isa isa;
    cpu_isa_capped(getenv("TERN_ISA"), &isa);
    return isa;
}
