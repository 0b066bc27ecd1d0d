/* attn_amx: prefill attention on Intel AMX-BF16 tiles (TERN_ISA=amx), phase
 * 0's unit (attention.c); every other item (decode, small tiles, shapes
 * outside the tile geometry) goes to the AVX-512 unit.
 *
 * One (tile, KV head) item: its R = T·G query rows (tiles of up to
 * ATTN_AMX_TILE tokens under amx, padded to groups of 16 rows) against the keys [lo_min, p_last] in chunks of ATTN_AMX_CK keys at
 * fixed positions. Each chunk's K and V are converted to bf16 tiles once
 * per call and KV head, in a pass before the items (attn_amx_convert_unit,
 * per run of a sequence's tiles, attn_impl.h), not once per tile that
 * reads them (whatever the KV type: f16 / f32 planar, q8_0 / q4_0 rows): K as the B
 * operand of S = Q·Kᵀ (tile row k: dims 2k, 2k + 1 of 16 keys), V as the B
 * operand of O += P·V (tile row k: keys 2k, 2k + 1 of 16 dims). Per group
 * of 16 rows: the scores on tiles (tdpbf16ps, f32 sums), the online
 * softmax in AVX-512 (base-2 exponent, running max and sum per row), P
 * rounded to bf16, and the products with V accumulated into the row
 * group's f32 output, rescaled when a row's max grows.
 *
 * Precision: Q and K go in as bf16 hi + lo pairs, the scores as three
 * tile products (qh·kh + ql·kh + qh·kl: within 2^-14 of |q||k|; with Q and
 * K rounded to bf16 alone Gemma 3's perplexity moved by 0.4 %), P and V
 * rounded to bf16 (relative 2^-8), sums in f32. Not bit-identical to the
 * f32 path, which rounds Q and P to f16 as the reference does
 * (tests/kernels/cpu states the bound; docs/PERFORMANCE.md §5 the
 * perplexities). Each row's operations depend only on its own keys and the fixed
 * chunk positions, never on the other rows of its tile or the thread, so
 * results do not depend on the thread count or on how a prompt is cut
 * into tiles that take this path. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attn_impl.h"
#include "ops.h"
#include "quant.h"
#include "tr16_avx512.h"

#define CK ATTN_AMX_CK

/* GCC's tile intrinsics are asm without a memory clobber: stores of the
 * converted tiles and reads of the stored scores must not move across
 * them. */
#define AMX_FENCE() __asm__ volatile("" ::: "memory")

struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

/* Tiles 0-3: C (16 x 16 f32), 4 and 7: A (16 rows x 32 bf16), 5-6: B. */
static void amx_configure(void)
{
    struct amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) c.rows[i] = 16, c.colsb[i] = 64;
    AMX_FENCE();
    _tile_loadconfig(&c);
}

bool attn_amx_fits(const struct attn_job *J, int32_t tile)
{
    const struct attn_batch *b = J->b;
    const enum ops_kv_type ty = J->L->type;
    const int32_t T = J->tiles[2 * tile + 1], G = b->n_head / b->n_head_kv;
    /* decode (T = 1) keeps the f32 path; fewer than 16 rows would leave
     * most of each tile product padding */
    return T >= 2 && T * G >= ATTN_AMX_MIN_ROWS && G <= 32 && b->head_dim % 64 == 0 &&
           b->head_dim <= ATTN_AMX_MAX_HD && J->L->block_tokens % 16 == 0 &&
           (ty == OPS_KV_F16 || ty == OPS_KV_F32 || ty == OPS_KV_Q8_0 || ty == OPS_KV_Q4_0);
}

/* out[2n] = a[n], out[2n + 1] = b[n] as bf16 (round to nearest even): a
 * VNNI pair row of a B tile. */
static inline __m512i pair_bf16(__m512 a, __m512 b)
{
    static const uint16_t ix[32] __attribute__((aligned(64))) = {
        0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
        8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31 };
    return _mm512_permutexvar_epi16(_mm512_load_si512((const void *)ix),
                                    (__m512i)_mm512_cvtne2ps_pbh(b, a));
}

