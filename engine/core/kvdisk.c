/* kvdisk: the disk prefix cache's files (format in kvdisk.h). */
#define _POSIX_C_SOURCE 200809L
#include "kvdisk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

uint64_t kvd_hash(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *b = p;
    uint64_t h[4] = {seed ^ 0x9e3779b97f4a7c15ULL, seed + 0x632be59bd9b4e019ULL,
                     seed ^ 0xd6e8feb86659fd93ULL, seed - 0x3c6ef372fe94f82aULL};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int l = 0; l < 4; l++) {
            uint64_t v;
            memcpy(&v, b + i + 8 * l, 8);
            h[l] = (h[l] ^ v) * 0x9fb21c651e98df25ULL;
            h[l] ^= h[l] >> 29;
        }
    uint64_t t = 0;
    for (size_t k = 0; i + k < n; k++) t |= (uint64_t)b[i + k] << (8 * (k & 7));
    return mix64(h[0] ^ mix64(h[1]) ^ mix64(h[2] + 1) ^ mix64(h[3] + 2) ^ mix64(t + n));
}

uint64_t kvd_tokens_hash(const int32_t *tokens, int32_t n)
{
    return kvd_hash(tokens, (size_t)n * sizeof *tokens, 0x7465726e6b76ULL);
}

uint64_t kvd_file_identity(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return 0;
    }
    const uint64_t size = (uint64_t)st.st_size, MiB = 1u << 20;
    unsigned char *buf = malloc(MiB);
    uint64_t h = mix64(size + 1);
    if (!buf) {
        fclose(f);
        return 0;
    }
    /* (offset, length) samples: head, every 64 MiB, tail. */
    for (uint64_t off = 0;; off += 64 * MiB) {
        uint64_t len = off == 0 ? MiB : 64 * 1024;
        if (off >= size) break;
        if (len > size - off) len = size - off;
        if (fseek(f, (long)off, SEEK_SET) != 0 || fread(buf, 1, len, f) != len) break;
        h = mix64(h ^ kvd_hash(buf, len, off));
    }
    uint64_t toff = size > MiB ? size - MiB : 0;
    if (fseek(f, (long)toff, SEEK_SET) == 0) {
        size_t got = fread(buf, 1, (size_t)(size - toff), f);
        h = mix64(h ^ kvd_hash(buf, got, toff + 7));
    }
    free(buf);
    fclose(f);
    return h ? h : 1;
}

/* ---- header ---------------------------------------------------------------- */

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void header_write(const struct kvd_header *h, unsigned char *b)
{
    memset(b, 0, KVD_HEADER_BYTES);
    memcpy(b, KVD_MAGIC, 8);
    put32(b + 8, KVD_VERSION);
    put32(b + 12, KVD_HEADER_BYTES);
    put64(b + 16, h->id.model);
    put64(b + 24, h->id.tok);
    put64(b + 32, h->id.layout);
    put32(b + 40, h->id.kv_type);
    put32(b + 44, h->id.block_tokens);
    put64(b + 48, h->id.block_bytes);
    put32(b + 56, h->n_blocks);
    put64(b + 64, h->prefix_hash);
    put64(b + 72, h->created);
    put64(b + 80, h->payload_sum);
    memcpy(b + 88, h->tag, strnlen(h->tag, KVD_TAG_BYTES));
    put64(b + 120, kvd_hash(b, 120, 0x68647200));
}

/* Untrusted bytes: every field checked before use. */
static const char *header_read(const unsigned char *b, struct kvd_header *h)
{
    if (memcmp(b, KVD_MAGIC, 8) != 0) return "not a tern KV cache file";
    if (get32(b + 8) != KVD_VERSION || get32(b + 12) != KVD_HEADER_BYTES)
        return "another format version";
    if (get64(b + 120) != kvd_hash(b, 120, 0x68647200)) return "header checksum mismatch";
    memset(h, 0, sizeof *h);
    h->id.model = get64(b + 16);
    h->id.tok = get64(b + 24);
    h->id.layout = get64(b + 32);
    h->id.kv_type = get32(b + 40);
    h->id.block_tokens = get32(b + 44);
    h->id.block_bytes = get64(b + 48);
    h->n_blocks = get32(b + 56);
    h->prefix_hash = get64(b + 64);
    h->created = get64(b + 72);
    h->payload_sum = get64(b + 80);
    memcpy(h->tag, b + 88, KVD_TAG_BYTES);
    h->tag[KVD_TAG_BYTES] = 0;
    if (h->id.block_tokens == 0 || h->id.block_tokens > 4096 || h->n_blocks == 0 ||
        (uint64_t)h->n_blocks * h->id.block_tokens > (1u << 24) || h->id.block_bytes == 0 ||
        h->id.block_bytes > (1ull << 32))
        return "implausible sizes in the header";
    return NULL;
}

