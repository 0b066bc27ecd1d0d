/* ops: elementwise and per-row transformer operations on f32 rows, written
 * as plain loops the compiler vectorises. They are bandwidth-bound on rows
 * that sit in L1/L2, so none of them is a measurable share of a step. */
#include "ops.h"

#include <math.h>
#include <string.h>

#include "quant.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Branch-free IEEE half <-> float (round to nearest even), after the FP16
 * library by M. Dukhan; vectorisable, unlike a table or a branchy version. */
static inline float h2f(uint16_t h)
{
    const uint32_t w = (uint32_t)h << 16, sign = w & 0x80000000u, two_w = w + w;
    const float normalized = bits_f32((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    const float denormalized = bits_f32((two_w >> 17) | (126u << 23)) - 0.5f;
    const uint32_t r = two_w < (1u << 27) ? f32_bits(denormalized) : f32_bits(normalized);
    return bits_f32(sign | r);
}

static inline uint16_t f2h(float f)
{
    float base = (fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;
    const uint32_t w = f32_bits(f), shl1_w = w + w, sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = bits_f32((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = f32_bits(base);
    const uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
    return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

void ops_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    /* Sum in double as the reference does, so the order of the sum does not
     * show in the float result; 8 fixed lanes instead of one dependent chain
     * of adds, which was latency-bound (Gemma's per-head q/k norms call it
     * often). */
    double lane[8] = { 0 };
    int64_t i0 = 0;
    for (; i0 + 8 <= n; i0 += 8)
        for (int k = 0; k < 8; k++) lane[k] += (double)(x[i0 + k] * x[i0 + k]);
    double sum = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
    for (; i0 < n; i0++) sum += (double)(x[i0] * x[i0]);
    const float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
    if (w) {
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale * w[i];
    } else {
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
    }
}

void ops_rope_cache(float *cs, int32_t n_rot, int32_t pos, float base, float freq_scale,
                    const float *factors)
{
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    for (int32_t i = 0; i < n_rot / 2; i++) {
        const float ff = factors ? factors[i] : 1.0f;
        const float t = freq_scale * (theta / ff);
        cs[2 * i] = cosf(t);
        cs[2 * i + 1] = sinf(t);
        theta *= theta_scale;
    }
}

void ops_rope_cache_yarn(float *cs, int32_t n_rot, int32_t pos, float base, float freq_scale,
                         const float *factors, const float corr[2], float ext_factor, float attn)
{
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    float mscale = attn;
    if (ext_factor != 0.0f) mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale);
    float theta = (float)pos;
    for (int32_t i = 0; i < n_rot / 2; i++) {
        const float ff = factors ? factors[i] : 1.0f;
        const float extrap = theta / ff, interp = freq_scale * extrap;
        float t = interp;
        if (ext_factor != 0.0f) {
            const float y = ((float)i - corr[0]) / fmaxf(0.001f, corr[1] - corr[0]);
            const float ramp_mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * ext_factor;
            t = interp * (1.0f - ramp_mix) + extrap * ramp_mix;
        }
        cs[2 * i] = cosf(t) * mscale;
        cs[2 * i + 1] = sinf(t) * mscale;
        theta *= theta_scale;
    }
}

void ops_rope_apply(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                    const float *cs, bool neox)
{
    const int32_t half = n_rot / 2;
    for (int32_t h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * head_dim;
        if (neox) {
            for (int32_t i = 0; i < half; i++) {
                const float c = cs[2 * i], s = cs[2 * i + 1];
                const float a = v[i], b = v[i + half];
                v[i] = a * c - b * s;
                v[i + half] = a * s + b * c;
            }
        } else {
            for (int32_t i = 0; i < half; i++) {
                const float c = cs[2 * i], s = cs[2 * i + 1];
                const float a = v[2 * i], b = v[2 * i + 1];
                v[2 * i] = a * c - b * s;
                v[2 * i + 1] = a * s + b * c;
            }
        }
    }
}

/* Same operations in every clone (C11: no FMA contraction). */
OPS_ISA_CLONES
void ops_swiglu(float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        g[i] = x / (1.0f + ops_expf(-x)) * u[i];
    }
}

void ops_gelu_table_init(float *table)
{
    const float c = 0.79788456080286535588f; /* sqrt(2/pi) */
    for (uint32_t i = 0; i < 65536; i++) {
        const float x = h2f((uint16_t)i);
        const float y = 0.5f * x * (1.0f + tanhf(c * x * (1.0f + 0.044715f * x * x)));
        table[i] = h2f(f2h(y));
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The scalar loop below, 8 at a time: F16C rounds to the table index as
 * f2h does (nearest even) and a gather reads the table. The scalar f2h per
 * element showed in Gemma's prefill profile. */
__attribute__((target("avx2,f16c"))) static int64_t geglu_avx2(float *g, const float *u, int64_t n,
                                                              const float *table)
{
    const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
        __m256 y = _mm256_i32gather_ps(table, _mm256_cvtepu16_epi32(h), 4);
        y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LE_OQ));
        y = _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(y, _mm256_loadu_ps(u + i)));
    }
    return i;
}
#endif

void ops_geglu(float *g, const float *u, int64_t n, const float *table)
{
    int64_t i0 = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"))
        i0 = geglu_avx2(g, u, n, table);
#endif
    for (int64_t i = i0; i < n; i++) {
        const float x = g[i];
        float y;
        if (x <= -10.0f)
            y = 0.0f;
        else if (x >= 10.0f)
            y = x;
        else
            y = table[f2h(x)];
        g[i] = y * u[i];
    }
}

void ops_add(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

void ops_scale(float *y, float s, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] *= s;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("f16c,avx"))) static void round_f16_f16c(float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(x + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++) x[i] = h2f(f2h(x[i]));
}
#endif

