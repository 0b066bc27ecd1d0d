/* test_kv: the paged KV block manager on its own: allocation, ref counts,
 * prefix reuse by hash chain, LRU eviction, counters. */
#include <stdlib.h>

#include "kv.h"
#include "tap.h"

static void fill(int32_t *t, int32_t n, int32_t base)
{
    for (int32_t i = 0; i < n; i++) t[i] = base + i;
}

static void check(const struct kv *kv, const char *what)
{
    char err[256] = "";
    int rc = kv_check(kv, err, sizeof err);
    if (!ok(rc == 0, "counters consistent: %s", what)) tap_diag("%s", err);
}

int main(void)
{
    char err[256];
    struct kv kv;
    ok(kv_init(&kv, 0, 16, err, sizeof err) != 0, "empty pool refused: %s", err);
    if (kv_init(&kv, 8, 4, err, sizeof err) != 0) return tap_bail("%s", err);
    is_int(kv_available(&kv), 8, "all blocks free");
    is_int(kv_blocks_for(&kv, 9), 3, "9 tokens need 3 blocks of 4");

    int32_t a[20], b[20];
    fill(a, 20, 100);
    fill(b, 20, 100);
    b[10] = 7; /* b shares a's first 2 blocks (8 tokens) */

    struct kv_seq sa, sb, sc;
    kv_seq_init(&sa);
    is_int(kv_seq_match(&kv, &sa, a, 10, 9), 0, "nothing cached at first");
    is_int(kv_seq_reserve(&kv, &sa, 10), 0, "reserve 10 tokens");
    is_int(sa.n_blocks, 3, "3 blocks");
    is_int(kv.n_used, 3, "3 used");
    kv_seq_commit(&kv, &sa, a, 10);
    is_int(sa.n_hashed, 2, "2 full blocks registered after 10 tokens");
    check(&kv, "after a");

    kv_seq_init(&sb);
    int32_t nc;
    is_int(kv_peek_match(&kv, b, 19, &nc), 8, "peek: b reuses 8 tokens");
    is_int(nc, 0, "shared blocks are in use, not cached");
    is_int(kv_seq_match(&kv, &sb, b, 20, 19), 8, "b reuses 8 tokens");
    is_int(sb.blocks[0], sa.blocks[0], "first block shared");
    is_int(kv.blocks[sa.blocks[1]].ref, 2, "shared block has ref 2");
    is_int(kv_seq_reserve(&kv, &sb, 20), 0, "b grows to 20 tokens");
    is_int(kv.n_used, 6, "3 + 3 new blocks used");
    kv_seq_commit(&kv, &sb, b, 20);
    check(&kv, "after b");

    kv_seq_free(&kv, &sa);
    is_int(kv.n_used, 5, "a's private block freed, shared ones stay");
    is_int(kv.n_free, 3, "free count");
    kv_seq_free(&kv, &sb);
    is_int(kv.n_used, 0, "nothing used after both released");
    is_int(kv.n_cached, 5, "registered blocks stay cached (2 of a + 3 full of b)");
    check(&kv, "after release");

    /* A cached prefix is reused after its owners left. */
    kv_seq_init(&sc);
    is_int(kv_peek_match(&kv, a, 19, &nc), 8, "peek after release");
    is_int(nc, 2, "both matched blocks are cached");
    is_int(kv_seq_match(&kv, &sc, a, 20, 19), 8, "a's prefix reused from the cache");
    is_int(kv.n_cached, 3, "reused blocks left the cached list");
    /* Needs 3 more blocks: 3 free, none evicted. Then 2 more evict LRU. */
    is_int(kv_seq_reserve(&kv, &sc, 20), 0, "reserve from free list");
    is_int((long long)kv.evictions, 0, "no eviction while free blocks remain");
    is_int(kv_seq_reserve(&kv, &sc, 28), 0, "reserve evicts cached blocks");
    is_int((long long)kv.evictions, 2, "two LRU evictions");
    ok(kv_seq_reserve(&kv, &sc, 40) != 0, "over-reserve refused");
    is_int(sc.n_blocks, 7, "table unchanged by the refused reserve");
    check(&kv, "after evictions");
    kv_seq_free(&kv, &sc);
    is_int(kv.n_used, 0, "no leak");
    is_int(kv.n_free + kv.n_cached, 8, "all blocks back");
    ok(kv.hit_tokens == 16 && kv.query_tokens == 9 + 19 + 19, "hit/query tokens (%llu/%llu)",
       (unsigned long long)kv.hit_tokens, (unsigned long long)kv.query_tokens);

    /* Same prefix computed twice concurrently: only one copy registered. */
    struct kv_seq s1, s2;
    kv_seq_init(&s1);
    kv_seq_init(&s2);
    int32_t c[8];
    fill(c, 8, 5000);
    kv_seq_reserve(&kv, &s1, 8);
    kv_seq_reserve(&kv, &s2, 8);
    kv_seq_commit(&kv, &s1, c, 8);
    kv_seq_commit(&kv, &s2, c, 8);
    ok(kv.blocks[s1.blocks[0]].hashed && !kv.blocks[s2.blocks[0]].hashed,
       "duplicate prefix registered once");
    kv_seq_free(&kv, &s2);
    kv_seq_free(&kv, &s1);
    check(&kv, "after duplicate");
    kv_free(&kv);

    /* Disk restore: adopt shares what is registered, takes and registers
     * the rest, leaves them cached; a later match reuses them all. */
    if (kv_init(&kv, 6, 4, err, sizeof err) != 0) return tap_bail("%s", err);
    int32_t d[16], ids[4];
    bool fresh[8];   /* up to the 5 blocks of the refused adopt below */
    fill(d, 16, 500);
    struct kv_seq ra, rb;
    kv_seq_init(&ra);
    kv_seq_match(&kv, &ra, d, 16, 0);
    kv_seq_reserve(&kv, &ra, 4);
    kv_seq_commit(&kv, &ra, d, 4); /* block 0 of d registered */
    kv_seq_free(&kv, &ra);
    kv_seq_init(&ra);
    ok(kv_seq_adopt(&kv, &ra, d, 4, fresh) == 0 && !fresh[0] && fresh[1] && fresh[2] && fresh[3],
       "adopt: the registered block shared, three fresh ones");
    kv_seq_free(&kv, &ra);
    check(&kv, "after adopt");
    ok(kv.n_cached == 4 && kv_prefix_blocks(&kv, d, 16, ids) == 16, "adopted blocks cached, found");
    kv_seq_init(&rb);
    ok(kv_seq_match(&kv, &rb, d, 16, 16) == 16, "a match reuses all 16 adopted tokens");
    kv_seq_init(&ra);
    int32_t e2[20];
    fill(e2, 20, 900);
    ok(kv_seq_adopt(&kv, &ra, e2, 5, fresh) == -1 && ra.n_blocks == 0,
       "adopt refused when the pool cannot supply it (2 available, 5 wanted)");
    kv_seq_free(&kv, &ra);
    kv_seq_free(&kv, &rb);
    check(&kv, "after refusal");
    kv_free(&kv);

    /* A restore whose third block could not be written: that block and the
     * one chained after it leave the index; the first two stay matchable. */
    if (kv_init(&kv, 6, 4, err, sizeof err) != 0) return tap_bail("%s", err);
    fill(d, 16, 700);
    kv_seq_init(&ra);
    ok(kv_seq_adopt(&kv, &ra, d, 4, fresh) == 0 && fresh[0] && fresh[3], "adopt four fresh blocks");
    kv_seq_unadopt(&kv, &ra, 2);
    ok(ra.n_blocks == 2, "unadopt keeps the blocks before the failed one");
    kv_seq_free(&kv, &ra);
    check(&kv, "after unadopt");
    ok(kv_prefix_blocks(&kv, d, 16, ids) == 8 && kv.n_cached == 2 && kv.n_free == 4,
       "unadopted blocks are free and never matched: 8 of 16 tokens found");
    kv_seq_init(&rb);
    ok(kv_seq_match(&kv, &rb, d, 16, 16) == 8, "a later match reuses only the written 8 tokens");
    kv_seq_free(&kv, &rb);
    check(&kv, "after the partial match");
    kv_free(&kv);
    return tap_done();
}