static uint64_t entry_bytes(const struct kvd_header *h)
{
    return KVD_HEADER_BYTES + (uint64_t)h->n_blocks * h->id.block_tokens * 4 +
           (uint64_t)h->n_blocks * h->id.block_bytes;
}

/* ---- notes ------------------------------------------------------------------ */

static void note(struct kvd *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->note, sizeof d->note, fmt, ap);
    va_end(ap);
    d->n_notes++;
    if (d->log) {
        fprintf(d->log, "%s\n", d->note);
        fflush(d->log);
    }
}

static bool ident_eq(const struct kvd_ident *a, const struct kvd_ident *b)
{
    return a->model == b->model && a->tok == b->tok && a->layout == b->layout &&
           a->kv_type == b->kv_type && a->block_tokens == b->block_tokens &&
           a->block_bytes == b->block_bytes;
}

/* Why entry identity a cannot serve b, in words. */
static const char *ident_why(const struct kvd_ident *a, const struct kvd_ident *b)
{
    if (a->model != b->model) return "made with a different model file";
    if (a->tok != b->tok) return "made with a different tokenizer or chat template";
    if (a->kv_type != b->kv_type) return "made with another KV type";
    return "made with another backend or KV layout";
}

/* ---- index ------------------------------------------------------------------ */

static void path_of(const struct kvd *d, const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", d->dir, name);
}

static void entry_drop(struct kvd *d, int32_t i)
{
    free(d->e[i].tokens);
    d->e[i] = d->e[--d->n];
}

