/* attention: paged, grouped-query attention on the CPU. Queries of one
 * sequence at consecutive positions form tiles of up to TILE tokens, so a
 * KV block is converted to f32 once per tile and KV head, not once per
 * query; each (tile, KV head) is one work item. Scores are kept for the
 * whole span of the tile (two passes: QK, then softmax-weighted V). Cost is
 * bounded by reading the KV rows (decode) or by the QK and PV products
 * (prefill). */
#include "attention.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "threadpool.h"

/* Per-ISA versions of the worker (explicit, not target_clones: the caller's
 * isa picks one). Not under TSan, as OPS_ISA_CLONES (ops.h). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define ATTN_X86 1
#else
#define ATTN_X86 0
#endif

#if defined(__GNUC__) && !defined(__clang__)
/* ld16 is always inlined, so no vector ever crosses a call boundary. */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

enum { TILE = 8 };

struct attn_job {
    const struct attn_layer *L;
    const struct attn_batch *b;
    const int32_t *tiles;
    int32_t n_tiles;
    float *scratch;
    size_t per_thread;          /* floats */
};

void attn_scratch_free(struct attn_scratch *s)
{
    free(s->buf);
    free(s->tiles);
    memset(s, 0, sizeof *s);
}

static int32_t window_lo(int32_t p, int32_t window)
{
    return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
}

/* f16 and f32 blocks are stored head-major (see attention.h); q8_0 keeps
 * token rows, its quantization blocks run along the row. */
static bool kv_planar(enum ops_kv_type t)
{
    return t != OPS_KV_Q8_0;
}

static size_t kv_elem_bytes(enum ops_kv_type t)
{
    return t == OPS_KV_F16 ? 2 : 4;
}

void attn_kv_store(const struct attn_layer *L, int32_t n_head_kv, int32_t head_dim,
                   int32_t block, int32_t slot, const float *k, const float *v)
{
    const int32_t bt = L->block_tokens, hd = head_dim;
    char *kb = (char *)L->k + (size_t)block * bt * L->row_bytes;
    char *vb = (char *)L->v + (size_t)block * bt * L->row_bytes;
    if (!kv_planar(L->type)) {
        ops_kv_store(L->type, kb + (size_t)slot * L->row_bytes, k, (int64_t)n_head_kv * hd);
        ops_kv_store(L->type, vb + (size_t)slot * L->row_bytes, v, (int64_t)n_head_kv * hd);
        return;
    }
    const size_t es = kv_elem_bytes(L->type);
    for (int32_t g = 0; g < n_head_kv; g++)
        ops_kv_store(L->type, vb + ((size_t)g * bt + slot) * hd * es, v + (size_t)g * hd, hd);
    /* K element (g, d) of this token sits at ((g·hd + d)·bt + slot): convert
     * in short runs, then scatter with stride bt. */
    enum { RUN = 64 };
    unsigned char conv[RUN * 4];
    const int64_t kd = (int64_t)n_head_kv * hd;
    for (int64_t i0 = 0; i0 < kd; i0 += RUN) {
        const int64_t n = kd - i0 < RUN ? kd - i0 : RUN;
        ops_kv_store(L->type, conv, k + i0, n);
        for (int64_t i = 0; i < n; i++)
            memcpy(kb + ((size_t)(i0 + i) * bt + slot) * es, conv + (size_t)i * es, es);
    }
}

/* Loads V rows [j0, j1] of one block for KV head g into buf (bt × hd). Rows
 * outside are zeroed in the row layout and left as stored in the planar
 * one: pv_block reads only [j0, j1]. */
