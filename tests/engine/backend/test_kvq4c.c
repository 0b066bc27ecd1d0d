/* test_kvq4c: the q4c KV cache (kv_type KV_Q4C) on the CPU backend, the
 * real default model (SmolLM2-135M): K per channel over each block, the
 * blocks a forward writes staged in f16 (engine/backend/cpu_kvstage.h),
 * V as rotated q5_0 rows.
 *
 * - its size: 8280 bytes per token for SmolLM2 (30 layers of kv_dim 192:
 *   K 192 · 12 / 16, V 192 / 32 · 22), the pool exactly its blocks; the
 *   other types' 2 · n_layer · row unchanged;
 * - a 70-token prompt in one batch, token by token and in chunks of 5: the
 *   same logits bit for bit at every position;
 * - taken-back tokens (a speculative verification rejected): rewriting
 *   positions of an open block, of a block filled and closed before (its
 *   keys requantized), across and back over block boundaries, in one or
 *   several forwards: the same bits as a sequence that never had the
 *   rejected tokens;
 * - sequences batched together the same bits as each alone; more
 *   sequences than the staging keeps (max_seqs 1: 6 entries), interleaved
 *   so that open blocks are closed and reopened from the pool: finite, and
 *   within a loose bound of each alone;
 * - a full staging never reclaims an entry the forward itself writes, in
 *   whichever order the batch lists its sequences;
 * - kv_block_io (the disk prompt cache): blocks read from one backend and
 *   written over another's (whose staging held other keys for them) give
 *   the same logits for a continuation, also after that staging would have
 *   been reclaimed;
 * - f16 against q4c on real text: mean next-token NLL within 3 %. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "engine_util.h"
#include "model.h"
#include "tap.h"
#include "tok.h"

static const char TEXT[] =
    "The lighthouse stood on a narrow spit of rock at the mouth of the harbour, and for "
    "nearly two hundred years its keepers had written down the weather in a row of "
    "leather-bound books. Each morning the keeper climbed the spiral stair, trimmed the "
    "wick, polished the great lens and then sat at the small desk by the window to record "
    "the direction of the wind, the height of the sea and the colour of the sky. Most of "
    "the entries are short and plain: a fresh breeze from the west, a long swell, rain "
    "before noon. But here and there a keeper wrote more. One described a winter so cold "
    "that the spray froze on the railings and had to be broken off with a hammer. Another "
    "recorded the night a fishing boat lost its mast and drifted onto the rocks below, and "
    "how the crew were pulled up one by one on a rope while the keeper's wife held the "
    "lamp. When the light was finally automated, the books were taken to the town museum, "
    "where visitors can still turn the pages and follow the slow rhythm of the seasons. "
    "Historians have used them to study how storms have changed over the centuries, and "
    "schoolchildren read them to learn what daily life was like before radios and "
    "satellites. The building itself is now empty, but on clear nights the beam still "
    "sweeps across the water, turning every ten seconds, as it always has. Sailors say "
    "that the light is a promise: whatever the weather, someone once sat at that window "
    "and watched the sea, so that others could come home safely.";

enum { BT = 16 };

static struct backend *open_be(const struct model *m, enum kv_type kv, int32_t bt, int32_t max_seqs,
                               char *err, size_t errlen)
{
    struct backend_config cfg = {
        .kind = BACKEND_CPU, .threads = 2, .kv_type = kv, .kv_block_tokens = bt,
        .kv_bytes = (uint64_t)256 * (uint64_t)bt * backend_kv_token_bytes(kv, m->hp.n_layer,
                        (int64_t)m->hp.n_head_kv * m->hp.head_dim, bt),
        .max_batch_tokens = 512, .max_seqs = max_seqs,
    };
    return backend_cpu_open(m, &cfg, err, errlen);
}

/* Tokens tok[p0, p1) of one sequence at positions p0.. over its block
 * table, in forwards of `chunk`; every row's logits into out[(p - p0)]
 * (out may be NULL). */
