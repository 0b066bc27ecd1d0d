/* test_gguf_reader: the GGUF reader on a small valid file built in memory
 * (every value type, nested arrays, tensors, v2 and v3, from disk and from
 * memory), then one malformed variant per error the reader reports, checking
 * that the message names the file, the byte offset and the problem. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_writer.h"
#include "quant.h"
#include "tap.h"

#define NAME "mem.gguf"

/* Opens buf and expects failure with `want` (and "byte AT" when at >= 0). */
static void expect_err(const struct gw *w, const char *want, long at, const char *what)
{
    char err[512] = "";
    struct gguf_ctx *c = gguf_open_memory(w->p, w->n, NAME, err, sizeof err);
    char at_s[48] = "";
    if (at >= 0) snprintf(at_s, sizeof at_s, NAME ": byte %ld: ", at);
    bool good = !c && strstr(err, want) && strncmp(err, NAME ": ", strlen(NAME) + 2) == 0 &&
                (at < 0 || strncmp(err, at_s, strlen(at_s)) == 0);
    if (!ok(good, "%s", what)) tap_diag("  got \"%s\", want \"%s%s\"", c ? "(opened)" : err, at_s, want);
    gguf_close(c);
}

static void put_u32(struct gw *w, size_t at, uint32_t v) { memcpy(w->p + at, &v, 4); }
static void put_u64(struct gw *w, size_t at, uint64_t v) { memcpy(w->p + at, &v, 8); }

static void check_values(struct gguf_ctx *c, const char *tag)
{
    char n[96];
#define T(s) (snprintf(n, sizeof n, "%s: %s", tag, s), n)
    is_int(gguf_n_kv(c), 16, T("16 keys"));
    is_int(gguf_n_tensors(c), 2, T("2 tensors"));
    is_int(gguf_alignment(c), 32, T("alignment"));
    is_str(gguf_get_str(c, "general.architecture"), "test", T("architecture"));
    uint32_t u32 = 7;
    ok(gguf_get_u32(c, "t.u8", &u32) && u32 == 200, "%s", T("u8 as u32"));
    ok(gguf_get_u32(c, "t.u16", &u32) && u32 == 60000, "%s", T("u16 as u32"));
    ok(gguf_get_u32(c, "t.u32", &u32) && u32 == 4000000000u, "%s", T("u32"));
    u32 = 7;
    ok(!gguf_get_u32(c, "t.u64", &u32) && u32 == 7, "%s", T("u64 2^40 does not fit u32, out untouched"));
    ok(!gguf_get_u32(c, "t.i8", &u32) && u32 == 7, "%s", T("negative i8 is not a u32"));
    ok(!gguf_get_u32(c, "missing", &u32) && u32 == 7, "%s", T("missing key leaves default"));
    int32_t i32 = 0;
    ok(gguf_get_i32(c, "t.i8", &i32) && i32 == -5, "%s", T("i8 as i32"));
    ok(gguf_get_i32(c, "t.i16", &i32) && i32 == -300, "%s", T("i16 as i32"));
    ok(gguf_get_i32(c, "t.i32", &i32) && i32 == -70000, "%s", T("i32"));
    ok(!gguf_get_i32(c, "t.u32", &i32), "%s", T("u32 4e9 does not fit i32"));
    uint64_t u64 = 0;
    ok(gguf_get_u64(c, "t.u64", &u64) && u64 == 1ull << 40, "%s", T("u64"));
    ok(!gguf_get_u64(c, "t.i64", &u64), "%s", T("negative i64 is not a u64"));
    float f = 0;
    ok(gguf_get_f32(c, "t.f32", &f) && f == 0.5f, "%s", T("f32"));
    ok(gguf_get_f32(c, "t.f64", &f) && f == -2.25f, "%s", T("f64 as f32"));
    ok(!gguf_get_f32(c, "general.architecture", &f), "%s", T("string is not f32"));
    bool b = false;
    ok(gguf_get_bool(c, "t.bool", &b) && b, "%s", T("bool"));
    ok(gguf_get_str(c, "t.u8") == NULL, "%s", T("u8 is not a string"));
    const struct gguf_kv *a = gguf_get_arr(c, "t.arr_i32");
    int64_t i64 = 0;
    double d = 0;
    ok(a && a->v.arr.type == GGUF_VT_I32 && a->v.arr.n == 3, "%s", T("i32 array"));
    ok(gguf_arr_i64(a, 0, &i64) && i64 == -1 && gguf_arr_f64(a, 2, &d) && d == 1.0, "%s",
       T("i32 array elements"));
    ok(!gguf_arr_i64(a, 3, &i64), "%s", T("array index out of range"));
    a = gguf_get_arr(c, "t.arr_str");
    ok(a && a->v.arr.n == 2 && a->v.arr.strs && a->v.arr.strs[0].len == 5 &&
       memcmp(a->v.arr.strs[0].ptr, "hello", 5) == 0 && a->v.arr.strs[1].len == 0, "%s",
       T("string array"));
    ok(!gguf_arr_i64(a, 0, &i64), "%s", T("string array is not numeric"));
    a = gguf_get_arr(c, "t.nested");
    ok(a && a->v.arr.type == GGUF_VT_ARRAY && a->v.arr.n == 2, "%s", T("nested array"));
    is_str(gguf_vtype_name(a ? a->type : GGUF_VT_COUNT), "array", T("vtype name"));
    const struct gguf_tensor *t = gguf_find_tensor(c, "a");
    ok(t && t->type == QT_F32 && t->n_dims == 2 && t->ne[0] == 8 && t->ne[1] == 2 && t->ne[2] == 1 &&
       t->n_elements == 16 && t->nbytes == 64, "%s", T("tensor a info"));
    ok(t && t->file_offset == gguf_data_offset(c) && ((const float *)t->data)[15] == 15.0f, "%s",
       T("tensor a data"));
    t = gguf_find_tensor(c, "b");
    float row[32];
    ok(t && t->nbytes == 34 && t->offset == 64 && dequant_row(t->type, t->data, row, 32) &&
       row[0] == -16.0f && row[31] == 15.0f, "%s", T("tensor b dequantizes"));
    ok(gguf_find_tensor(c, "c") == NULL && gguf_tensor_at(c, 2) == NULL && gguf_kv_at(c, 16) == NULL,
       "%s", T("absent tensor/kv"));
#undef T
}