static void load_block(const struct attn_layer *L, int32_t block, int32_t g, int32_t hd,
                       int32_t j0, int32_t j1, float *buf)
{
    const int32_t bt = L->block_tokens;
    const char *base = (const char *)L->v + (size_t)block * bt * L->row_bytes;
    if (kv_planar(L->type)) {
        const size_t es = kv_elem_bytes(L->type);
        ops_kv_load(L->type, base + ((size_t)g * bt + j0) * hd * es, buf + (size_t)j0 * hd,
                    (int64_t)(j1 - j0 + 1) * hd);
        return;
    }
    const size_t head_off = ops_kv_row_bytes(L->type, (int64_t)g * hd);
    for (int32_t j = 0; j < bt; j++) {
        float *dst = buf + (size_t)j * hd;
        if (j < j0 || j > j1)
            memset(dst, 0, (size_t)hd * sizeof(float));
        else
            ops_kv_load(L->type, base + (size_t)j * L->row_bytes + head_off, dst, hd);
    }
}

/* Loads K rows [j0, j1] of one block transposed, buf[d * bt + j], so the QK
 * products run across keys (one vector lane per key, no reductions). The
 * planar layout is stored that way: one conversion of bt · hd elements.
 * Lanes outside [j0, j1] hold whatever the slots hold; lanes never mix and
 * their scores are not read. */
static void load_block_t(const struct attn_layer *L, int32_t block, int32_t g, int32_t hd,
                         int32_t j0, int32_t j1, float *buf, float *tmp)
{
    const int32_t bt = L->block_tokens;
    const char *base = (const char *)L->k + (size_t)block * bt * L->row_bytes;
    if (kv_planar(L->type)) {
        ops_kv_load(L->type, base + (size_t)g * hd * bt * kv_elem_bytes(L->type), buf,
                    (int64_t)hd * bt);
        return;
    }
    const size_t head_off = ops_kv_row_bytes(L->type, (int64_t)g * hd);
    for (int32_t j = 0; j < bt; j++) {
        if (j < j0 || j > j1) {
            for (int32_t d = 0; d < hd; d++) buf[(size_t)d * bt + j] = 0.0f;
            continue;
        }
        ops_kv_load(L->type, base + (size_t)j * L->row_bytes + head_off, tmp, hd);
        for (int32_t d = 0; d < hd; d++) buf[(size_t)d * bt + j] = tmp[d];
    }
}

/* Softmax of one query's scores over [jlo, jhi] as the reference computes
 * it (max, exp, sum in double, scale by the inverse), then each probability
 * rounded to f16 as the reference rounds it before the product with V. The
 * sum runs in 8 fixed lanes (one dependent chain of double adds was 6 % of
 * a prefill), the same order on every ISA. */
static inline __attribute__((always_inline)) void softmax_f16(float *restrict sc, int32_t n)
{
    float mx = -INFINITY;
    for (int32_t j = 0; j < n; j++) mx = sc[j] > mx ? sc[j] : mx;
    for (int32_t j = 0; j < n; j++) sc[j] = ops_expf(sc[j] - mx);
    double lane[8] = { 0 };
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) lane[k] += (double)sc[i + k];
    double sum = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
    for (; i < n; i++) sum += (double)sc[i];
    const float inv = (float)(1.0 / sum);
    for (int32_t j = 0; j < n; j++) sc[j] *= inv;
    ops_round_f16(sc, n);
}

/* 16 floats as one vector (GCC/Clang vector extension): one zmm on
 * AVX-512, two ymm on AVX2, four xmm otherwise, same arithmetic in each. */
typedef float v16 __attribute__((vector_size(64)));