static int fwd(struct backend *be, const int32_t *table, int32_t nb, const int32_t *tok,
               int32_t p0, int32_t p1, int32_t chunk, float *out)
{
    char err[256];
    const int32_t nv = be->model->hp.n_vocab;
    int32_t pos[512], seq[512];
    uint8_t want[512];
    float *tmp = malloc((size_t)chunk * nv * sizeof(float));
    const struct fwd_seq s = { table, nb };
    int rc = 0;
    for (int32_t i = p0; i < p1 && !rc; i += chunk) {
        const int32_t k = p1 - i < chunk ? p1 - i : chunk;
        for (int32_t j = 0; j < k; j++) {
            pos[j] = i + j;
            seq[j] = 0;
            want[j] = 1;
        }
        const struct fwd_batch b = { k, tok + i, pos, seq, want, 1, &s };
        rc = backend_forward(be, &b, tmp, err, sizeof err);
        if (rc) tap_diag("forward: %s", err);
        else if (out) memcpy(out + (size_t)(i - p0) * nv, tmp, (size_t)k * nv * sizeof(float));
    }
    free(tmp);
    return rc;
}

static void table_from(int32_t *t, int32_t n, int32_t first)
{
    for (int32_t i = 0; i < n; i++) t[i] = first + i;
}

static int32_t first_diff_row(const float *a, const float *b, int32_t rows, int32_t nv)
{
    for (int32_t r = 0; r < rows; r++)
        if (memcmp(a + (size_t)r * nv, b + (size_t)r * nv, (size_t)nv * sizeof(float))) return r;
    return -1;
}

/* ---- size ------------------------------------------------------------------- */

static void sizes(const struct model *m)
{
    /* no model needed: the formula */
    ok(backend_kv_token_bytes(KV_Q4C, 30, 192, 16) == 8280,
       "q4c: 8280 bytes per token at 30 layers of kv_dim 192 (K 144 + V 132 per layer): %llu",
       (unsigned long long)backend_kv_token_bytes(KV_Q4C, 30, 192, 16));
    static const struct { enum kv_type t; uint64_t row; const char *name; } o[] = {
        { KV_F16, 192 * 2, "f16" }, { KV_F32, 192 * 4, "f32" },
        { KV_Q8_0, 192 / 32 * 34, "q8_0" }, { KV_Q4_0, 192 / 32 * 18, "q4_0" },
    };
    int same = 1;
    for (size_t i = 0; i < 4; i++)
        for (int32_t bt = 8; bt <= 64; bt *= 2)
            same &= backend_kv_token_bytes(o[i].t, 30, 192, bt) == 2 * 30 * o[i].row;
    ok(same, "f16, f32, q8_0, q4_0: 2 · n_layer · row bytes per token at any block size");
    if (!m) return;
    char err[512];
    const int64_t kv_dim = (int64_t)m->hp.n_head_kv * m->hp.head_dim;
    ok(m->hp.n_layer == 30 && kv_dim == 192, "SmolLM2: 30 layers, kv_dim 192 (%d, %lld)",
       m->hp.n_layer, (long long)kv_dim);
    struct backend *be = open_be(m, KV_Q4C, BT, 4, err, sizeof err);
    if (!ok(be != NULL, "q4c backend opens: %s", be ? "" : err)) return;
    struct backend_info info;
    be->ops->get_info(be, &info);
    ok(be->kv_bytes_per_token == 8280 &&
       info.kv_bytes == (uint64_t)be->kv_n_blocks * BT * be->kv_bytes_per_token,
       "q4c backend: %llu bytes per token, pool of %d blocks of %llu bytes each",
       (unsigned long long)be->kv_bytes_per_token, be->kv_n_blocks,
       (unsigned long long)(info.kv_bytes / (uint64_t)be->kv_n_blocks));
    backend_close(be);
    /* blocks of 10: K takes 192 · 9 / 10 = 172.8 bytes per token, so a
     * block is not kv_bytes_per_token · 10 bytes unless the size is
     * refused or rounded up (kv_block_io copies the block's bytes into a
     * buffer the disk cache sizes by kv_bytes_per_token · block_tokens) */
    be = open_be(m, KV_Q4C, 10, 4, err, sizeof err);
    if (be) {
        be->ops->get_info(be, &info);
        ok(info.kv_bytes == (uint64_t)be->kv_n_blocks * 10 * be->kv_bytes_per_token,
           "q4c with blocks of 10 tokens: a block is kv_bytes_per_token · 10 bytes (%llu "
           "bytes per token, blocks of %llu bytes)", (unsigned long long)be->kv_bytes_per_token,
           (unsigned long long)(info.kv_bytes / (uint64_t)be->kv_n_blocks));
        /* what the disk cache would see: a block read into its buffer */
        const size_t bb = (size_t)be->kv_bytes_per_token * 10;
        unsigned char *buf = malloc(bb + 4096);
        memset(buf, 0xC3, bb + 4096);
        int canary = be->ops->kv_block_io(be, 0, buf, false) == 0;
        for (size_t i = bb; i < bb + 4096; i++) canary &= buf[i] == 0xC3;
        ok(canary, "q4c with blocks of 10 tokens: kv_block_io reads no more than "
           "kv_bytes_per_token · 10 bytes into the caller's buffer");
        free(buf);
        backend_close(be);
    } else {
        ok(strstr(err, "q4c") != NULL, "q4c with blocks of 10 tokens refused: %s", err);
    }
}