/* a and b as bf16 pairs hi + lo (x = hi + lo within 2^-16 |x|; an f16
 * value exactly): *hi = bf16(x), *lo = bf16(x - hi), as 32 bf16 with a in
 * the low half and b in the high one. */
static inline void split_bf16(__m512 a, __m512 b, __m512i *hi, __m512i *lo)
{
    const __m512i h = (__m512i)_mm512_cvtne2ps_pbh(b, a);
    const __m512 ah = (__m512)_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16);
    const __m512 bh = (__m512)_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16);
    *hi = h;
    *lo = (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(b, bh), _mm512_sub_ps(a, ah));
}

/* pair_bf16 of hi and lo parts: the VNNI rows of K's two B tiles. */
static inline void pair_split(__m512 a, __m512 b, __m512i *hi, __m512i *lo)
{
    static const uint16_t ix[32] __attribute__((aligned(64))) = {
        0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
        8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31 };
    const __m512i p = _mm512_load_si512((const void *)ix);
    __m512i h, l;
    split_bf16(a, b, &h, &l);
    *hi = _mm512_permutexvar_epi16(p, h);
    *lo = _mm512_permutexvar_epi16(p, l);
}

/* 16 f32 at element i of a planar f16 or f32 block. */
static inline __m512 ld16(const void *p, size_t i, int f16)
{
    if (f16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
    return _mm512_loadu_ps((const float *)p + i);
}

/* One q8_0 or q4_0 row of hd values into dst as f32 (d · q, exact). */
static void deq_row(enum ops_kv_type t, const char *src, int32_t hd, float *dst)
{
    for (int32_t qb = 0; qb < hd / 32; qb++) {
        uint16_t h;
        __m512 lo, hi;
        if (t == OPS_KV_Q8_0) {
            const block_q8_0 *blk = (const block_q8_0 *)(src + (size_t)qb * sizeof(block_q8_0));
            memcpy(&h, &blk->d, sizeof h);
            lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)blk->qs)));
            hi = _mm512_cvtepi32_ps(
                _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk->qs + 16))));
        } else {
            const block_q4_0 *blk = (const block_q4_0 *)(src + (size_t)qb * sizeof(block_q4_0));
            memcpy(&h, &blk->d, sizeof h);
            const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)blk->qs));
            const __m512i m4 = _mm512_set1_epi32(0x0F), e8 = _mm512_set1_epi32(8);
            lo = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_and_si512(x, m4), e8));
            hi = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(x, 4), e8));
        }
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(h));
        _mm512_storeu_ps(dst + qb * 32, _mm512_mul_ps(lo, d));
        _mm512_storeu_ps(dst + qb * 32 + 16, _mm512_mul_ps(hi, d));
    }
}

/* 2^x for x <= 0 (x = -inf gives 0): 2^n · 2^f, f = x - n in [-1/2, 1/2],
 * Taylor of degree 5 (relative error 2.4e-6, far below bf16's 2^-8). */
