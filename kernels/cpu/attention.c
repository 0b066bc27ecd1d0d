/* attention: paged, grouped-query attention on the CPU. Queries of one
 * sequence at consecutive positions form tiles of up to ATTN_TILE tokens;
 * a prompt's K and V blocks are converted to f32 once per call and KV head
 * (the runs of its tiles, attn_kv_run), decode tiles read them in place.
 * Each (tile, KV head) is one work item, or, when those are too few
 * for the threads (decode), each (tile, KV head, part of the keys). Scores
 * are kept for the whole span of the tile (two passes: QK, then
 * softmax-weighted V). Cost is bounded by reading the KV rows (decode) or
 * by the QK and PV products (prefill). */
#include "attention.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "threadpool.h"

#include "attn_impl.h"

void attn_scratch_free(struct attn_scratch *s)
{
    free(s->buf);
    free(s->tiles);
    free(s->items);
    free(s->parts);
    free(s->stats);
    free(s->part_base);
    free(s->qrot);
    free(s->kvbf);
    free(s->runs);
    free(s->tile_run);
    memset(s, 0, sizeof *s);
}

int32_t attn_kv_rot(enum ops_kv_type t, int32_t head_dim, int v)
{
    /* q8_0 keeps its unrotated figures (docs/PERFORMANCE.md §8) */
    if ((t != OPS_KV_Q4_0 && t != OPS_KV_Q4C) || head_dim % 64 || head_dim > ATTN_ROT_MAX)
        return 0;
    if (v) return 64;   /* the reference found small pieces better for V */
    if (t == OPS_KV_Q4C) return 0;   /* per channel: a rotation would mix the channels */
    int32_t n = 64;
    while (head_dim % (2 * n) == 0) n *= 2;
    return n;
}

