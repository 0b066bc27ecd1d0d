/* test_kvdisk: the disk prefix cache (engine/core/kvdisk.h).
 *
 * Files alone: a saved entry is found by its exact token prefix and loads
 * its bytes back; a flipped payload byte, a truncated file, a broken header,
 * another model, tokenizer or KV type are each ignored with one note and
 * never loaded; eviction at the cap removes the least recently used entry.
 *
 * The engine on the real default model (SmolLM2-135M-Instruct, CPU, one
 * thread): a ~1,000-token prompt's reply, greedy, is the same token for
 * token when its prefix is restored from disk by a new engine as when it is
 * prefilled cold, for the same prompt and for a longer follow-up turn; the
 * restore shows in n_cached; a corrupted file and a KV-type change give the
 * cold answer with one note; engine_cache_list lists the entries without
 * text unless asked. Fails (never skips) without the model. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"
#include "engine_util.h"
#include "kvdisk.h"
#include "tap.h"
#include "tok.h"

#define BT 16
#define BB 64 /* bytes per block in the file-only tests */

static char dir[256];

static int fill(void *ud, int32_t k, void *buf)
{
    int seed = *(int *)ud;
    for (int i = 0; i < BB; i++) ((unsigned char *)buf)[i] = (unsigned char)(seed * 31 + k * 7 + i);
    return 0;
}

static struct kvd_ident ident(void)
{
    struct kvd_ident id = {.model = 11, .tok = 22, .layout = 33, .kv_type = 0,
                           .block_tokens = BT, .block_bytes = BB};
    return id;
}

static void toks(int32_t *t, int n, int seed)
{
    for (int i = 0; i < n; i++) t[i] = (seed * 1000 + i * 13) % 49152;
}

