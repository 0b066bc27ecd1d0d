/* matmul: the dispatcher. Picks the kernel for (ISA, weight type), quantizes
 * the activations once per call, and splits output rows across the thread
 * pool. The arithmetic lives in mm_scalar.c / mm_avx2.c / mm_avx512.c. */
#include "cpu/matmul.h"

#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/mm_impl.h"
#include "cpu/threadpool.h"

/* Rows are handed out in chunks of a multiple of this, so every kernel call
 * runs whole 8-row tiles. */
#define MM_ROW_ALIGN 8
/* Chunks per thread. Each thread claims the chunks of its own contiguous
 * share first, then steals what is left of the others' shares, so a thread
 * that the OS preempts (a shared machine) delays only its current chunk. */
#define MM_CHUNKS_PER_THREAD 4
/* Prefill (n ≥ MM_FINE_N): finer chunks, in whole 16-row tiles (the
 * AVX-512 kernels' width). A chunk of a 512-token QKV or FFN op is then
 * about 0.25 ms of one thread instead of 1 ms, so the last chunk another
 * thread is still running when one runs out of work (a preempted thread on
 * a shared machine, or the ops' uneven ends) idles the other for a quarter
 * of it; more claims cost nothing measurable at this size. */
#define MM_FINE_N 64
#define MM_FINE_CHUNKS_PER_THREAD 16
#define MM_FINE_ROW_ALIGN 16
#define MM_MAX_OPS 8
/* From this many tokens on, quantizing x is itself split across threads. */
#define MM_PAR_QUANT_MIN_N 8

bool mm_supported(uint32_t wtype)
{
    return mm_scalar_kernel(wtype) != NULL;
}

void mm_scratch_free(struct mm_scratch *s)
{
    if (!s) return;
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
    free(s->xb);
    s->xb = NULL;
    s->xb_cap = 0;
    free(s->x8);
    s->x8 = NULL;
    s->x8_cap = 0;
    free(s->w8);
    s->w8 = NULL;
    s->w8_cap = 0;
}

/* The int8 tiles of x and the per-token scales after them (W8A8): NULL
 * when out of memory (the exact path runs then). */
static int8_t *x8_reserve(struct mm_scratch *s, int64_t n, int64_t cols, float **sx)
{
    const size_t tiles = mm_w8a8_x_bytes(n, cols);
    const size_t need = tiles + mm_w8a8_sx_count(n, cols) * sizeof(float);
    if (s->x8_cap < need) {
        free(s->x8);
        s->x8 = aligned_alloc(64, (need + 63) & ~(size_t)63);
        s->x8_cap = s->x8 ? need : 0;
    }
    *sx = s->x8 ? (float *)((uint8_t *)s->x8 + tiles) : NULL;
    return s->x8;
}

/* W8A8: nth per-thread areas of `each` bytes (a multiple of 64), grown
 * only, so a call allocates nothing after the first; NULL when out of memory. */
static uint8_t *w8_reserve(struct mm_scratch *s, int nth, size_t each)
{
    const size_t need = (size_t)nth * each;
    if (s->w8_cap < need) {
        free(s->w8);
        s->w8 = aligned_alloc(64, need);
        s->w8_cap = s->w8 ? need : 0;
    }
    return s->w8;
}

/* x as bf16 for the AMX-BF16 or vdpbf16ps kernels: NULL when out of memory
 * (the kernels then take the f32 path). */
static uint16_t *xb_reserve(struct mm_scratch *s, int64_t n, int64_t cols)
{
    const size_t need = mm_bf16_x_bytes(n, cols);
    if (s->xb_cap < need) {
        free(s->xb);
        s->xb = aligned_alloc(64, (need + 63) & ~(size_t)63);
        s->xb_cap = s->xb ? need : 0;
    }
    return s->xb;
}

/* Bytes per weight row; 0 for types without a kernel. */
static size_t row_bytes(uint32_t wtype, int64_t cols)
{
    switch (wtype & ~MM_PACKED) {   /* packed: the same bytes, reordered */
    case QT_F32: return (size_t)cols * 4;
    case QT_F16: case QT_BF16: return (size_t)cols * 2;
    case QT_Q8_0: return (size_t)cols / 32 * sizeof(block_q8_0);
    case QT_Q4_0: return (size_t)cols / 32 * sizeof(block_q4_0);
    case QT_Q4_1: return (size_t)cols / 32 * sizeof(block_q4_1);
    case QT_Q5_0: return (size_t)cols / 32 * sizeof(block_q5_0);
    case QT_Q5_1: return (size_t)cols / 32 * sizeof(block_q5_1);
    case QT_Q4_K: return (size_t)cols / QK_K * sizeof(block_q4_K);
    case QT_Q5_K: return (size_t)cols / QK_K * sizeof(block_q5_K);
    case QT_Q6_K: return (size_t)cols / QK_K * sizeof(block_q6_K);
    case QT_Q2_K: case QT_Q3_K: case QT_IQ4_NL: case QT_IQ4_XS:   /* mm_lowbit.c */
        return qtype_row_bytes(wtype, (uint64_t)cols);
    default: return 0;
    }
}


