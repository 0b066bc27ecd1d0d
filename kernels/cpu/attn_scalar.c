/* attn_scalar: the attention tile kernel (attn_tile.inc) for any x86-64 or
 * other CPU; 4 lanes, each FMA through fmaf (exact: the same rounding as
 * the SIMD builds' fused instructions). */
#include <math.h>

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

#include "attn_tile.inc"
