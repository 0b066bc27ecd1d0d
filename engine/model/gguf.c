/* gguf: memory-mapped, bounds-checked reader for GGUF v2/v3 model files.
 *
 * The whole header (key/values, tensor infos) is parsed and validated once at
 * open; afterwards every accessor is a table lookup. Every length, count and
 * offset read from the file is checked against the bytes that remain before it
 * is used, with arithmetic that cannot overflow, so a hostile file gets an
 * error naming the file, the byte offset and the problem. */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quant.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" little endian */
#define GGUF_DEFAULT_ALIGNMENT 32
/* Nested arrays recurse; a file must not be able to exhaust the stack. */
#define GGUF_MAX_ARRAY_DEPTH 8
/* Smallest encodings, used to reject counts that cannot fit in the file
 * before allocating tables for them. */
#define KV_MIN_BYTES 13     /* key length (8) + type (4) + a u8 value */
#define TENSOR_MIN_BYTES 24 /* name length (8) + n_dims (4) + type (4) + offset (8) */

/* Open-addressing hash from a name to an index (+1; 0 = empty slot). */
struct name_index {
    uint64_t *slots;
    uint64_t cap; /* power of two */
};

struct gguf_ctx {
    char *name;         /* path or caller-given name, for messages */
    const uint8_t *buf; /* whole file */
    uint64_t size;
    bool mapped;        /* buf is our mmap */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;
    uint64_t n_kv;
    struct gguf_kv *kvs;
    char **kv_cstr;     /* NUL-terminated copies of scalar string values (else NULL) */
    uint64_t n_tensors;
    struct gguf_tensor *tensors;
    struct name_index kv_index, tensor_index;
};

/* Parse cursor: position in the buffer plus where errors go. */
struct rd {
    const uint8_t *buf;
    uint64_t size, pos;
    const char *name;
    char *err;
    size_t errlen;
};