static int entry_add(struct kvd *d, const char *name, const struct kvd_header *h, int32_t *tokens,
                     uint64_t bytes, double used)
{
    if (d->n == d->cap_e) {
        int32_t c = d->cap_e ? 2 * d->cap_e : 16;
        struct kvd_entry *ne = realloc(d->e, (size_t)c * sizeof *ne);
        if (!ne) return -1;
        d->e = ne;
        d->cap_e = c;
    }
    struct kvd_entry *e = &d->e[d->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->h = *h;
    e->tokens = tokens;
    e->n_tokens = (int32_t)(h->n_blocks * h->id.block_tokens);
    e->bytes = bytes;
    e->used = used;
    return 0;
}

/* Reads one file's header and tokens into the index; notes a broken one. */
static void index_file(struct kvd *d, const char *name)
{
    char path[4200];
    path_of(d, name, path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f) return;
    struct stat st;
    unsigned char hb[KVD_HEADER_BYTES];
    struct kvd_header h;
    const char *why = NULL;
    int32_t *tokens = NULL;
    if (fstat(fileno(f), &st) != 0 || fread(hb, 1, sizeof hb, f) != sizeof hb)
        why = "truncated header";
    else why = header_read(hb, &h);
    if (!why && (uint64_t)st.st_size != entry_bytes(&h))
        why = (uint64_t)st.st_size < entry_bytes(&h) ? "truncated" : "longer than its header says";
    if (!why) {
        size_t nt = (size_t)h.n_blocks * h.id.block_tokens;
        tokens = malloc(nt * sizeof *tokens);
        if (!tokens || fread(tokens, sizeof *tokens, nt, f) != nt) why = "unreadable tokens";
        else if (kvd_tokens_hash(tokens, (int32_t)nt) != h.prefix_hash)
            why = "token checksum mismatch";
    }
    fclose(f);
    if (why) {
        free(tokens);
        /* Another version's file is left to it; a broken one goes. */
        bool keep = strcmp(why, "another format version") == 0;
        note(d, "kv cache: %s: %s; ignored%s, the prompt is prefilled", name, why,
             keep ? "" : " (removed)");
        if (!keep) unlink(path);
        return;
    }
    double used = (double)st.st_mtim.tv_sec + (double)st.st_mtim.tv_nsec * 1e-9;
    if (entry_add(d, name, &h, tokens, (uint64_t)st.st_size, used) != 0) free(tokens);
}

static int mkdirs(const char *dir)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0700) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(buf, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

int kvd_open(struct kvd *d, const char *dir, uint64_t cap, const struct kvd_ident *id, FILE *log,
             char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->cap = cap;
    d->id = *id;
    d->log = log;
    d->dir = strdup(dir);
    if (!d->dir) {
        snprintf(err, errlen, "kv cache: out of memory");
        return -1;
    }
    if (mkdirs(dir) != 0) {
        snprintf(err, errlen, "kv cache: cannot create %s: %s", dir, strerror(errno));
        kvd_close(d);
        return -1;
    }
    DIR *dh = opendir(dir);
    if (!dh) {
        snprintf(err, errlen, "kv cache: cannot read %s: %s", dir, strerror(errno));
        kvd_close(d);
        return -1;
    }
    struct dirent *de;
    while ((de = readdir(dh))) {
        size_t l = strlen(de->d_name);
        if (l < 5 || l >= sizeof d->e[0].name || strcmp(de->d_name + l - 4, ".tkv") != 0) continue;
        index_file(d, de->d_name);
    }
    closedir(dh);
    return 0;
}

void kvd_close(struct kvd *d)
{
    for (int32_t i = 0; i < d->n; i++) free(d->e[i].tokens);
    free(d->e);
    free(d->dir);
    memset(d, 0, sizeof *d);
}

uint64_t kvd_bytes(const struct kvd *d)
{
    uint64_t t = 0;
    for (int32_t i = 0; i < d->n; i++) t += d->e[i].bytes;
    return t;
}

int32_t kvd_find(struct kvd *d, const int32_t *tokens, int32_t max_tokens, int32_t min_match,
                 int32_t *n_match)
{
    int32_t best = -1, best_n = 0, other = -1, other_n = 0;
    for (int32_t i = 0; i < d->n; i++) {
        struct kvd_entry *e = &d->e[i];
        const int32_t bt = (int32_t)e->h.id.block_tokens;
        int32_t lim = e->n_tokens < max_tokens ? e->n_tokens : max_tokens, n = 0;
        while (n < lim && e->tokens[n] == tokens[n]) n++;
        n = n / bt * bt; /* whole blocks */
        if (n < min_match || n < 1) continue;
        if (ident_eq(&e->h.id, &d->id)) {
            if (n > best_n) best = i, best_n = n;
        } else if (n > other_n) {
            other = i, other_n = n;
        }
    }
    /* One line, and only when an entry of another identity would have
     * served better than what this identity has. */
    if (other >= 0 && other_n > best_n && !d->e[other].noted) {
        struct kvd_entry *e = &d->e[other];
        e->noted = true;
        note(d, "kv cache: %s (%d tokens) was %s; ignored, the prompt is prefilled", e->name,
             e->n_tokens, ident_why(&e->h.id, &d->id));
    }
    *n_match = best_n;
    return best;
}

int kvd_load(struct kvd *d, int32_t i, void **blocks)
{
    struct kvd_entry *e = &d->e[i];
    char path[4200];
    path_of(d, e->name, path, sizeof path);
    const char *why = NULL;
    const size_t tb = (size_t)e->n_tokens * 4, bb = (size_t)e->h.n_blocks * e->h.id.block_bytes;
    unsigned char *buf = malloc(bb ? bb : 1);
    int32_t *tk = malloc(tb);
    unsigned char hb[KVD_HEADER_BYTES];
    struct kvd_header h;
    FILE *f = fopen(path, "rb");
    if (!buf || !tk) why = "out of memory";
    else if (!f) why = "vanished";
    else if (fread(hb, 1, sizeof hb, f) != sizeof hb) why = "truncated header";
    else if ((why = header_read(hb, &h)) != NULL)
        ;
    else if (!ident_eq(&h.id, &d->id) || h.prefix_hash != e->h.prefix_hash ||
             h.n_blocks != e->h.n_blocks)
        why = "changed since it was indexed";
    else if (fread(tk, 1, tb, f) != tb || fread(buf, 1, bb, f) != bb) why = "truncated";
    else if (memcmp(tk, e->tokens, tb) != 0) why = "changed since it was indexed";
    else if (kvd_hash(buf, bb, kvd_hash(tk, tb, 0)) != h.payload_sum) why = "checksum mismatch";
    if (f) fclose(f);
    free(tk);
    if (why) {
        free(buf);
        note(d, "kv cache: %s: %s; ignored (removed), the prompt is prefilled", e->name, why);
        unlink(path);
        entry_drop(d, i);
        return -1;
    }
    *blocks = buf;
    return 0;
}

void kvd_touch(struct kvd *d, int32_t i)
{
    struct kvd_entry *e = &d->e[i];
    char path[4200];
    path_of(d, e->name, path, sizeof path);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct timespec ts[2] = {now, now};
    utimensat(AT_FDCWD, path, ts, 0);
    e->used = (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
    e->hits++;
}

void kvd_evict(struct kvd *d)
{
    uint64_t total = kvd_bytes(d);
    while (total > d->cap && d->n > 0) {
        int32_t lru = 0;
        for (int32_t i = 1; i < d->n; i++)
            if (d->e[i].used < d->e[lru].used) lru = i;
        char path[4200];
        path_of(d, d->e[lru].name, path, sizeof path);
        unlink(path);
        total -= d->e[lru].bytes;
        entry_drop(d, lru);
        d->evictions++;
    }
}

int kvd_save(struct kvd *d, const int32_t *tokens, int32_t n_blocks, const char *tag,
             int (*get)(void *ud, int32_t k, void *buf), void *ud, char *err, size_t errlen)
{
    struct kvd_header h;
    memset(&h, 0, sizeof h);
    h.id = d->id;
    h.n_blocks = (uint32_t)n_blocks;
    const int32_t nt = n_blocks * (int32_t)d->id.block_tokens;
    h.prefix_hash = kvd_tokens_hash(tokens, nt);
    h.created = (uint64_t)time(NULL);
    snprintf(h.tag, sizeof h.tag, "%s", tag ? tag : "");
    char name[40];
    /* The name carries the identity too: equal prefixes of two models differ. */
    snprintf(name, sizeof name, "%016llx.tkv",
             (unsigned long long)mix64(h.prefix_hash ^ kvd_hash(&d->id, sizeof d->id, 3)));
    for (int32_t i = 0; i < d->n; i++)
        if (strcmp(d->e[i].name, name) == 0) {
            kvd_touch(d, i);
            return 0;
        }
    const uint64_t bytes = entry_bytes(&h);
    if (bytes > d->cap) return 0; /* would be evicted at once */
    const size_t bb = (size_t)d->id.block_bytes;
    unsigned char *blk = malloc((size_t)n_blocks * bb);
    int32_t *tk = malloc((size_t)nt * sizeof *tk);
    if (!blk || !tk) {
        free(blk);
        free(tk);
        snprintf(err, errlen, "kv cache: out of memory for %d blocks", n_blocks);
        return -1;
    }
    memcpy(tk, tokens, (size_t)nt * sizeof *tk);
    for (int32_t k = 0; k < n_blocks; k++)
        if (get(ud, k, blk + (size_t)k * bb) != 0) {
            free(blk);
            free(tk);
            snprintf(err, errlen, "kv cache: cannot read KV block %d", k);
            return -1;
        }
    h.payload_sum = kvd_hash(blk, (size_t)n_blocks * bb, kvd_hash(tk, (size_t)nt * 4, 0));
    unsigned char hb[KVD_HEADER_BYTES];
    header_write(&h, hb);
    char path[4200], tmp[4300];
    path_of(d, name, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    bool ok = f && fwrite(hb, 1, sizeof hb, f) == sizeof hb &&
              fwrite(tk, sizeof *tk, (size_t)nt, f) == (size_t)nt &&
              fwrite(blk, 1, (size_t)n_blocks * bb, f) == (size_t)n_blocks * bb;
    if (f && fclose(f) != 0) ok = false;
    free(blk);
    /* Written whole, then renamed: a crash leaves no half entry under the name. */
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        free(tk);
        snprintf(err, errlen, "kv cache: cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (entry_add(d, name, &h, tk, bytes, (double)now.tv_sec + (double)now.tv_nsec * 1e-9) != 0)
        free(tk);
    d->saves++;
    kvd_evict(d);
    return 0;
}