static inline __attribute__((always_inline)) v16 ld16(const float *p)
{
    v16 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Scores of N queries (rows q[0..N-1], each hd long) against one block,
 * keys across vector lanes, out[i · bt + j]. Each score is summed over d in
 * order; the N rows are independent chains, so the FMA latency of one
 * chain hides behind the others (one chain alone ran at a quarter of the
 * FMA throughput), and each K vector is loaded once for N rows. */
static inline __attribute__((always_inline)) void qk_rows(const float *const *q, const int N,
                                                          const float *restrict kt, int32_t hd,
                                                          int32_t bt, float *restrict out)
{
    if (bt == 16) {
        v16 acc[4] = { { 0 } };
        for (int32_t d = 0; d < hd; d++) {
            const v16 k = ld16(kt + (size_t)d * 16);
            for (int i = 0; i < N; i++) acc[i] += q[i][d] * k;
        }
        for (int i = 0; i < N; i++) memcpy(out + (size_t)i * 16, &acc[i], sizeof acc[i]);
        return;
    }
    for (int i = 0; i < N; i++) {
        float *o = out + (size_t)i * bt;
        for (int32_t j = 0; j < bt; j++) o[j] = 0.0f;
        for (int32_t d = 0; d < hd; d++)
            for (int32_t j = 0; j < bt; j++) o[j] += q[i][d] * kt[(size_t)d * bt + j];
    }
}

/* o += Σ_j p_j v_j over one block: 64 output dims at a time in four
 * independent register chains (then 16), each summed over j in order. */
static inline __attribute__((always_inline)) void pv_block(float *restrict o,
                                                           const float *restrict p,
                                                           const float *restrict v, int32_t jlo,
                                                           int32_t jhi, int32_t hd)
{
    int32_t d0 = 0;
    for (; d0 + 64 <= hd; d0 += 64) {
        v16 a0 = ld16(o + d0), a1 = ld16(o + d0 + 16), a2 = ld16(o + d0 + 32),
            a3 = ld16(o + d0 + 48);
        for (int32_t j = jlo; j <= jhi; j++) {
            const float *vj = v + (size_t)j * hd + d0;
            a0 += p[j] * ld16(vj);
            a1 += p[j] * ld16(vj + 16);
            a2 += p[j] * ld16(vj + 32);
            a3 += p[j] * ld16(vj + 48);
        }
        memcpy(o + d0, &a0, sizeof a0);
        memcpy(o + d0 + 16, &a1, sizeof a1);
        memcpy(o + d0 + 32, &a2, sizeof a2);
        memcpy(o + d0 + 48, &a3, sizeof a3);
    }
    for (; d0 + 16 <= hd; d0 += 16) {
        v16 acc = ld16(o + d0);
        for (int32_t j = jlo; j <= jhi; j++) acc += p[j] * ld16(v + (size_t)j * hd + d0);
        memcpy(o + d0, &acc, sizeof acc);
    }
    for (; d0 < hd; d0++)
        for (int32_t j = jlo; j <= jhi; j++) o[d0] += p[j] * v[(size_t)j * hd + d0];
}

/* Scaled scores of query rows rows[0..nq-1] (nq ≤ 4) of a tile against the
 * block at key position base, into their rows of sc. */
static inline __attribute__((always_inline)) void score_rows(
    const struct attn_batch *b, int32_t t0, int32_t G, int32_t base, int32_t lo_min, int32_t span,
    int32_t bt, int32_t hd, const float *kbuf, const float *qh, const int32_t *rows, int32_t nq,
    float *sacc, float *sc)
{
    const float *qs[4];
    for (int32_t i = 0; i < nq; i++) qs[i] = qh + (size_t)rows[i] * hd;
    if (nq == 4) qk_rows(qs, 4, kbuf, hd, bt, sacc);
    else if (nq == 3) qk_rows(qs, 3, kbuf, hd, bt, sacc);
    else if (nq == 2) qk_rows(qs, 2, kbuf, hd, bt, sacc);
    else qk_rows(qs, 1, kbuf, hd, bt, sacc);
    for (int32_t i = 0; i < nq; i++) {
        const int32_t p = b->pos[t0 + rows[i] / G], lo = window_lo(p, b->window);
        const int32_t jlo = lo - base > 0 ? lo - base : 0;
        const int32_t jhi = p - base < bt - 1 ? p - base : bt - 1;
        float *row = sc + (size_t)rows[i] * span + (base - lo_min);
        for (int32_t j = jlo; j <= jhi; j++) row[j] = sacc[(size_t)i * bt + j] * b->scale;
    }
}

/* One tile of T queries (consecutive positions of one sequence) against KV
 * head g, in three passes over the blocks: scores, softmax, weighted V.
 * Scores of query (tt, h) for key position kp sit at
 * sc[(tt*G + h) * span + kp - lo_min]. */
static inline __attribute__((always_inline)) void do_tile(const struct attn_job *J, int32_t t0,
                                                          int32_t T, int32_t g, float *ws)
{
    const struct attn_layer *L = J->L;
    const struct attn_batch *b = J->b;
    const int32_t hd = b->head_dim, G = b->n_head / b->n_head_kv, bt = L->block_tokens;
    const int32_t qdim = b->n_head * hd;
    const int32_t p_last = b->pos[t0 + T - 1];
    const int32_t lo_min = window_lo(b->pos[t0], b->window);
    const int32_t span = p_last - lo_min + 1;
    const int32_t *table = b->table[t0];
    float *kbuf = ws, *tmp = kbuf + (size_t)bt * hd, *sacc = tmp + hd;
    float *qh = sacc + 4 * (size_t)bt, *sc = qh + (size_t)T * G * hd;

    /* Queries rounded to f16: the reference multiplies f16 K by f16 Q. */
    for (int32_t tt = 0; tt < T; tt++) {
        for (int32_t h = 0; h < G; h++) {
            float *d = qh + (size_t)(tt * G + h) * hd;
            memcpy(d, b->q + (size_t)(t0 + tt) * qdim + (size_t)(g * G + h) * hd,
                   (size_t)hd * sizeof(float));
            ops_round_f16(d, hd);
        }
    }
    for (int32_t pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            for (int32_t tt = 0; tt < T; tt++) {
                const int32_t p = b->pos[t0 + tt], lo = window_lo(p, b->window);
                for (int32_t h = 0; h < G; h++)
                    softmax_f16(sc + (size_t)(tt * G + h) * span + (lo - lo_min), p - lo + 1);
            }
            for (int32_t i = 0; i < T * G; i++) {
                float *o = b->out + (size_t)(t0 + i / G) * qdim + (size_t)(g * G + i % G) * hd;
                memset(o, 0, (size_t)hd * sizeof(float));
            }
        }
        for (int32_t blk = lo_min / bt; blk <= p_last / bt; blk++) {
            const int32_t base = blk * bt;
            const int32_t j0 = lo_min - base > 0 ? lo_min - base : 0;
            const int32_t j1 = p_last - base < bt - 1 ? p_last - base : bt - 1;
            if (pass)
                load_block(L, table[blk], g, hd, j0, j1, kbuf);
            else
                load_block_t(L, table[blk], g, hd, j0, j1, kbuf, tmp);
            if (pass == 0) {
                /* s_j = Σ_d q_d k_jd, summed over d in order for every key;
                 * the query rows that see this block go 4 at a time */
                int32_t rows[4], nq = 0;
                for (int32_t s = 0; s < T * G; s++) {
                    const int32_t p = b->pos[t0 + s / G], lo = window_lo(p, b->window);
                    if (p >= base && lo <= base + bt - 1) rows[nq++] = s; /* else wholly masked */
                    if (nq == 4 || (nq > 0 && s == T * G - 1)) {
                        score_rows(b, t0, G, base, lo_min, span, bt, hd, kbuf, qh, rows, nq, sacc, sc);
                        nq = 0;
                    }
                }
                continue;
            }
            for (int32_t tt = 0; tt < T; tt++) {
                const int32_t p = b->pos[t0 + tt], lo = window_lo(p, b->window);
                if (p < base || lo > base + bt - 1) continue; /* block wholly masked */
                const int32_t jlo = lo - base > 0 ? lo - base : 0;
                const int32_t jhi = p - base < bt - 1 ? p - base : bt - 1;
                for (int32_t h = 0; h < G; h++) {
                    const int32_t s = tt * G + h;
                    pv_block(b->out + (size_t)(t0 + tt) * qdim + (size_t)(g * G + h) * hd,
                             sc + (size_t)s * span + (base - lo_min), kbuf, jlo, jhi, hd);
                }
            }
        }
    }
}

