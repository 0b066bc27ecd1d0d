/* synth_gen: the synthetic models' weight generator (engine/model/synthetic.h
 * has the models). Every weight byte is a pure function of (seed, tensor id,
 * block index), written once here and compiled for the host (synthetic.c)
 * and the device (kernels/cuda/dequant.cu), so a synthetic model's weights
 * can be made on the GPU instead of uploaded, and both sides agree bit for bit
 * (tests/engine/backend checks it). Header-only: static inline, no state. */
#ifndef TERN_SYNTH_GEN_H
#define TERN_SYNTH_GEN_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define SYNTH_HD __host__ __device__
#else
#define SYNTH_HD
#endif

SYNTH_HD static inline uint64_t synth_mix(uint64_t z)
{
    /* splitmix64 finaliser: a counter-based generator, so any block can be
     * produced independently (and in parallel on the GPU). */
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* f32 -> IEEE half bits for the small normal values the generator makes. */
SYNTH_HD static inline uint16_t synth_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u;
    int32_t e = (int32_t)((u >> 23) & 0xff) - 127 + 15;
    uint32_t man = (u >> 13) & 0x3ffu;
    if (e <= 0) return (uint16_t)sign;           /* flush tiny values */
    if (e >= 31) return (uint16_t)(sign | 0x7bffu);
    return (uint16_t)(sign | ((uint32_t)e << 10) | man);
}

/* uniform in [-1, 1) from 24 random bits */
SYNTH_HD static inline float synth_unit(uint64_t r)
{
    return (float)(int32_t)((r >> 40) & 0xffffff) * (1.0f / 8388608.0f) - 1.0f;
}

/* Bytes of one generated block: GGML block size for quantized types, one
 * element for F32/F16/BF16. Returns 0 for types the generator does not make. */
SYNTH_HD static inline uint32_t synth_block_bytes(uint32_t type)
{
    switch (type) {
    case 0: return 4;     /* F32 */
    case 1: return 2;     /* F16 */
    case 30: return 2;    /* BF16 */
    case 2: return 18;    /* Q4_0 */
    case 3: return 20;    /* Q4_1 */
    case 6: return 22;    /* Q5_0 */
    case 7: return 24;    /* Q5_1 */
    case 8: return 34;    /* Q8_0 */
    case 12: return 144;  /* Q4_K */
    case 13: return 176;  /* Q5_K */
    case 14: return 210;  /* Q6_K */
    case 10: return 84;   /* Q2_K */
    case 11: return 110;  /* Q3_K */
    case 20: return 18;   /* IQ4_NL */
    case 23: return 136;  /* IQ4_XS */
    default: return 0;
    }
}
SYNTH_HD static inline uint32_t synth_block_elems(uint32_t type)
{
    switch (type) {
    case 0: case 1: case 30: return 1;
    case 2: case 3: case 6: case 7: case 8: case 20: return 32;
    case 10: case 11: case 12: case 13: case 14: case 23: return 256;
    default: return 0;
    }
}

/* Writes block `blk` of tensor `tid`. Norm vectors (`is_norm`) are all 1.0
 * (F32). Matrices get weights of standard deviation about 0.02, like a
 * trained model, so activations stay finite through many layers. */