/* ---- batch invariance ---------------------------------------------------------- */

static void batching(const struct model *m, const int32_t *text, const char *name)
{
    enum { N = 70 };
    char err[512];
    const int32_t nv = m->hp.n_vocab;
    struct backend *be = open_be(m, KV_Q4C, BT, 4, err, sizeof err);
    if (!ok(be != NULL, "%s: q4c backend opens: %s", name, be ? "" : err)) return;
    const size_t rows = (size_t)N * nv * sizeof(float);
    float *one = malloc(rows), *got = malloc(rows);
    int32_t table[8];
    table_from(table, 8, 0);
    if (ok(fwd(be, table, 8, text, 0, N, N, one) == 0, "%s: %d-token prompt in one batch runs",
           name, N)) {
        static const int32_t chunks[] = { 1, 5 };
        for (int i = 0; i < 2; i++) {
            /* blocks 8.. the first time, then 0.. again (written over from slot 0) */
            for (int again = 0; again < 2; again++) {
                table_from(table, 8, again ? 0 : 8);
                const int rc = fwd(be, table, 8, text, 0, N, chunks[i], got);
                const int32_t r = rc ? 0 : first_diff_row(one, got, N, nv);
                ok(rc == 0 && r < 0, "%s: %s (blocks %s): every position's logits equal the "
                   "one batch's bit for bit%s", name,
                   chunks[i] == 1 ? "token by token" : "chunks of 5",
                   again ? "written over" : "fresh", r >= 0 ? " (a row differs)" : "");
                if (r >= 0) tap_diag("first differing position %d", r);
            }
        }
    }
    free(one);
    free(got);
    backend_close(be);
}

/* ---- taken-back tokens ----------------------------------------------------------- */

/* The sequence a[0..n_a) written (in forwards of chunk_a), then b[r..e)
 * at positions r..e-1 over the same blocks in steps (forwards ending at
 * each of cut[]), against a[0..r) + b[r..e) in blocks of their own. */