size_t mm_pack_size(enum cpu_isa isa, uint32_t wtype, int64_t rows, int64_t cols)
{
    if (isa == CPU_ISA_SCALAR || rows <= 0 || rows % 8 != 0 || cols <= 0 || cols % 32 != 0)
        return 0;
    if (wtype == QT_Q4_K || wtype == QT_Q5_K || wtype == QT_Q6_K) {
        if (cols % QK_K != 0) return 0;
    } else if (wtype != QT_Q4_0 && wtype != QT_Q4_1 && wtype != QT_Q5_0 && wtype != QT_Q5_1 &&
               wtype != QT_Q8_0) {
        return 0;
    }
#ifndef __x86_64__
    return 0;   /* the packed kernels are x86-64 SIMD */
#endif
    if (wtype == QT_Q4_K || wtype == QT_Q5_K || wtype == QT_Q6_K)
        return (size_t)(rows / 8) * (size_t)(cols / QK_K) * mm_pk_super_bytes(wtype);
    return row_bytes(wtype, cols) * (size_t)rows;
}

/* Q6_K element e (0..255) of a plain super-block as its 6-bit code: halves
 * of 128, in each the low nibbles of elements l and l + 64 share ql[l'] and
 * four elements 32 apart share a qh byte. */
static int q6k_code(const block_q6_K *w, int e)
{
    const int h = e / 128, k = e % 128 / 32, j = e % 32;
    const int lo = w->ql[64 * h + 32 * (k & 1) + j] >> (4 * (k >> 1)) & 0xF;
    const int hi = w->qh[32 * h + j] >> (2 * k) & 3;
    return lo | hi << 4;
}

static void q6k_set_code(block_q6_K *w, int e, int code)
{
    const int h = e / 128, k = e % 128 / 32, j = e % 32;
    w->ql[64 * h + 32 * (k & 1) + j] |= (uint8_t)((code & 0xF) << (4 * (k >> 1)));
    w->qh[32 * h + j] |= (uint8_t)((code >> 4) << (2 * k));
}

/* Q6_K, one super-block of 8 rows: f16 d[8], then per block b of 32
 * columns (208 bytes):
 *   i8 sc[half][row] (16)           the sub-block scales of elements 0-15 / 16-31
 *   u8 V[3][group 2][32]            the 6-bit codes of 8 vectors W[v] (v = 2p + a:
 *                                   pair p, rows p | p + 4 in the two 16-byte
 *                                   halves), 4 vectors per group g = p / 2: W[4g],
 *                                   W[4g+1], W[4g+2] in bits 0-5 of V[0..2][g],
 *                                   W[4g+3] in their bits 6-7 (bits 2k-2k+1 in V[k][g])
 * In W[2p + a], dword j of a row's 16 bytes holds elements 8a + 4·(j / 2) +
 * 16·(j % 2) .. + 3: the dwords alternate between the two halves (scales),
 * so one dword of both activation halves meets them (tile_pq6). Decoding is
 * 9 bit operations per 4 vectors (pq6_codes in mm_decode.inc). */
static size_t q6k_at(int i, int k, int *w)   /* row i, element k: byte in its W, and W's index */
{
    const int h = k / 16, r = k % 16, a = r / 8, j = 2 * (r % 8 / 4) + h;
    *w = 2 * (i % 4) + a;
    return (size_t)(16 * (i / 4) + 4 * j + k % 4);
}

static void pack_q6k(const block_q6_K *const blk[8], uint8_t *dst)
{
    for (int i = 0; i < 8; i++) memcpy(dst + 2 * i, &blk[i]->d, 2);
    for (int b = 0; b < 8; b++) {
        uint8_t *o = dst + 16 + MM_PK_Q6K_BLOCK * b;
        memset(o, 0, MM_PK_Q6K_BLOCK);
        for (int i = 0; i < 8; i++) {
            o[i] = (uint8_t)blk[i]->scales[2 * b];
            o[8 + i] = (uint8_t)blk[i]->scales[2 * b + 1];
            for (int k = 0; k < 32; k++) {
                int w;
                const size_t at = q6k_at(i, k, &w);
                const int code = q6k_code(blk[i], 32 * b + k);
                uint8_t *v = o + 16 + 32 * (w / 4);
                if (w % 4 < 3) v[64 * (w % 4) + at] |= (uint8_t)code;
                else
                    for (int c = 0; c < 3; c++) v[64 * c + at] |= (uint8_t)((code >> 2 * c & 3) << 6);
            }
        }
    }
}

/* Inverse of pack_q6k for row i. */
static void unpack_q6k(const uint8_t *src, int i, block_q6_K *blk)
{
    memset(blk, 0, sizeof *blk);
    memcpy(&blk->d, src + 2 * i, 2);
    for (int b = 0; b < 8; b++) {
        const uint8_t *o = src + 16 + MM_PK_Q6K_BLOCK * b;
        blk->scales[2 * b] = (int8_t)o[i];
        blk->scales[2 * b + 1] = (int8_t)o[8 + i];
        for (int k = 0; k < 32; k++) {
            int w, code = 0;
            const size_t at = q6k_at(i, k, &w);
            const uint8_t *v = o + 16 + 32 * (w / 4);
            if (w % 4 < 3) code = v[64 * (w % 4) + at] & 63;
            else
                for (int c = 0; c < 3; c++) code |= (v[64 * c + at] >> 6) << 2 * c;
            q6k_set_code(blk, 32 * b + k, code);
        }
    }
}