static bool rd_fail(struct rd *r, uint64_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool rd_fail(struct rd *r, uint64_t at, const char *fmt, ...)
{
    if (!r->err || r->errlen == 0) return false;
    int n = snprintf(r->err, r->errlen, "%s: byte %llu: ", r->name, (unsigned long long)at);
    if (n < 0 || (size_t)n >= r->errlen) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

static uint64_t rd_left(const struct rd *r)
{
    return r->size - r->pos;
}

static bool rd_need(struct rd *r, uint64_t n, const char *what)
{
    if (n <= rd_left(r)) return true;
    return rd_fail(r, r->pos, "truncated header: %s needs %llu bytes, file has %llu left",
                   what, (unsigned long long)n, (unsigned long long)rd_left(r));
}

static bool rd_bytes(struct rd *r, void *out, uint64_t n, const char *what)
{
    if (!rd_need(r, n, what)) return false;
    memcpy(out, r->buf + r->pos, n);
    r->pos += n;
    return true;
}

static bool rd_u32(struct rd *r, uint32_t *out, const char *what)
{
    return rd_bytes(r, out, sizeof *out, what);
}

static bool rd_u64(struct rd *r, uint64_t *out, const char *what)
{
    return rd_bytes(r, out, sizeof *out, what);
}

static bool rd_str(struct rd *r, struct gguf_str *s, const char *what)
{
    uint64_t at = r->pos;
    if (!rd_u64(r, &s->len, what)) return false;
    if (s->len > rd_left(r))
        return rd_fail(r, at, "%s: string of length %llu is longer than the file (%llu bytes)",
                       what, (unsigned long long)s->len, (unsigned long long)r->size);
    s->ptr = (const char *)r->buf + r->pos;
    r->pos += s->len;
    return true;
}

/* ---- name index ---------------------------------------------------------- */

static uint64_t name_hash(const char *s, uint64_t len)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (uint64_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static bool index_init(struct name_index *ix, uint64_t n)
{
    ix->cap = 16;
    while (ix->cap < 2 * n) ix->cap *= 2;
    ix->slots = calloc(ix->cap, sizeof *ix->slots);
    return ix->slots != NULL;
}

/* Returns the slot for (s, len): occupied by the same name, or empty. `name_of`
 * gives the stored name of index i. */
typedef struct gguf_str (*name_fn)(const struct gguf_ctx *ctx, uint64_t i);

static uint64_t *index_slot(const struct gguf_ctx *ctx, const struct name_index *ix, name_fn name_of,
                            const char *s, uint64_t len)
{
    uint64_t mask = ix->cap - 1;
    for (uint64_t p = name_hash(s, len) & mask;; p = (p + 1) & mask) {
        uint64_t *slot = &ix->slots[p];
        if (*slot == 0) return slot;
        struct gguf_str k = name_of(ctx, *slot - 1);
        if (k.len == len && memcmp(k.ptr, s, len) == 0) return slot;
    }
}

static struct gguf_str kv_name(const struct gguf_ctx *ctx, uint64_t i)
{
    return ctx->kvs[i].key;
}

static struct gguf_str tensor_name(const struct gguf_ctx *ctx, uint64_t i)
{
    struct gguf_str s = {ctx->tensors[i].name, strlen(ctx->tensors[i].name)};
    return s;
}

/* ---- metadata values ----------------------------------------------------- */

static uint64_t vtype_size(uint32_t t)
{
    switch (t) {
    case GGUF_VT_U8: case GGUF_VT_I8: case GGUF_VT_BOOL: return 1;
    case GGUF_VT_U16: case GGUF_VT_I16: return 2;
    case GGUF_VT_U32: case GGUF_VT_I32: case GGUF_VT_F32: return 4;
    case GGUF_VT_U64: case GGUF_VT_I64: case GGUF_VT_F64: return 8;
    default: return 0; /* string, array, unknown */
    }
}

static bool vtype_valid(uint32_t t)
{
    return t < GGUF_VT_COUNT;
}

/* Decodes a fixed-size scalar at p into the kv union. */
static void scalar_decode(struct gguf_kv *kv, const uint8_t *p)
{
    uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
    float f32;
    switch (kv->type) {
    case GGUF_VT_U8: case GGUF_VT_BOOL: memcpy(&u8, p, 1); kv->v.u64 = u8; break;
    case GGUF_VT_I8: memcpy(&i8, p, 1); kv->v.i64 = i8; break;
    case GGUF_VT_U16: memcpy(&u16, p, 2); kv->v.u64 = u16; break;
    case GGUF_VT_I16: memcpy(&i16, p, 2); kv->v.i64 = i16; break;
    case GGUF_VT_U32: memcpy(&u32, p, 4); kv->v.u64 = u32; break;
    case GGUF_VT_I32: memcpy(&i32, p, 4); kv->v.i64 = i32; break;
    case GGUF_VT_F32: memcpy(&f32, p, 4); kv->v.f64 = f32; break;
    case GGUF_VT_U64: memcpy(&kv->v.u64, p, 8); break;
    case GGUF_VT_I64: memcpy(&kv->v.i64, p, 8); break;
    case GGUF_VT_F64: memcpy(&kv->v.f64, p, 8); break;
    default: break;
    }
}

static bool check_bools(struct rd *r, const uint8_t *p, uint64_t n, const char *key)
{
    for (uint64_t i = 0; i < n; i++)
        if (p[i] > 1)
            return rd_fail(r, (uint64_t)(p + i - r->buf), "key '%s': bool value %u is not 0 or 1",
                           key, p[i]);
    return true;
}

/* Skips the contents of an array of `type` with n elements (nested arrays
 * are validated and skipped; they are not exposed element by element). */
static bool skip_array(struct rd *r, uint32_t type, uint64_t n, const char *key, int depth)
{
    if (depth > GGUF_MAX_ARRAY_DEPTH)
        return rd_fail(r, r->pos, "key '%s': arrays nested deeper than %d", key,
                       GGUF_MAX_ARRAY_DEPTH);
    uint64_t esz = vtype_size(type);
    if (esz) {
        if (n > rd_left(r) / esz)
            return rd_fail(r, r->pos, "key '%s': array of %llu elements is longer than the file",
                           key, (unsigned long long)n);
        if (type == GGUF_VT_BOOL && !check_bools(r, r->buf + r->pos, n, key)) return false;
        r->pos += n * esz;
        return true;
    }
    for (uint64_t i = 0; i < n; i++) {
        if (type == GGUF_VT_STRING) {
            struct gguf_str s;
            if (!rd_str(r, &s, key)) return false;
            continue;
        }
        uint64_t at = r->pos, sub_n;
        uint32_t sub_t;
        if (!rd_u32(r, &sub_t, key) || !rd_u64(r, &sub_n, key)) return false;
        if (!vtype_valid(sub_t))
            return rd_fail(r, at, "key '%s': unknown array element type %u", key, sub_t);
        if (!skip_array(r, sub_t, sub_n, key, depth + 1)) return false;
    }
    return true;
}

static bool read_array(struct rd *r, struct gguf_kv *kv, const char *key)
{
    uint64_t at = r->pos;
    uint32_t et;
    if (!rd_u32(r, &et, "array element type") || !rd_u64(r, &kv->v.arr.n, "array length"))
        return false;
    if (!vtype_valid(et))
        return rd_fail(r, at, "key '%s': unknown array element type %u", key, et);
    kv->v.arr.type = (enum gguf_vtype)et;
    kv->v.arr.data = r->buf + r->pos;
    kv->v.arr.strs = NULL;
    uint64_t n = kv->v.arr.n;
    if (et != GGUF_VT_STRING) return skip_array(r, et, n, key, 1);
    /* Index string arrays (token vocabularies) once, so lookups are O(1). */
    if (n > rd_left(r) / 8)
        return rd_fail(r, r->pos, "key '%s': array of %llu strings is longer than the file", key,
                       (unsigned long long)n);
    struct gguf_str *strs = malloc((n ? n : 1) * sizeof *strs);
    if (!strs) return rd_fail(r, at, "key '%s': out of memory for %llu strings", key,
                              (unsigned long long)n);
    kv->v.arr.strs = strs;
    for (uint64_t i = 0; i < n; i++)
        if (!rd_str(r, &strs[i], key)) return false;
    return true;
}

static bool read_kv(struct rd *r, struct gguf_ctx *ctx, uint64_t i)
{
    struct gguf_kv *kv = &ctx->kvs[i];
    uint64_t at = r->pos;
    if (!rd_str(r, &kv->key, "key")) return false;
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)(kv->key.len < 120 ? kv->key.len : 120), kv->key.ptr);
    uint64_t *slot = index_slot(ctx, &ctx->kv_index, kv_name, kv->key.ptr, kv->key.len);
    if (*slot) return rd_fail(r, at, "duplicate key '%s'", key);
    *slot = i + 1;
    uint32_t t;
    uint64_t tat = r->pos;
    if (!rd_u32(r, &t, "value type")) return false;
    if (!vtype_valid(t)) return rd_fail(r, tat, "key '%s': unknown value type %u", key, t);
    kv->type = (enum gguf_vtype)t;
    kv->offset = r->pos;
    if (t == GGUF_VT_STRING) {
        if (!rd_str(r, &kv->v.str, key)) return false;
        ctx->kv_cstr[i] = strndup(kv->v.str.ptr, kv->v.str.len);
        if (!ctx->kv_cstr[i]) return rd_fail(r, at, "key '%s': out of memory", key);
        return true;
    }
    if (t == GGUF_VT_ARRAY) return read_array(r, kv, key);
    uint64_t sz = vtype_size(t);
    if (!rd_need(r, sz, key)) return false;
    if (t == GGUF_VT_BOOL && !check_bools(r, r->buf + r->pos, 1, key)) return false;
    scalar_decode(kv, r->buf + r->pos);
    r->pos += sz;
    return true;
}

/* ---- tensor infos -------------------------------------------------------- */

static bool mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a && b > UINT64_MAX / a) return false;
    *out = a * b;
    return true;
}

