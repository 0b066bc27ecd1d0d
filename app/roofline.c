/* roofline: model costs and predictions from the machine limits (see
 * roofline.h). */
#include "roofline.h"

#include <stdio.h>

#include "cpu/cpu_isa.h"

int roofline_limits(struct limits *l, int isa, bool remeasure, char *err, size_t errlen)
{
    const enum cpu_isa use = isa >= 0 ? (enum cpu_isa)isa : cpu_isa_best();
    char path[4096];
    limits_default_path(use, path, sizeof path);
    if (!remeasure && limits_load(l, path, use, 0, err, errlen) == LIMITS_CACHE_OK) return 0;
    fprintf(stderr, "tern: measuring this machine's limits (%s; once, about a second)\n",
            cpu_isa_name(use));
    int rc = limits_get(l, path, use, true, err, errlen);
    if (rc == 1) fprintf(stderr, "tern: limits not cached: %s\n", err); /* still usable */
    return rc < 0 ? -1 : 0;
}

struct roofline_model roofline_model_cost(uint64_t active_weight_bytes, uint64_t active_params,
                                          uint64_t vocab_params)
{
    /* a model whose vocabulary matrices hold most of its parameters (Gemma 3
     * 270M: 63 %) still multiplies only the rest per prompt token */
    const uint64_t per_token =
        vocab_params < active_params ? active_params - vocab_params : active_params;
    struct roofline_model m = {
        .bytes_per_token = (double)active_weight_bytes,
        .ops_per_token = 2.0 * (double)per_token,
        /* quantized types hold at most ~1.07 bytes per weight (Q8_0); F16
         * and BF16 hold 2, F32 4 */
        .float_weights =
            active_params > 0 && (double)active_weight_bytes / (double)active_params >= 1.5,
    };
    return m;
}

struct roofline_fig roofline_predict(const struct limits *l, const struct roofline_model *m,
                                     int threads)
{
    struct roofline_fig f = {.threads = threads};
    f.read_gbs = limits_read_gbs(l, threads);
    f.peak_tops = limits_peak_ops(l, threads, m->float_weights) / 1e12;
    f.tg_pred_tok_s = limits_decode_tok_s(l, threads, m->bytes_per_token + m->kv_bytes_per_token);
    f.pp_pred_tok_s = limits_prefill_tok_s(l, threads, m->ops_per_token, m->float_weights);
    if (m->attn_flops_per_token > 0 && f.pp_pred_tok_s > 0) {
        /* the matrices and the attention, each at its own peak, one after the other */
        const double attn_peak =
            m->attn_bf16 ? limits_peak_ops(l, threads, true) : limits_peak_f32(l, threads);
        if (attn_peak > 0)
            f.pp_pred_tok_s = 1.0 / (1.0 / f.pp_pred_tok_s + m->attn_flops_per_token / attn_peak);
    }
    return f;
}

double roofline_decode_gbs(const struct roofline_model *m, double tg_tok_s)
{
    return (m->bytes_per_token + m->kv_bytes_per_token) * tg_tok_s / 1e9;
}

double roofline_prefill_tops(const struct roofline_model *m, double pp_tok_s)
{
    return m->ops_per_token * pp_tok_s / 1e12;
}

void roofline_fmt_rate(char *buf, size_t n, double v)
{
    if (v <= 0)
        snprintf(buf, n, "–");
    else if (v < 10)
        snprintf(buf, n, "%.2f", v);
    else if (v < 100)
        snprintf(buf, n, "%.1f", v);
    else if (v < 10000)
        snprintf(buf, n, "%.0f", v);
    else if (v < 1e6)
        snprintf(buf, n, "%.0fk", v / 1e3);
    else
        snprintf(buf, n, "%.1fM", v / 1e6);
}
