"""test_trace: `tern serve --trace FILE` tags every span of a request with its
X-Request-Id and tenant, so one request can be followed from the access log
into the Chrome trace: for each request of the access log, its track is named
with the id, and its queue, prefill and decode (or end) spans carry
request_id and tenant in their args, with phase times that agree with the
access log's. A generated id (no X-Request-Id sent) is tagged the same way."""
import json
import os
import threading

from serve_lib import Server, done, diag, ok, request

KEYS = {"editor": "sk-trace-editor-0000", "batch": "sk-trace-batch-00000"}
keyfile = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"tern-trace-keys-{os.getpid()}")
with open(keyfile, "w") as f:
    f.write(f"{KEYS['editor']} tenant=editor priority=interactive\n")
    f.write(f"{KEYS['batch']} tenant=batch-team priority=batch\n")
trace_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"tern-trace-{os.getpid()}.json")
srv = Server(["--api-key-file", keyfile, "--trace", trace_path])
ok(srv.ready(), "server with --trace is up")

# a few concurrent requests from both tenants, ids of every printable kind
# the edge keeps (quotes and backslashes are not valid ids: replaced)
sent = [("editor", "trace-a1"), ("batch", "trace-b1/{x}:y'z"), ("editor", "trace-a2"),
        ("batch", "trace-b2?&=%"), ("editor", None)]
codes = {}


def go(tenant, rid):
    h = {"Authorization": f"Bearer {KEYS[tenant]}"}
    if rid:
        h["X-Request-Id"] = rid
    body = {"messages": [{"role": "user", "content": f"Say something about {tenant}."}],
            "max_tokens": 6, "temperature": 0, "stream": rid is None}
    st, hdrs, _ = request(srv.base, "POST", "/v1/chat/completions", body, h, timeout=120)
    codes[rid or hdrs.get("X-Request-Id")] = st


ths = [threading.Thread(target=go, args=s) for s in sent]
for t in ths:
    t.start()
for t in ths:
    t.join()
ok(len(codes) == len(sent) and all(c == 200 for c in codes.values()), f"all served: {codes}")
ok(srv.stop() == 0, "clean exit (the trace is closed)")

with open(trace_path) as f:
    tr = json.load(f)  # a real JSON parser: any unescaped byte fails here
ev = tr["traceEvents"]
log = {l["request_id"]: l for l in srv.access() if l["route"] == "/v1/chat/completions"}
ok(set(log) == set(codes), f"access log ids = the ids the clients saw ({sorted(log)})")
tracks = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M"}
for rid, l in sorted(log.items()):
    tids = [t for t, n in tracks.items() if n.endswith(" " + rid)]
    if not ok(len(tids) == 1, f"{rid}: one trace track named with it ({tids})"):
        continue
    spans = [e for e in ev if e.get("ph") == "X" and e["tid"] == tids[0]]
    names = [s["name"] for s in spans]
    ok("queue" in names and "prefill" in names and ("decode" in names or "end" in names),
       f"{rid}: queue, prefill and decode spans ({names})")
    ok(all(s.get("args", {}).get("request_id") == rid and
           s["args"].get("tenant") == l["tenant"] for s in spans),
       f"{rid}: every span carries request_id and tenant {l['tenant']!r}")
    ok(("(batch)" in tracks[tids[0]]) == (l["tenant"] == "batch-team"),
       f"{rid}: track priority class matches the tenant ({tracks[tids[0]]})")
    q = next(s for s in spans if s["name"] == "queue")
    ok(abs(q["dur"] / 1e6 - l["queue_s"]) < 0.01,
       f"{rid}: trace queue {q['dur'] / 1e6:.4f} s = access log queue {l['queue_s']:.4f} s")
    fin = next(s for s in spans if s["name"] in ("decode", "end"))
    ok(fin["args"].get("generated") == l["generated_tokens"] and
       fin["args"].get("prompt") == l["prompt_tokens"],
       f"{rid}: trace prompt/generated {fin['args'].get('prompt')}/{fin['args'].get('generated')} "
       f"= access log {l['prompt_tokens']}/{l['generated_tokens']}")
# engine steps (track 0) carry no request tags; the warm-up request has no id
steps = [e for e in ev if e.get("ph") == "X" and e["tid"] == 0]
ok(steps and all("request_id" not in s.get("args", {}) for s in steps),
   f"{len(steps)} engine-step spans, untagged")
diag(f"trace: {len(ev)} events, {len(tracks)} tracks")
os.unlink(keyfile)
os.unlink(trace_path)
done()