static bool read_tensor_info(struct rd *r, struct gguf_ctx *ctx, uint64_t i)
{
    struct gguf_tensor *t = &ctx->tensors[i];
    uint64_t at = r->pos;
    struct gguf_str name;
    if (!rd_str(r, &name, "tensor name")) return false;
    t->name = strndup(name.ptr, name.len);
    if (!t->name) return rd_fail(r, at, "out of memory");
    if (strlen(t->name) != name.len) return rd_fail(r, at, "tensor name contains a NUL byte");
    uint64_t *slot = index_slot(ctx, &ctx->tensor_index, tensor_name, t->name, name.len);
    if (*slot) return rd_fail(r, at, "duplicate tensor name '%s'", t->name);
    *slot = i + 1;
    uint64_t dat = r->pos;
    if (!rd_u32(r, &t->n_dims, t->name)) return false;
    if (t->n_dims > GGUF_MAX_DIMS)
        return rd_fail(r, dat, "tensor '%s': too many dimensions (%u, at most %d)", t->name,
                       t->n_dims, GGUF_MAX_DIMS);
    t->n_elements = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d < t->n_dims && !rd_u64(r, &t->ne[d], t->name)) return false;
        if (t->ne[d] > (uint64_t)INT64_MAX || !mul_ok(t->n_elements, t->ne[d], &t->n_elements) ||
            t->n_elements > (uint64_t)INT64_MAX)
            return rd_fail(r, dat, "tensor '%s': dimensions overflow", t->name);
    }
    uint64_t tat = r->pos;
    if (!rd_u32(r, &t->type, t->name)) return false;
    const struct qtype_info *qi = qtype_get(t->type);
    if (!qi) return rd_fail(r, tat, "tensor '%s': unknown tensor type %u", t->name, t->type);
    if (t->ne[0] % qi->block_size)
        return rd_fail(r, dat, "tensor '%s': row of %llu elements is not a multiple of the %s block size %u",
                       t->name, (unsigned long long)t->ne[0], qi->name, qi->block_size);
    uint64_t rows = 1; /* ne[0] may be 0, so n_elements does not bound this product */
    uint64_t row_bytes = qtype_row_bytes(t->type, t->ne[0]); /* 0 on overflow */
    if ((t->ne[0] && !row_bytes) || !mul_ok(rows, t->ne[1], &rows) ||
        !mul_ok(rows, t->ne[2], &rows) || !mul_ok(rows, t->ne[3], &rows) ||
        !mul_ok(row_bytes, rows, &t->nbytes))
        return rd_fail(r, dat, "tensor '%s': size overflows", t->name);
    return rd_u64(r, &t->offset, t->name);
}

