/* make_corpus: writes the fuzz seed corpus (tests/engine/model/gguf/corpus/) with the test
 * GGUF writer: small valid files covering every value type, nested arrays and
 * tensors of each supported format, plus typical malformed ones. Run by hand:
 *   build/tests/engine/model/make_corpus tests/engine/model/gguf/corpus */
#include <stdio.h>
#include <string.h>

#include "gguf.h"
#include "gguf_writer.h"
#include "quant.h"

static int save(const char *dir, const char *name, const struct gw *w, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int bad = !f || w->oom || fwrite(w->p, 1, n, f) != n;
    if (f && fclose(f) != 0) bad = 1;
    if (bad) fprintf(stderr, "make_corpus: cannot write %s\n", path);
    return bad;
}

/* One tensor of every supported format, rows of one block each. */
static void all_formats(struct gw *w)
{
    static const uint32_t types[] = {QT_F32, QT_F16, QT_BF16, QT_Q4_0, QT_Q4_1, QT_Q5_0,
                                     QT_Q5_1, QT_Q8_0, QT_Q4_K, QT_Q5_K, QT_Q6_K};
    size_t nt = sizeof types / sizeof types[0];
    gw_header(w, 3, nt, 2);
    gw_kv_str(w, "general.architecture", "llama");
    gw_kv_arr(w, "tokenizer.ggml.tokens", GGUF_VT_STRING, 3);
    gw_str(w, "<s>"), gw_str(w, "a"), gw_str(w, "\xe2\x96\x81" "b");
    uint64_t off = 0;
    for (size_t i = 0; i < nt; i++) {
        const struct qtype_info *qi = qtype_get(types[i]);
        char name[32];
        snprintf(name, sizeof name, "t.%s", qi->name);
        gw_tensor(w, name, 2, (const uint64_t[]){qi->block_size == 1 ? 32 : qi->block_size, 2},
                  types[i], off);
        off += (2 * qtype_row_bytes(types[i], qi->block_size == 1 ? 32 : qi->block_size) + 31) / 32 * 32;
    }
    gw_pad(w, 32);
    for (uint64_t i = 0; i < off; i++) gw_u8(w, (uint8_t)(i * 37 + 11));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_corpus DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    int bad = 0;
    struct gw w;
    struct gw_valid_layout lay;
    gw_init(&w), gw_valid(&w, 3, &lay);
    bad |= save(dir, "valid-v3.gguf", &w, w.n);
    bad |= save(dir, "truncated-kv.gguf", &w, lay.arch_kv + 30);
    bad |= save(dir, "truncated-data.gguf", &w, lay.data + 20);
    w.p[lay.bool_val] = 2;
    bad |= save(dir, "bad-bool.gguf", &w, w.n);
    gw_free(&w);
    gw_init(&w), gw_valid(&w, 2, &lay);
    bad |= save(dir, "valid-v2.gguf", &w, w.n);
    w.p[4] = 1;
    bad |= save(dir, "v1.gguf", &w, w.n);
    gw_free(&w);
    gw_init(&w), gw_header(&w, 3, 0, 1), gw_kv_str(&w, "general.architecture", "x");
    bad |= save(dir, "minimal.gguf", &w, w.n);
    gw_free(&w);
    gw_init(&w), all_formats(&w);
    bad |= save(dir, "formats.gguf", &w, w.n);
    gw_free(&w);
    gw_init(&w), gw_header(&w, 3, 0, 2), gw_kv_str(&w, "general.architecture", "x");
    gw_kv_arr(&w, "nest", GGUF_VT_ARRAY, 2);
    gw_u32(&w, GGUF_VT_ARRAY), gw_u64(&w, 1), gw_u32(&w, GGUF_VT_I16), gw_u64(&w, 2), gw_u32(&w, 0);
    gw_u32(&w, GGUF_VT_STRING), gw_u64(&w, 2), gw_str(&w, "p"), gw_str(&w, "q");
    bad |= save(dir, "nested.gguf", &w, w.n);
    gw_free(&w);
    gw_init(&w), gw_header(&w, 3, 0, 2), gw_kv_str(&w, "general.architecture", "x");
    gw_kv_arr(&w, "deep", GGUF_VT_ARRAY, 1);
    for (int i = 0; i < 9; i++) gw_u32(&w, GGUF_VT_ARRAY), gw_u64(&w, 1);
    gw_u32(&w, GGUF_VT_U8), gw_u64(&w, 1), gw_u8(&w, 5);
    bad |= save(dir, "nested-deep.gguf", &w, w.n);
    w.p[4] = 0, w.p[7] = 3; /* version 3 written big-endian */
    bad |= save(dir, "big-endian.gguf", &w, w.n);
    gw_free(&w);
    gw_init(&w), gw_header(&w, 3, 1, 1), gw_kv_str(&w, "general.architecture", "x");
    gw_tensor(&w, "w", 2, (const uint64_t[]){256, 1}, QT_Q6_K, 4096);
    bad |= save(dir, "tensor-oob.gguf", &w, w.n);
    gw_free(&w);
    return bad;
}