/* The work items of thread ith. Compiled per ISA and picked by the
 * caller's isa (so TERN_ISA caps it like the matmuls); every version does
 * the same operations in the same order (C11: no FMA contraction), so
 * results do not depend on the CPU. */
static inline __attribute__((always_inline)) void worker_body(const struct attn_job *J, int ith,
                                                              int nth)
{
    const int32_t nkv = J->b->n_head_kv;
    float *ws = J->scratch + (size_t)ith * J->per_thread;
    /* Interleaved items balance the causal triangle across threads. */
    for (int32_t it = ith; it < J->n_tiles * nkv; it += nth) {
        const int32_t tile = it / nkv;
        do_tile(J, J->tiles[2 * tile], J->tiles[2 * tile + 1], it % nkv, ws);
    }
}

static void worker_scalar(void *arg, int ith, int nth)
{
    worker_body(arg, ith, nth);
}

#if ATTN_X86
__attribute__((target("avx2,fma,f16c"))) static void worker_avx2(void *arg, int ith, int nth)
{
    worker_body(arg, ith, nth);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))) static void
worker_avx512(void *arg, int ith, int nth)
{
    worker_body(arg, ith, nth);
}
#endif

static void (*attn_worker_for(enum cpu_isa isa))(void *, int, int)
{
#if ATTN_X86
    if (isa >= CPU_ISA_AVX512) return worker_avx512;
    if (isa == CPU_ISA_AVX2) return worker_avx2;
#endif
    (void)isa;
    return worker_scalar;
}