/* Q4_K, one super-block of 8 rows: f16 d[8], f16 dmin[8], u8 sc[sub-block][row] (64),
 * u8 m[sub-block][row] (64), then for each sub-block pair c (the plain
 * layout's qs[32c .. 32c+31]: low nibbles sub-block 2c, high 2c+1) and
 * pair p: row p bytes 0-15, row p+4 bytes 0-15, row p bytes 16-31, row p+4
 * bytes 16-31. Scales are widened so the kernel needs no 6-bit decoding.
 * Q5_K: the same, with the fifth bits between the scales and the quants
 * (MM_PK_Q5K_H): per sub-block sb and pair p two u32, h0 = bits of elements
 * 0-15 of row p | of row p+4 << 16, h1 = the same for elements 16-31, as
 * the packed Q5_0 keeps them. Q4_K and Q5_K blocks share d, dmin and the
 * 12 scale bytes at the same offsets. */
static void pack_k4(uint32_t wtype, const uint8_t *const blk[8], uint8_t *dst)
{
    const bool q5 = wtype == QT_Q5_K;
    const size_t qs_off = q5 ? offsetof(block_q5_K, qs) : offsetof(block_q4_K, qs);
    const size_t scales_off = offsetof(block_q4_K, scales);
    for (int i = 0; i < 8; i++) {
        memcpy(dst + 2 * i, blk[i], 2);                       /* d */
        memcpy(dst + 16 + 2 * i, blk[i] + 2, 2);              /* dmin */
        for (int sb = 0; sb < 8; sb++) {
            int sc, m;
            mm_k4_scale_min(sb, blk[i] + scales_off, &sc, &m);
            dst[32 + 8 * sb + i] = (uint8_t)sc;
            dst[96 + 8 * sb + i] = (uint8_t)m;
        }
    }
    uint8_t *q = dst + (q5 ? MM_PK_Q5K_Q : MM_PK_K4_Q);
    for (int c = 0; c < 4; c++)
        for (int p = 0; p < 4; p++) {
            uint8_t *o = q + 256 * c + 64 * p;
            memcpy(o, blk[p] + qs_off + 32 * c, 16);
            memcpy(o + 16, blk[p + 4] + qs_off + 32 * c, 16);
            memcpy(o + 32, blk[p] + qs_off + 32 * c + 16, 16);
            memcpy(o + 48, blk[p + 4] + qs_off + 32 * c + 16, 16);
        }
    if (!q5) return;
    for (int sb = 0; sb < 8; sb++)
        for (int p = 0; p < 4; p++) {
            const uint8_t *ha = blk[p] + offsetof(block_q5_K, qh);
            const uint8_t *hc = blk[p + 4] + offsetof(block_q5_K, qh);
            uint32_t h0 = 0, h1 = 0;
            for (int j = 0; j < 16; j++) {
                h0 |= (uint32_t)(ha[j] >> sb & 1) << j | (uint32_t)(hc[j] >> sb & 1) << (16 + j);
                h1 |= (uint32_t)(ha[16 + j] >> sb & 1) << j | (uint32_t)(hc[16 + j] >> sb & 1) << (16 + j);
            }
            memcpy(dst + MM_PK_Q5K_H + 32 * sb + 8 * p, &h0, 4);
            memcpy(dst + MM_PK_Q5K_H + 32 * sb + 8 * p + 4, &h1, 4);
        }
}

/* Inverse of pack_k4 for row i: the 6-bit scales are packed back exactly
 * (all 96 bits of the 12 bytes carry scale bits). */
static void unpack_k4(uint32_t wtype, const uint8_t *src, int i, uint8_t *blk)
{
    const bool q5 = wtype == QT_Q5_K;
    const size_t qs_off = q5 ? offsetof(block_q5_K, qs) : offsetof(block_q4_K, qs);
    uint8_t *scales = blk + offsetof(block_q4_K, scales);
    memcpy(blk, src + 2 * i, 2);
    memcpy(blk + 2, src + 16 + 2 * i, 2);
    uint8_t sc[8], m[8];
    for (int sb = 0; sb < 8; sb++) {
        sc[sb] = src[32 + 8 * sb + i];
        m[sb] = src[96 + 8 * sb + i];
    }
    for (int k = 0; k < 4; k++) {
        scales[k] = (uint8_t)(sc[k] | (sc[k + 4] >> 4) << 6);
        scales[k + 4] = (uint8_t)(m[k] | (m[k + 4] >> 4) << 6);
        scales[k + 8] = (uint8_t)((sc[k + 4] & 0xF) | (m[k + 4] & 0xF) << 4);
    }
    const int p = i % 4, second = i / 4;
    const uint8_t *q = src + (q5 ? MM_PK_Q5K_Q : MM_PK_K4_Q);
    for (int c = 0; c < 4; c++) {
        const uint8_t *o = q + 256 * c + 64 * p;
        memcpy(blk + qs_off + 32 * c, o + 16 * second, 16);
        memcpy(blk + qs_off + 32 * c + 16, o + 32 + 16 * second, 16);
    }
    if (!q5) return;
    uint8_t *qh = blk + offsetof(block_q5_K, qh);
    memset(qh, 0, QK_K / 8);
    for (int sb = 0; sb < 8; sb++) {
        uint32_t h0, h1;
        memcpy(&h0, src + MM_PK_Q5K_H + 32 * sb + 8 * p, 4);
        memcpy(&h1, src + MM_PK_Q5K_H + 32 * sb + 8 * p + 4, 4);
        for (int j = 0; j < 16; j++) {
            qh[j] |= (uint8_t)((h0 >> (16 * second + j) & 1) << sb);
            qh[16 + j] |= (uint8_t)((h1 >> (16 * second + j) & 1) << sb);
        }
    }
}

