/* ops: the elementwise and per-row operations of a transformer step on the
 * CPU (RMSNorm, RoPE, GELU/SiLU gating, residual adds, KV row conversion to
 * f16 / q8_0). Every function works on one row (or one token) so callers
 * can split tokens across threads; results never depend on that split. */
#ifndef TERN_OPS_H
#define TERN_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Per-ISA clones of a plain C loop (GCC ifunc). Not under TSan: its runtime
 * is not set up yet when the ifunc resolvers run at load time, and every
 * binary would crash before main. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
#define OPS_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define OPS_ISA_CLONES
#endif

/* y = x / sqrt(mean(x²) + eps) * w (w may be NULL: no weight). y may alias x. */
void ops_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);

/* RoPE angles for one position: cs[2i] = cos θ_i, cs[2i+1] = sin θ_i for
 * i < n_rot/2, θ_i = pos · freq_scale · base^(-2i/n_rot) / factors[i]
 * (factors may be NULL), computed as the reference does (float recurrence). */
void ops_rope_cache(float *cs, int32_t n_rot, int32_t pos, float base, float freq_scale,
                    const float *factors);
/* The same with YaRN (ggml's rope_yarn): angle pair i mixes the
 * interpolated freq_scale·θ and the extrapolated θ by a ramp that is 1 below
 * corr[0] and 0 above corr[1] (times ext_factor); cos and sin are scaled by
 * attn · (1 + 0.1 ln(1 / freq_scale)) where ext_factor != 0. */
void ops_rope_cache_yarn(float *cs, int32_t n_rot, int32_t pos, float base, float freq_scale,
                         const float *factors, const float corr[2], float ext_factor, float attn);
/* Rotates the first n_rot dims of each of n_heads heads (head_dim apart) in
 * place: NeoX style pairs (i, i + n_rot/2), normal style pairs (2i, 2i+1). */
void ops_rope_apply(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                    const float *cs, bool neox);

/* g[i] = silu(g[i]) * u[i]  (SwiGLU) */
void ops_swiglu(float *g, const float *u, int64_t n);
/* GELU(tanh) table over every f16 input value: the reference rounds the
 * argument to f16 and looks it up, so this matches it exactly and is fast.
 * table has 65536 floats. */
void ops_gelu_table_init(float *table);
/* g[i] = gelu(g[i]) * u[i]  (GeGLU) using the table. */
void ops_geglu(float *g, const float *u, int64_t n, const float *table);

/* y[i] += x[i] */
void ops_add(float *y, const float *x, int64_t n);
/* y[i] *= s */
void ops_scale(float *y, float s, int64_t n);

/* exp(x), relative error < 4e-7, 0-ish below -87 (inline so loops over it
 * vectorise: exp is a large share of softmax and SiLU). */
static inline float ops_expf(float x)
{
    /* exp(x) = 2^n · e^r, r in [-ln2/2, ln2/2]; degree-6 polynomial (Cephes). */
    union { float f; uint32_t u; } t, p, bias = { .f = 12582912.0f };
    x = x < -87.3f ? -87.3f : (x > 88.3f ? 88.3f : x);
    t.f = x * 1.44269504088896341f + 12582912.0f; /* round to integer via 1.5·2^23 */
    const float n = t.f - 12582912.0f;
    const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
    float q = 1.9875691500e-4f;
    q = q * r + 1.3981999507e-3f;
    q = q * r + 8.3334519073e-3f;
    q = q * r + 4.1665795894e-2f;
    q = q * r + 1.6666665459e-1f;
    q = q * r + 5.0000001201e-1f;
    p.f = q * r * r + r + 1.0f;
    p.u += (t.u - bias.u) << 23;
    return p.f;
}

/* x[i] = the f16 value nearest x[i] (round to nearest even). */
void ops_round_f16(float *x, int64_t n);

/* KV row storage formats. OPS_KV_Q4C: V rows as q5_0; its K is not stored
 * in rows but per channel over each block (attention.h, attn_kc_*). */
enum ops_kv_type { OPS_KV_F32, OPS_KV_F16, OPS_KV_Q8_0, OPS_KV_Q4_0, OPS_KV_Q4C };
/* Bytes of n elements (n a multiple of 32 for q8_0, q4_0 and q4c). */
size_t ops_kv_row_bytes(enum ops_kv_type t, int64_t n);
/* Stores n f32 values as type t at dst. */
void ops_kv_store(enum ops_kv_type t, void *dst, const float *src, int64_t n);
/* Loads n values of type t into f32. */
void ops_kv_load(enum ops_kv_type t, const void *src, float *dst, int64_t n);

#endif
