"""test_metrics: /metrics parsed by prometheus_client's text parser after a
known set of requests: every family has its declared type (counters typed
counter, not unknown: HELP/TYPE name NAME_total as the samples do, as vLLM's
server writes them), the counters and histogram counts equal what was sent,
the vLLM names and labels are there, histograms are cumulative, and nothing
is left running or holding KV blocks at the end."""
import json

import openai

from serve_lib import Server, done, metric, metric_types, metrics, ok, request

srv = Server()
ok(srv.ready(), "server up")
c = openai.OpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0)
msgs = [{"role": "user", "content": "Count to five."}]
usage = []
for i in range(3):
    usage.append(c.chat.completions.create(model="default", messages=msgs, max_tokens=4 + i).usage)
for i in range(2):
    chunks = list(c.chat.completions.create(model="default", messages=msgs, max_tokens=5,
                                            stream=True, stream_options={"include_usage": True}))
    usage.append(chunks[-1].usage)
for i in range(2):
    usage.append(c.completions.create(model="default", prompt="Hello there", max_tokens=3).usage)
n_ok = len(usage)
st, _, _ = request(srv.base, "POST", "/v1/chat/completions", b"{bad json")
ok(st == 400, "one malformed request (400)")
st, _, _ = request(srv.base, "GET", "/v1/nothing")
ok(st == 404, "one unknown route (404)")

m = metrics(srv.base)
ok(len(m) > 50, f"prometheus_client parsed {len(m)} samples")
# the parsed types: no family left untyped, and the ones vLLM has with vLLM's types
fams, stypes, text = metric_types(srv.base)
bad = sorted(n for n, t in fams.items() if t in ("unknown", "untyped"))
ok(not bad, f"every family parses with its declared type ({len(fams)} families; untyped: {bad[:6]})")
want = {"vllm:prompt_tokens": "counter", "vllm:generation_tokens": "counter",
        "vllm:request_success": "counter", "vllm:num_preemptions": "counter",
        "vllm:prefix_cache_queries": "counter", "vllm:prefix_cache_hits": "counter",
        "tern:http_responses": "counter", "tern:rejected_requests": "counter",
        "tern:requests_finished": "counter", "tern:tenant_tokens": "counter",
        "tern:engine_steps": "counter", "vllm:num_requests_running": "gauge",
        "vllm:kv_cache_usage_perc": "gauge", "tern:kv_blocks": "gauge",
        "vllm:time_to_first_token_seconds": "histogram", "vllm:e2e_request_latency_seconds": "histogram"}
got = {n: fams.get(n) for n in want}
ok(got == want, f"parsed family types: {[(n, t) for n, t in got.items() if t != want[n]] or 'as vLLM'}")
tot = sorted(n for n, t in stypes.items() if n.endswith("_total") and t != "counter")
ok(not tot and any(n.endswith("_total") for n in stypes),
   f"every *_total sample is in a counter family (not: {tot[:6]})")
# the text itself as prometheus_client writes vLLM's counters: HELP and TYPE
# name NAME_total, the name its samples carry
lines = text.splitlines()
ctr = [l.split()[2] for l in lines if l.startswith("# TYPE ") and l.split()[3] == "counter"]
helps = {l.split()[2] for l in lines if l.startswith("# HELP ")}
ok(ctr and all(n.endswith("_total") and n in helps for n in ctr),
   f"{len(ctr)} counter TYPE lines name NAME_total with a HELP line: {[n for n in ctr if not n.endswith('_total')][:4]}")
snames = {l.split("{")[0].split()[0] for l in lines if l and not l.startswith("#")}
ok(all(n in snames or n.startswith("tern:tenant") or n.startswith("tern:rejected") for n in ctr),
   "each counter's samples carry the TYPE line's name")
fin = metric(m, "vllm:request_success_total", finished_reason="stop") + \
      metric(m, "vllm:request_success_total", finished_reason="length")
ok(fin == n_ok, f"vllm:request_success_total stop+length = {fin}, sent {n_ok}")
ok(metric(m, "vllm:request_success_total", finished_reason="abort") == 0, "no aborts")
ok(metric(m, "vllm:e2e_request_latency_seconds_count") == n_ok, "e2e histogram count = requests")
ok(metric(m, "vllm:time_to_first_token_seconds_count") == n_ok, "TTFT histogram count = requests")
pt = sum(u.prompt_tokens for u in usage)
gt = sum(u.completion_tokens for u in usage)
ok(metric(m, "vllm:prompt_tokens_total") == pt, f"vllm:prompt_tokens_total = {pt} (sum of usage)")
ok(metric(m, "vllm:generation_tokens_total") == gt, f"vllm:generation_tokens_total = {gt}")
ok(metric(m, "vllm:inter_token_latency_seconds_count") == gt - n_ok,
   f"ITL count = generated - requests = {gt - n_ok}")
ok(metric(m, "tern:http_responses_total", code="200") >= n_ok and
   metric(m, "tern:http_responses_total", code="400") == 1 and
   metric(m, "tern:http_responses_total", code="404") == 1, "HTTP status counters")
ok(metric(m, "tern:rejected_requests_total", reason="bad_request") == 1, "rejections by reason")
ok(metric(m, "tern:tenant_requests_total", tenant="default") == n_ok, "per-tenant request counter")
ok(metric(m, "tern:tenant_tokens_total", tenant="default", kind="generated") == gt,
   "per-tenant generated tokens")
ok(metric(m, "vllm:num_requests_running") == 0 and metric(m, "vllm:num_requests_waiting") == 0,
   "nothing running or waiting")
ok(metric(m, "tern:kv_blocks", state="used") == 0 and metric(m, "vllm:kv_cache_usage_perc") == 0,
   "no KV blocks in use")
ok(metric(m, "tern:kv_blocks", state="cached") > 0, "prefix blocks stay cached")
ok(metric(m, "vllm:prefix_cache_hits_total") > 0 and
   metric(m, "vllm:prefix_cache_queries_total") >= metric(m, "vllm:prefix_cache_hits_total"),
   "prefix cache counters")
# cumulative buckets, +Inf = count
ttft = sorted((float(dict(k[1])["le"]), v) for k, v in m.items()
              if k[0] == "vllm:time_to_first_token_seconds_bucket")
ok(all(a[1] <= b[1] for a, b in zip(ttft, ttft[1:])) and ttft[-1][1] == n_ok and len(ttft) == 23,
   f"TTFT buckets cumulative ({len(ttft)} with +Inf) ending at the count")
st, _, body = request(srv.base, "GET", "/v1/tern/status")
j = json.loads(body)
ok(st == 200 and "engine" in j and len(j["recent"]) == n_ok and j["recent"][0]["tenant"] == "default"
   and "ttft_s" in json.dumps(j["recent"][0]),
   f"/v1/tern/status: engine snapshot and {len(j.get('recent', []))} recent requests")
ok(srv.stop() == 0, "clean exit")
done()