/* Where the fields of a plain block of a packable type sit. */
struct plain_block {
    bool q5, has_m;          /* fifth bits (Q5_0, Q5_1); a min (Q4_1, Q5_1) */
    size_t qs_off, qh_off;   /* quants; fifth bits */
};

static struct plain_block plain_block_of(uint32_t wtype)
{
    struct plain_block pb = { wtype == QT_Q5_0 || wtype == QT_Q5_1,
                              wtype == QT_Q4_1 || wtype == QT_Q5_1, offsetof(block_q8_0, qs),
                              wtype == QT_Q5_0 ? offsetof(block_q5_0, qh) : offsetof(block_q5_1, qh) };
    if (wtype == QT_Q4_0) pb.qs_off = offsetof(block_q4_0, qs);
    else if (wtype == QT_Q4_1) pb.qs_off = offsetof(block_q4_1, qs);
    else if (wtype == QT_Q5_0) pb.qs_off = offsetof(block_q5_0, qs);
    else if (wtype == QT_Q5_1) pb.qs_off = offsetof(block_q5_1, qs);
    return pb;
}

/* Packed layout of one 8-row tile, per block of 32 columns (the bytes of
 * the 8 plain blocks, reordered):
 *   f16 d[8], in row order
 *   f16 m[8]                       Q4_1, Q5_1
 *   u32 h[8]: fifth bits, pair p:  Q5_0, Q5_1
 *         h[2p] = bits 0-15 of row p | bits 0-15 of row p+4 << 16,
 *         h[2p+1] = bits 16-31 of row p | bits 16-31 of row p+4 << 16
 *   quants, pair p = rows p and p+4 side by side, 32 bytes per half:
 *     4-bit types: row p's 16 bytes, then row p+4's (low nibbles = elements
 *                  0-15, high = 16-31, as in the plain block)
 *     Q8_0:        row p bytes 0-15, row p+4 bytes 0-15, then bytes 16-31 of each
 * so one 32-byte vector holds 16 elements of two rows and the kernel's hadd
 * reduction yields the 8 rows in order. */
static void pack_block(uint32_t wtype, const uint8_t *const blk[8], uint8_t *dst)
{
    const struct plain_block pb = plain_block_of(wtype);
    const bool q5 = pb.q5, has_m = pb.has_m;
    const size_t qs_off = pb.qs_off, qh_off = pb.qh_off;
    for (int i = 0; i < 8; i++) {
        memcpy(dst + 2 * i, blk[i], 2);                        /* d is every type's first field */
        if (has_m) memcpy(dst + 16 + 2 * i, blk[i] + 2, 2);   /* m follows d */
    }
    uint8_t *q = dst + 16 + (has_m ? 16 : 0);
    if (q5) {
        for (int p = 0; p < 4; p++) {
            uint32_t a, c;
            memcpy(&a, blk[p] + qh_off, 4);
            memcpy(&c, blk[p + 4] + qh_off, 4);
            uint32_t h0 = (a & 0xFFFFu) | (c << 16), h1 = (a >> 16) | (c & 0xFFFF0000u);
            memcpy(q + 8 * p, &h0, 4);
            memcpy(q + 8 * p + 4, &h1, 4);
        }
        q += 32;
    }
    for (int p = 0; p < 4; p++) {
        const uint8_t *a = blk[p] + qs_off, *c = blk[p + 4] + qs_off;
        if (wtype == QT_Q8_0) {
            memcpy(q + 64 * p, a, 16);
            memcpy(q + 64 * p + 16, c, 16);
            memcpy(q + 64 * p + 32, a + 16, 16);
            memcpy(q + 64 * p + 48, c + 16, 16);
        } else {
            memcpy(q + 32 * p, a, 16);
            memcpy(q + 32 * p + 16, c, 16);
        }
    }
}

uint32_t mm_pack(enum cpu_isa isa, uint32_t wtype, const void *w, int64_t rows, int64_t cols,
                 void *out)
{
    if (!mm_pack_size(isa, wtype, rows, cols)) return 0;
    const int64_t nb = cols / 32;
    const size_t rb = row_bytes(wtype, cols), bb = rb / (size_t)nb;   /* row, block bytes */
    const uint8_t *src = w;
    uint8_t *dst = out;
    if (wtype == QT_Q4_K || wtype == QT_Q5_K || wtype == QT_Q6_K) {   /* per 256-column super-block */
        const size_t sup = mm_pk_super_bytes(wtype);
        const size_t sbb = rb / (size_t)(cols / QK_K);   /* plain super-block bytes */
        for (int64_t t = 0; t < rows / 8; t++)
            for (int64_t S = 0; S < cols / QK_K; S++, dst += sup) {
                const uint8_t *blk[8];
                for (int i = 0; i < 8; i++) blk[i] = src + (size_t)(8 * t + i) * rb + (size_t)S * sbb;
                if (wtype == QT_Q6_K) pack_q6k((const block_q6_K *const *)blk, dst);
                else pack_k4(wtype, blk, dst);
            }
        return wtype | MM_PACKED;
    }
    for (int64_t t = 0; t < rows / 8; t++) {
        for (int64_t b = 0; b < nb; b++, dst += 8 * bb) {
            const uint8_t *blk[8];
            for (int i = 0; i < 8; i++) blk[i] = src + (size_t)(8 * t + i) * rb + (size_t)b * bb;
            pack_block(wtype, blk, dst);
        }
    }
    return wtype | MM_PACKED;
}

