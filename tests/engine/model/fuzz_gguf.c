/* fuzz_gguf: libFuzzer target for the GGUF reader. Opens the input as a GGUF
 * file and, when it is accepted, walks every key/value, array element and
 * tensor the way the tokenizer and model loader do, dequantizing the first row
 * of each tensor, so the sanitizers see every byte the API hands out. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "gguf.h"
#include "quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned walk_kv(const struct gguf_kv *kv)
{
    unsigned h = (unsigned)kv->key.len;
    for (uint64_t j = 0; j < kv->key.len; j++) h += (uint8_t)kv->key.ptr[j];
    if (kv->type == GGUF_VT_STRING)
        for (uint64_t j = 0; j < kv->v.str.len; j++) h += (uint8_t)kv->v.str.ptr[j];
    if (kv->type != GGUF_VT_ARRAY) return h;
    for (uint64_t j = 0; j < kv->v.arr.n; j++) {
        double d;
        int64_t i;
        const struct gguf_str *s = kv->v.arr.strs ? &kv->v.arr.strs[j] : NULL;
        if (s && s->len) h += (unsigned)s->len + (uint8_t)s->ptr[s->len - 1];
        else if (gguf_arr_f64(kv, j, &d)) h += (unsigned)(d != 0);
        if (gguf_arr_i64(kv, j, &i)) h += (unsigned)i;
    }
    return h;
}

/* Invariants a consumer relies on: the byte size matches the element count
 * exactly (so reading n_elements never runs past nbytes) and the data lies
 * inside the input. Checked in 128 bits so the check cannot overflow. */
static void check_tensor(const struct gguf_tensor *t, const uint8_t *buf, size_t size)
{
    const struct qtype_info *qi = qtype_get(t->type);
    if (!qi) abort();
    if ((unsigned __int128)t->nbytes * qi->block_size !=
        (unsigned __int128)t->n_elements * qi->type_size)
        abort();
    const uint8_t *p = t->data;
    if (p < buf || p > buf + size || t->nbytes > (size_t)(buf + size - p)) abort();
}

static unsigned walk_tensor(const struct gguf_tensor *t)
{
    unsigned h = t->type;
    const uint8_t *p = t->data;
    for (uint64_t j = 0; j < t->nbytes && j < 4096; j++) h += p[j];
    if (t->nbytes) h += p[t->nbytes - 1];
    const struct qtype_info *qi = qtype_get(t->type);
    if (qi && qi->supported && t->ne[0] <= 4096 && t->n_elements) {
        float *row = malloc(t->ne[0] * sizeof *row + 1);
        if (row && dequant_row(t->type, t->data, row, (int64_t)t->ne[0])) h += (unsigned)(row[0] > 0);
        free(row);
    }
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    struct gguf_ctx *c = gguf_open_memory(data, size, "fuzz", err, sizeof err);
    if (!c) return 0;
    volatile unsigned h = 0;
    for (uint64_t i = 0; i < gguf_n_kv(c); i++) {
        const struct gguf_kv *kv = gguf_kv_at(c, i);
        h += walk_kv(kv);
        uint32_t u;
        int32_t i32;
        uint64_t u64;
        float f;
        bool b;
        char key[64];
        size_t n = kv->key.len < sizeof key - 1 ? kv->key.len : sizeof key - 1;
        for (size_t j = 0; j < n; j++) key[j] = kv->key.ptr[j];
        key[n] = 0;
        const char *s = gguf_get_str(c, key);
        h += (s ? (unsigned)s[0] : 0) + gguf_get_u32(c, key, &u) + gguf_get_f32(c, key, &f) +
             gguf_get_bool(c, key, &b) + gguf_get_i32(c, key, &i32) + gguf_get_u64(c, key, &u64) +
             (gguf_get_arr(c, key) != NULL) + (unsigned)gguf_vtype_name(kv->type)[0];
    }
    h += (unsigned)(gguf_version(c) + gguf_file_size(c) + gguf_alignment(c) + gguf_data_offset(c));
    for (uint64_t i = 0; i < gguf_n_tensors(c); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(c, i);
        check_tensor(t, data, size);
        h += walk_tensor(t) + (gguf_find_tensor(c, t->name) == t);
    }
    gguf_close(c);
    (void)h;
    return 0;
}
