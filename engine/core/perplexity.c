/* perplexity: llama-perplexity's chunked method on a tern backend (see
 * perplexity.h). Logits come back per sub-batch, so memory stays at
 * n_batch rows of the vocabulary whatever n_ctx is. */
#include "perplexity.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"
#include "model.h"

double ppl_token_logprobs(const float *logits, int32_t n_vocab, int32_t target, int32_t n_top,
                          int32_t *top_tok, float *top_lp)
{
    float mx = logits[0];
    for (int32_t i = 1; i < n_vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)(logits[i] - mx));
    const double lse = log(sum);
    /* Insertion into a sorted list of n_top raw logits: most rows leave it
     * after one comparison with its last entry. */
    int32_t k = 0;
    for (int32_t i = 0; i < n_vocab && n_top > 0; i++) {
        float v = logits[i];
        if (k == n_top && v <= top_lp[k - 1]) continue;
        int32_t j = k < n_top ? k++ : n_top - 1;
        while (j > 0 && top_lp[j - 1] < v) {
            top_lp[j] = top_lp[j - 1];
            top_tok[j] = top_tok[j - 1];
            j--;
        }
        top_lp[j] = v;
        top_tok[j] = i;
    }
    for (int32_t j = 0; j < k; j++) top_lp[j] = (float)((double)(top_lp[j] - mx) - lse);
    return (double)(logits[target] - mx) - lse;
}

double ppl_log_softmax(const float *logits, int32_t n_vocab, int32_t target)
{
    return ppl_token_logprobs(logits, n_vocab, target, 0, NULL, NULL);
}

/* One chunk: forward in sub-batches, accumulate NLL of the scored half. */
static int run_chunk(struct backend *be, const int32_t *chunk, const struct ppl_params *p,
                     struct fwd_single *b, double *nll, double *nll2, char *err, size_t errlen)
{
    const int32_t n_vocab = be->model->hp.n_vocab, first = p->n_ctx / 2;
    for (int32_t start = 0; start < p->n_ctx; start += p->n_batch) {
        const int32_t n = p->n_ctx - start < p->n_batch ? p->n_ctx - start : p->n_batch;
        for (int32_t k = 0; k < n; k++) {
            const int32_t j = start + k;
            b->tok[k] = j == 0 && p->bos >= 0 ? p->bos : chunk[j];
            b->want[k] = j >= first && j < p->n_ctx - 1;
        }
        if (fwd_single_forward(be, b, n, start, err, errlen)) return -1;
        int32_t row = 0;
        for (int32_t k = 0; k < n; k++) {
            if (!b->want[k]) continue;
            const double v = -ppl_log_softmax(b->logits + (size_t)row++ * n_vocab, n_vocab,
                                              chunk[start + k + 1]);
            *nll += v;
            *nll2 += v * v;
        }
    }
    return 0;
}

void ppl_from_sums(double nll_sum, double nll_sq_sum, int64_t n, struct ppl_result *out)
{
    const double mean = n > 0 ? nll_sum / (double)n : 0.0;
    const double var = n > 0 ? nll_sq_sum / (double)n - mean * mean : 0.0;
    out->nll = mean;
    out->ppl = exp(mean);
    out->ppl_err = n > 1 && var > 0.0 ? sqrt(var / (double)(n - 1)) * out->ppl : 0.0;
    out->n_scored = n;
}

int ppl_run(struct backend *be, const int32_t *tokens, int64_t n_tokens,
            const struct ppl_params *pin, struct ppl_result *out, char *err, size_t errlen)
{
    struct ppl_params p = *pin;
    struct fwd_single b = { 0 };
    int rc = -1;
    if (p.n_batch <= 0) p.n_batch = 128;
    if (p.n_batch > p.n_ctx) p.n_batch = p.n_ctx;
    if (p.n_ctx < 4 || n_tokens < 2 * (int64_t)p.n_ctx) {
        snprintf(err, errlen, "perplexity: %lld tokens, need at least %d for a context of %d",
                 (long long)n_tokens, 2 * p.n_ctx, p.n_ctx);
        return -1;
    }
    int32_t n_chunks = (int32_t)(n_tokens / p.n_ctx);
    if (p.n_chunks > 0 && p.n_chunks < n_chunks) n_chunks = p.n_chunks;
    const int32_t bt = be->kv_block_tokens, nb = (p.n_ctx + bt - 1) / bt;
    if (nb > be->kv_n_blocks) {
        snprintf(err, errlen, "perplexity: context %d needs %d KV blocks, the pool has %d",
                 p.n_ctx, nb, be->kv_n_blocks);
        return -1;
    }
    if (fwd_single_alloc(&b, p.n_batch, nb, p.n_batch, be->model->hp.n_vocab)) {
        snprintf(err, errlen, "perplexity: out of memory for %d logit rows", p.n_batch);
        goto fail;
    }
    double nll = 0.0, nll2 = 0.0;
    int64_t count = 0;
    for (int32_t c = 0; c < n_chunks; c++) {
        if (run_chunk(be, tokens + (size_t)c * p.n_ctx, &p, &b, &nll, &nll2, err, errlen))
            goto fail;
        count += p.n_ctx - p.n_ctx / 2 - 1;
        if (p.progress) p.progress(p.ud, c + 1, n_chunks, exp(nll / (double)count));
    }
    ppl_from_sums(nll, nll2, count, out);
    out->n_chunks = n_chunks;
    rc = 0;
fail:
    fwd_single_free(&b);
    return rc;
}