/* Places every tensor in the data section, checking alignment and bounds. */
static bool place_tensors(struct rd *r, struct gguf_ctx *ctx)
{
    uint64_t size = ctx->size;
    uint64_t data_room = ctx->data_offset <= size ? size - ctx->data_offset : 0;
    for (uint64_t i = 0; i < ctx->n_tensors; i++) {
        struct gguf_tensor *t = &ctx->tensors[i];
        if (t->offset % ctx->alignment)
            return rd_fail(r, ctx->data_offset, "tensor '%s': data offset %llu is misaligned (alignment %llu)",
                           t->name, (unsigned long long)t->offset,
                           (unsigned long long)ctx->alignment);
        if (ctx->data_offset > size || t->offset > data_room || t->nbytes > data_room - t->offset)
            return rd_fail(r, t->offset <= data_room ? ctx->data_offset + t->offset : ctx->data_offset,
                           "tensor '%s': data out of bounds (%llu bytes at data offset %llu; the "
                           "data section at byte %llu has %llu bytes)",
                           t->name, (unsigned long long)t->nbytes, (unsigned long long)t->offset,
                           (unsigned long long)ctx->data_offset, (unsigned long long)data_room);
        t->file_offset = ctx->data_offset + t->offset;
        t->data = ctx->buf + t->file_offset;
    }
    return true;
}

/* ---- open / close -------------------------------------------------------- */

static bool read_preamble(struct rd *r, struct gguf_ctx *ctx)
{
    uint32_t magic;
    if (!rd_u32(r, &magic, "magic")) return false;
    if (magic != GGUF_MAGIC)
        return rd_fail(r, 0, "bad magic 0x%08x (not a GGUF file)", magic);
    if (!rd_u32(r, &ctx->version, "version")) return false;
    if (ctx->version == 1)
        return rd_fail(r, 4, "unsupported version 1 (GGUF v1 is obsolete; re-convert the model)");
    if (ctx->version == 0x02000000u || ctx->version == 0x03000000u)
        return rd_fail(r, 4, "unsupported version: a big-endian GGUF file (tern reads little-endian)");
    if (ctx->version != 2 && ctx->version != 3)
        return rd_fail(r, 4, "unsupported version %u (supported: 2, 3)", ctx->version);
    uint64_t at = r->pos;
    if (!rd_u64(r, &ctx->n_tensors, "tensor count") || !rd_u64(r, &ctx->n_kv, "key/value count"))
        return false;
    if (ctx->n_kv > rd_left(r) / KV_MIN_BYTES)
        return rd_fail(r, at + 8, "key/value count %llu cannot fit in a file of %llu bytes",
                       (unsigned long long)ctx->n_kv, (unsigned long long)ctx->size);
    if (ctx->n_tensors > (rd_left(r) - ctx->n_kv * KV_MIN_BYTES) / TENSOR_MIN_BYTES)
        return rd_fail(r, at, "tensor count %llu cannot fit in a file of %llu bytes",
                       (unsigned long long)ctx->n_tensors, (unsigned long long)ctx->size);
    return true;
}

