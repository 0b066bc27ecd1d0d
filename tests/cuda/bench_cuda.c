/* bench_cuda: decode and prefill throughput of the CUDA backend on a
 * synthetic model generated on the device, against the measured copy
 * bandwidth (the roofline of decode). Run by tests/gpu/check.sh.
 * usage: bench_cuda NAME TYPE [JSON_OUT]   e.g. bench_cuda llama3-8b q4_0 out.json
 * BENCH_BATCHES="1,8" limits the decode batches, BENCH_NO_PREFILL=1 skips
 * prefill (for the crossover and ablation runs of check.sh).
 * Decode: B sequences from position 0, steps 16..ST timed; bytes per step =
 * every weight matrix once (all but the embedding table) + the KV read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "backend.h"
#include "cuda_ops.h"
#include "model.h"
#include "quant.h"
#include "synthetic.h"

#define BT 16
#define STEPS 112
#define WARM 16

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t tbytes(const struct wtensor *t)
{
    return (uint64_t)t->rows * qtype_row_bytes(t->type, (uint64_t)t->cols);
}

/* Weight bytes a decode step reads: every matrix once, one embedding row. */
static uint64_t step_weight_bytes(const struct model *m)
{
    uint64_t b = tbytes(&m->output);
    for (int l = 0; l < m->hp.n_layer; l++) {
        const struct layer_weights *L = &m->layers[l];
        b += tbytes(&L->wq) + tbytes(&L->wk) + tbytes(&L->wv) + tbytes(&L->wo) + tbytes(&L->w_gate) +
             tbytes(&L->w_up) + tbytes(&L->w_down);
    }
    return b;
}