static char *only_file(void)
{
    static char path[512];
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s/*.tkv 2>/dev/null | head -1", dir);
    FILE *p = popen(cmd, "r");
    path[0] = 0;
    if (p) {
        if (!fgets(path, sizeof path, p)) path[0] = 0;
        pclose(p);
    }
    path[strcspn(path, "\n")] = 0;
    return path;
}

static void clear_dir(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -f %s/*.tkv", dir);
    if (system(cmd) != 0) tap_diag("rm failed");
}

static void flip_byte(const char *path, long off)
{
    FILE *f = fopen(path, "r+b");
    if (!f) return;
    fseek(f, off, off < 0 ? SEEK_END : SEEK_SET);
    int c = fgetc(f);
    fseek(f, off, off < 0 ? SEEK_END : SEEK_SET);
    fputc(c ^ 0x40, f);
    fclose(f);
}

static void unit_files(void)
{
    char err[256];
    struct kvd d;
    struct kvd_ident id = ident();
    int32_t t[256];
    toks(t, 256, 1);
    int seed = 5;
    clear_dir();
    ok(kvd_open(&d, dir, 1 << 20, &id, NULL, err, sizeof err) == 0 && d.n == 0, "open empty");
    ok(kvd_save(&d, t, 8, "session 7", fill, &seed, err, sizeof err) == 0 && d.n == 1,
       "save 8 blocks");
    kvd_close(&d);

    ok(kvd_open(&d, dir, 1 << 20, &id, NULL, err, sizeof err) == 0 && d.n == 1, "reopen indexes it");
    int32_t nm, i;
    i = kvd_find(&d, t, 8 * BT - 1, 0, &nm);
    ok(i == 0 && nm == 7 * BT, "a shorter prompt shares its whole blocks (%d tokens)", nm);
    ok(kvd_find(&d, t, 8 * BT - 1, 8 * BT, &nm) == -1, "... not when asked for more");
    i = kvd_find(&d, t, 200, 0, &nm);
    ok(i == 0 && nm == 128 && d.e[0].n_tokens == 128 && strcmp(d.e[0].h.tag, "session 7") == 0,
       "a longer prompt with the prefix matches it whole (%d)", nm);
    int32_t t2[256];
    memcpy(t2, t, sizeof t2);
    t2[100] ^= 1;
    i = kvd_find(&d, t2, 200, 0, &nm);
    ok(i == 0 && nm == 96,
       "one token changed inside the prefix: the blocks before it (%d)", nm);
    t2[3] ^= 1;
    ok(kvd_find(&d, t2, 200, 0, &nm) == -1, "changed in the first block: no match");
    void *blocks = NULL;
    bool same = kvd_load(&d, 0, &blocks) == 0;
    for (int k = 0; same && k < 8; k++) {
        unsigned char want[BB];
        fill(&seed, k, want);
        same = memcmp((char *)blocks + k * BB, want, BB) == 0;
    }
    free(blocks);
    ok(same && d.n_notes == 0, "load gives the saved bytes back, no note");
    kvd_close(&d);

    /* Another model, tokenizer, KV type: ignored with one note each, file kept. */
    struct kvd_ident other = id;
    other.model = 12;
    kvd_open(&d, dir, 1 << 20, &other, NULL, err, sizeof err);
    ok(kvd_find(&d, t, 200, 0, &nm) == -1 && d.n_notes == 1 && strstr(d.note, "different model file"),
       "another model: ignored with a note: %s", d.note);
    ok(kvd_find(&d, t, 200, 0, &nm) == -1 && d.n_notes == 1, "the note is said once");
    kvd_close(&d);
    other = id;
    other.kv_type = 2;
    kvd_open(&d, dir, 1 << 20, &other, NULL, err, sizeof err);
    ok(kvd_find(&d, t, 200, 0, &nm) == -1 && strstr(d.note, "another KV type"),
       "another KV type: ignored: %s", d.note);
    kvd_close(&d);
    other = id;
    other.tok = 23;
    kvd_open(&d, dir, 1 << 20, &other, NULL, err, sizeof err);
    ok(kvd_find(&d, t, 200, 0, &nm) == -1 && strstr(d.note, "tokenizer"), "another tokenizer: ignored: %s",
       d.note);
    kvd_close(&d);

    /* A flipped payload byte: the checksum catches it at load. */
    char path[512];
    snprintf(path, sizeof path, "%s", only_file());
    flip_byte(path, -5);
    kvd_open(&d, dir, 1 << 20, &id, NULL, err, sizeof err);
    i = kvd_find(&d, t, 200, 0, &nm);
    blocks = NULL;
    ok(i == 0 && kvd_load(&d, i, &blocks) == -1 && blocks == NULL && d.n == 0 &&
           strstr(d.note, "checksum mismatch") && access(path, F_OK) != 0,
       "flipped byte: not loaded, removed, one note: %s", d.note);
    kvd_close(&d);

    /* Truncated: caught when indexing. */
    kvd_open(&d, dir, 1 << 20, &id, NULL, err, sizeof err);
    kvd_save(&d, t, 8, "s", fill, &seed, err, sizeof err);
    kvd_close(&d);
    snprintf(path, sizeof path, "%s", only_file());
    struct stat st;
    stat(path, &st);
    if (truncate(path, st.st_size - 100) != 0) tap_diag("truncate failed");
    kvd_open(&d, dir, 1 << 20, &id, NULL, err, sizeof err);
    ok(d.n == 0 && strstr(d.note, "truncated") && kvd_find(&d, t, 200, 0, &nm) == -1,
       "truncated file: ignored: %s", d.note);
    kvd_close(&d);

    /* A header byte: the header checksum. */
    kvd_open(&d, dir, 1 << 20, &id, NULL, err, sizeof err);
    kvd_save(&d, t, 8, "s", fill, &seed, err, sizeof err);
    kvd_close(&d);
    snprintf(path, sizeof path, "%s", only_file());
    flip_byte(path, 57); /* n_blocks */
    kvd_open(&d, dir, 1 << 20, &id, NULL, err, sizeof err);
    ok(d.n == 0 && strstr(d.note, "header checksum"), "header byte flipped: ignored: %s", d.note);
    kvd_close(&d);

    /* Eviction at the cap: three entries of 8 blocks, room for two. */
    clear_dir();
    const uint64_t one = KVD_HEADER_BYTES + 8 * BT * 4 + 8 * BB;
    kvd_open(&d, dir, 2 * one + one / 2, &id, NULL, err, sizeof err);
    int32_t a[128], b[128], c[128];
    toks(a, 128, 2);
    toks(b, 128, 3);
    toks(c, 128, 4);
    kvd_save(&d, a, 8, "a", fill, &seed, err, sizeof err);
    usleep(20000);
    kvd_save(&d, b, 8, "b", fill, &seed, err, sizeof err);
    usleep(20000);
    kvd_touch(&d, kvd_find(&d, a, 128, 0, &nm)); /* a used again: b is now the least recent */
    usleep(20000);
    kvd_save(&d, c, 8, "c", fill, &seed, err, sizeof err);
    ok(d.n == 2 && kvd_find(&d, a, 128, 0, &nm) >= 0 && kvd_find(&d, b, 128, 0, &nm) < 0 &&
           kvd_find(&d, c, 128, 0, &nm) >= 0 && d.evictions == 1 && kvd_bytes(&d) <= d.cap,
       "cap: the least recently used entry (b) evicted, a and c kept");
    kvd_close(&d);
    kvd_open(&d, dir, 2 * one + one / 2, &id, NULL, err, sizeof err);
    ok(d.n == 2 && kvd_find(&d, b, 128, 0, &nm) < 0, "eviction removed the file (%d entries)", d.n);
    kvd_close(&d);
    clear_dir();
}

