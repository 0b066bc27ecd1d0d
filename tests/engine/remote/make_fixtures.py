#!/usr/bin/env python3
"""Writes the /metrics fixtures (fixtures/*.prom) in the exposition shapes that
vLLM v0.10 (V1 engine: kv_cache_usage_perc, inter_token_latency_seconds, one
label set per engine), vLLM v0.6 (gpu_cache_usage_perc,
time_per_output_token_seconds), SGLang v0.4 (--enable-metrics) and llama.cpp's
llama-server (--metrics) publish, as their documentation shows them, with
values chosen so test_prom can check exact figures: between scrape 1 and
scrape 2 exactly ten TTFT samples land in (0.04, 0.06], so the interval p50 is
0.05 s while the lifetime p50 (100 old samples in (0.5, 0.75]) would be ~0.7."""
import os

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
TTFT_LE = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
           7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
ITL_LE = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
          10.0, 20.0, 40.0, 80.0]
E2E_LE = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
          120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]


def hist(name, les, samples, labels, help_):
    """samples: list of (value, count). Cumulative buckets, _sum, _count."""
    out = ["# HELP %s %s" % (name, help_), "# TYPE %s histogram" % name]
    total = sum(c for _, c in samples)
    s = sum(v * c for v, c in samples)
    for le in les + [float("inf")]:
        cum = sum(c for v, c in samples if v <= le)
        les_ = "+Inf" if le == float("inf") else repr(float(le))
        out.append('%s_bucket{le="%s",%s} %s' % (name, les_, labels, float(cum)))
    out.append("%s_sum{%s} %r" % (name, labels, float(s)))
    out.append("%s_count{%s} %s" % (name, labels, float(total)))
    return out


def gauge(name, v, labels, kind="gauge", help_="."):
    base = name[:-6] if kind == "counter" and name.endswith("_total") else name
    return ["# HELP %s %s" % (base, help_), "# TYPE %s %s" % (base, kind),
            "%s{%s} %r" % (name, labels, float(v))]


def vllm(step, old=False):
    L = 'engine="%d",model_name="meta-llama/Llama-3.1-8B-Instruct"'
    ttft = [(0.6, 100)] + ([(0.05, 10)] if step == 2 else [])
    itl = [(0.02, 5000)] + ([(0.03, 400)] if step == 2 else [])
    e2e = [(4.0, 100)] + ([(1.2, 10)] if step == 2 else [])
    q = [(0.4, 100)] + ([(0.1, 10)] if step == 2 else [])
    out = []
    for eng, run, wait in ((0, 3, 2), (1, 1, 0)):
        lab = L % eng
        out += gauge("vllm:num_requests_running", run, lab)
        out += gauge("vllm:num_requests_waiting", wait, lab)
        out += gauge("vllm:gpu_cache_usage_perc" if old else "vllm:kv_cache_usage_perc",
                     0.25 if eng == 0 else 0.75, lab)
        if not old:
            out += gauge("vllm:prefix_cache_queries_total", 1000 * step, lab, "counter")
            out += gauge("vllm:prefix_cache_hits_total", 250 * step, lab, "counter")
        out += gauge("vllm:num_preemptions_total", 2 * step, lab, "counter")
        out += gauge("vllm:generation_tokens_total", 10000 + 500 * (step - 1), lab, "counter")
        if eng == 0:  # the histograms on one engine only, as a single-GPU server has them
            out += hist("vllm:time_to_first_token_seconds", TTFT_LE, ttft, lab, "TTFT.")
            out += hist("vllm:time_per_output_token_seconds" if old else
                        "vllm:inter_token_latency_seconds", ITL_LE, itl, lab, "ITL.")
            out += hist("vllm:e2e_request_latency_seconds", E2E_LE, e2e, lab, "E2E.")
            out += hist("vllm:request_queue_time_seconds", E2E_LE, q, lab, "Queue.")
    return out


def sglang(step):
    lab = 'model_name="meta-llama/Llama-3.1-8B-Instruct"'
    ttft = [(0.6, 100)] + ([(0.05, 10)] if step == 2 else [])
    out = []
    out += gauge("sglang:prompt_tokens_total", 8128902 + step, lab, "counter")
    out += gauge("sglang:generation_tokens_total", 7557572 + step, lab, "counter")
    out += gauge("sglang:token_usage", 0.28, lab)
    out += gauge("sglang:cache_hit_rate", 0.0075, lab)
    out += gauge("sglang:num_running_reqs", 7, lab)
    out += gauge("sglang:num_queue_reqs", 3, lab)
    out += gauge("sglang:gen_throughput", 1234.5, lab)
    out += hist("sglang:time_to_first_token_seconds", TTFT_LE, ttft, lab, "TTFT.")
    out += hist("sglang:time_per_output_token_seconds", ITL_LE, [(0.02, 100)], lab, "TPOT.")
    out += hist("sglang:e2e_request_latency_seconds", E2E_LE, [(4.0, 100)], lab, "E2E.")
    return out


def llamacpp():
    out = []
    for name, kind, v in (("llamacpp:prompt_tokens_total", "counter", 1200),
                          ("llamacpp:prompt_tokens_cached_total", "counter", 400),
                          ("llamacpp:prompt_seconds_total", "counter", 1.5),
                          ("llamacpp:tokens_predicted_total", "counter", 800),
                          ("llamacpp:tokens_predicted_seconds_total", "counter", 4.0),
                          ("llamacpp:n_decode_total", "counter", 790),
                          ("llamacpp:n_busy_slots_per_decode", "counter", 1.0),
                          ("llamacpp:prompt_tokens_seconds", "gauge", 800.0),
                          ("llamacpp:predicted_tokens_seconds", "gauge", 200.0),
                          ("llamacpp:requests_processing", "gauge", 1),
                          ("llamacpp:requests_deferred", "gauge", 0)):
        base = name[:-6] if kind == "counter" and name.endswith("_total") else name
        out += ["# HELP %s ." % base, "# TYPE %s %s" % (base, kind), "%s %r" % (name, float(v))]
    return out


def write(name, lines):
    with open(os.path.join(HERE, name), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    os.makedirs(HERE, exist_ok=True)
    write("vllm-1.prom", vllm(1))
    write("vllm-2.prom", vllm(2))
    write("vllm-old.prom", vllm(2, old=True))
    write("sglang-1.prom", sglang(1))
    write("sglang-2.prom", sglang(2))
    write("llamacpp.prom", llamacpp())