static void test_valid(void)
{
    struct gw w;
    struct gw_valid_layout lay;
    char err[512] = "";
    for (uint32_t v = 2; v <= 3; v++) {
        gw_init(&w);
        gw_valid(&w, v, &lay);
        struct gguf_ctx *c = gguf_open_memory(w.p, w.n, NAME, err, sizeof err);
        if (!ok(c != NULL, "valid v%u file opens from memory", v)) tap_diag("  %s", err);
        if (c) {
            is_int(gguf_version(c), v, "version");
            is_int(gguf_data_offset(c), lay.data, "data offset");
            check_values(c, v == 2 ? "v2" : "v3");
        }
        gguf_close(c);
        gw_free(&w);
    }
    /* Same file through the mmap path. */
    gw_init(&w);
    gw_valid(&w, 3, &lay);
    char path[] = "/tmp/tern-gguf-test-XXXXXX";
    int fd = mkstemp(path);
    bool wrote = fd >= 0 && write(fd, w.p, w.n) == (ssize_t)w.n;
    if (fd >= 0) close(fd);
    struct gguf_ctx *c = wrote ? gguf_open(path, err, sizeof err) : NULL;
    if (!ok(c != NULL, "valid file opens from disk")) tap_diag("  %s", err);
    if (c) {
        is_str(gguf_path(c), path, "path kept");
        is_int(gguf_file_size(c), w.n, "file size");
        check_values(c, "mmap");
    }
    gguf_close(c);
    if (fd >= 0) unlink(path);
    gw_free(&w);
}

/* Every strict prefix of a valid file fails cleanly (truncation anywhere). */
static void test_truncation(void)
{
    struct gw w;
    struct gw_valid_layout lay;
    gw_init(&w);
    gw_valid(&w, 3, &lay);
    size_t bad = 0;
    for (size_t n = 0; n < w.n; n++) {
        char err[512] = "";
        struct gguf_ctx *c = gguf_open_memory(w.p, n, NAME, err, sizeof err);
        if (c || strncmp(err, NAME ": byte ", strlen(NAME) + 7) != 0) {
            if (!bad) tap_diag("  prefix %zu: %s", n, c ? "opened" : err);
            bad++;
        }
        gguf_close(c);
    }
    is_int(bad, 0, "every truncated prefix is rejected with a located message");
    struct gw t = {w.p, 10, w.cap, false};
    expect_err(&t, "truncated header: tensor count needs 8 bytes", 8, "truncated in the counts");
    t.n = 0;
    expect_err(&t, "truncated header: magic", 0, "empty file");
    t.n = lay.data + 10;
    expect_err(&t, "tensor 'a': data out of bounds", -1, "truncated in tensor data");
    gw_free(&w);
}