static inline __m512 exp2v(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-200.0f));
    const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(1.3333558e-3f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504109e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022651e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* The work buffers of one item (attn_amx_floats), 64-byte aligned. */
struct amx_ws {
    uint16_t *qb;   /* [2][RP][hd] queries as bf16 hi and lo parts (A tiles) */
    uint16_t *kt;   /* [2][hd/32][CK/16] B tiles of K's hi and lo parts, 512 bf16 each */
    uint16_t *vt;   /* [CK/32][hd/16] B tiles of V */
    uint16_t *kr;   /* [2][16][hd] K rows as bf16 hi and lo (q8_0 / q4_0), before the transpose */
    uint16_t *p;    /* [16][CK] probabilities (A tiles) */
    float *s;       /* [2][16][CK] scores */
    float *o;       /* [RP][hd] output sums */
    float *m, *l;   /* [RP] running max (base 2) and sum */
    float *vr;      /* [2][hd] dequantized rows */
};

static inline void *align64(void *p)
{
    return (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

static struct amx_ws amx_ws_at(float *ws, int32_t RP, int32_t hd)
{
    struct amx_ws w;
    char *p = align64(ws);
    w.qb = (uint16_t *)p; p = align64(p + (size_t)2 * RP * hd * 2);
    w.kt = (uint16_t *)p; p = align64(p + (size_t)2 * CK * hd * 2);
    w.vt = (uint16_t *)p; p = align64(p + (size_t)CK * hd * 2);
    w.kr = (uint16_t *)p; p = align64(p + (size_t)2 * 16 * hd * 2);
    w.p = (uint16_t *)p;  p = align64(p + (size_t)16 * CK * 2);
    w.s = (float *)p;     p = align64(p + (size_t)2 * 16 * CK * 4);
    w.o = (float *)p;     p = align64(p + (size_t)RP * hd * 4);
    w.m = (float *)p;     p = align64(p + (size_t)RP * 4);
    w.l = (float *)p;     p = align64(p + (size_t)RP * 4);
    w.vr = (float *)p;
    return w;
}

struct amx_geo {
    int32_t t0, T, g, hd, G, bt, R, RP, lo_min, p_last;
    const int32_t *table;
    enum ops_kv_type type;
    size_t head_off;   /* q8_0 / q4_0: KV head g's bytes in a row */
};

/* K and V of chunk [base, base + CK) into w->kt and w->vt. Keys outside
 * [lo_min, p_last] are not read: their V rows are zero (their
 * probabilities are 0, and 0 · NaN of a stale slot would not be), their
 * K columns whatever the buffer held (their scores are masked). */
static void load_chunk(const struct attn_layer *L, const struct amx_geo *a, int32_t base,
                       const struct amx_ws *w)
{
    const int32_t hd = a->hd, bt = a->bt, nd = hd / 16;
    const int planar = a->type == OPS_KV_F16 || a->type == OPS_KV_F32, f16 = a->type == OPS_KV_F16;
    const size_t es = f16 ? 2 : 4;
    for (int32_t kb = 0; kb < CK / 16; kb++) {
        const int32_t p0 = base + kb * 16;
        if (p0 + 15 < a->lo_min || p0 > a->p_last) {
            /* wholly outside: V zero (keys 16kb.. are rows 8kb.. of kp = kb / 2) */
            for (int32_t db = 0; db < nd; db++)
                memset(w->vt + ((size_t)(kb / 2) * nd + db) * 512 + (kb % 2) * 256, 0, 512);
            continue;
        }
        const int32_t slot0 = p0 % bt;
        const char *kblk = attn_block(L, L->k, a->table[p0 / bt]);
        const char *vblk = attn_block(L, L->v, a->table[p0 / bt]);
        /* K */
        if (planar) {
            const char *kh = kblk + (size_t)a->g * hd * bt * es;
            for (int32_t dk = 0; dk < hd / 32; dk++) {
                uint16_t *o = w->kt + ((size_t)dk * (CK / 16) + kb) * 512;
                for (int k = 0; k < 16; k++) {
                    const size_t d = (size_t)dk * 32 + 2 * (size_t)k;
                    __m512i hi, lo;
                    pair_split(ld16(kh, d * bt + slot0, f16), ld16(kh, (d + 1) * bt + slot0, f16),
                               &hi, &lo);
                    _mm512_store_si512((void *)(o + 32 * k), hi);
                    _mm512_store_si512((void *)(o + (size_t)CK * hd + 32 * k), lo);
                }
            }
        } else {
            for (int n = 0; n < 16; n++) {
                deq_row(a->type, kblk + (size_t)(slot0 + n) * L->row_bytes + a->head_off, hd, w->vr);
                for (int32_t d = 0; d < hd; d += 32) {
                    __m512i hi, lo;
                    split_bf16(_mm512_loadu_ps(w->vr + d), _mm512_loadu_ps(w->vr + d + 16), &hi, &lo);
                    _mm512_store_si512((void *)(w->kr + (size_t)n * hd + d), hi);
                    _mm512_store_si512((void *)(w->kr + (size_t)(16 + n) * hd + d), lo);
                }
            }
            for (int part = 0; part < 2; part++)
                for (int32_t dk = 0; dk < hd / 32; dk++) {
                    __m512i r[16];
                    for (int n = 0; n < 16; n++)
                        r[n] = _mm512_load_si512(
                            (const void *)(w->kr + (size_t)(16 * part + n) * hd + dk * 32));
                    tr16_epi32(r, r);
                    uint16_t *o = w->kt + (size_t)part * CK * hd + ((size_t)dk * (CK / 16) + kb) * 512;
                    for (int k = 0; k < 16; k++) _mm512_store_si512((void *)(o + 32 * k), r[k]);
                }
        }
        /* V: key pairs (2k, 2k + 1) of the 16 */
        const int32_t kp = kb / 2;
        for (int k = 0; k < 8; k++) {
            uint16_t *o = w->vt + (size_t)kp * nd * 512 + 32 * ((kb % 2) * 8 + k);
            const int32_t pa = p0 + 2 * k, sa = slot0 + 2 * k;
            const int ina = pa >= a->lo_min && pa <= a->p_last,
                      inb = pa + 1 >= a->lo_min && pa + 1 <= a->p_last;
            if (planar && ina && inb) {   /* the common case: both rows read as stored */
                const char *va = vblk + ((size_t)a->g * bt + sa) * hd * es;
                const char *vb = va + (size_t)hd * es;
                for (int32_t db = 0; db < nd; db++)
                    _mm512_store_si512((void *)(o + (size_t)db * 512),
                                       pair_bf16(ld16(va, (size_t)db * 16, f16),
                                                 ld16(vb, (size_t)db * 16, f16)));
                continue;
            }
            for (int e = 0; e < 2; e++) {
                float *dst = w->vr + (size_t)e * hd;
                if (!(e ? inb : ina)) {
                    memset(dst, 0, (size_t)hd * sizeof(float));
                } else if (planar) {
                    const char *vh = vblk + ((size_t)a->g * bt + sa + e) * hd * es;
                    for (int32_t d = 0; d < hd; d += 16) _mm512_storeu_ps(dst + d, ld16(vh, (size_t)d, f16));
                } else {
                    deq_row(a->type, vblk + (size_t)(sa + e) * L->row_bytes + a->head_off, hd, dst);
                }
            }
            for (int32_t db = 0; db < nd; db++)
                _mm512_store_si512((void *)(o + (size_t)db * 512),
                                   pair_bf16(_mm512_loadu_ps(w->vr + db * 16),
                                             _mm512_loadu_ps(w->vr + hd + db * 16)));
        }
    }
}

/* Scores of rows [16 rg, 16 rg + 16) against the chunk's keys into w->s. */
static inline void qk_group(const struct amx_geo *a, int32_t rg, const struct amx_ws *w, float *sbuf)
{
    const int32_t hd = a->hd;
    for (int32_t h = 0; h < CK / 64; h++) {   /* 64 keys (4 C tiles) at a time */
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        /* q·k as qh·kh + ql·kh + qh·kl (hi and lo parts; ql·kl, 2^-16 of
         * it, left out): the scores nearly as exact as in f32 */
        for (int32_t dk = 0; dk < hd / 32; dk++) {
            const uint16_t *kt = w->kt + ((size_t)dk * (CK / 16) + 4 * h) * 512;
            const uint16_t *kl = kt + (size_t)CK * hd;
            const uint16_t *q = w->qb + (size_t)rg * 16 * hd + dk * 32;
            _tile_loadd(4, q, hd * 2);
            _tile_loadd(7, q + (size_t)a->RP * hd, hd * 2);
#define QK3(C, OFF)                      \
            _tile_loadd(5, kt + (OFF), 64);  \
            _tile_dpbf16ps(C, 4, 5);         \
            _tile_dpbf16ps(C, 7, 5);         \
            _tile_loadd(6, kl + (OFF), 64);  \
            _tile_dpbf16ps(C, 4, 6);
            QK3(0, 0)
            QK3(1, 512)
            QK3(2, 1024)
            QK3(3, 1536)
#undef QK3
        }
        float *s = sbuf + 64 * h;
        _tile_stored(0, s, CK * 4);
        _tile_stored(1, s + 16, CK * 4);
        _tile_stored(2, s + 32, CK * 4);
        _tile_stored(3, s + 48, CK * 4);
    }
    AMX_FENCE();
}

/* o rows [16 rg, +16) += P · V over the chunk. */
static inline void pv_group(const struct amx_geo *a, int32_t rg, const struct amx_ws *w)
{
    const int32_t hd = a->hd, nd = hd / 16;
    AMX_FENCE();
    for (int32_t dg = 0; dg < nd / 4; dg++) {
        float *o = w->o + (size_t)rg * 16 * hd + dg * 64;
        _tile_loadd(0, o, hd * 4);
        _tile_loadd(1, o + 16, hd * 4);
        _tile_loadd(2, o + 32, hd * 4);
        _tile_loadd(3, o + 48, hd * 4);
        for (int32_t kp = 0; kp < CK / 32; kp++) {
            const uint16_t *vt = w->vt + ((size_t)kp * nd + dg * 4) * 512;
            _tile_loadd(4, w->p + kp * 32, CK * 2);
            _tile_loadd(5, vt, 64);
            _tile_dpbf16ps(0, 4, 5);
            _tile_loadd(6, vt + 512, 64);
            _tile_dpbf16ps(1, 4, 6);
            _tile_loadd(5, vt + 1024, 64);
            _tile_dpbf16ps(2, 4, 5);
            _tile_loadd(6, vt + 1536, 64);
            _tile_dpbf16ps(3, 4, 6);
        }
        _tile_stored(0, o, hd * 4);
        _tile_stored(1, o + 16, hd * 4);
        _tile_stored(2, o + 32, hd * 4);
        _tile_stored(3, o + 48, hd * 4);
    }
    AMX_FENCE();
}

/* The online softmax of the row group's chunk scores: masked to each
 * row's keys, P = 2^(s·log2 e - m) as bf16, the sums of the rounded P,
 * and the rows' output rescaled where their max grew. Returns whether any
 * row sees the chunk. */
static int softmax_group(const struct attn_batch *b, const struct amx_geo *a, int32_t rg,
                         int32_t base, const struct amx_ws *w, float *sbuf)
{
    const int32_t hd = a->hd;
    const float log2e = 1.44269504088896341f;
    const bool cap = b->softcap > 0.0f;
    const __m512 mul = _mm512_set1_ps(cap ? log2e : b->scale * log2e);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    int any = 0;
    for (int i = 0; i < 16; i++) {
        const int32_t r = rg * 16 + i;
        uint16_t *prow = w->p + (size_t)i * CK;
        int32_t klo = 1, khi = 0;
        if (r < a->R) {
            const int32_t p = b->pos[a->t0 + r / a->G], lo = attn_window_lo(p, b->window);
            klo = lo > base ? lo - base : 0;
            khi = p < base + CK - 1 ? p - base : CK - 1;
        }
        if (klo > khi) {   /* no key of this row in the chunk: P row 0, state kept */
            memset(prow, 0, CK * 2);
            continue;
        }
        any = 1;
        float *srow = sbuf + (size_t)i * CK;
        if (cap) {   /* as the reference: scale, 1/cap, tanh, cap */
            const float inv = 1.0f / b->softcap;
            for (int32_t j = klo; j <= khi; j++) srow[j] = tanhf(srow[j] * b->scale * inv) * b->softcap;
        }
        /* the chunk's scaled scores stay in registers (a store and a
         * reload each, where srow may alias the row state) */
        __m512 xs[CK / 16];
        __m512 mx = _mm512_set1_ps(-INFINITY);
        if (klo == 0 && khi == CK - 1) {   /* the whole chunk: no mask */
            for (int v = 0; v < CK / 16; v++) {
                xs[v] = _mm512_mul_ps(_mm512_loadu_ps(srow + 16 * v), mul);
                mx = _mm512_max_ps(mx, xs[v]);
            }
        } else {
            for (int v = 0; v < CK / 16; v++) {
                const __m512i jv = _mm512_add_epi32(lane, _mm512_set1_epi32(16 * v));
                const __mmask16 k = _mm512_cmp_epi32_mask(jv, _mm512_set1_epi32(klo), _MM_CMPINT_NLT) &
                                    _mm512_cmp_epi32_mask(jv, _mm512_set1_epi32(khi), _MM_CMPINT_LE);
                xs[v] = _mm512_mask_mul_ps(_mm512_set1_ps(-INFINITY), k,
                                           _mm512_loadu_ps(srow + 16 * v), mul);
                mx = _mm512_max_ps(mx, xs[v]);
            }
        }
        const float mc = _mm512_reduce_max_ps(mx), mo = w->m[r];
        const float mn = mc > mo ? mc : mo;
        const __m512 vm = _mm512_set1_ps(mn);
        __m512 sum = _mm512_setzero_ps();
        for (int v = 0; v < CK / 16; v += 2) {
            const __m512 e0 = exp2v(_mm512_sub_ps(xs[v], vm));
            const __m512 e1 = exp2v(_mm512_sub_ps(xs[v + 1], vm));
            _mm512_storeu_si512((void *)(prow + 16 * v), (__m512i)_mm512_cvtne2ps_pbh(e1, e0));
            sum = _mm512_add_ps(sum, _mm512_add_ps(e0, e1));
        }
        const float ls = _mm512_reduce_add_ps(sum);
        if (mn != mo) {
            const float al = exp2f(mo - mn);   /* mo = -inf: 0, o and l are 0 */
            w->l[r] *= al;
            float *o = w->o + (size_t)r * hd;
            const __m512 va = _mm512_set1_ps(al);
            for (int32_t d = 0; d < hd; d += 16) _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_loadu_ps(o + d), va));
            w->m[r] = mn;
        }
        w->l[r] += ls;
    }
    return any;
}

/* The geometry of KV head g of tile (t0, T) (T = 0: a run's conversion),
 * its keys [lo_min, p_last]. */
static struct amx_geo amx_geo_at(const struct attn_job *J, int32_t t0, int32_t T, int32_t g,
                                 int32_t lo_min, int32_t p_last)
{
    const struct attn_batch *b = J->b;
    struct amx_geo a;
    a.t0 = t0;
    a.T = T;
    a.g = g;
    a.hd = b->head_dim;
    a.G = b->n_head / b->n_head_kv;
    a.bt = J->L->block_tokens;
    a.R = a.T * a.G;
    a.RP = (a.R + 15) / 16 * 16;
    a.lo_min = lo_min;
    a.p_last = p_last;
    a.table = b->table[t0];
    a.type = J->L->type;
    a.head_off = a.type == OPS_KV_Q8_0 ? (size_t)g * (a.hd / 32) * sizeof(block_q8_0)
                                        : (size_t)g * (a.hd / 32) * sizeof(block_q4_0);
    return a;
}

/* Rows of the largest tile: where a conversion unit finds its buffers. */
static int32_t amx_rp_max(const struct attn_batch *b)
{
    return (ATTN_AMX_TILE * (b->n_head / b->n_head_kv) + 15) / 16 * 16;
}

/* Keys beyond a tile's own [lo_min, p_last] that share its chunks hold the
 * run's real K and V (finite), where a tile converting for itself would
 * have left V zero: their probabilities are 0, so each adds a product 0
 * to the f32 sums and the results keep their bits. */
void attn_amx_convert_unit(void *arg, int64_t u, int ith)
{
    const struct attn_job *J = arg;
    const struct attn_kv_run *run = attn_run_of_slot(J, u);
    const int32_t i = (int32_t)(u - (int64_t)run->off), c = run->c_lo + i % run->n_ch;
    const struct amx_geo a = amx_geo_at(J, run->tok, 0, i / run->n_ch, run->lo, run->hi);
    struct amx_ws w = amx_ws_at(J->scratch + (size_t)ith * J->per_thread, amx_rp_max(J->b), a.hd);
    w.kt = J->kvbf + (size_t)u * (attn_amx_slot_bytes(a.hd) / 2);
    w.vt = w.kt + (size_t)2 * CK * a.hd;
    load_chunk(J->L, &a, c * CK, &w);
}

static void amx_item(const struct attn_job *J, int32_t tile, int32_t g, float *ws)
{
    const struct attn_batch *b = J->b;
    const struct attn_layer *L = J->L;
    const int32_t t0 = J->tiles[2 * tile], T = J->tiles[2 * tile + 1];
    const struct amx_geo a = amx_geo_at(J, t0, T, g, attn_window_lo(b->pos[t0], b->window),
                                        b->pos[t0 + T - 1]);
    const int32_t hd = a.hd, qdim = b->n_head * hd;
    struct amx_ws w = amx_ws_at(ws, a.RP, hd);
    /* the run's converted chunks (attn_amx_convert_unit), or this item's own */
    const struct attn_kv_run *run = J->kvbf ? &J->runs[J->tile_run[tile]] : NULL;
    uint16_t *kv0 = run ? J->kvbf + (run->off + (size_t)g * run->n_ch) * (attn_amx_slot_bytes(hd) / 2)
                              : NULL;
    for (int32_t r = 0; r < a.RP; r++) {
        uint16_t *d = w.qb + (size_t)r * hd;
        w.m[r] = -INFINITY;
        w.l[r] = 0.0f;
        memset(w.o + (size_t)r * hd, 0, (size_t)hd * sizeof(float));
        if (r >= a.R) {
            memset(d, 0, (size_t)hd * 2);
            memset(d + (size_t)a.RP * hd, 0, (size_t)hd * 2);
            continue;
        }
        const float *q = b->q + (size_t)(a.t0 + r / a.G) * qdim + (size_t)(g * a.G + r % a.G) * hd;
        for (int32_t i = 0; i < hd; i += 32) {
            __m512i hi, lo;
            split_bf16(_mm512_loadu_ps(q + i), _mm512_loadu_ps(q + i + 16), &hi, &lo);
            _mm512_store_si512((void *)(d + i), hi);
            _mm512_store_si512((void *)(d + (size_t)a.RP * hd + i), lo);
        }
    }
    amx_configure();
    for (int32_t c = a.lo_min / CK; c <= a.p_last / CK; c++) {
        const int32_t base = c * CK;
        if (run) {
            w.kt = kv0 + (size_t)(c - run->c_lo) * (attn_amx_slot_bytes(hd) / 2);
            w.vt = w.kt + (size_t)2 * CK * hd;
        } else {
            load_chunk(L, &a, base, &w);
        }
        /* the row groups that see the chunk; each one's scores are
         * computed before the previous one's softmax (two score buffers),
         * so the tile unit works while the vector unit does the softmax */
        int32_t rgs[ATTN_AMX_TILE * 8], n = 0;
        for (int32_t rg = 0; rg < a.RP / 16; rg++) {
            /* rows of the group see keys [lo of its first token, p of its last] */
            const int32_t r0 = rg * 16, r1 = (r0 + 15 < a.R - 1 ? r0 + 15 : a.R - 1);
            const int32_t plo = b->pos[a.t0 + r0 / a.G], phi = b->pos[a.t0 + r1 / a.G];
            if (phi < base || attn_window_lo(plo, b->window) > base + CK - 1) continue;
            rgs[n++] = rg;
        }
        AMX_FENCE();
        if (n) qk_group(&a, rgs[0], &w, w.s);
        for (int32_t i = 0; i < n; i++) {
            if (i + 1 < n) qk_group(&a, rgs[i + 1], &w, w.s + (size_t)((i + 1) % 2) * 16 * CK);
            if (softmax_group(b, &a, rgs[i], base, &w, w.s + (size_t)(i % 2) * 16 * CK))
                pv_group(&a, rgs[i], &w);
        }
    }
    _tile_release();   /* no 8 KiB of tile state saved at every switch */
    for (int32_t r = 0; r < a.R; r++) {
        float *out = b->out + (size_t)(a.t0 + r / a.G) * qdim + (size_t)(g * a.G + r % a.G) * hd;
        const __m512 inv = _mm512_set1_ps(1.0f / w.l[r]);
        const float *o = w.o + (size_t)r * hd;
        for (int32_t d = 0; d < hd; d += 16) _mm512_storeu_ps(out + d, _mm512_mul_ps(_mm512_loadu_ps(o + d), inv));
    }
}

/* Phase 0's unit under TERN_ISA=amx: the same (item, KV head) order as the
 * AVX-512 unit; items that do not pay on tiles run there. */
void attn_amx_unit(void *arg, int64_t c, int ith)
{
    const struct attn_job *J = arg;
    const int32_t nkv = J->b->n_head_kv, it = J->n_items * nkv - 1 - (int32_t)c;
    const int32_t tile = J->items[2 * (it / nkv)];
    if (!attn_amx_fits(J, tile)) {
        attn_avx512_unit(arg, c, ith);
        return;
    }
    amx_item(J, tile, it % nkv, J->scratch + (size_t)ith * J->per_thread);
}