static void rollback_case(struct backend *be, const int32_t *a, const int32_t *b, int32_t n_a,
                          int32_t chunk_a, int32_t r, int32_t e, const int32_t *cut, int n_cut,
                          int32_t *next_block)
{
    const int32_t nv = be->model->hp.n_vocab, n = e - r;
    int32_t tx[8], ty[8];
    table_from(tx, 8, *next_block);
    table_from(ty, 8, *next_block + 8);
    *next_block += 16;
    const size_t rows = (size_t)n * nv * sizeof(float);
    float *lx = malloc(rows), *ly = malloc(rows);
    int rc = fwd(be, tx, 8, a, 0, n_a, chunk_a, NULL);
    int32_t p = r;
    for (int i = 0; i <= n_cut && !rc; i++) {
        const int32_t end = i < n_cut ? cut[i] : e;
        rc = fwd(be, tx, 8, b, p, end, end - p, lx + (size_t)(p - r) * nv);
        p = end;
    }
    /* the sequence that never had a's tokens from r on: a[0..r) then b */
    int32_t *ref = malloc(sizeof(int32_t) * (size_t)e);
    memcpy(ref, a, sizeof(int32_t) * (size_t)r);
    memcpy(ref + r, b + r, sizeof(int32_t) * (size_t)(e - r));
    if (!rc) rc = fwd(be, ty, 8, ref, 0, r, r ? r : 1, NULL);
    if (!rc) rc = fwd(be, ty, 8, ref, r, e, e - r, ly);
    const int32_t d = rc ? 0 : first_diff_row(lx, ly, n, nv);
    char steps[96];
    int k = snprintf(steps, sizeof steps, "%d", r);
    for (int i = 0; i < n_cut; i++)
        k += snprintf(steps + k, sizeof steps - (size_t)k, "..%d | %d", cut[i], cut[i]);
    snprintf(steps + k, sizeof steps - (size_t)k, "..%d", e);
    ok(rc == 0 && d < 0, "%d tokens written (forwards of %d), taken back at %d, then %s: the "
       "same bits as never having had them%s", n_a, chunk_a, r, steps,
       d >= 0 ? " (a row differs)" : "");
    if (d >= 0) tap_diag("first differing position %d", r + d);
    free(ref);
    free(lx);
    free(ly);
}

static void rollback(const struct model *m, const int32_t *text)
{
    char err[512];
    struct backend *be = open_be(m, KV_Q4C, BT, 4, err, sizeof err);
    if (!ok(be != NULL, "q4c backend opens: %s", be ? "" : err)) return;
    const int32_t *a = text, *b = text + 100;   /* b: other tokens at the same positions */
    int32_t nb = 0;
    /* within the open block (32..47), then over the boundary at 48 */
    rollback_case(be, a, b, 40, 40, 35, 50, NULL, 0, &nb);
    /* into block 1, filled and closed at 31: rewritten from 30, closed
     * again, and block 2 (8 keys) from slot 0; A decoded token by token */
    rollback_case(be, a, b, 40, 1, 30, 45, NULL, 0, &nb);
    /* the same in steps: block 1 left open at 14 keys of 16, then refilled */
    static const int32_t c1[] = { 31, 34 };
    rollback_case(be, a, b, 40, 7, 30, 45, c1, 2, &nb);
    /* taken back to a block boundary */
    rollback_case(be, a, b, 40, 40, 32, 45, NULL, 0, &nb);
    /* back over two boundaries (block 1 from slot 3, blocks 2 and 3 anew) */
    rollback_case(be, a, b, 60, 5, 19, 52, NULL, 0, &nb);
    /* a verification that fills the closed block again only partly, twice */
    static const int32_t c2[] = { 29, 30, 31, 33 };
    rollback_case(be, a, b, 47, 47, 27, 49, c2, 4, &nb);
    backend_close(be);
}

/* ---- several sequences ---------------------------------------------------------- */