/* ---- the engine on the real model ------------------------------------------------ */

struct res {
    int32_t tok[64], n;
    int32_t n_cached;
    enum engine_status st;
};

static int run1(struct engine *e, const int32_t *prompt, int32_t n, struct res *o)
{
    char err[256];
    enum engine_status why;
    struct engine_request q;
    memset(&q, 0, sizeof q);
    q.prompt_tokens = prompt;
    q.n_prompt_tokens = n;
    engine_sampling_greedy(&q.sampling);
    q.max_tokens = 24;
    q.ignore_eos = true;
    memset(o, 0, sizeof *o);
    uint64_t id = engine_submit(e, &q, &why, err, sizeof err);
    if (!id) {
        tap_diag("submit: %s", err);
        return -1;
    }
    struct engine_event evs[32];
    for (;;) {
        engine_wait_events(e, id, 0.1);
        int k = engine_poll_request(e, id, evs, 32);
        bool done = false;
        for (int j = 0; j < k; j++) {
            if (evs[j].type == ENGINE_EV_TOKEN && evs[j].token >= 0 && o->n < 64)
                o->tok[o->n++] = evs[j].token;
            if (evs[j].type == ENGINE_EV_FINISHED) {
                done = true;
                o->st = evs[j].status;
                if (evs[j].metrics) o->n_cached = evs[j].metrics->n_cached;
            }
            engine_event_free(&evs[j]);
        }
        if (done) return 0;
    }
}

static bool same(const struct res *a, const struct res *b)
{
    return a->n == b->n && a->n > 0 && memcmp(a->tok, b->tok, (size_t)a->n * sizeof *a->tok) == 0;
}

static struct engine *open_eng(const char *mpath, const char *cache, enum kv_type kv, FILE *log)
{
    struct engine_config c;
    engine_config_default(&c);
    c.model_path = mpath;
    c.backend.kind = BACKEND_CPU;
    c.backend.threads = 1;
    c.backend.kv_type = kv;
    c.n_ctx = 2048;
    c.kv_disk_dir = cache;
    c.kv_disk_log = log;
    char err[512];
    struct engine *e = engine_open(&c, err, sizeof err);
    if (!e) tap_diag("engine_open: %s", err);
    return e;
}

