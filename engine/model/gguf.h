/* gguf: memory-mapped, bounds-checked reader for GGUF v2/v3 model files.
 *
 * Ownership: gguf_open maps the file read-only; every pointer handed out
 * (strings, arrays, tensor data) points into that mapping or into the
 * context's own tables and stays valid until gguf_close. Strings from the
 * file are NOT NUL-terminated in the mapping: use the (ptr, len) pairs, or
 * gguf_get_str which returns a NUL-terminated copy owned by the context.
 * A context is never modified after open, so threads may share it. */
#ifndef TERN_GGUF_H
#define TERN_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* Metadata value types, numbered as in the GGUF specification. */
enum gguf_vtype {
    GGUF_VT_U8 = 0, GGUF_VT_I8 = 1, GGUF_VT_U16 = 2, GGUF_VT_I16 = 3,
    GGUF_VT_U32 = 4, GGUF_VT_I32 = 5, GGUF_VT_F32 = 6, GGUF_VT_BOOL = 7,
    GGUF_VT_STRING = 8, GGUF_VT_ARRAY = 9, GGUF_VT_U64 = 10, GGUF_VT_I64 = 11,
    GGUF_VT_F64 = 12,
    GGUF_VT_COUNT
};

#define GGUF_MAX_DIMS 4

/* A string inside the mapping (not NUL-terminated). */
struct gguf_str {
    const char *ptr;
    uint64_t len;
};

/* One metadata key/value. Arrays keep their element type and count; their
 * elements are read with gguf_arr_* below (strings are pre-indexed). Nested
 * arrays (arrays of arrays) are validated and skipped: `data` points at the
 * first inner array's header, and their elements are not indexed. */
struct gguf_kv {
    struct gguf_str key;
    enum gguf_vtype type;
    uint64_t offset;              /* byte offset of the value in the file */
    union {
        uint64_t u64;             /* any unsigned integer, bool (0/1) */
        int64_t i64;              /* any signed integer */
        double f64;               /* f32 or f64 */
        struct gguf_str str;
        struct {
            enum gguf_vtype type; /* element type (nested arrays: GGUF_VT_ARRAY) */
            uint64_t n;           /* element count */
            const void *data;     /* first element in the mapping (fixed-size types) */
            const struct gguf_str *strs; /* string arrays: n entries, owned by ctx */
        } arr;
    } v;
};

struct gguf_tensor {
    const char *name;             /* NUL-terminated copy owned by ctx */
    uint32_t type;                /* enum qtype (kernels/quant.h), GGML numbering */
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];   /* ne[0] is the contiguous (row) dimension; unused dims are 1 */
    uint64_t n_elements;
    uint64_t offset;              /* relative to the data section */
    uint64_t file_offset;         /* absolute byte offset in the file */
    uint64_t nbytes;
    const void *data;             /* points into the mapping */
};

struct gguf_ctx;

/* Opens and validates `path`: GGUF v2 or v3 (v1 and big-endian files get an
 * "unsupported version" error), every count, length and offset within the
 * file, no duplicate keys or tensor names, `general.architecture` present,
 * known tensor types, tensor data aligned and inside the file. On failure
 * returns NULL and writes "FILE: byte N: problem" into err (errlen bytes),
 * or "FILE: problem" when it cannot be opened or mapped. */
struct gguf_ctx *gguf_open(const char *path, char *err, size_t errlen);
/* Same over a caller-owned buffer (fuzzing, tests). The buffer must outlive ctx. */
struct gguf_ctx *gguf_open_memory(const void *buf, size_t size, const char *name,
                                  char *err, size_t errlen);
void gguf_close(struct gguf_ctx *ctx);

uint32_t gguf_version(const struct gguf_ctx *ctx);
uint64_t gguf_file_size(const struct gguf_ctx *ctx);
const char *gguf_path(const struct gguf_ctx *ctx);
uint64_t gguf_alignment(const struct gguf_ctx *ctx);
uint64_t gguf_data_offset(const struct gguf_ctx *ctx);

/* Metadata. */
uint64_t gguf_n_kv(const struct gguf_ctx *ctx);
const struct gguf_kv *gguf_kv_at(const struct gguf_ctx *ctx, uint64_t i);
const struct gguf_kv *gguf_find_kv(const struct gguf_ctx *ctx, const char *key);

/* Typed getters: return true and set *out when the key exists and its value
 * converts losslessly to the requested type; otherwise leave *out untouched
 * (so callers pre-set defaults) and return false. */
bool gguf_get_u32(const struct gguf_ctx *ctx, const char *key, uint32_t *out);
bool gguf_get_i32(const struct gguf_ctx *ctx, const char *key, int32_t *out);
bool gguf_get_u64(const struct gguf_ctx *ctx, const char *key, uint64_t *out);
bool gguf_get_f32(const struct gguf_ctx *ctx, const char *key, float *out);
bool gguf_get_bool(const struct gguf_ctx *ctx, const char *key, bool *out);
/* NUL-terminated copy owned by ctx, or NULL when absent / not a string. */
const char *gguf_get_str(const struct gguf_ctx *ctx, const char *key);
/* Array access: returns the kv if `key` is an array (else NULL). */
const struct gguf_kv *gguf_get_arr(const struct gguf_ctx *ctx, const char *key);
/* Element i of a numeric array as double / int64 (bounds-checked; false if not numeric). */
bool gguf_arr_f64(const struct gguf_kv *arr, uint64_t i, double *out);
bool gguf_arr_i64(const struct gguf_kv *arr, uint64_t i, int64_t *out);

/* Tensors. */
/* Drops the pages of [p, p + n) that lie wholly inside the file mapping from
 * this process's resident memory (they are read back from the file if
 * touched again). For a reader that has copied the data elsewhere (repacked
 * weights), so the copy does not double the resident size. A no-op for
 * contexts not backed by a mapping. */
void gguf_release_pages(const struct gguf_ctx *ctx, const void *p, size_t n);
/* Whether [p, p + n) lies inside the file mapping (false for NULL ctx or a
 * context not backed by one): a copy of it can give its pages back. */
bool gguf_in_mapping(const struct gguf_ctx *ctx, const void *p, size_t n);

uint64_t gguf_n_tensors(const struct gguf_ctx *ctx);
const struct gguf_tensor *gguf_tensor_at(const struct gguf_ctx *ctx, uint64_t i);
const struct gguf_tensor *gguf_find_tensor(const struct gguf_ctx *ctx, const char *name);

const char *gguf_vtype_name(enum gguf_vtype t);

#endif