/* Inverse of pack_block for row i (0..7) of the tile block at src. */
static void unpack_block(uint32_t wtype, const uint8_t *src, int i, uint8_t *blk)
{
    const struct plain_block pb = plain_block_of(wtype);
    const bool q5 = pb.q5, has_m = pb.has_m;
    const size_t qs_off = pb.qs_off, qh_off = pb.qh_off;
    const int p = i % 4, second = i / 4;   /* pair p holds rows p and p + 4 */
    memcpy(blk, src + 2 * i, 2);
    if (has_m) memcpy(blk + 2, src + 16 + 2 * i, 2);
    const uint8_t *q = src + 16 + (has_m ? 16 : 0);
    if (q5) {
        uint32_t h0, h1, h;
        memcpy(&h0, q + 8 * p, 4);
        memcpy(&h1, q + 8 * p + 4, 4);
        h = second ? (h0 >> 16) | (h1 & 0xFFFF0000u) : (h0 & 0xFFFFu) | (h1 << 16);
        memcpy(blk + qh_off, &h, 4);
        q += 32;
    }
    if (wtype == QT_Q8_0) {
        memcpy(blk + qs_off, q + 64 * p + 16 * second, 16);
        memcpy(blk + qs_off + 16, q + 64 * p + 32 + 16 * second, 16);
    } else {
        memcpy(blk + qs_off, q + 32 * p + 16 * second, 16);
    }
}

void mm_unpack_row(uint32_t ptype, const void *w, int64_t cols, int64_t row, void *out)
{
    const uint32_t wtype = ptype & ~MM_PACKED;
    const int64_t nb = cols / 32;
    const size_t rb = row_bytes(wtype, cols), bb = rb / (size_t)nb;
    if (wtype == QT_Q4_K || wtype == QT_Q5_K || wtype == QT_Q6_K) {
        const size_t sup = mm_pk_super_bytes(wtype);
        const size_t sbb = rb / (size_t)(cols / QK_K);
        const uint8_t *tile = (const uint8_t *)w + (size_t)(row / 8) * (size_t)(cols / QK_K) * sup;
        for (int64_t S = 0; S < cols / QK_K; S++) {
            uint8_t *o = (uint8_t *)out + (size_t)S * sbb;
            if (wtype == QT_Q6_K) unpack_q6k(tile + (size_t)S * sup, (int)(row % 8), (block_q6_K *)o);
            else unpack_k4(wtype, tile + (size_t)S * sup, (int)(row % 8), o);
        }
        return;
    }
    const uint8_t *tile = (const uint8_t *)w + (size_t)(row / 8) * 8 * rb;
    for (int64_t b = 0; b < nb; b++)
        unpack_block(wtype, tile + (size_t)b * 8 * bb, (int)(row % 8), (uint8_t *)out + (size_t)b * bb);
}

static mm_kernel_fn kernel_for(enum cpu_isa isa, uint32_t wtype)
{
    mm_kernel_fn k = NULL;
#ifdef __x86_64__   /* the SIMD libraries are built for x86-64 only */
    if (isa == CPU_ISA_AMX) k = mm_amx_kernel(wtype);
    else if (isa == CPU_ISA_AVX512) k = mm_avx512_kernel(wtype);
    else if (isa == CPU_ISA_AVXVNNI) k = mm_avxvnni_kernel(wtype);
    else if (isa == CPU_ISA_AVX2) k = mm_avx2_kernel(wtype);
    if (!k) k = isa >= CPU_ISA_AVX512 ? mm_lowbit_avx512_kernel(wtype)   /* mm_lowbit_simd.inc */
                : isa >= CPU_ISA_AVX2 ? mm_lowbit_avx2_kernel(wtype) : NULL;
#else
    (void)isa;
#endif
    return k ? k : mm_scalar_kernel(wtype);
}

static mm_quant_fn quant_for(enum cpu_isa isa)
{
#ifdef __x86_64__   /* the SIMD libraries are built for x86-64 only */
    if (isa >= CPU_ISA_AVX512) return mm_avx512_quant;   /* amx: the same activations */
    if (isa == CPU_ISA_AVXVNNI) return mm_avxvnni_quant;
    if (isa == CPU_ISA_AVX2) return mm_avx2_quant;
#else
    (void)isa;
#endif
    return mm_scalar_quant;
}

/* The Q8_K activations (mm_wants_q8k), the same bits on every ISA. */
static mm_quant_fn q8k_quant_for(enum cpu_isa isa)
{
#ifdef __x86_64__
    if (isa >= CPU_ISA_AVX512) return mm_avx512_q8k_quant;
    if (isa == CPU_ISA_AVXVNNI) return mm_avxvnni_q8k_quant;
    if (isa == CPU_ISA_AVX2) return mm_avx2_q8k_quant;
#else
    (void)isa;
#endif
    return mm_q8k_quant;
}