static void test_preamble_errors(void)
{
    struct gw w;
    struct gw_valid_layout lay;
    gw_init(&w);
    gw_valid(&w, 3, &lay);
    memcpy(w.p, "GGML", 4);
    expect_err(&w, "bad magic", 0, "bad magic");
    memcpy(w.p, "GGUF", 4);
    put_u32(&w, 4, 1);
    expect_err(&w, "unsupported version 1", 4, "version 1");
    put_u32(&w, 4, 4);
    expect_err(&w, "unsupported version 4", 4, "version 4");
    put_u32(&w, 4, 0x03000000u);
    expect_err(&w, "unsupported version: a big-endian GGUF file", 4, "big-endian file");
    put_u32(&w, 4, 3);
    put_u64(&w, 16, UINT64_MAX / 2);
    expect_err(&w, "key/value count 9223372036854775807 cannot fit", 16, "huge n_kv");
    put_u64(&w, 16, 16);
    put_u64(&w, 8, 1ull << 60);
    expect_err(&w, "tensor count 1152921504606846976 cannot fit", 8, "huge n_tensors");
    gw_free(&w);
}

/* Starts a v3 file with no tensors and n_kv keys, the first of which is
 * general.architecture; the test appends the others. */
static void arch_only(struct gw *w, uint64_t n_kv)
{
    gw_init(w);
    gw_header(w, 3, 0, n_kv);
    gw_kv_str(w, "general.architecture", "x");
}

static void test_kv_errors(void)
{
    struct gw w;
    struct gw_valid_layout lay;
    gw_init(&w);
    gw_valid(&w, 3, &lay);
    put_u64(&w, lay.arch_kv, 1ull << 40);
    expect_err(&w, "string of length 1099511627776 is longer than the file", (long)lay.arch_kv,
               "key longer than the file");
    put_u64(&w, lay.arch_kv, 20);
    w.p[lay.bool_val] = 2;
    expect_err(&w, "key 't.bool': bool value 2 is not 0 or 1", (long)lay.bool_val, "bool not 0/1");
    w.p[lay.bool_val] = 1;
    memcpy(w.p + lay.arch_kv + 8, "general.architectur_", 20);
    expect_err(&w, "missing required key 'general.architecture'", -1, "missing architecture");
    gw_free(&w);

    arch_only(&w, 2);
    size_t dup_at = w.n;
    gw_kv_str(&w, "general.architecture", "y");
    expect_err(&w, "duplicate key 'general.architecture'", (long)dup_at, "duplicate key");
    gw_free(&w);

    arch_only(&w, 2);
    gw_str(&w, "k");
    size_t type_at = w.n;
    gw_u32(&w, 13), gw_u32(&w, 0);
    expect_err(&w, "key 'k': unknown value type 13", (long)type_at, "unknown value type");
    gw_free(&w);

    arch_only(&w, 2);
    gw_kv_u32(&w, "general.alignment", 24);
    expect_err(&w, "general.alignment must be a u32 power of two", -1, "alignment not a power of two");
    gw_free(&w);
}

static void test_array_errors(void)
{
    struct gw w;
    arch_only(&w, 2);
    gw_kv_arr(&w, "deep", GGUF_VT_ARRAY, 1);
    for (int i = 0; i < 20; i++) gw_u32(&w, GGUF_VT_ARRAY), gw_u64(&w, 1);
    gw_u32(&w, GGUF_VT_U8), gw_u64(&w, 0);
    expect_err(&w, "key 'deep': arrays nested deeper than 8", -1, "nesting depth limit");
    gw_free(&w);

    arch_only(&w, 2);
    gw_kv_arr(&w, "big", GGUF_VT_U32, 1ull << 62);
    expect_err(&w, "key 'big': array of 4611686018427387904 elements is longer than the file", -1,
               "array count past the end (no overflow)");
    gw_free(&w);

    arch_only(&w, 2);
    gw_kv_arr(&w, "strs", GGUF_VT_STRING, 1ull << 61);
    expect_err(&w, "array of 2305843009213693952 strings is longer than the file", -1,
               "string array count past the end");
    gw_free(&w);

    arch_only(&w, 2);
    gw_kv_arr(&w, "bools", GGUF_VT_BOOL, 3);
    gw_u8(&w, 0), gw_u8(&w, 1), gw_u8(&w, 255);
    expect_err(&w, "key 'bools': bool value 255 is not 0 or 1", (long)w.n - 1, "bool array element");
    gw_free(&w);

    arch_only(&w, 2);
    gw_kv_arr(&w, "elt", 42, 0);
    expect_err(&w, "key 'elt': unknown array element type 42", -1, "unknown element type");
    gw_free(&w);
}