void ops_round_f16(float *x, int64_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("f16c")) {
        round_f16_f16c(x, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) x[i] = h2f(f2h(x[i]));
}

size_t ops_kv_row_bytes(enum ops_kv_type t, int64_t n)
{
    switch (t) {
    case OPS_KV_F32: return (size_t)n * 4;
    case OPS_KV_F16: return (size_t)n * 2;
    case OPS_KV_Q8_0: return (size_t)(n / QK8_0) * sizeof(block_q8_0);
    case OPS_KV_Q4_0: return (size_t)(n / QK4_0) * sizeof(block_q4_0);
    case OPS_KV_Q4C: return (size_t)(n / QK5_0) * sizeof(block_q5_0);   /* its V rows */
    }
    return 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* F16C rounds to nearest even, as f2h does. */
__attribute__((target("f16c,avx"))) static int64_t store_f16_f16c(uint16_t *d, const float *s,
                                                                int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    return i;
}
#endif

void ops_kv_store(enum ops_kv_type t, void *dst, const float *src, int64_t n)
{
    if (t == OPS_KV_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (t == OPS_KV_F16) {
        uint16_t *d = dst;
        int64_t i0 = 0;
#if defined(__x86_64__) && defined(__GNUC__)
        if (n >= 8 && __builtin_cpu_supports("f16c")) i0 = store_f16_f16c(d, src, n);
#endif
        for (int64_t i = i0; i < n; i++) d[i] = f2h(src[i]);
    } else if (t == OPS_KV_Q8_0) {
        quant_row_q8_0(src, dst, n);
    } else if (t == OPS_KV_Q4C) {
        quant_row_q5_0(src, dst, n);   /* the reference's quantize_row_q5_0_ref */
    } else {
        quant_row_q4_0(src, dst, n);   /* the reference's quantize_row_q4_0_ref */
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* F16C converts 8 halves per instruction: this load is most of attention's
 * time at long contexts (every K and V row is read once per query tile). */
__attribute__((target("f16c,avx"))) static void load_f16_f16c(const uint16_t *s, float *d,
                                                               int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++) d[i] = h2f(s[i]);
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
/* q8_0 and q4_0 blocks, 8 values per instruction: d · q is exact in f32 (an
 * 11-bit f16 mantissa times an integer of at most 8 bits), so these give
 * the scalar loop's bits. A tile dequantizes every K and V block it reads
 * (attn_tile.inc): most of a quantized cache's decode time. */
__attribute__((target("avx2"))) static void load_q8_0_avx2(const block_q8_0 *b, float *dst,
                                                            int64_t nb)
{
    for (int64_t j = 0; j < nb; j++) {
        const __m256 d = _mm256_set1_ps(h2f(b[j].d));
        for (int k = 0; k < QK8_0; k += 8) {
            const __m128i q = _mm_loadl_epi64((const __m128i *)(b[j].qs + k));
            _mm256_storeu_ps(dst + j * QK8_0 + k,
                             _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
        }
    }
}

/* 32 signed bytes (two halves of 16) times d into o[0..31]. */
__attribute__((target("avx2"))) static inline void store_i8x32(float *o, const __m128i half[2],
                                                                __m256 d)
{
    for (int h = 0; h < 2; h++) {
        _mm256_storeu_ps(o + 16 * h,
                         _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(half[h]))));
        _mm256_storeu_ps(o + 16 * h + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                                                              _mm_srli_si128(half[h], 8)))));
    }
}