static void sequences(const struct model *m, const int32_t *text)
{
    enum { NA = 40, NB = 24, NC = 7 };
    char err[512];
    const int32_t nv = m->hp.n_vocab;
    struct backend *be = open_be(m, KV_Q4C, BT, 4, err, sizeof err);
    if (!ok(be != NULL, "q4c backend opens: %s", be ? "" : err)) return;
    const int32_t *a = text, *bt = text + 50, *ct = text + 90;
    float *alone = malloc((size_t)(NA + NB + NC) * nv * sizeof(float));
    float *mixed = malloc((size_t)(NA + NB + NC) * nv * sizeof(float));
    int32_t t0[3], t1[2], t2[1];
    table_from(t0, 3, 20);
    table_from(t1, 2, 30);
    table_from(t2, 1, 40);
    int rc = fwd(be, t0, 3, a, 0, NA, NA, alone);
    if (!rc) rc = fwd(be, t1, 2, bt, 0, NB, NB, alone + (size_t)NA * nv);
    if (!rc) rc = fwd(be, t2, 1, ct, 0, NC, NC, alone + (size_t)(NA + NB) * nv);
    /* B's prefill, A's, C's in one batch, each in other blocks */
    int32_t tab_a[3] = { 9, 4, 7 }, tab_b[2] = { 1, 8 }, tab_c[1] = { 2 };
    const struct fwd_seq seqs[3] = { { tab_b, 2 }, { tab_a, 3 }, { tab_c, 1 } };
    int32_t tok[NA + NB + NC], pos[NA + NB + NC], seq[NA + NB + NC];
    uint8_t want[NA + NB + NC];
    int32_t k = 0;
    for (int32_t i = 0; i < NB; i++, k++) { tok[k] = bt[i]; pos[k] = i; seq[k] = 0; want[k] = 1; }
    for (int32_t i = 0; i < NA; i++, k++) { tok[k] = a[i]; pos[k] = i; seq[k] = 1; want[k] = 1; }
    for (int32_t i = 0; i < NC; i++, k++) { tok[k] = ct[i]; pos[k] = i; seq[k] = 2; want[k] = 1; }
    const struct fwd_batch b = { k, tok, pos, seq, want, 3, seqs };
    if (!rc) rc = backend_forward(be, &b, mixed, err, sizeof err);
    if (ok(rc == 0, "A, B and C alone and in one batch run %s", rc ? err : "")) {
        ok(memcmp(alone, mixed + (size_t)NB * nv, (size_t)NA * nv * sizeof(float)) == 0 &&
           memcmp(alone + (size_t)NA * nv, mixed, (size_t)NB * nv * sizeof(float)) == 0 &&
           memcmp(alone + (size_t)(NA + NB) * nv, mixed + (size_t)(NA + NB) * nv,
                  (size_t)NC * nv * sizeof(float)) == 0,
           "three sequences in one batch: each one's logits the same bits as alone");
    }
    free(alone);
    free(mixed);
    backend_close(be);
}

/* More sequences than the staging keeps (max_seqs 1: 2 · 1 + 4 entries
 * beyond a batch's blocks), 3 tokens of one a forward, round robin:
 * the entries of open blocks are reclaimed (closed into the pool with the
 * keys they hold) and reopened from the pool, their keys rounded twice. */
static void reclaim(const struct model *m, const int32_t *text)
{
    enum { NS = 10, L = 40, STEP = 3 };
    char err[512];
    const int32_t nv = m->hp.n_vocab;
    struct backend *be = open_be(m, KV_Q4C, BT, 1, err, sizeof err);
    struct backend *f16 = be ? open_be(m, KV_F16, BT, 1, err, sizeof err) : NULL;
    if (!ok(be && f16, "q4c (max_seqs 1) and f16 backends open: %s", be && f16 ? "" : err)) {
        backend_close(be);
        backend_close(f16);
        return;
    }
    float *alone = malloc((size_t)NS * L * nv * sizeof(float));
    float *inter = malloc((size_t)NS * L * nv * sizeof(float));
    float *row16 = malloc((size_t)L * nv * sizeof(float));
    int32_t tabs[NS][3];
    int rc = 0;
    double q4c_f16 = 0.0;   /* the scale: q4c's own distance from f16 on these sequences */
    for (int32_t s = 0; s < NS && !rc; s++) {
        table_from(tabs[s], 3, 100 + 3 * s);
        rc = fwd(be, tabs[s], 3, text + 7 * s, 0, L, L, alone + (size_t)s * L * nv);
        if (!rc) rc = fwd(f16, tabs[s], 3, text + 7 * s, 0, L, L, row16);
        for (size_t i = 0; !rc && i < (size_t)L * nv; i++)
            q4c_f16 = fmax(q4c_f16, fabs((double)row16[i] - alone[(size_t)s * L * nv + i]));
    }
    free(row16);
    backend_close(f16);
    for (int32_t s = 0; s < NS; s++) table_from(tabs[s], 3, 3 * s);
    for (int32_t p = 0; p < L && !rc; p += STEP) {
        const int32_t n = L - p < STEP ? L - p : STEP;
        for (int32_t s = 0; s < NS && !rc; s++)   /* one sequence a forward (max_seqs 1) */
            rc = fwd(be, tabs[s], 3, text + 7 * s, p, p + n, n, inter + ((size_t)s * L + p) * nv);
    }
    if (ok(rc == 0, "%d sequences alone, then interleaved %d tokens a forward, run %s", NS, STEP,
           rc ? err : "")) {
        int finite = 1, agree = 0, exact = 0;
        double worst = 0.0;
        for (int32_t s = 0; s < NS; s++) {
            exact += memcmp(alone + (size_t)s * L * nv, inter + (size_t)s * L * nv,
                            (size_t)L * nv * sizeof(float)) == 0;
            for (int32_t p = 0; p < L; p++) {
                const size_t o = ((size_t)s * L + p) * nv;
                const float *x = alone + o, *y = inter + o;
                for (int32_t i = 0; i < nv; i++) {
                    finite &= isfinite(y[i]);
                    worst = fmax(worst, fabs((double)x[i] - y[i]));
                }
                agree += eu_argmax(x, nv) == eu_argmax(y, nv);
            }
        }
        tap_diag("interleaved: %d of %d sequences bit-identical to alone, argmax agrees at %d "
                 "of %d positions, max |logit difference| %.3g (q4c alone vs f16: %.3g)", exact,
                 NS, agree, NS * L, worst, q4c_f16);
        ok(finite, "interleaved past the staging's entries: every logit finite");
        ok(worst <= 2.0 * q4c_f16 && agree >= NS * L * 9 / 10, "interleaved past the staging's "
           "entries: within twice q4c's own distance from f16 of each alone (max |logit "
           "difference| %.3g <= 2 x %.3g), argmax the same at %d of %d positions (>= 90 %%)",
           worst, q4c_f16,
           agree, NS * L);
    }
    free(alone);
    free(inter);
    backend_close(be);
}