static bool read_alignment(struct rd *r, struct gguf_ctx *ctx)
{
    ctx->alignment = GGUF_DEFAULT_ALIGNMENT;
    const struct gguf_kv *kv = gguf_find_kv(ctx, "general.alignment");
    if (!kv) return true;
    if (kv->type != GGUF_VT_U32 || kv->v.u64 == 0 || (kv->v.u64 & (kv->v.u64 - 1)))
        return rd_fail(r, kv->offset, "general.alignment must be a u32 power of two");
    ctx->alignment = kv->v.u64;
    return true;
}

static bool parse(struct rd *r, struct gguf_ctx *ctx)
{
    if (!read_preamble(r, ctx)) return false;
    ctx->kvs = calloc(ctx->n_kv ? ctx->n_kv : 1, sizeof *ctx->kvs);
    ctx->kv_cstr = calloc(ctx->n_kv ? ctx->n_kv : 1, sizeof *ctx->kv_cstr);
    ctx->tensors = calloc(ctx->n_tensors ? ctx->n_tensors : 1, sizeof *ctx->tensors);
    if (!ctx->kvs || !ctx->kv_cstr || !ctx->tensors || !index_init(&ctx->kv_index, ctx->n_kv) ||
        !index_init(&ctx->tensor_index, ctx->n_tensors))
        return rd_fail(r, 8, "out of memory for %llu keys and %llu tensors",
                       (unsigned long long)ctx->n_kv, (unsigned long long)ctx->n_tensors);
    for (uint64_t i = 0; i < ctx->n_kv; i++)
        if (!read_kv(r, ctx, i)) return false;
    const struct gguf_kv *arch = gguf_find_kv(ctx, "general.architecture");
    if (!arch || arch->type != GGUF_VT_STRING)
        return rd_fail(r, r->pos, "missing required key 'general.architecture' (a string)");
    if (!read_alignment(r, ctx)) return false;
    for (uint64_t i = 0; i < ctx->n_tensors; i++)
        if (!read_tensor_info(r, ctx, i)) return false;
    uint64_t pad = (ctx->alignment - r->pos % ctx->alignment) % ctx->alignment;
    ctx->data_offset = r->pos + pad; /* pos <= size < 2^63, cannot overflow */
    return place_tensors(r, ctx);
}

static struct gguf_ctx *open_buf(const void *buf, size_t size, bool mapped, const char *name,
                                 char *err, size_t errlen)
{
    struct gguf_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        if (mapped) munmap((void *)buf, size);
        snprintf(err, errlen, "%s: out of memory", name);
        return NULL;
    }
    ctx->buf = buf;
    ctx->size = size;
    ctx->mapped = mapped;
    ctx->name = strdup(name);
    struct rd r = {buf, size, 0, name, err, errlen};
    if (!ctx->name) {
        snprintf(err, errlen, "%s: out of memory", name);
        goto fail;
    }
    if (!parse(&r, ctx)) goto fail;
    return ctx;
fail:
    gguf_close(ctx);
    return NULL;
}

struct gguf_ctx *gguf_open_memory(const void *buf, size_t size, const char *name, char *err,
                                  size_t errlen)
{
    static const uint8_t empty[1];
    return open_buf(size ? buf : empty, size, false, name ? name : "(memory)", err, errlen);
}

struct gguf_ctx *gguf_open(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if (st.st_size == 0) {
        close(fd);
        return gguf_open_memory(NULL, 0, path, err, errlen);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(err, errlen, "%s: cannot map %lld bytes: %s", path, (long long)st.st_size,
                 strerror(map_errno));
        return NULL;
    }
    return open_buf(map, (size_t)st.st_size, true, path, err, errlen);
}