/* Lays out struct mm_xq in the scratch buffer (64-byte aligned parts). */
static size_t xq_parts(int64_t n, int64_t cols, size_t *qs_bytes, size_t *d_bytes)
{
    *qs_bytes = ((size_t)(n * cols) + 63) & ~(size_t)63;
    *d_bytes = ((size_t)(n * (cols / 32)) * 4 + 63) & ~(size_t)63;
    return 2 * *qs_bytes + 8 * *d_bytes + 64;   /* token-major, then group-major */
}

bool mm_scratch_reserve(struct mm_scratch *s, int64_t n, int64_t cols)
{
    size_t qs_bytes, d_bytes, need = xq_parts(n, cols, &qs_bytes, &d_bytes);
    if (s->cap >= need) return true;
    free(s->buf);
    s->buf = malloc(need);
    s->cap = s->buf ? need : 0;
    return s->buf != NULL;
}

static bool xq_reserve(struct mm_scratch *s, int64_t n, int64_t cols, struct mm_xq *xq)
{
    int64_t nb = cols / 32;
    size_t qs_bytes, d_bytes;
    xq_parts(n, cols, &qs_bytes, &d_bytes);
    if (!mm_scratch_reserve(s, n, cols)) return false;
    uint8_t *p = (uint8_t *)(((uintptr_t)s->buf + 63) & ~(uintptr_t)63);
    xq->qs = (int8_t *)p;
    xq->d = (float *)(p + qs_bytes);
    xq->sum = (int32_t *)(p + qs_bytes + d_bytes);
    xq->ds = (float *)(p + qs_bytes + 2 * d_bytes);
    xq->gq = NULL;
    xq->gd = xq->gds = NULL;
    xq->gsum = xq->gh = xq->gsp = NULL;
    if (n >= MM_XG_MIN_N) {
        p += qs_bytes + 3 * d_bytes;
        xq->gq = (int8_t *)p;
        xq->gd = (float *)(p + qs_bytes);
        xq->gsum = (int32_t *)(p + qs_bytes + d_bytes);
        xq->gds = (float *)(p + qs_bytes + 2 * d_bytes);
        xq->gh = (int32_t *)(p + qs_bytes + 3 * d_bytes);
        xq->gsp = (int32_t *)(p + qs_bytes + 4 * d_bytes);
    }
    xq->nb = nb;
    return true;
}

/* One call: up to MM_MAX_OPS matmuls sharing x (one quantization, one
 * pool run). Row chunks are numbered across the ops in order and claimed
 * with tp_run_claimed (TP_CLAIM_OWN_FIRST: the decode loop's many small
 * chunks would otherwise move one counter's cache line on every claim). */
struct mm_job {
    struct mm_task t[MM_MAX_OPS];
    mm_kernel_fn kernel[MM_MAX_OPS];
    int64_t first_chunk[MM_MAX_OPS + 1]; /* chunk numbers where each op starts */
    int n_ops;
    int64_t chunk;           /* rows per claim */
    mm_quant_fn quant;
    struct mm_xq xq;
    const float *x;
    int64_t cols, n;
    int8_t *x8;              /* W8A8: x as int8 tiles, per-token scales */
    float *sx;
    bool on_w8[MM_MAX_OPS];  /* op k runs mm_w8a8_run, with ... */
    uint8_t *w8;             /* ... thread ith's buffers at w8 + ith · w8_each */
    size_t w8_each;
    bool xb_amx;             /* xb: AMX-BF16 tiles, else vdpbf16ps pairs */
};

static void range_for(int64_t total, int ith, int nth, int64_t *lo, int64_t *hi)
{
    int64_t per = (total + nth - 1) / nth;
    *lo = per * ith < total ? per * ith : total;
    *hi = *lo + per < total ? *lo + per : total;
}

/* Two int16 values as the halves of one int32 (lo in the low half). */
static int32_t i16_pair(int32_t lo, int32_t hi)
{
    return (int32_t)(((uint32_t)lo & 0xFFFFu) | (uint32_t)hi << 16);
}

static void quant_tokens(const struct mm_job *job, int64_t j0, int64_t j1)
{
    const int64_t nb = job->xq.nb;
    for (int64_t j = j0; j < j1; j++) {
        job->quant(job->x + j * job->cols, job->cols, job->xq.qs + j * job->cols,
                   job->xq.d + j * nb, job->xq.sum + j * nb);
        for (int64_t b = j * nb; b < (j + 1) * nb; b++)
            job->xq.ds[b] = job->xq.d[b] * (float)job->xq.sum[b];
        if (!job->xq.gq) continue;
        const int64_t g = j / MM_XG, i = j % MM_XG;
        const int64_t gs = job->n - g * MM_XG < MM_XG ? job->n - g * MM_XG : MM_XG;
        int8_t *gq = job->xq.gq + g * MM_XG * job->cols;
        const int64_t go = g * MM_XG * nb;
        for (int64_t b = 0; b < nb; b++) {
            memcpy(gq + 32 * (b * gs + i), job->xq.qs + j * job->cols + 32 * b, 32);
            job->xq.gd[go + b * gs + i] = job->xq.d[j * nb + b];
            job->xq.gsum[go + b * gs + i] = job->xq.sum[j * nb + b];
            job->xq.gds[go + b * gs + i] = job->xq.ds[j * nb + b];
            const int8_t *q = job->xq.qs + j * job->cols + 32 * b;
            int32_t h0 = 0, h1 = 0;   /* |h| ≤ 16 · 127: int16 */
            for (int e = 0; e < 16; e++) {
                h0 += q[e];
                h1 += q[16 + e];
            }
            job->xq.gh[go + b * gs + i] = i16_pair(h0, h1);
            if (b % 2 == 0)   /* |Σ| ≤ 32 · 127: int16; only even blocks are read */
                job->xq.gsp[go + b * gs + i] =
                    i16_pair(job->xq.sum[j * nb + b], b + 1 < nb ? job->xq.sum[j * nb + b + 1] : 0);
        }
    }
}