/* A batch whose first sequence needs a fresh entry when every entry is
 * taken: the least recently written is reclaimed, but never one this
 * forward writes (cpu_kvstage.h, kvs_begin), whichever order the batch
 * lists its sequences in. Q's open block is the least recently written
 * (16 entries: Q's and 15 full blocks of R since; max_seqs 2 keeps 8,
 * this batch's limit is 14), and P's fresh block comes first or last. */
static void batch_order(const struct model *m, const int32_t *text)
{
    char err[512];
    const int32_t nv = m->hp.n_vocab;
    const int32_t *qt = text + 20, *pt = text + 120, *rt = text;
    float *alone = malloc((size_t)2 * nv * sizeof(float));
    float *got = malloc((size_t)6 * nv * sizeof(float));
    struct backend *a = open_be(m, KV_Q4C, BT, 2, err, sizeof err);
    int32_t tq[2] = { 0, 1 }, tp[1] = { 40 }, tr[16];
    int rc = a ? fwd(a, tq, 2, qt, 0, 8, 8, NULL) : -1;
    if (!rc) rc = fwd(a, tq, 2, qt, 8, 10, 2, alone);
    backend_close(a);
    for (int order = 0; order < 2 && !rc; order++) {
        struct backend *be = open_be(m, KV_Q4C, BT, 2, err, sizeof err);
        if (!be) {
            rc = -1;
            break;
        }
        rc = fwd(be, tq, 2, qt, 0, 8, 8, NULL);
        for (int32_t k = 0; k < 15 && !rc; k++) {
            table_from(tr, 1, 10 + k);
            rc = fwd(be, tr, 1, rt, 0, BT, BT, NULL);
        }
        /* P's 4 tokens (a fresh block) and Q's next 2, P first or Q first */
        const struct fwd_seq fs[2] = { { tp, 1 }, { tq, 2 } };
        int32_t tok[6], pos[6], seq[6];
        uint8_t want[6] = { 1, 1, 1, 1, 1, 1 };
        for (int32_t j = 0; j < 6; j++) {
            const int is_q = order == 0 ? j >= 4 : j < 2;
            const int32_t i = order == 0 ? (is_q ? j - 4 : j) : (is_q ? j : j - 2);
            tok[j] = is_q ? qt[8 + i] : pt[i];
            pos[j] = is_q ? 8 + i : i;
            seq[j] = is_q;
        }
        const struct fwd_batch b = { 6, tok, pos, seq, want, 2, fs };
        if (!rc) rc = backend_forward(be, &b, got, err, sizeof err);
        const float *qrows = got + (size_t)(order == 0 ? 4 : 0) * nv;
        ok(rc == 0 && memcmp(qrows, alone, (size_t)2 * nv * sizeof(float)) == 0,
           "staging full, a batch of a fresh block's P and an open block's Q (%s first): Q's "
           "entry, written by this forward, is not the one reclaimed: Q's logits the bits of Q "
           "alone%s", order == 0 ? "P" : "Q", rc ? err : "");
        backend_close(be);
    }
    if (rc) ok(0, "batch order case runs: %s", err);
    free(alone);
    free(got);
}

