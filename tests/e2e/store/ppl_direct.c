/* ppl_direct: the engine's own perplexity figure (engine/perplexity.h,
 * ppl_run straight on a CPU backend, no scheduler) for comparison with
 * 'tern eval --perplexity', which runs the same method as score requests
 * through the scheduler. usage: ppl_direct MODEL TEXT CTX CHUNKS; prints the
 * perplexity. */
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"
#include "model.h"
#include "perplexity.h"
#include "tok.h"

int main(int argc, char **argv)
{
    char err[512];
    if (argc != 5) {
        fprintf(stderr, "usage: ppl_direct MODEL TEXT CTX CHUNKS\n");
        return 2;
    }
    struct model *m = model_open(argv[1], err, sizeof err);
    struct tok *t = m ? tok_open(m->gguf, err, sizeof err) : NULL;
    FILE *f = fopen(argv[2], "rb");
    if (!m || !t || !f) {
        fprintf(stderr, "ppl_direct: %s\n", f ? err : argv[2]);
        return 1;
    }
    static char text[1 << 20];
    size_t len = fread(text, 1, sizeof text, f);
    fclose(f);
    int64_t n = tok_encode(t, text, len, TOK_ADD_BOS, NULL, 0, err, sizeof err);
    int32_t *ids = n > 0 ? malloc((size_t)n * sizeof *ids) : NULL;
    if (!ids || tok_encode(t, text, len, TOK_ADD_BOS, ids, n, err, sizeof err) != n) {
        fprintf(stderr, "ppl_direct: tokenizing: %s\n", err);
        return 1;
    }
    struct backend_config cfg = {.kind = BACKEND_CPU, .threads = 2, .kv_type = KV_F16,
                                 .kv_block_tokens = 16, .max_batch_tokens = 128, .max_seqs = 4};
    struct backend *be = backend_cpu_open(m, &cfg, err, sizeof err);
    if (!be) {
        fprintf(stderr, "ppl_direct: %s\n", err);
        return 1;
    }
    struct ppl_params p = {.n_ctx = atoi(argv[3]), .n_chunks = atoi(argv[4]),
                           .bos = tok_adds_bos(t) ? tok_bos(t) : -1, .n_batch = 128};
    struct ppl_result r;
    int rc = ppl_run(be, ids, n, &p, &r, err, sizeof err);
    if (rc == 0)
        printf("%.9g %lld %.9g\n", r.ppl, (long long)r.n_scored, r.ppl_err);
    else
        fprintf(stderr, "ppl_direct: %s\n", err);
    backend_close(be);
    free(ids);
    tok_close(t);
    model_close(m);
    return rc ? 1 : 0;
}