bool gguf_in_mapping(const struct gguf_ctx *ctx, const void *p, size_t n)
{
    if (!ctx || !ctx->mapped || !p || n == 0) return false;
    const uintptr_t lo = (uintptr_t)ctx->buf, hi = lo + ctx->size, a = (uintptr_t)p;
    return a >= lo && a <= hi && n <= hi - a;
}

void gguf_release_pages(const struct gguf_ctx *ctx, const void *p, size_t n)
{
    if (!gguf_in_mapping(ctx, p, n)) return;
    uintptr_t a = (uintptr_t)p, b = a + n;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    a = (a + page - 1) & ~(page - 1);   /* whole pages only: neighbours keep theirs */
    b &= ~(page - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

void gguf_close(struct gguf_ctx *ctx)
{
    if (!ctx) return;
    for (uint64_t i = 0; ctx->tensors && i < ctx->n_tensors; i++) free((char *)ctx->tensors[i].name);
    for (uint64_t i = 0; ctx->kvs && i < ctx->n_kv; i++) {
        if (ctx->kvs[i].type == GGUF_VT_ARRAY) free((void *)ctx->kvs[i].v.arr.strs);
        if (ctx->kv_cstr) free(ctx->kv_cstr[i]);
    }
    free(ctx->tensors);
    free(ctx->kv_cstr);
    free(ctx->kvs);
    free(ctx->kv_index.slots);
    free(ctx->tensor_index.slots);
    if (ctx->mapped) munmap((void *)ctx->buf, ctx->size);
    free(ctx->name);
    free(ctx);
}

/* ---- accessors ----------------------------------------------------------- */

uint32_t gguf_version(const struct gguf_ctx *ctx) { return ctx->version; }
uint64_t gguf_file_size(const struct gguf_ctx *ctx) { return ctx->size; }
const char *gguf_path(const struct gguf_ctx *ctx) { return ctx->name; }
uint64_t gguf_alignment(const struct gguf_ctx *ctx) { return ctx->alignment; }
uint64_t gguf_data_offset(const struct gguf_ctx *ctx) { return ctx->data_offset; }
uint64_t gguf_n_kv(const struct gguf_ctx *ctx) { return ctx->n_kv; }
uint64_t gguf_n_tensors(const struct gguf_ctx *ctx) { return ctx->n_tensors; }

const struct gguf_kv *gguf_kv_at(const struct gguf_ctx *ctx, uint64_t i)
{
    return i < ctx->n_kv ? &ctx->kvs[i] : NULL;
}

const struct gguf_tensor *gguf_tensor_at(const struct gguf_ctx *ctx, uint64_t i)
{
    return i < ctx->n_tensors ? &ctx->tensors[i] : NULL;
}

const struct gguf_kv *gguf_find_kv(const struct gguf_ctx *ctx, const char *key)
{
    if (!ctx->kv_index.slots) return NULL;
    uint64_t *slot = index_slot(ctx, &ctx->kv_index, kv_name, key, strlen(key));
    return *slot ? &ctx->kvs[*slot - 1] : NULL;
}

const struct gguf_tensor *gguf_find_tensor(const struct gguf_ctx *ctx, const char *name)
{
    if (!ctx->tensor_index.slots) return NULL;
    uint64_t *slot = index_slot(ctx, &ctx->tensor_index, tensor_name, name, strlen(name));
    return *slot ? &ctx->tensors[*slot - 1] : NULL;
}

static bool is_unsigned(enum gguf_vtype t)
{
    return t == GGUF_VT_U8 || t == GGUF_VT_U16 || t == GGUF_VT_U32 || t == GGUF_VT_U64;
}

static bool is_signed(enum gguf_vtype t)
{
    return t == GGUF_VT_I8 || t == GGUF_VT_I16 || t == GGUF_VT_I32 || t == GGUF_VT_I64;
}

/* Any integer kv as a signed/unsigned pair; false if not an integer. */
static bool kv_int(const struct gguf_kv *kv, bool *neg, uint64_t *mag)
{
    if (!kv) return false;
    if (is_unsigned(kv->type)) {
        *neg = false;
        *mag = kv->v.u64;
        return true;
    }
    if (!is_signed(kv->type)) return false;
    *neg = kv->v.i64 < 0;
    *mag = *neg ? (uint64_t)0 - (uint64_t)kv->v.i64 : (uint64_t)kv->v.i64;
    return true;
}

bool gguf_get_u64(const struct gguf_ctx *ctx, const char *key, uint64_t *out)
{
    bool neg;
    uint64_t mag;
    if (!kv_int(gguf_find_kv(ctx, key), &neg, &mag) || neg) return false;
    *out = mag;
    return true;
}

bool gguf_get_u32(const struct gguf_ctx *ctx, const char *key, uint32_t *out)
{
    uint64_t v;
    if (!gguf_get_u64(ctx, key, &v) || v > UINT32_MAX) return false;
    *out = (uint32_t)v;
    return true;
}

bool gguf_get_i32(const struct gguf_ctx *ctx, const char *key, int32_t *out)
{
    bool neg;
    uint64_t mag;
    if (!kv_int(gguf_find_kv(ctx, key), &neg, &mag)) return false;
    if (neg ? mag > (uint64_t)INT32_MAX + 1 : mag > INT32_MAX) return false;
    *out = neg ? (int32_t)(-(int64_t)mag) : (int32_t)mag;
    return true;
}

bool gguf_get_f32(const struct gguf_ctx *ctx, const char *key, float *out)
{
    const struct gguf_kv *kv = gguf_find_kv(ctx, key);
    if (!kv || (kv->type != GGUF_VT_F32 && kv->type != GGUF_VT_F64)) return false;
    *out = (float)kv->v.f64;
    return true;
}

bool gguf_get_bool(const struct gguf_ctx *ctx, const char *key, bool *out)
{
    const struct gguf_kv *kv = gguf_find_kv(ctx, key);
    if (!kv || kv->type != GGUF_VT_BOOL) return false;
    *out = kv->v.u64 != 0;
    return true;
}

const char *gguf_get_str(const struct gguf_ctx *ctx, const char *key)
{
    const struct gguf_kv *kv = gguf_find_kv(ctx, key);
    if (!kv || kv->type != GGUF_VT_STRING) return NULL;
    return ctx->kv_cstr[kv - ctx->kvs];
}

const struct gguf_kv *gguf_get_arr(const struct gguf_ctx *ctx, const char *key)
{
    const struct gguf_kv *kv = gguf_find_kv(ctx, key);
    return kv && kv->type == GGUF_VT_ARRAY ? kv : NULL;
}

/* Element i of a fixed-size numeric array decoded into a scalar kv. */
static bool arr_elem(const struct gguf_kv *arr, uint64_t i, struct gguf_kv *out)
{
    if (!arr || arr->type != GGUF_VT_ARRAY || i >= arr->v.arr.n) return false;
    uint64_t esz = vtype_size(arr->v.arr.type);
    if (!esz) return false;
    out->type = arr->v.arr.type;
    scalar_decode(out, (const uint8_t *)arr->v.arr.data + i * esz);
    return true;
}

bool gguf_arr_f64(const struct gguf_kv *arr, uint64_t i, double *out)
{
    struct gguf_kv e;
    if (!arr_elem(arr, i, &e)) return false;
    if (e.type == GGUF_VT_F32 || e.type == GGUF_VT_F64) *out = e.v.f64;
    else if (is_signed(e.type)) *out = (double)e.v.i64;
    else *out = (double)e.v.u64;
    return true;
}

bool gguf_arr_i64(const struct gguf_kv *arr, uint64_t i, int64_t *out)
{
    struct gguf_kv e;
    if (!arr_elem(arr, i, &e)) return false;
    if (e.type == GGUF_VT_F32 || e.type == GGUF_VT_F64) return false;
    if (is_signed(e.type)) *out = e.v.i64;
    else if (e.v.u64 > (uint64_t)INT64_MAX) return false;
    else *out = (int64_t)e.v.u64;
    return true;
}

const char *gguf_vtype_name(enum gguf_vtype t)
{
    static const char *const names[GGUF_VT_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
    };
    return (unsigned)t < GGUF_VT_COUNT ? names[t] : "unknown";
}