SYNTH_HD static inline void synth_gen_block(uint64_t seed, uint32_t tid, uint64_t blk,
                                            uint32_t type, bool is_norm, uint8_t *out)
{
    uint64_t base = synth_mix(seed ^ ((uint64_t)tid << 44)) ^ (blk * 0x2545f4914f6cdd1dull);
    uint32_t nb = synth_block_bytes(type);
    if (is_norm && type == 0) {
        float one = 1.0f;
        memcpy(out, &one, 4);
        return;
    }
    if (type == 0 || type == 1 || type == 30) {
        float v = 0.035f * synth_unit(synth_mix(base));
        if (type == 0) {
            memcpy(out, &v, 4);
        } else if (type == 1) {
            uint16_t h = synth_f16(v);
            memcpy(out, &h, 2);
        } else {
            uint32_t u;
            memcpy(&u, &v, 4);
            uint16_t h = (uint16_t)(u >> 16);
            memcpy(out, &h, 2);
        }
        return;
    }
    for (uint32_t i = 0; i < nb; i += 8) {
        uint64_t r = synth_mix(base + i);
        uint32_t n = nb - i < 8 ? nb - i : 8;
        memcpy(out + i, &r, n);
    }
    uint64_t rs = synth_mix(base ^ 0x5bd1e995ull);
    float jitter = 1.0f + 0.25f * synth_unit(rs);
    uint16_t d, m;
    switch (type) {
    case 2: /* Q4_0: (q - 8) * d, q uniform in 0..15 (sd 4.6) */
        d = synth_f16(0.0043f * jitter);
        memcpy(out, &d, 2);
        break;
    case 3: /* Q4_1: q * d + m */
        d = synth_f16(0.0043f * jitter);
        m = synth_f16(-0.032f * jitter);
        memcpy(out, &d, 2);
        memcpy(out + 2, &m, 2);
        break;
    case 6: /* Q5_0: (q - 16) * d, q uniform in 0..31 (sd 9.2) */
        d = synth_f16(0.0022f * jitter);
        memcpy(out, &d, 2);
        break;
    case 7: /* Q5_1: q * d + m */
        d = synth_f16(0.0022f * jitter);
        m = synth_f16(-0.034f * jitter);
        memcpy(out, &d, 2);
        memcpy(out + 2, &m, 2);
        break;
    case 8: /* Q8_0: q * d, q uniform in -128..127 (sd 74) */
        d = synth_f16(0.00027f * jitter);
        memcpy(out, &d, 2);
        break;
    case 12: /* Q4_K: d * sc * q - dmin * mn, 6-bit sc/mn uniform; dmin
              * about 7.5 d keeps the mean near zero */
        d = synth_f16(0.00012f * jitter);
        m = synth_f16(0.0009f * jitter);
        memcpy(out, &d, 2);
        memcpy(out + 2, &m, 2);
        break;
    case 13: /* Q5_K: as Q4_K with q in 0..31 (mean 15.5): dmin about 15.5 d */
        d = synth_f16(0.00006f * jitter);
        m = synth_f16(0.00093f * jitter);
        memcpy(out, &d, 2);
        memcpy(out + 2, &m, 2);
        break;
    case 14: /* Q6_K: d * sc * (q - 32); sc kept in -8..7 so d stays a
              * normal half */
        for (int i = 0; i < 16; i++) out[192 + i] = (uint8_t)((int)(out[192 + i] & 15) - 8);
        d = synth_f16(0.00024f * jitter);
        memcpy(out + 208, &d, 2);
        break;
    case 10: /* Q2_K: d * sc * q - dmin * mn, q in 0..3 (mean 1.5), 4-bit
              * sc/mn uniform: dmin = 1.5 d keeps the mean near zero */
        d = synth_f16(0.0015f * jitter);
        m = synth_f16(0.00225f * jitter);
        memcpy(out + 80, &d, 2);
        memcpy(out + 82, &m, 2);
        break;
    case 11: /* Q3_K: d * (sc - 32) * q, q in -4..3; every scale's high 2
              * bits 1 or 2, so sc - 32 is in -16..15 */
        for (int i = 104; i < 108; i++)
            out[i] = (uint8_t)(((out[i] & 0x55u) << 1) | (~out[i] & 0x55u));
        d = synth_f16(0.00095f * jitter);
        memcpy(out + 108, &d, 2);
        break;
    case 20: /* IQ4_NL: d * level, levels -127..113 (rms 67) */
        d = synth_f16(0.0003f * jitter);
        memcpy(out, &d, 2);
        break;
    case 23: { /* IQ4_XS: d * (ls - 32) * level; ls - 32 kept in -8..7 (high
                * bits 1 with low 8..15, or 2 with 0..7) so d stays a normal half */
        uint16_t sh = 0;
        for (int ib = 0; ib < 8; ib++) {
            const int hb = (out[2 + ib / 4] >> (2 * (ib % 4))) & 1, sft = 4 * (ib % 2);
            uint8_t *sl = out + 4 + ib / 2;
            sh = (uint16_t)(sh | (hb ? 2u : 1u) << (2 * ib));
            *sl = (uint8_t)((*sl & ~(0xfu << sft)) | ((((*sl >> sft) & 7u) | (hb ? 0u : 8u)) << sft));
        }
        memcpy(out + 2, &sh, 2);
        d = synth_f16(0.00009f * jitter);
        memcpy(out, &d, 2);
        break;
    }
    default:
        break;
    }
}

#endif
