/* tr16_avx512.h: the 16 x 16 transpose of 32-bit elements that the AMX
 * kernels use to move a C tile's rows into token order or to build VNNI B
 * tiles (attn_amx.c, mm_bf16_amx.inc, mm_w8a8_amx.c). Include after
 * <immintrin.h>, in a file built with AVX-512F. */
#ifndef TERN_TR16_AVX512_H
#define TERN_TR16_AVX512_H

/* out[k] = element k of every in[i]. in and out may be the same array:
 * every input is read before the first output is written. */
static inline __attribute__((always_inline)) void tr16_epi32(const __m512i in[16],
                                                             __m512i out[16])
{
    __m512i t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {   /* u[4i + q], lane L: element 4L + q of rows 4i .. 4i + 3 */
        u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int q = 0; q < 4; q++) {
        const __m512i v0 = _mm512_shuffle_i32x4(u[q], u[4 + q], 0x44);
        const __m512i v1 = _mm512_shuffle_i32x4(u[q], u[4 + q], 0xEE);
        const __m512i w0 = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0x44);
        const __m512i w1 = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0xEE);
        out[q] = _mm512_shuffle_i32x4(v0, w0, 0x88);
        out[4 + q] = _mm512_shuffle_i32x4(v0, w0, 0xDD);
        out[8 + q] = _mm512_shuffle_i32x4(v1, w1, 0x88);
        out[12 + q] = _mm512_shuffle_i32x4(v1, w1, 0xDD);
    }
}

#endif
