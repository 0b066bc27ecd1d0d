/* gguf_writer: in-memory GGUF builder for tests (see gguf_writer.h). */
#include "gguf_writer.h"

#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"

void gw_init(struct gw *w)
{
    memset(w, 0, sizeof *w);
}

void gw_free(struct gw *w)
{
    free(w->p);
    memset(w, 0, sizeof *w);
}

void gw_bytes(struct gw *w, const void *src, size_t n)
{
    if (w->oom) return;
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->n + n) cap *= 2;
        uint8_t *p = realloc(w->p, cap);
        if (!p) {
            w->oom = true;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->n, src, n);
    w->n += n;
}

void gw_u8(struct gw *w, uint8_t v) { gw_bytes(w, &v, 1); }
void gw_u32(struct gw *w, uint32_t v) { gw_bytes(w, &v, 4); }
void gw_u64(struct gw *w, uint64_t v) { gw_bytes(w, &v, 8); }
void gw_f32(struct gw *w, float v) { gw_bytes(w, &v, 4); }

void gw_str(struct gw *w, const char *s)
{
    gw_u64(w, strlen(s));
    gw_bytes(w, s, strlen(s));
}

void gw_pad(struct gw *w, size_t align)
{
    while (w->n % align) gw_u8(w, 0);
}

void gw_header(struct gw *w, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    gw_bytes(w, "GGUF", 4);
    gw_u32(w, version);
    gw_u64(w, n_tensors);
    gw_u64(w, n_kv);
}

void gw_kv_str(struct gw *w, const char *key, const char *val)
{
    gw_str(w, key);
    gw_u32(w, GGUF_VT_STRING);
    gw_str(w, val);
}

void gw_kv_u32(struct gw *w, const char *key, uint32_t v)
{
    gw_str(w, key);
    gw_u32(w, GGUF_VT_U32);
    gw_u32(w, v);
}

void gw_kv_arr(struct gw *w, const char *key, uint32_t etype, uint64_t n)
{
    gw_str(w, key);
    gw_u32(w, GGUF_VT_ARRAY);
    gw_u32(w, etype);
    gw_u64(w, n);
}

void gw_tensor(struct gw *w, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
               uint64_t offset)
{
    gw_str(w, name);
    gw_u32(w, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) gw_u64(w, ne[i]);
    gw_u32(w, type);
    gw_u64(w, offset);
}

/* Scalars of every fixed-size type, one key each. */
static void valid_scalars(struct gw *w, struct gw_valid_layout *lay)
{
    gw_str(w, "t.u8"), gw_u32(w, GGUF_VT_U8), gw_u8(w, 200);
    gw_str(w, "t.i8"), gw_u32(w, GGUF_VT_I8), gw_u8(w, (uint8_t)-5);
    gw_str(w, "t.u16"), gw_u32(w, GGUF_VT_U16), gw_bytes(w, &(uint16_t){60000}, 2);
    gw_str(w, "t.i16"), gw_u32(w, GGUF_VT_I16), gw_bytes(w, &(int16_t){-300}, 2);
    gw_kv_u32(w, "t.u32", 4000000000u);
    gw_str(w, "t.i32"), gw_u32(w, GGUF_VT_I32), gw_bytes(w, &(int32_t){-70000}, 4);
    gw_str(w, "t.f32"), gw_u32(w, GGUF_VT_F32), gw_f32(w, 0.5f);
    gw_str(w, "t.bool"), gw_u32(w, GGUF_VT_BOOL);
    lay->bool_val = w->n;
    gw_u8(w, 1);
    gw_str(w, "t.u64"), gw_u32(w, GGUF_VT_U64), gw_u64(w, 1ull << 40);
    gw_str(w, "t.i64"), gw_u32(w, GGUF_VT_I64), gw_u64(w, (uint64_t)-3);
    gw_str(w, "t.f64"), gw_u32(w, GGUF_VT_F64), gw_bytes(w, &(double){-2.25}, 8);
}

/* Arrays: i32, strings, and an array of two arrays (u8 x2, string x1). */
static void valid_arrays(struct gw *w)
{
    gw_kv_arr(w, "t.arr_i32", GGUF_VT_I32, 3);
    for (int32_t v = -1; v <= 1; v++) gw_bytes(w, &v, 4);
    gw_kv_arr(w, "t.arr_str", GGUF_VT_STRING, 2);
    gw_str(w, "hello");
    gw_str(w, "");
    gw_kv_arr(w, "t.nested", GGUF_VT_ARRAY, 2);
    gw_u32(w, GGUF_VT_U8), gw_u64(w, 2), gw_u8(w, 7), gw_u8(w, 9);
    gw_u32(w, GGUF_VT_STRING), gw_u64(w, 1), gw_str(w, "in");
}

#define VALID_N_KV 16

void gw_valid(struct gw *w, uint32_t version, struct gw_valid_layout *lay)
{
    gw_header(w, version, 2, VALID_N_KV);
    lay->arch_kv = w->n;
    gw_kv_str(w, "general.architecture", "test");
    gw_kv_u32(w, "general.alignment", 32);
    valid_scalars(w, lay);
    valid_arrays(w);
    gw_tensor(w, "a", 2, (const uint64_t[]){8, 2}, QT_F32, 0);
    lay->tensor_b = w->n;
    gw_tensor(w, "b", 1, (const uint64_t[]){32}, QT_Q8_0, 64);
    gw_pad(w, 32);
    lay->data = w->n;
    for (int i = 0; i < 16; i++) gw_f32(w, (float)i);
    gw_u8(w, 0x00), gw_u8(w, 0x3c); /* f16 1.0 */
    for (int i = -16; i < 16; i++) gw_u8(w, (uint8_t)(int8_t)i);
}
