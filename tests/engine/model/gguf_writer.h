/* gguf_writer: builds GGUF files byte by byte in memory for the reader's
 * tests, the fuzz corpus and malformed-file cases (a test can write any
 * field, valid or not). State in one growable buffer; no validation. */
#ifndef TERN_TEST_GGUF_WRITER_H
#define TERN_TEST_GGUF_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gw {
    uint8_t *p;
    size_t n, cap;
    bool oom; /* set when an append failed; the buffer is then incomplete */
};

void gw_init(struct gw *w);
void gw_free(struct gw *w);

void gw_bytes(struct gw *w, const void *src, size_t n);
void gw_u8(struct gw *w, uint8_t v);
void gw_u32(struct gw *w, uint32_t v);
void gw_u64(struct gw *w, uint64_t v);
void gw_f32(struct gw *w, float v);
void gw_str(struct gw *w, const char *s); /* u64 length + bytes */
void gw_pad(struct gw *w, size_t align); /* zero bytes up to a multiple of align */

/* Field groups. */
void gw_header(struct gw *w, uint32_t version, uint64_t n_tensors, uint64_t n_kv);
void gw_kv_str(struct gw *w, const char *key, const char *val);
void gw_kv_u32(struct gw *w, const char *key, uint32_t v);
/* Array header only: key, type ARRAY, element type, count; elements follow. */
void gw_kv_arr(struct gw *w, const char *key, uint32_t etype, uint64_t n);
void gw_tensor(struct gw *w, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
               uint64_t offset);

/* A small valid v`version` file exercising every value type, nested arrays
 * and two tensors ("a": F32 [8,2] = 0..15; "b": Q8_0 [32], d = 1, qs = -16..15).
 * Layout constants for tests that patch fields are in gw_valid_layout. */
struct gw_valid_layout {
    size_t arch_kv;     /* offset of the general.architecture key */
    size_t bool_val;    /* offset of the scalar bool value byte */
    size_t tensor_b;    /* offset of tensor info "b" (its name length) */
    size_t data;        /* data section */
};
void gw_valid(struct gw *w, uint32_t version, struct gw_valid_layout *lay);

#endif