/* ---- kv_block_io ------------------------------------------------------------------ */

static void block_io(const struct model *m, const int32_t *text)
{
    enum { NB = 3, CONT = 12 };
    char err[512];
    const int32_t nv = m->hp.n_vocab;
    struct backend *x = open_be(m, KV_Q4C, BT, 1, err, sizeof err);
    struct backend *y = x ? open_be(m, KV_Q4C, BT, 1, err, sizeof err) : NULL;
    if (!ok(x && y && x->ops->kv_block_io, "two q4c backends with kv_block_io open: %s",
            x && y ? "" : err)) {
        backend_close(x);
        backend_close(y);
        return;
    }
    const size_t bb = (size_t)x->kv_bytes_per_token * BT;
    char *blocks = malloc(NB * bb + 64);
    memset(blocks + NB * bb, 0xC3, 64);
    float *lx = malloc((size_t)CONT * nv * sizeof(float));
    float *ly = malloc((size_t)CONT * nv * sizeof(float));
    int32_t table[6];
    table_from(table, 6, 0);
    /* x: the prompt's 3 full blocks, read out */
    int rc = fwd(x, table, 6, text, 0, NB * BT, NB * BT, NULL);
    for (int32_t k = 0; k < NB && !rc; k++) rc = x->ops->kv_block_io(x, k, blocks + k * bb, false);
    int canary = 1;
    for (int i = 0; i < 64; i++) canary &= (unsigned char)blocks[NB * bb + i] == 0xC3;
    ok(rc == 0 && canary, "x: %d blocks read out (%zu bytes each, nothing past them)", NB, bb);
    /* y: other keys in those blocks first (block 2 left open, 8 keys in
     * its staging), then the blocks written from x's bytes */
    if (!rc) rc = fwd(y, table, 6, text + 200, 0, 40, 40, NULL);
    for (int32_t k = 0; k < NB && !rc; k++) rc = y->ops->kv_block_io(y, k, blocks + k * bb, true);
    /* then enough other blocks that an entry left for block 2 would be
     * reclaimed, and closed over the written bytes */
    int32_t other[24], filler[24 * BT];
    table_from(other, 24, 10);
    for (int32_t i = 0; i < 24 * BT; i++) filler[i] = text[(i * 7) % 256];
    if (!rc) rc = fwd(y, other, 24, filler, 0, 24 * BT, BT, NULL);
    /* the continuation on both */
    if (!rc) rc = fwd(x, table, 6, text, NB * BT, NB * BT + CONT, CONT, lx);
    if (!rc) rc = fwd(y, table, 6, text, NB * BT, NB * BT + CONT, CONT, ly);
    const int32_t d = rc ? 0 : first_diff_row(lx, ly, CONT, nv);
    ok(rc == 0 && d < 0, "y: the blocks written from x's bytes (its staging for them dropped), "
       "%d other blocks later: a %d-token continuation's logits the same bits as x's%s",
       24, CONT, d >= 0 ? " (a row differs)" : "");
    /* and decoding on from there, token by token, still equal */
    if (!rc) rc = fwd(x, table, 6, text, NB * BT + CONT, NB * BT + 2 * CONT, 1, lx);
    if (!rc) rc = fwd(y, table, 6, text, NB * BT + CONT, NB * BT + 2 * CONT, 1, ly);
    ok(rc == 0 && first_diff_row(lx, ly, CONT, nv) < 0,
       "and %d more tokens decoded one by one on both: the same bits", CONT);
    free(blocks);
    free(lx);
    free(ly);
    backend_close(x);
    backend_close(y);
}

/* ---- real text ----------------------------------------------------------------------- */

