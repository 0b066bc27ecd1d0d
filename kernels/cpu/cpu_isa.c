/* cpu_isa: which SIMD path this CPU can run, from cpuid (the instructions)
 * and xgetbv (whether the OS saves the wider registers on context switch). */
#include "cpu/matmul.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
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
    if (f && dq && bw && vl && vnni && zmm_state) return CPU_ISA_AVX512;
    return CPU_ISA_AVX2;
}
#else
enum cpu_isa cpu_isa_detect(void)
{
    return CPU_ISA_SCALAR;
}
#endif

const char *cpu_isa_name(enum cpu_isa isa)
{
    switch (isa) {
    case CPU_ISA_SCALAR: return "scalar";
    case CPU_ISA_AVX2: return "avx2";
    case CPU_ISA_AVX512: return "avx512";
    }
    return "unknown";
}