#ifdef __x86_64__
static void xb_worker(void *arg, int ith, int nth)
{
    const struct mm_job *job = arg;
    int64_t lo, hi;
    if (job->xb_amx) {
        range_for((job->n + 31) / 32 * 2, ith, nth, &lo, &hi);
        mm_amx_bf16_x(job->x, job->cols, job->n, lo, hi, (uint16_t *)job->t[0].xb);
    } else {
        range_for((job->n + MM_BF16DP_GROUP - 1) / MM_BF16DP_GROUP, ith, nth, &lo, &hi);
        mm_avx512_bf16dp_x(job->x, job->cols, job->n, lo, hi, (uint16_t *)job->t[0].xb);
    }
}

static void x8_worker(void *arg, int ith, int nth)
{
    const struct mm_job *job = arg;
    int64_t lo, hi;
    range_for((job->n + 31) / 32 * 2, ith, nth, &lo, &hi);
    mm_w8a8_x(job->x, job->cols, job->n, lo, hi, (int8_t *)job->x8, (float *)job->sx);
}
#endif

static void quant_worker(void *arg, int ith, int nth)
{
    const struct mm_job *job = arg;
    int64_t lo, hi;
    range_for(job->n, ith, nth, &lo, &hi);
    quant_tokens(job, lo, hi);
}

static void run_chunk(const struct mm_job *job, int64_t c, int ith)
{
    int k = 0;
    while (c >= job->first_chunk[k + 1]) k++;
    const struct mm_task *t = &job->t[k];
    int64_t lo = (c - job->first_chunk[k]) * job->chunk;
    int64_t hi = lo + job->chunk < t->rows ? lo + job->chunk : t->rows;
#ifdef __x86_64__
    if (job->on_w8[k]) {
        mm_w8a8_run(t, lo, hi, job->w8 + (size_t)ith * job->w8_each);
        return;
    }
#else
    (void)ith;
#endif
    job->kernel[k](t, lo, hi);
}

static void mm_unit(void *arg, int64_t c, int ith)
{
    run_chunk(arg, c, ith);
}

