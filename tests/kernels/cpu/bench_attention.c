/* bench_attention: the CPU attention kernel alone (built, not run as a
 * test). A prefill of N tokens into an empty context, in batches of 512 as
 * the engine sends them, then decode steps at depth N; CPU seconds
 * (this thread and the pool's, so a loaded machine disturbs it less; on
 * more threads they include the pool's spinning) and, for decode, wall.
 *   bench_attention [N [n_head n_kv head_dim [threads [decode_steps [split_keys [kv [bf16 [layers [tokens]]]]]]]]]
 * (TERN_ISA caps the ISA; split_keys as attn_batch, default 1; kv f16 (default),
 * f32, q8_0, q4_0 or q4c (K closed per block as the engine does, the last
 * block in f16 staging); bf16 as attn_batch.bf16_tiles for the prefill, default 1:
 * AMX-BF16 prompt tiles where the ISA is amx; layers: the decode steps go
 * through this many layers' caches in turn (default 1), so that, as in a
 * model, a layer's K and V are read from memory rather than from a cache
 * that still holds them from the step before; tokens: each step's tokens, the
 * sequence's last ones, as a speculative verification sends them, default 1) */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

#include "cpu/attention.h"
#include "cpu/cpu_isa.h"
#include "cpu/ops.h"
#include "cpu/threadpool.h"

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double wall_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The cache pools as the engine allocates them: 2 MiB-aligned, in huge
 * pages where the kernel gives them (TERN_BENCH_SMALL_PAGES=1: 4 KiB). */
static char *pool_alloc(size_t bytes)
{
    const size_t a = (size_t)2 << 20, n = (bytes + a - 1) / a * a;
    char *p = aligned_alloc(a, n);
    if (!p) return NULL;
#ifdef MADV_HUGEPAGE
    if (!getenv("TERN_BENCH_SMALL_PAGES")) madvise(p, n, MADV_HUGEPAGE);
#endif
    memset(p, 0, n);
    return p;
}