__attribute__((target("avx2"))) static void load_q4_0_avx2(const block_q4_0 *b, float *dst,
                                                            int64_t nb)
{
    const __m128i lo4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    for (int64_t j = 0; j < nb; j++) {
        const __m256 d = _mm256_set1_ps(h2f(b[j].d));
        const __m128i q = _mm_loadu_si128((const __m128i *)b[j].qs);
        /* low nibbles: values 0-15, high nibbles: 16-31 (ggml's layout) */
        const __m128i half[2] = { _mm_sub_epi8(_mm_and_si128(q, lo4), eight),
                                  _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), lo4), eight) };
        store_i8x32(dst + j * QK4_0, half, d);
    }
}

/* q5_0 (q4c's V rows): q4_0's nibbles with the fifth bits of qh spread to
 * bytes (bit k of qh to byte k: each byte of qh broadcast to 8 bytes, and
 * the byte's own bit tested) and 16 subtracted. */
__attribute__((target("avx2"))) static void load_q5_0_avx2(const block_q5_0 *b, float *dst,
                                                            int64_t nb)
{
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                            2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
    const __m128i lo4 = _mm_set1_epi8(0x0F);
    for (int64_t j = 0; j < nb; j++) {
        const __m256 d = _mm256_set1_ps(h2f(b[j].d));
        uint32_t qh;
        memcpy(&qh, b[j].qh, sizeof qh);
        const __m256i sel = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), spread);
        const __m256i h16 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(sel, bit), bit),
                                             _mm256_set1_epi8(16));
        const __m128i q = _mm_loadu_si128((const __m128i *)b[j].qs);
        const __m256i u = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), lo4),
                                           _mm_and_si128(q, lo4));
        const __m256i x = _mm256_sub_epi8(_mm256_or_si256(u, h16), _mm256_set1_epi8(16));
        const __m128i half[2] = { _mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1) };
        store_i8x32(dst + j * QK5_0, half, d);
    }
}
#endif

void ops_kv_load(enum ops_kv_type t, const void *src, float *dst, int64_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if ((t == OPS_KV_Q8_0 || t == OPS_KV_Q4_0 || t == OPS_KV_Q4C) &&
        __builtin_cpu_supports("avx2")) {
        if (t == OPS_KV_Q8_0) load_q8_0_avx2(src, dst, n / QK8_0);
        else if (t == OPS_KV_Q4C) load_q5_0_avx2(src, dst, n / QK5_0);
        else load_q4_0_avx2(src, dst, n / QK4_0);
        return;
    }
#endif
    if (t == OPS_KV_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (t == OPS_KV_F16) {
        const uint16_t *s = src;
#if defined(__x86_64__) && defined(__GNUC__)
        if (__builtin_cpu_supports("f16c")) {
            load_f16_f16c(s, dst, n);
            return;
        }
#endif
        for (int64_t i = 0; i < n; i++) dst[i] = h2f(s[i]);
    } else if (t == OPS_KV_Q8_0) {
        const block_q8_0 *b = src;
        for (int64_t j = 0; j < n / QK8_0; j++) {
            const float d = h2f(b[j].d);
            for (int k = 0; k < QK8_0; k++) dst[j * QK8_0 + k] = d * (float)b[j].qs[k];
        }
    } else if (t == OPS_KV_Q4C) {
        /* q5_0: q4_0's nibbles, element k's fifth bit in bit k of qh, biased
         * by 16; d · (q - 16) is exact in f32 as q4_0's is */
        const block_q5_0 *b = src;
        for (int64_t j = 0; j < n / QK5_0; j++) {
            const float d = h2f(b[j].d);
            uint32_t qh;
            memcpy(&qh, b[j].qh, sizeof qh);
            for (int k = 0; k < QK5_0 / 2; k++) {
                const int lo = (b[j].qs[k] & 0x0F) | (int)(qh >> k & 1) << 4;
                const int hi = (b[j].qs[k] >> 4) | (int)(qh >> (k + 16) & 1) << 4;
                dst[j * QK5_0 + k] = d * (float)(lo - 16);
                dst[j * QK5_0 + k + QK5_0 / 2] = d * (float)(hi - 16);
            }
        }
    } else {
        /* ggml's layout: byte k holds element k (low nibble) and k + 16
         * (high), each biased by 8; d · (q - 8) is exact in f32 (a 4-bit
         * integer times an f16), so every ISA reads the same values. */
        const block_q4_0 *b = src;
        for (int64_t j = 0; j < n / QK4_0; j++) {
            const float d = h2f(b[j].d);
            for (int k = 0; k < QK4_0 / 2; k++) {
                dst[j * QK4_0 + k] = d * (float)((b[j].qs[k] & 0x0F) - 8);
                dst[j * QK4_0 + k + QK4_0 / 2] = d * (float)((b[j].qs[k] >> 4) - 8);
            }
        }
    }
}