static int32_t make_tiles(const struct attn_batch *b, int32_t *tiles)
{
    int32_t n = 0;
    for (int32_t i = 0; i < b->n_tokens;) {
        int32_t k = 1;
        while (k < TILE && i + k < b->n_tokens && b->table[i + k] == b->table[i] &&
               b->pos[i + k] == b->pos[i + k - 1] + 1)
            k++;
        tiles[2 * n] = i;
        tiles[2 * n + 1] = k;
        n++;
        i += k;
    }
    return n;
}

int attn_forward(struct threadpool *tp, enum cpu_isa isa, const struct attn_layer *L,
                 const struct attn_batch *b, struct attn_scratch *s)
{
    const int nth = tp ? tp_n_threads(tp) : 1;
    const size_t G = (size_t)(b->n_head / b->n_head_kv), hd = (size_t)b->head_dim;
    const size_t bt = (size_t)L->block_tokens;
    int32_t span = 1;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        const int32_t w = b->window > 0 && b->pos[i] + 1 > b->window ? b->window : b->pos[i] + 1;
        span = w + TILE > span ? w + TILE : span;
    }
    const size_t per = bt * hd + hd + 4 * bt + TILE * G * hd + TILE * G * (size_t)span + 16;
    if (s->cap < per * (size_t)nth) {
        float *nb = realloc(s->buf, per * (size_t)nth * sizeof(float));
        if (!nb) return -1;
        s->buf = nb;
        s->cap = per * (size_t)nth;
    }
    if (s->tiles_cap < (size_t)b->n_tokens) {
        int32_t *nt = realloc(s->tiles, (size_t)b->n_tokens * 2 * sizeof(int32_t));
        if (!nt) return -1;
        s->tiles = nt;
        s->tiles_cap = (size_t)b->n_tokens;
    }
    struct attn_job J = { L, b, s->tiles, make_tiles(b, s->tiles), s->buf, per };
    void (*worker)(void *, int, int) = attn_worker_for(isa);
    if (tp && nth > 1 && (int64_t)J.n_tiles * b->n_head_kv > 1)
        tp_run(tp, worker, &J);
    else
        worker(&J, 0, 1);
    return 0;
}