int main(int argc, char **argv)
{
    const int32_t N = argc > 1 ? atoi(argv[1]) : 4096;
    const int32_t nh = argc > 4 ? atoi(argv[2]) : 9, nkv = argc > 4 ? atoi(argv[3]) : 3;
    const int32_t hd = argc > 4 ? atoi(argv[4]) : 64, nth = argc > 5 ? atoi(argv[5]) : 1;
    const int32_t bt = 16, nblk = (N + bt) / bt, qd = nh * hd, kd = nkv * hd;
    const char *kvn = argc > 8 ? argv[8] : "f16";
    const enum ops_kv_type kvt = !strcmp(kvn, "q4_0") ? OPS_KV_Q4_0 : !strcmp(kvn, "q8_0") ? OPS_KV_Q8_0
                               : !strcmp(kvn, "q4c")  ? OPS_KV_Q4C
                               : !strcmp(kvn, "f32")  ? OPS_KV_F32  : OPS_KV_F16;
    const bool kc = kvt == OPS_KV_Q4C;
    const size_t row = ops_kv_row_bytes(kvt, kd);
    const enum cpu_isa isa = cpu_isa_best();
    const int32_t nl = argc > 10 && atoi(argv[10]) > 1 ? atoi(argv[10]) : 1;
    /* q4c's K block: per KV head attn_kc_head_bytes (packed pools, attn_block) */
    const size_t kblk = kc ? (size_t)nkv * attn_kc_head_bytes(hd, bt) : (size_t)bt * row;
    char *kp = pool_alloc((size_t)nblk * nl * kblk);
    char *vp = pool_alloc((size_t)nblk * bt * nl * row);
    int32_t *entry = malloc(sizeof(int32_t) * (size_t)nblk);   /* q4c: staging entry per block */
    uint16_t *stage = malloc(sizeof(uint16_t) * (size_t)nl * kd * bt);
    for (int32_t i = 0; i < nblk; i++) entry[i] = -1;
    float *q = malloc(sizeof(float) * (size_t)N * qd), *out = malloc(sizeof(float) * (size_t)N * qd);
    float *kv = malloc(sizeof(float) * (size_t)kd * 2);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)N), *table = malloc(sizeof(int32_t) * (size_t)nblk);
    const int32_t **tabs = malloc(sizeof(*tabs) * (size_t)N);
    struct attn_layer *Ls = malloc(sizeof(*Ls) * (size_t)nl);
    for (int32_t l = 0; l < nl; l++) {
        const size_t off = (size_t)l * nblk * bt * row;
        Ls[l] = (struct attn_layer){ kp + (size_t)l * nblk * kblk, vp + off, kvt, bt, row, 0,
                                     kc ? entry : NULL, kc ? stage + (size_t)l * kd * bt : NULL,
                                     0 };
    }
    const struct attn_layer L = Ls[0];
    uint32_t r = 1;
    for (int32_t i = 0; i < nblk; i++) table[i] = i;
    for (int32_t t = 0; t < N; t++) {
        for (int32_t i = 0; i < 2 * kd; i++) {
            r = r * 1664525u + 1013904223u;
            kv[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
        }
        if (kc) entry[t / bt] = 0;   /* one staging entry: the block being written */
        for (int32_t l = 0; l < nl; l++) attn_kv_store(&Ls[l], nkv, hd, t / bt, t % bt, kv, kv + kd);
        if (kc && t % bt == bt - 1 && t + 1 < N) {   /* full, not the decode's own: closed */
            for (int32_t l = 0; l < nl; l++)
                attn_kc_close(&Ls[l], nkv, hd, t / bt, Ls[l].kc_stage, bt);
            entry[t / bt] = -1;
        }
        for (int32_t i = 0; i < qd; i++) q[(size_t)t * qd + i] = kv[i % (2 * kd)] * 0.3f;
        pos[t] = t;
        tabs[t] = table;
    }
    struct threadpool *tp = tp_open(nth);
    struct attn_scratch s = { 0 };
    double t0 = cpu_s();
    /* q4c: the engine keeps a staging entry per block a forward writes and
     * a prompt tile reads its own block from it; this one keeps one (the
     * last block's), so the other tiles read their own blocks closed, from
     * the pool: the same work, K quantized instead of f16 */
    for (int32_t b0 = 0; b0 < N; b0 += 512) {
        const int32_t n = N - b0 < 512 ? N - b0 : 512;
        const struct attn_batch b = { n, nh, nkv, hd, 0, q + (size_t)b0 * qd, out + (size_t)b0 * qd,
                                      pos + b0, tabs + b0, 0.125f, 0.0f, 0,
                                      argc > 9 ? atoi(argv[9]) : 1 };
        attn_forward(tp, isa, &L, &b, &s);
    }
    const double pre = cpu_s() - t0;
    const double pairs = (double)N * (N + 1) / 2.0 * nh;   /* (query, key) pairs */
    const int STEPS = argc > 6 ? atoi(argv[6]) : 64;
    const int32_t split = argc > 7 ? atoi(argv[7]) : 1;
    t0 = cpu_s();
    const double w0 = wall_s();
    /* 11th argument: tokens per step (a speculative verification's rows,
     * the last ones of the sequence); 1 = decode */
    const int32_t nv = argc > 11 && atoi(argv[11]) > 1 && atoi(argv[11]) <= N ? atoi(argv[11]) : 1;
    for (int i = 0; i < STEPS; i++) {
        const struct attn_batch b = { nv, nh, nkv, hd, 0, q + (size_t)(N - nv) * qd, out,
                                      pos + N - nv, tabs + N - nv, 0.125f, 0.0f, split, 0 };
        for (int32_t l = 0; l < nl; l++) attn_forward(tp, isa, &Ls[l], &b, &s);
    }
    const double dec = (cpu_s() - t0) / STEPS / nl, decw = (wall_s() - w0) / STEPS / nl;
    printf("isa=%s threads=%d heads=%d/%d hd=%d N=%d: prefill %.3f CPU-s (%.2f ns per query-key "
           "pair, %.1f GFLOP/s), decode at depth %d (split %d, %d tokens) %.1f CPU-us (%.1f wall-us) per layer of %d (%.1f GB/s of K and V)\n",
           cpu_isa_name(isa), nth, nh, nkv, hd, N, pre, 1e9 * pre / pairs, 4.0 * hd * pairs / pre * 1e-9,
           N, split, nv, dec * 1e6, decw * 1e6, nl, N * ((double)kblk / bt + row) / decw * 1e-9);
    attn_scratch_free(&s);
    tp_close(tp);
    free(Ls); free(entry); free(stage); free(kp); free(vp); free(q); free(out); free(kv); free(pos); free(table); free(tabs);
    return 0;
}