static char *read_all(FILE *f)
{
    static char buf[4096];
    fflush(f);
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    return buf;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static void real_engine(void)
{
    static char mpath[4096];
    if (eu_model_path("smollm2", mpath, sizeof mpath) != 0) {
        ok(false, "the default model (packaging/fetch-model)");
        return;
    }
    const char *shared = getenv("TERN_SHARED");
    char tpath[1024];
    snprintf(tpath, sizeof tpath, "%s/texts/gpl-3.0.txt", shared ? shared : "../shared");
    FILE *tf = fopen(tpath, "rb");
    if (!ok(tf != NULL, "the shared text %s", tpath)) return;
    static char text[16384];
    size_t tl = fread(text, 1, 6000, tf);
    text[tl] = 0;
    fclose(tf);
    char err[256];
    struct model *m = model_open(mpath, err, sizeof err);
    struct tok *tk = m ? tok_open(m->gguf, err, sizeof err) : NULL;
    static int32_t prompt[4096];
    int64_t np = tk ? tok_encode(tk, text, tl, 0, prompt, 4096, err, sizeof err) : -1;
    if (tk) tok_close(tk);
    if (m) model_close(m);
    if (!ok(np > 1100, "prompt tokenized (%lld tokens)", (long long)np)) return;
    const int32_t n1 = 1000, n2 = 1090; /* the first turn; a longer follow-up */

    clear_dir();
    /* Cold answers, no cache at all. */
    struct res cold1, cold2, r;
    struct engine *e = open_eng(mpath, NULL, KV_F16, NULL);
    if (!e) return;
    run1(e, prompt, n1, &cold1);
    run1(e, prompt, n2, &cold2);
    engine_close(e);

    /* The first session: prefills, then saves at close. */
    e = open_eng(mpath, dir, KV_F16, NULL);
    run1(e, prompt, n1, &r);
    ok(same(&r, &cold1) && r.n_cached == 0, "first session: cold prefill, same reply");
    engine_close(e);
    ok(only_file()[0] != 0, "closing saved an entry: %s", only_file());

    /* A new engine restores it. */
    e = open_eng(mpath, dir, KV_F16, NULL);
    struct engine_cache_entry ce[8];
    int nce = engine_cache_list(e, ce, 8, false);
    ok(nce == 1 && ce[0].on_disk && ce[0].usable && ce[0].tokens >= 992 && ce[0].text[0] == 0 &&
           ce[0].bytes > 0,
       "listed: 1 disk entry of %d tokens, %llu bytes, no text", nce ? ce[0].tokens : 0,
       nce ? (unsigned long long)ce[0].bytes : 0ull);
    run1(e, prompt, n1, &r);
    ok(same(&r, &cold1) && r.n_cached >= 992,
       "restored: the same %d greedy tokens, %d prompt tokens from disk", r.n, r.n_cached);
    engine_close(e);
    e = open_eng(mpath, dir, KV_F16, NULL);
    run1(e, prompt, n2, &r);
    ok(same(&r, &cold2) && r.n_cached >= 992, "follow-up turn: restored prefix, same reply (%d cached)",
       r.n_cached);
    nce = engine_cache_list(e, ce, 8, true);
    bool mem = false, txt = false;
    for (int i = 0; i < nce; i++) {
        mem |= !ce[i].on_disk && ce[i].tokens >= 1088;
        txt |= strstr(ce[i].text, "GNU") != NULL;
    }
    ok(mem && txt, "listed with text when asked: the in-memory prefix and its opening text");
    engine_close(e);

    /* KV type mismatch: q8_0 engine, the f16 entries are not used. */
    FILE *log = tmpfile();
    e = open_eng(mpath, dir, KV_Q8_0, log);
    run1(e, prompt, n1, &r);
    engine_close(e);
    char *lines = read_all(log);
    ok(r.n_cached == 0 && strstr(lines, "another KV type") && count_lines(lines) == 1,
       "q8_0 engine: the f16 entry ignored with one line: %s", lines);
    fclose(log);

    /* Corruption: flip a byte in every f16 entry's payload. */
    char cmd[700];
    snprintf(cmd, sizeof cmd,
             "for f in %s/*.tkv; do python3 -c \"import sys;p=sys.argv[1];"
             "d=bytearray(open(p,'rb').read());"
             "d[-1000]^=1;open(p,'wb').write(d)\" \"$f\"; done",
             dir);
    ok(system(cmd) == 0, "corrupted the entries");
    log = tmpfile();
    e = open_eng(mpath, dir, KV_F16, log);
    run1(e, prompt, n1, &r);
    engine_close(e);
    lines = read_all(log);
    ok(same(&r, &cold1) && r.n_cached == 0 && strstr(lines, "checksum mismatch") &&
           count_lines(lines) == 1,
       "corrupt entry: cold prefill, same reply, one line: %s", lines);
    fclose(log);
    clear_dir();
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tern-kvdisk-%ld", (long)getpid());
    mkdir(dir, 0700);
    unit_files();
    real_engine();
    rmdir(dir);
    return tap_done();
}