int main(int argc, char **argv)
{
    char err[1024];
    if (argc < 3) {
        fprintf(stderr, "usage: bench_cuda NAME TYPE [JSON_OUT]\n");
        return 2;
    }
    uint32_t type = QT_COUNT;
    for (uint32_t t = 0; t < QT_COUNT; t++)
        if (qtype_get(t) && strcasecmp(qtype_name(t), argv[2]) == 0) type = t;
    if (type == QT_COUNT) {
        fprintf(stderr, "bench_cuda: unknown type %s\n", argv[2]);
        return 2;
    }
    double bw = 0;
    cudaError_t ce = cu_copy_bandwidth((size_t)1 << 30, 20, &bw);
    if (ce != cudaSuccess) {
        fprintf(stderr, "bench_cuda: bandwidth probe: %s\n", cudaGetErrorString(ce));
        return 1;
    }
    double t0 = now();
    struct model *m = model_open_synthetic_ex(argv[1], type, 1, SYNTH_NO_HOST_DATA, err, sizeof err);
    if (!m) {
        fprintf(stderr, "bench_cuda: %s\n", err);
        return 1;
    }
    const int32_t n_blocks = 1024;
    const uint64_t kv_tok = 2ull * m->hp.n_layer * m->hp.n_head_kv * m->hp.head_dim * 2;
    struct backend_config cfg = { .kind = BACKEND_CUDA, .kv_type = KV_F16, .kv_block_tokens = BT,
                                  .kv_bytes = kv_tok * BT * n_blocks, .max_batch_tokens = 4096,
                                  .max_seqs = 64 };
    struct backend *be = backend_cuda_open(m, &cfg, err, sizeof err);
    if (!be) {
        fprintf(stderr, "bench_cuda: %s\n", err);
        return 1;
    }
    const double t_load = now() - t0;
    struct backend_info info;
    be->ops->get_info(be, &info);
    const int32_t nv = m->hp.n_vocab;
    float *logits = malloc((size_t)64 * nv * sizeof *logits);
    int32_t *tables = malloc((size_t)n_blocks * sizeof *tables);
    for (int i = 0; i < n_blocks; i++) tables[i] = i;
    const uint64_t wstep = step_weight_bytes(m);
    FILE *js = argc > 3 ? fopen(argv[3], "w") : NULL;
    printf("bench %s %s on %s: load %.1f s (weights generated on the device), weights %.2f GiB, "
           "copy bandwidth %.0f GB/s\n", argv[1], qtype_name(type), info.device, t_load,
           info.weight_bytes / 1073741824.0, bw);
    if (js)
        fprintf(js, "{\"model\": \"%s\", \"type\": \"%s\", \"device\": \"%s\", \"copy_gbps\": %.1f, "
                "\"load_s\": %.2f, \"weight_bytes\": %llu, \"decode\": [", argv[1], qtype_name(type),
                info.device, bw, t_load, (unsigned long long)info.weight_bytes);

    int batches[8] = { 1, 8, 32, 64 }, n_batches = 4;
    const char *bl = getenv("BENCH_BATCHES");
    if (bl) {
        n_batches = 0;
        for (const char *q = bl; *q && n_batches < 8;) {
            int v = atoi(q);
            if (v >= 1 && v <= 64) batches[n_batches++] = v;
            q = strchr(q, ',');
            if (!q) break;
            q++;
        }
    }
    double tps1 = 0;
    int rc = 0;
    for (int bi = 0; bi < n_batches && rc == 0; bi++) {
        const int B = batches[bi];
        const int per = (STEPS + BT) / BT; /* blocks per sequence */
        struct fwd_seq seqs[64];
        int32_t tok[64], pos[64], seq[64];
        uint8_t want[64];
        for (int s = 0; s < B; s++) {
            seqs[s].block_table = tables + s * per;
            seqs[s].n_blocks = per;
            seq[s] = s;
            want[s] = 1;
        }
        double ts = 0;
        uint64_t kv_read = 0;
        for (int step = 0; step < STEPS && rc == 0; step++) {
            for (int s = 0; s < B; s++) {
                tok[s] = (step * 7919 + s * 104729) % nv;
                pos[s] = step;
            }
            struct fwd_batch b = { B, tok, pos, seq, want, B, seqs };
            double a = now();
            rc = backend_forward(be, &b, logits, err, sizeof err);
            if (step >= WARM) {
                ts += now() - a;
                kv_read += (uint64_t)B * (uint64_t)(step + 1) * kv_tok;
            }
        }
        if (rc) {
            fprintf(stderr, "bench_cuda: decode batch %d: %s\n", B, err);
            break;
        }
        const int timed = STEPS - WARM;
        const double tps = (double)B * timed / ts;
        const double gbps = ((double)wstep * timed + (double)kv_read) / ts / 1e9;
        if (bi == 0) tps1 = tps;
        printf("  decode batch %2d: %8.1f tok/s  step %.2f ms  %6.0f GB/s = %5.1f %% of copy bandwidth\n",
               B, tps, ts / timed * 1e3, gbps, 100.0 * gbps / bw);
        if (bi > 0) printf("                   aggregate %.1fx batch %d\n", tps / tps1, batches[0]);
        if (js)
            fprintf(js, "%s{\"batch\": %d, \"tok_s\": %.1f, \"step_ms\": %.3f, \"gbps\": %.1f, "
                    "\"roofline_pct\": %.1f, \"x_batch1\": %.2f}", bi ? ", " : "", B, tps,
                    ts / timed * 1e3, gbps, 100.0 * gbps / bw, tps / tps1);
    }
    if (js) fprintf(js, "], \"prefill\": [");
    const int lens[] = { 512, 4096 };
    for (int li = 0; li < 2 && rc == 0 && !getenv("BENCH_NO_PREFILL"); li++) {
        const int n = lens[li];
        int32_t *tok = malloc((size_t)n * 4), *pos = malloc((size_t)n * 4), *seq = calloc((size_t)n, 4);
        uint8_t *want = calloc((size_t)n, 1);
        for (int i = 0; i < n; i++) {
            tok[i] = (i * 7919) % nv;
            pos[i] = i;
        }
        want[n - 1] = 1;
        struct fwd_seq fs = { tables, n / BT };
        struct fwd_batch b = { n, tok, pos, seq, want, 1, &fs };
        double best = 1e30;
        for (int r = 0; r < 3 && rc == 0; r++) {
            double a = now();
            rc = backend_forward(be, &b, logits, err, sizeof err);
            double t = now() - a;
            if (r > 0 && t < best) best = t; /* first run warms up */
        }
        if (rc) fprintf(stderr, "bench_cuda: prefill %d: %s\n", n, err);
        else printf("  prefill %4d tokens: %8.0f tok/s (%.1f ms)\n", n, n / best, best * 1e3);
        if (js && !rc) fprintf(js, "%s{\"tokens\": %d, \"tok_s\": %.0f, \"ms\": %.1f}", li ? ", " : "", n, n / best, best * 1e3);
        free(tok);
        free(pos);
        free(seq);
        free(want);
    }
    if (js) {
        fprintf(js, "], \"ok\": %s}\n", rc ? "false" : "true");
        fclose(js);
    }
    free(logits);
    free(tables);
    backend_close(be);
    model_close(m);
    return rc ? 1 : 0;
}