void cpu_matmul_multi(struct threadpool *tp, enum cpu_isa isa, struct mm_scratch *scratch,
                      int n_ops, const struct mm_op *ops, int64_t cols,
                      const float *x, int64_t n)
{
    struct mm_job job = { .n_ops = 0, .quant = quant_for(isa), .x = x, .cols = cols, .n = n };
    bool want_xq = false;
    int64_t total_rows = 0;
    if (n <= 0 || n_ops <= 0) return;
    if (n_ops > MM_MAX_OPS) {   /* more than one job's worth: split */
        cpu_matmul_multi(tp, isa, scratch, MM_MAX_OPS, ops, cols, x, n);
        cpu_matmul_multi(tp, isa, scratch, n_ops - MM_MAX_OPS, ops + MM_MAX_OPS, cols, x, n);
        return;
    }
    {   /* activations as the reference quantizes them for each type (mm_impl.h):
         * a call mixing the kinds runs as one call per kind */
        struct mm_op g[3][MM_MAX_OPS];
        int ng[3] = { 0, 0, 0 };
        for (int k = 0; k < n_ops; k++) {
            const int kind = mm_wants_q8k(ops[k].wtype) ? 1 : mm_wants_q8_f32d(ops[k].wtype) ? 2 : 0;
            g[kind][ng[kind]++] = ops[k];
        }
        if ((ng[0] > 0) + (ng[1] > 0) + (ng[2] > 0) > 1) {
            for (int i = 0; i < 3; i++)
                if (ng[i]) cpu_matmul_multi(tp, isa, scratch, ng[i], g[i], cols, x, n);
            return;
        }
        if (ng[1]) job.quant = q8k_quant_for(isa);
        if (ng[2]) job.quant = mm_q8_f32d_quant;
    }
    bool w8a8 = false;
#ifdef __x86_64__
    /* W8A8 (mm_scratch.w8a8): only with AMX in force and a prefill batch;
     * |Σ| ≤ cols · 127² stays in int32 up to 2^17 columns */
    if (scratch && scratch->w8a8 && isa == CPU_ISA_AMX && n >= MM_W8A8_MIN_N && cols % 64 == 0 &&
        cols <= (1 << 17)) {
        for (int k = 0; k < n_ops; k++) w8a8 |= mm_w8a8_supported(ops[k].wtype);
        if (w8a8) job.x8 = x8_reserve(scratch, n, cols, &job.sx);
        w8a8 = job.x8 != NULL;
    }
#endif
    for (int k = 0; k < n_ops; k++) {
        mm_kernel_fn kern = kernel_for(isa, ops[k].wtype);
        if (!kern || ops[k].rows <= 0) continue;   /* unsupported: see mm_supported */
        bool on_w8 = false;
#ifdef __x86_64__
        on_w8 = w8a8 && mm_w8a8_supported(ops[k].wtype);
#endif
        struct mm_task *t = &job.t[job.n_ops];
        *t = (struct mm_task){ .wtype = ops[k].wtype, .w = ops[k].w,
                               .row_bytes = row_bytes(ops[k].wtype, cols), .rows = ops[k].rows,
                               .cols = cols, .n = n, .x = x, .y = ops[k].y,
                               .x8 = on_w8 ? job.x8 : NULL, .sx = on_w8 ? job.sx : NULL };
        job.on_w8[job.n_ops] = on_w8;
        job.kernel[job.n_ops++] = kern;
        want_xq |= mm_wants_xq(ops[k].wtype) && !on_w8;
        total_rows += ops[k].rows;
    }
    if (want_xq) {
        if (!scratch || !xq_reserve(scratch, n, cols, &job.xq)) {
            /* Out of memory: make the failure visible downstream rather
             * than leaving stale numbers (mm_scratch_reserve reports it). */
            for (int k = 0; k < job.n_ops; k++)
                for (int64_t i = 0; i < n * job.t[k].rows; i++) job.t[k].y[i] = NAN;
            return;
        }
        for (int k = 0; k < job.n_ops; k++) job.t[k].xq = job.xq;
        if (n >= MM_PAR_QUANT_MIN_N && tp_n_threads(tp) > 1) tp_run(tp, quant_worker, &job);
        else quant_tokens(&job, 0, n);
    }
    bool tiles16 = n >= MM_FINE_N;
#ifdef __x86_64__
    if (w8a8) {
        job.w8_each = mm_w8a8_work_bytes(cols);
        job.w8 = w8_reserve(scratch, tp_n_threads(tp), job.w8_each);
        if (!job.w8) {   /* out of memory: the W8A8 ops' outputs NaN, visible downstream */
            for (int k = 0; k < job.n_ops; k++)
                if (job.on_w8[k]) {
                    for (int64_t i = 0; i < n * job.t[k].rows; i++) job.t[k].y[i] = NAN;
                    job.t[k].rows = 0;
                }
        }
        if (tp_n_threads(tp) > 1) tp_run(tp, x8_worker, &job);
        else mm_w8a8_x(x, cols, n, 0, (n + 31) / 32 * 2, job.x8, job.sx);
    }
    bool want_xb = false;
    for (int k = 0; k < job.n_ops; k++)
        want_xb |= (job.t[k].wtype == QT_F16 || job.t[k].wtype == QT_BF16);
    want_xb = want_xb && n >= MM_BF16_MIN_N && cols % 32 == 0 && scratch;
    job.xb_amx = isa == CPU_ISA_AMX;
    if (want_xb && isa == CPU_ISA_AVX512 && !scratch->avx512bf16)
        scratch->avx512bf16 = cpu_avx512bf16() ? 1 : -1;
    if (want_xb && (job.xb_amx || (isa == CPU_ISA_AVX512 && scratch->avx512bf16 > 0))) {
        const uint16_t *xb = xb_reserve(scratch, n, cols);
        for (int k = 0; k < job.n_ops; k++) job.t[k].xb = xb;
        /* chunks of whole 16-row tiles: which rows take the tiles (all but
         * the matrix's last rows % 16) then does not depend on the threads */
        tiles16 = true;
        if (xb) {
            if (tp_n_threads(tp) > 1) tp_run(tp, xb_worker, &job);
            else xb_worker(&job, 0, 1);   /* the whole of x */
        }
    }
#endif
    int64_t nth = tp_n_threads(tp);
    const int64_t per = n >= MM_FINE_N ? MM_FINE_CHUNKS_PER_THREAD : MM_CHUNKS_PER_THREAD;
    /* W8A8: whole 32-row strips (its 2 × 2 tiles) where the rows allow */
    const int64_t align = w8a8 ? 32 : tiles16 ? MM_FINE_ROW_ALIGN : MM_ROW_ALIGN;
    job.chunk = nth == 1 ? total_rows : (total_rows + nth * per - 1) / (nth * per);
    job.chunk = (job.chunk + align - 1) / align * align;
    job.first_chunk[0] = 0;
    for (int k = 0; k < job.n_ops; k++)
        job.first_chunk[k + 1] = job.first_chunk[k] + (job.t[k].rows + job.chunk - 1) / job.chunk;
    /* each thread its own share of the chunks first, then the others' */
    tp_run_claimed(tp, job.first_chunk[job.n_ops], TP_CLAIM_OWN_FIRST, mm_unit, &job);
}

void cpu_matmul(struct threadpool *tp, enum cpu_isa isa, struct mm_scratch *scratch,
                uint32_t wtype, const void *w, int64_t rows, int64_t cols,
                const float *x, int64_t n, float *y)
{
    struct mm_op op = { .wtype = wtype, .w = w, .rows = rows, .y = y };
    cpu_matmul_multi(tp, isa, scratch, 1, &op, cols, x, n);
}
