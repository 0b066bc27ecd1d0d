/* attn_scalar: the attention tile kernel (attn_tile.inc) for any x86-64 or
 * other CPU; 4 lanes, each FMA through fmaf (exact: the same rounding as
 * the SIMD builds' fused instructions). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ops.h"

#define VW 4
#define QKN 2   /* query rows per QK pass: QKN x 16/VW accumulators */
#define PVN 2   /* rows per PV pass: PVN x 4 accumulators */
#define ATTN_PREFIX(name) attn_scalar_##name

typedef float vf4 __attribute__((vector_size(16)));

static inline __attribute__((always_inline)) vf4 vfma(vf4 a, vf4 b, vf4 c)
{
    vf4 r;
    for (int i = 0; i < 4; i++) r[i] = fmaf(a[i], b[i], c[i]);
    return r;
}

static inline __attribute__((always_inline)) vf4 splat(float x)
{
    return (vf4){ x, x, x, x };
}

/* a > b ? a : b and a < b ? a : b per lane, as maxps / minps. */
static inline __attribute__((always_inline)) vf4 vmaxv(vf4 a, vf4 b)
{
    vf4 r;
    for (int i = 0; i < 4; i++) r[i] = a[i] > b[i] ? a[i] : b[i];
    return r;
}

static inline __attribute__((always_inline)) vf4 vminv(vf4 a, vf4 b)
{
    vf4 r;
    for (int i = 0; i < 4; i++) r[i] = a[i] < b[i] ? a[i] : b[i];
    return r;
}

/* f16 bits to f32, exact (as vcvtph2ps; NaN payloads kept, quieted). */
static inline float h2f_exact(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t bits;
    if (e == 0) {
        const float f = (float)m * 0x1p-24f;   /* zero or subnormal: exact */
        memcpy(&bits, &f, sizeof bits);
        bits |= sign;
    } else if (e == 31) {
        bits = sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u);
    } else {
        bits = sign | ((e + 112u) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline __attribute__((always_inline)) vf4 cvt16(const uint16_t *p)
{
    return (vf4){ h2f_exact(p[0]), h2f_exact(p[1]), h2f_exact(p[2]), h2f_exact(p[3]) };
}

/* x rounded to f16 and back (ops_round_f16). */
static inline __attribute__((always_inline)) vf4 rnd16(vf4 x)
{
    float f[4];
    memcpy(f, &x, sizeof f);
    ops_round_f16(f, 4);
    memcpy(&x, f, sizeof f);
    return x;
}

/* *acc (4 doubles) += four floats as doubles. */
static inline __attribute__((always_inline)) void add4pd(void *acc, const float *p)
{
    double a[4];
    memcpy(a, acc, sizeof a);
    for (int i = 0; i < 4; i++) a[i] += (double)p[i];
    memcpy(acc, a, sizeof a);
}

#include "attn_tile.inc"