void attn_hadamard(float *x, int32_t n)
{
    /* butterflies over log2(n) levels: Sylvester order, as the reference's
     * ggml_gen_hadamard builds its matrix */
    for (int32_t h = 1; h < n; h *= 2)
        for (int32_t i = 0; i < n; i += 2 * h)
            for (int32_t j = i; j < i + h; j++) {
                const float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
    const float sc = 1.0f / sqrtf((float)n);
    for (int32_t i = 0; i < n; i++) x[i] *= sc;
}

/* Rotates each head_dim piece of n rows in place: pieces of r floats. */
static void rotate_heads(float *x, int64_t n_heads, int32_t hd, int32_t r)
{
    for (int64_t h = 0; h < n_heads; h++)
        for (int32_t i = 0; i < hd; i += r) attn_hadamard(x + h * hd + i, r);
}

static uint16_t to_f16(float x)
{
    uint16_t h;
    ops_kv_store(OPS_KV_F16, &h, &x, 1);
    return h;
}

static float from_f16(uint16_t h)
{
    float x;
    ops_kv_load(OPS_KV_F16, &h, &x, 1);
    return x;
}

/* The per-channel codes of n values x (one dimension's keys in a block):
 * min and step rounded to f16 first, each code the nearest level of the
 * rounded pair, so the reader's min + step · code is what was meant. */
static void kc_quant_channel(const float *x, int32_t n, int32_t bt, uint16_t *mn_h,
                             uint16_t *st_h, uint8_t *codes)
{
    float lo = x[0], hi = x[0];
    for (int32_t j = 1; j < n; j++) {
        lo = x[j] < lo ? x[j] : lo;
        hi = x[j] > hi ? x[j] : hi;
    }
    *mn_h = to_f16(lo);
    *st_h = to_f16((hi - lo) / 15.0f);
    const float mn = from_f16(*mn_h), st = from_f16(*st_h);
    /* an infinite step (keys past f16's range) codes everything 0 */
    const float inv = st > 0.0f && st < INFINITY ? 1.0f / st : 0.0f;
    memset(codes, 0, (size_t)bt / 2);
    for (int32_t j = 0; j < n; j++) {
        float c = nearbyintf((x[j] - mn) * inv);
        c = !(c >= 0.0f) ? 0.0f : c > 15.0f ? 15.0f : c;   /* NaN: 0 */
        codes[j / 2] |= (uint8_t)((int)c << (4 * (j & 1)));
    }
}

void attn_kc_close(const struct attn_layer *L, int32_t n_head_kv, int32_t head_dim,
                   int32_t block, const uint16_t *st, int32_t n)
{
    const int32_t bt = L->block_tokens, hd = head_dim;
    char *kb = attn_block(L, L->k, block);
    float x[256];   /* block_tokens at most 256 (backend_cpu checks) */
    for (int32_t g = 0; g < n_head_kv; g++) {
        char *h = kb + (size_t)g * attn_kc_head_bytes(hd, bt);
        uint16_t *pairs = (uint16_t *)(void *)h;
        uint8_t *codes = (uint8_t *)h + (size_t)hd * 4;
        for (int32_t d = 0; d < hd; d++) {
            ops_kv_load(OPS_KV_F16, st + ((size_t)g * hd + d) * bt, x, n);
            kc_quant_channel(x, n, bt, &pairs[2 * d], &pairs[2 * d + 1],
                             codes + (size_t)d * (bt / 2));
        }
    }
}

/* Dimension d's keys [0, n): min + step · code, the product exact (an f16
 * times a 4-bit integer), so a fused or a separate add gives these bits. */
static void kc_load_dim(const void *head, int32_t hd, int32_t bt, int32_t d, int32_t n, float *o)
{
    const uint16_t *pairs = head;
    const uint8_t *c = (const uint8_t *)head + (size_t)hd * 4 + (size_t)d * (bt / 2);
    const float mn = from_f16(pairs[2 * d]), st = from_f16(pairs[2 * d + 1]);
    for (int32_t j = 0; j < n; j++) o[j] = st * (float)((c[j / 2] >> (4 * (j & 1))) & 15) + mn;
}

void attn_kc_load(const void *head, int32_t head_dim, int32_t bt, float *buf)
{
    for (int32_t d = 0; d < head_dim; d++)
        kc_load_dim(head, head_dim, bt, d, bt, buf + (size_t)d * bt);
}

void attn_kc_reopen(const struct attn_layer *L, int32_t n_head_kv, int32_t head_dim,
                    int32_t block, uint16_t *st, int32_t n)
{
    const int32_t bt = L->block_tokens, hd = head_dim;
    const char *kb = attn_block(L, L->k, block);
    float buf[256];
    for (int32_t g = 0; g < n_head_kv; g++)
        for (int32_t d = 0; d < hd; d++) {
            kc_load_dim(kb + (size_t)g * attn_kc_head_bytes(hd, bt), hd, bt, d, n, buf);
            ops_kv_store(OPS_KV_F16, st + ((size_t)g * hd + d) * bt, buf, n);
        }
}

void attn_kv_store(const struct attn_layer *L, int32_t n_head_kv, int32_t head_dim,
                   int32_t block, int32_t slot, const float *k, const float *v)
{
    const int32_t bt = L->block_tokens, hd = head_dim;
    char *kb = attn_block(L, L->k, block);
    char *vb = attn_block(L, L->v, block);
    const int32_t rk = attn_kv_rot(L->type, hd, 0), rv = attn_kv_rot(L->type, hd, 1);
    if (L->type == OPS_KV_Q4C) {
        /* K into the block's f16 staging (quantized when the block is full,
         * attn_kc_close), V as q4_0 rows rotated as q4_0's */
        uint16_t *st = L->kc_stage + (size_t)L->kc_entry[block] * L->kc_stride;
        enum { RUN = 64 };
        uint16_t conv[RUN];
        const int64_t kd = (int64_t)n_head_kv * hd;
        for (int64_t i0 = 0; i0 < kd; i0 += RUN) {
            const int64_t n = kd - i0 < RUN ? kd - i0 : RUN;
            ops_kv_store(OPS_KV_F16, conv, k + i0, n);
            for (int64_t i = 0; i < n; i++) st[(size_t)(i0 + i) * bt + slot] = conv[i];
        }
        float tmp[ATTN_ROT_MAX];
        const size_t hb = ops_kv_row_bytes(L->type, hd);
        for (int32_t g = 0; g < n_head_kv; g++) {
            const float *src = v + (size_t)g * hd;
            if (rv) {
                memcpy(tmp, src, (size_t)hd * sizeof(float));
                rotate_heads(tmp, 1, hd, rv);
                src = tmp;
            }
            ops_kv_store(L->type, vb + (size_t)slot * L->row_bytes + g * hb, src, hd);
        }
        return;
    }
    if (rk) {
        /* a head at a time (its row starts on a quantization block), rotated
         * in a copy: the caller's rows stay as given */
        float tmp[ATTN_ROT_MAX];
        const size_t hb = ops_kv_row_bytes(L->type, hd);
        for (int32_t g = 0; g < n_head_kv; g++) {
            memcpy(tmp, k + (size_t)g * hd, (size_t)hd * sizeof(float));
            rotate_heads(tmp, 1, hd, rk);
            ops_kv_store(L->type, kb + (size_t)slot * L->row_bytes + g * hb, tmp, hd);
            memcpy(tmp, v + (size_t)g * hd, (size_t)hd * sizeof(float));
            rotate_heads(tmp, 1, hd, rv);
            ops_kv_store(L->type, vb + (size_t)slot * L->row_bytes + g * hb, tmp, hd);
        }
        return;
    }
    if (!attn_kv_planar(L->type)) {
        ops_kv_store(L->type, kb + (size_t)slot * L->row_bytes, k, (int64_t)n_head_kv * hd);
        ops_kv_store(L->type, vb + (size_t)slot * L->row_bytes, v, (int64_t)n_head_kv * hd);
        return;
    }
    const size_t es = attn_kv_elem_bytes(L->type);
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

/* The split phases' worker, phase 0's unit and the f32 conversion pass
 * for isa (TERN_ISA caps it like the matmuls); bf16: amx with
 * attn_batch.bf16_tiles (its own conversion, attn_amx_convert_unit). */
static void attn_kernels_for(enum cpu_isa isa, bool bf16, tp_fn *worker, tp_unit_fn *unit,
                             tp_unit_fn *convert)
{
#if defined(__x86_64__)
    if (bf16) {   /* prompt tiles on AMX-BF16, the split phases as AVX-512 */
        *worker = attn_avx512_worker;
        *unit = attn_amx_unit;
        *convert = attn_amx_convert_unit;
        return;
    }
    if (isa >= CPU_ISA_AVX512) {
        *worker = attn_avx512_worker;
        *unit = attn_avx512_unit;
        *convert = attn_avx512_convert;
        return;
    }
    if (isa >= CPU_ISA_AVX2) {
        *worker = attn_avx2_worker;
        *unit = attn_avx2_unit;
        *convert = attn_avx2_convert;
        return;
    }
#endif
    (void)isa;
    (void)bf16;
    *worker = attn_scalar_worker;
    *unit = attn_scalar_unit;
    *convert = attn_scalar_convert;
}

/* Tiles of up to tmax queries of one sequence at consecutive positions;
 * bt > 0: within one KV block (q4c: a tile's queries share their own
 * block, read from staging, attn_layer). */
static int32_t make_tiles(const struct attn_batch *b, int32_t *tiles, int32_t tmax, int32_t bt)
{
    int32_t n = 0;
    for (int32_t i = 0; i < b->n_tokens;) {
        int32_t k = 1;
        while (k < tmax && i + k < b->n_tokens && b->table[i + k] == b->table[i] &&
               b->pos[i + k] == b->pos[i + k - 1] + 1 &&
               !(bt > 0 && b->pos[i + k] % bt == 0))
            k++;
        tiles[2 * n] = i;
        tiles[2 * n + 1] = k;
        n++;
        i += k;
    }
    return n;
}

/* Grows *p to hold n elements of size es; 0 or -1. */
static int grow(void **p, size_t *cap, size_t n, size_t es)
{
    if (*cap >= n) return 0;
    void *np = realloc(*p, n * es);
    if (!np) return -1;
    *p = np;
    *cap = n;
    return 0;
}

static int attn_run(struct threadpool *tp, enum cpu_isa isa, const struct attn_layer *L,
                    const struct attn_batch *b, struct attn_scratch *s);

/* Beyond this the prompt tiles convert K and V per tile (per item on AMX)
 * instead of once per call (e.g. 8 KV heads of 64 dims at 64k keys would
 * need 200 MB as bf16 tiles, 270 MB as f32). */
#define ATTN_KV_ONCE_MAX ((size_t)128 << 20)

/* Whether tile t's keys are converted once per call with its run's: AMX
 * tiles that fit; otherwise tiles that convert (more than ATTN_INPLACE_T
 * queries: the rest read the blocks in place where they can). */
static bool tile_in_run(const struct attn_job *J, int32_t t, bool amx)
{
#if defined(__x86_64__)
    if (amx) return attn_amx_fits(J, t);
#endif
    (void)amx;
    return J->tiles[2 * t + 1] > ATTN_INPLACE_T;
}

/* Prompt tiles in runs of one sequence at consecutive positions, each
 * run's keys converted once per KV head (attn_kv_run: bf16 tile chunks on
 * AMX, f32 blocks otherwise), so a block is not converted again for every
 * tile that reads it. Returns the slots to convert (0: none, J->kvbf and
 * J->kvf NULL), or -1. */
static int64_t plan_runs(struct attn_job *J, struct attn_scratch *s, bool amx)
{
    const struct attn_batch *b = J->b;
    if (grow((void **)&s->tile_run, &s->tile_run_cap, (size_t)J->n_tiles, sizeof(int32_t)) ||
        grow(&s->runs, &s->runs_cap, (size_t)J->n_tiles, sizeof(struct attn_kv_run)))
        return -1;
    struct attn_kv_run *runs = s->runs;
    int32_t n = 0;
    for (int32_t t = 0; t < J->n_tiles; t++) {
        const int32_t t0 = J->tiles[2 * t], T = J->tiles[2 * t + 1];
        if (!tile_in_run(J, t, amx)) {
            s->tile_run[t] = -1;
            continue;
        }
        if (!(t > 0 && s->tile_run[t - 1] >= 0 && b->table[t0] == b->table[t0 - 1] &&
              b->pos[t0] == b->pos[t0 - 1] + 1)) {
            runs[n].tok = t0;
            runs[n].lo = attn_window_lo(b->pos[t0], b->window);
            n++;
        }
        runs[n - 1].hi = b->pos[t0 + T - 1];
        s->tile_run[t] = n - 1;
    }
    const int32_t ck = amx ? ATTN_AMX_CK : J->L->block_tokens;
    size_t slots = 0;
    for (int32_t r = 0; r < n; r++) {
        runs[r].c_lo = runs[r].lo / ck;
        runs[r].n_ch = runs[r].hi / ck - runs[r].c_lo + 1;
        runs[r].off = slots;
        slots += (size_t)b->n_head_kv * (size_t)runs[r].n_ch;
    }
    J->runs = runs;
    J->n_runs = n;
    J->tile_run = s->tile_run;
#if defined(__x86_64__)
    const size_t slot = amx ? attn_amx_slot_bytes(b->head_dim)
                            : attn_kvf_slot_floats(J->L->block_tokens, b->head_dim) * sizeof(float);
#else
    const size_t slot = attn_kvf_slot_floats(J->L->block_tokens, b->head_dim) * sizeof(float);
#endif
    const size_t bytes = slots * slot + 64;
    if (!n || bytes > ATTN_KV_ONCE_MAX) return 0;
    if (grow(&s->kvbf, &s->kvbf_cap, bytes, 1)) return -1;
    void *at = (void *)(((uintptr_t)s->kvbf + 63) & ~(uintptr_t)63);
    if (amx)
        J->kvbf = at;
    else
        J->kvf = at;
    return (int64_t)slots;
}

int attn_forward(struct threadpool *tp, enum cpu_isa isa, const struct attn_layer *L,
                 const struct attn_batch *b, struct attn_scratch *s)
{
    const int32_t rk = attn_kv_rot(L->type, b->head_dim, 0), rv = attn_kv_rot(L->type, b->head_dim, 1);
    if (!rk && !rv) return attn_run(tp, isa, L, b, s);
    /* a rotated cache (attn_kv_rot): the queries rotated as K was, the
     * output rotated back as V was; on this thread, O(n · log hd) per row */
    const int64_t rows = (int64_t)b->n_tokens * b->n_head;
    struct attn_batch rb = *b;
    if (rk) {
        if (grow((void **)&s->qrot, &s->qrot_cap, (size_t)rows * (size_t)b->head_dim,
                 sizeof(float)))
            return -1;
        memcpy(s->qrot, b->q, (size_t)rows * (size_t)b->head_dim * sizeof(float));
        rotate_heads(s->qrot, rows, b->head_dim, rk);
        rb.q = s->qrot;
    }
    if (attn_run(tp, isa, L, &rb, s)) return -1;
    if (rv) rotate_heads(b->out, rows, b->head_dim, rv);
    return 0;
}

static int attn_run(struct threadpool *tp, enum cpu_isa isa, const struct attn_layer *L,
                    const struct attn_batch *b, struct attn_scratch *s)
{
    const int nth = tp ? tp_n_threads(tp) : 1;
    const size_t G = (size_t)(b->n_head / b->n_head_kv), hd = (size_t)b->head_dim;
    /* bf16 tiles (amx): longer tiles, so each chunk of K and V converted
     * to bf16 serves more rows */
    const bool bf16 = isa >= CPU_ISA_AMX && b->bf16_tiles;
    const int32_t tmax = bf16 ? ATTN_AMX_TILE : ATTN_TILE;
    const size_t bt = (size_t)L->block_tokens, R = (size_t)tmax * G;
    const int32_t P = attn_part_keys(L->block_tokens);
    int32_t span = 1;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        const int32_t w = b->window > 0 && b->pos[i] + 1 > b->window ? b->window : b->pos[i] + 1;
        span = w + tmax > span ? w + tmax : span;
    }
    /* kbuf (a run of V blocks), tmp, sacc, then per row: q, part
     * accumulator, max lanes, scores */
    const size_t per = (size_t)P * hd + hd + ATTN_ROWS_MAX * bt +
                       R * (2 * hd + ATTN_VW_MAX + (size_t)span) + 16 +
                       (bf16 ? attn_amx_floats((int32_t)G, b->head_dim) : 0);
    if (grow((void **)&s->buf, &s->cap, per * (size_t)nth, sizeof(float))) return -1;
    if (grow((void **)&s->tiles, &s->tiles_cap, (size_t)b->n_tokens, 2 * sizeof(int32_t))) return -1;
    const int32_t n_tiles = make_tiles(b, s->tiles, tmax,
                                       L->type == OPS_KV_Q4C ? L->block_tokens : 0);
    /* Too few (tile, KV head) items for the threads (decode): the scores
     * of each part of the keys are one item, then each (tile, KV head) the
     * softmax and the products with V. The same operations as whole. */
    int64_t n_parts = 0;
    for (int32_t t = 0; t < n_tiles; t++) {
        int32_t k0, n;
        attn_tile_parts(b, s->tiles[2 * t], s->tiles[2 * t + 1], P, &k0, &n);
        n_parts += n;
    }
    /* Only where whole (tile, KV head) items cannot be balanced over the
     * threads (decode: SmolLM2's 3 KV heads or Gemma 3's 1 on 2 threads):
     * then each (tile, KV head, part) is an item of three pool passes
     * (scores and max; exp and sum; probabilities and products with V),
     * each thread the same contiguous run of items in every pass (its
     * scores stay in its cache), and the parts are added on this thread. */
    const int64_t whole = (int64_t)n_tiles * b->n_head_kv;
    /* (AMX: prompt tiles, T >= 2, go on bf16 tiles whole, never split:
     * the result would depend on the thread count) */
    const bool split = b->split_keys && tp && nth > 1 && whole < 4 * nth && whole % nth != 0 &&
                       n_parts > n_tiles && !(bf16 && n_tiles < b->n_tokens);
    const size_t n_items = split ? (size_t)n_parts : (size_t)n_tiles;
    if (grow((void **)&s->items, &s->items_cap, n_items, 2 * sizeof(int32_t))) return -1;
    if (split && grow((void **)&s->part_base, &s->part_base_cap, (size_t)n_tiles, 3 * sizeof(size_t)))
        return -1;
    size_t n_split = 0, n_stats = 0, it = 0;
    for (int32_t t = 0; t < n_tiles; t++) {
        if (!split) {
            s->items[2 * it] = t;
            s->items[2 * it++ + 1] = -1;
            continue;
        }
        int32_t k0, n;
        const int32_t t0 = s->tiles[2 * t], T = s->tiles[2 * t + 1];
        attn_tile_parts(b, t0, T, P, &k0, &n);
        const size_t rows = (size_t)b->n_head_kv * T * G;   /* all KV heads' rows */
        s->part_base[3 * t] = n_split;
        n_split += (size_t)b->n_head_kv * attn_split_floats(b, t0, T);
        s->part_base[3 * t + 1] = n_split;
        n_split += rows * (size_t)n * hd;
        s->part_base[3 * t + 2] = n_stats;
        n_stats += rows * (size_t)n * 2;
        for (int32_t k = 0; k < n; k++) {
            s->items[2 * it] = t;
            s->items[2 * it++ + 1] = k0 + k;
        }
    }
    if (split && (grow((void **)&s->parts, &s->parts_cap, n_split, sizeof(float)) ||
                  grow((void **)&s->stats, &s->stats_cap, n_stats, sizeof(double))))
        return -1;
    struct attn_job J = { L, b, s->tiles, n_tiles, s->items, (int32_t)n_items, P, 0,
                          s->parts, s->stats, s->part_base, s->buf, per, NULL, 0, NULL, NULL,
                          NULL };
    tp_fn worker;
    tp_unit_fn unit, convert;
    attn_kernels_for(isa, bf16, &worker, &unit, &convert);
    if (split) {
        for (J.phase = 1; J.phase <= 3; J.phase++) tp_run(tp, worker, &J);
        J.phase = 4;
        worker(&J, 0, 1);
    } else {   /* one unit per (tile, KV head), claimed: thread 0 alone can finish them */
        /* first each run's K and V, once: bf16 tiles (AMX) or f32 blocks */
        const int64_t slots = plan_runs(&J, s, bf16);
        if (slots < 0) return -1;
        if (slots) tp_run_claimed(tp, slots, TP_CLAIM_OWN_FIRST, convert, &J);
        tp_run_claimed(tp, (int64_t)n_items * b->n_head_kv, TP_CLAIM_SHARED, unit, &J);
    }
    return 0;
}