static double mean_nll(struct backend *be, const int32_t *text, int32_t n)
{
    const int32_t nv = be->model->hp.n_vocab;
    float *lg = malloc((size_t)n * nv * sizeof(float));
    int32_t table[32];
    table_from(table, 32, 0);
    double sum = NAN;
    if (fwd(be, table, 32, text, 0, n, 128, lg) == 0) {
        sum = 0.0;
        for (int32_t i = 0; i + 1 < n; i++) {
            const float *r = lg + (size_t)i * nv;
            double mx = r[0], s = 0.0;
            for (int32_t j = 1; j < nv; j++) mx = r[j] > mx ? r[j] : mx;
            for (int32_t j = 0; j < nv; j++) s += exp(r[j] - mx);
            sum += mx + log(s) - r[text[i + 1]];
        }
        sum /= n - 1;
    }
    free(lg);
    return sum;
}

static void real_text(const struct model *m, const int32_t *text, int32_t n)
{
    char err[512];
    struct backend *f = open_be(m, KV_F16, BT, 4, err, sizeof err);
    struct backend *q = f ? open_be(m, KV_Q4C, BT, 4, err, sizeof err) : NULL;
    if (ok(f && q, "f16 and q4c backends open: %s", f && q ? "" : err)) {
        const double nf = mean_nll(f, text, n), nq = mean_nll(q, text, n);
        ok(isfinite(nf) && isfinite(nq) && fabs(nq - nf) <= 0.03 * nf,
           "real text (%d tokens): mean NLL f16 %.4f, q4c %.4f (%+.2f %%, within 3 %%)", n, nf,
           nq, 100.0 * (nq - nf) / nf);
    }
    backend_close(f);
    backend_close(q);
}

int main(void)
{
    char path[1024], err[512];
    const char *home = getenv("HOME");
    snprintf(path, sizeof path, "%s/.local/share/tern/models/SmolLM2-135M-Instruct.Q4_1.gguf",
             home ? home : ".");
    if (access(path, R_OK) != 0 && eu_model_path("smollm2", path, sizeof path) != 0) {
        sizes(NULL);   /* the formula needs no model */
        tap_skip("SmolLM2-135M-Instruct.Q4_1.gguf not found");
        return tap_done();
    }
    struct model *m = model_open(path, err, sizeof err);
    if (!m) return tap_bail("%s", err);
    struct tok *tk = tok_open(m->gguf, err, sizeof err);
    if (!tk) {
        model_close(m);
        return tap_bail("%s", err);
    }
    int32_t text[1024];
    const int64_t n = tok_encode(tk, TEXT, strlen(TEXT), TOK_ADD_BOS, text, 1024, err, sizeof err);
    tok_close(tk);
    if (!ok(n >= 260 && n <= 1024, "the text is %lld tokens (260 or more)", (long long)n)) {
        model_close(m);
        return tap_done();
    }
    sizes(m);
    batching(m, text, "smollm2");
    rollback(m, text);
    sequences(m, text);
    reclaim(m, text);
    batch_order(m, text);
    block_io(m, text);
    real_text(m, text, (int32_t)n);
    model_close(m);
    /* Gemma 3 (head_dim 256, one KV head for four query heads, sliding
     * window layers) where it is present */
    snprintf(path, sizeof path, "%s/.local/share/tern/models/gemma-3-270m-q4_k_m.gguf",
             home ? home : ".");
    if (access(path, R_OK) != 0) {
        tap_skip("gemma-3-270m-q4_k_m.gguf not found");
        return tap_done();
    }
    m = model_open(path, err, sizeof err);
    tk = m ? tok_open(m->gguf, err, sizeof err) : NULL;
    if (ok(m && tk, "gemma3 opens: %s", m && tk ? "" : err)) {
        const int64_t ng =
            tok_encode(tk, TEXT, strlen(TEXT), TOK_ADD_BOS, text, 1024, err, sizeof err);
        if (ok(ng >= 70 && ng <= 1024, "gemma3: the text is %lld tokens", (long long)ng))
            batching(m, text, "gemma3");
    }
    if (tk) tok_close(tk);
    if (m) model_close(m);
    return tap_done();
}