/* A file with one kv (architecture) and one tensor whose info is given. */
static void one_tensor(struct gw *w, const char *name, uint32_t n_dims, const uint64_t *ne,
                       uint32_t type, uint64_t offset, size_t data_bytes, size_t *info_at)
{
    gw_init(w);
    gw_header(w, 3, 1, 1);
    gw_kv_str(w, "general.architecture", "x");
    *info_at = w->n;
    gw_tensor(w, name, n_dims, ne, type, offset);
    gw_pad(w, 32);
    for (size_t i = 0; i < data_bytes; i++) gw_u8(w, 0);
}

static void test_tensor_errors(void)
{
    struct gw w;
    size_t at;
    one_tensor(&w, "w", 5, (const uint64_t[]){1, 1, 1, 1, 1}, QT_F32, 0, 4, &at);
    expect_err(&w, "tensor 'w': too many dimensions (5, at most 4)", (long)at + 9, "too many dimensions");
    gw_free(&w);
    one_tensor(&w, "w", 1, (const uint64_t[]){4}, 99, 0, 16, &at);
    expect_err(&w, "tensor 'w': unknown tensor type 99", (long)at + 9 + 4 + 8, "unknown tensor type");
    gw_free(&w);
    one_tensor(&w, "w", 1, (const uint64_t[]){4}, QT_F32, 0, 15, &at);
    expect_err(&w, "tensor 'w': data out of bounds", -1, "tensor data past the end");
    gw_free(&w);
    one_tensor(&w, "w", 1, (const uint64_t[]){4}, QT_F32, UINT64_MAX - 31, 16, &at);
    expect_err(&w, "tensor 'w': data out of bounds", -1, "tensor offset near 2^64 (no overflow)");
    gw_free(&w);
    one_tensor(&w, "w", 1, (const uint64_t[]){4}, QT_F32, 4, 64, &at);
    expect_err(&w, "tensor 'w': data offset 4 is misaligned (alignment 32)", -1, "misaligned tensor");
    gw_free(&w);
    one_tensor(&w, "w", 1, (const uint64_t[]){33}, QT_Q8_0, 0, 64, &at);
    expect_err(&w, "not a multiple of the Q8_0 block size 32", -1, "row not a whole number of blocks");
    gw_free(&w);
    one_tensor(&w, "w", 4, (const uint64_t[]){1ull << 20, 1ull << 20, 1ull << 20, 1ull << 20}, QT_F32, 0,
               16, &at);
    expect_err(&w, "tensor 'w': dimensions overflow", -1, "element count overflow");
    gw_free(&w);
    one_tensor(&w, "w", 1, (const uint64_t[]){1ull << 62}, QT_F32, 0, 16, &at);
    expect_err(&w, "tensor 'w': size overflows", -1, "row bytes overflow (2^62 f32)");
    gw_free(&w);
    one_tensor(&w, "w", 4, (const uint64_t[]){0, 1ull << 40, 1ull << 40, 1ull << 40}, QT_F32, 0, 16, &at);
    expect_err(&w, "tensor 'w': size overflows", -1, "row count overflow with ne[0] = 0");
    gw_free(&w);

    gw_init(&w);
    gw_header(&w, 3, 2, 1);
    gw_kv_str(&w, "general.architecture", "x");
    gw_tensor(&w, "w", 1, (const uint64_t[]){8}, QT_F32, 0);
    size_t dup_at = w.n;
    gw_tensor(&w, "w", 1, (const uint64_t[]){8}, QT_F32, 32);
    gw_pad(&w, 32);
    for (int i = 0; i < 64; i++) gw_u8(&w, 0);
    expect_err(&w, "duplicate tensor name 'w'", (long)dup_at, "duplicate tensor name");
    gw_free(&w);
}

static void test_open_errors(void)
{
    char err[512] = "";
    struct gguf_ctx *c = gguf_open("/nonexistent/x.gguf", err, sizeof err);
    ok(!c && strstr(err, "/nonexistent/x.gguf: cannot open"), "missing file: %s", err);
    c = gguf_open("/tmp", err, sizeof err);
    ok(!c && strstr(err, "/tmp: not a regular file"), "directory: %s", err);
    /* A tiny error buffer truncates the message but never overflows. */
    char small[8];
    struct gw w;
    gw_init(&w);
    gw_u32(&w, 0);
    c = gguf_open_memory(w.p, w.n, NAME, small, sizeof small);
    ok(!c && strlen(small) < sizeof small, "short error buffer");
    gw_free(&w);
}

int main(void)
{
    test_valid();
    test_truncation();
    test_preamble_errors();
    test_kv_errors();
    test_array_errors();
    test_tensor_errors();
    test_open_errors();
    return tap_done();
}
