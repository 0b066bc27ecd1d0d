"""test_edge: the API edge of tern serve with curl and the openai client:
keys (none, wrong, right; never logged), the loopback-only rule, request ids
into the response, access log and history, per-tenant limits (rpm, tpm,
concurrency: 429 with Retry-After, then allowed again; a per-request cap
(max_tokens, a tpm no request can fit): 400 naming the cap, no retry, or
clamped and said when the request gave no max_tokens; tern run --url --api-key
against a capped tenant), and the tenant's priority class reaching the engine."""
import json
import os
import sqlite3
import subprocess
import threading
import time

import openai

from serve_lib import MODEL, TERN, TIME_SCALE, Server, diag, done, ok, request

KEYS = {"editor": "sk-editor-0123456789", "batch": "sk-batch-abcdefghij",
        "rate": "sk-rate-0000000000", "tok": "sk-tok-1111111111", "one": "sk-one-2222222222"}


def curl(base, path, key=None, body=None, headers=()):
    cmd = ["curl", "-s", "-o", "/dev/stdout", "-w", "\n%{http_code}", "-D", "/dev/stderr",
           "--max-time", f"{60 * TIME_SCALE:g}", base + path]
    if key:
        cmd += ["-H", f"Authorization: Bearer {key}"]
    for h in headers:
        cmd += ["-H", h]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "--data-binary", json.dumps(body)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=90 * TIME_SCALE)
    out, code = p.stdout.rsplit("\n", 1)
    hdrs = {}
    for l in p.stderr.splitlines():
        if ":" in l:
            k, v = l.split(":", 1)
            hdrs[k.strip().lower()] = v.strip()
    return int(code), hdrs, out


# refusal to listen beyond loopback without keys (checked before binding)
p = subprocess.run([TERN, "serve", "-m", MODEL, "--host", "0.0.0.0", "--port", "0", "--no-history"],
                   capture_output=True, text=True, timeout=30 * TIME_SCALE)
ok(p.returncode == 1 and "--api-key-file" in p.stderr and "--insecure" in p.stderr,
   f"non-loopback bind without keys refused: {p.stderr.strip()[:120]}")

# keys shorter than 8 characters are refused, naming the line; the rule is in --help
keyfile = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"tern-keys-{os.getpid()}")
with open(keyfile, "w") as f:
    f.write("# a short key\nsk-1234 tenant=short\n")
p = subprocess.run([TERN, "serve", "-m", MODEL, "--api-key-file", keyfile, "--port", "0", "--no-history"],
                   capture_output=True, text=True, timeout=30 * TIME_SCALE)
h = subprocess.run([TERN, "serve", "--help"], capture_output=True, text=True).stdout
ok(p.returncode == 1 and f"{keyfile}:2: key shorter than 8 characters" in p.stderr
   and "at least 8 characters" in h, f"a 7-character key refused with file and line, documented: {p.stderr.strip()[:120]}")

with open(keyfile, "w") as f:
    f.write("# tenants of the edge test\n")
    f.write(f"{KEYS['editor']} tenant=editor priority=interactive max_tokens=16\n")
    f.write(f"{KEYS['batch']} tenant=batch priority=batch\n")
    f.write(f"{KEYS['rate']} tenant=rate rpm=20 burst=2\n")
    f.write(f"{KEYS['tok']} tenant=tok tpm=700\n")
    f.write(f"{KEYS['one']} tenant=one concurrency=1\n")
srv = Server(["--api-key-file", keyfile], history=True)
ok(srv.ready(), "server with keys is up")
B = srv.base
chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "temperature": 0}

code, _, body = curl(B, "/v1/chat/completions", body=chat)
ok(code == 401 and json.loads(body)["error"]["type"] == "authentication_error", f"no key -> 401: {body}")
code, _, body = curl(B, "/v1/chat/completions", key="sk-wrong-000000000", body=chat)
ok(code == 401 and "invalid API key" in body, f"wrong key -> 401: {body}")
code, _, body = curl(B, "/v1/models")
ok(code == 401, "GET /v1/models needs a key too")
code, _, _ = curl(B, "/health")
ok(code == 200, "/health needs no key")
code, _, body = curl(B, "/version")
want = subprocess.run([TERN, "--version"], capture_output=True, text=True).stdout.split()[1]
ok(code == 200 and json.loads(body) == {"version": want, "engine": "tern"},
   f"/version (no key) says the server's version as `tern --version` does: {body}")
code, h, body = curl(B, "/v1/chat/completions", key=KEYS["editor"], body=chat,
                     headers=["X-Request-Id: edge-test-42"])
j = json.loads(body)
ok(code == 200 and j["choices"][0]["message"]["content"] is not None, "right key -> 200")
ok(h.get("x-request-id") == "edge-test-42" and j["tern"]["request_id"] == "edge-test-42",
   f"X-Request-Id kept and echoed: header {h.get('x-request-id')}, body {j['tern'].get('request_id')}")
code, h, body = curl(B, "/v1/chat/completions", key=KEYS["editor"], body=chat,
                     headers=["X-Request-Id: bad id with spaces"])
rid = h.get("x-request-id", "")
ok(code == 200 and rid.startswith("req-") and len(rid) == 28, f"invalid X-Request-Id replaced: {rid}")
ok(j["tern"]["priority"] == "interactive", "interactive tenant runs interactive")

# the openai client with a key; the batch tenant's priority reaches the engine
cb = openai.OpenAI(base_url=B + "/v1", api_key=KEYS["batch"], max_retries=0)
r = cb.chat.completions.create(model="default", messages=chat["messages"], max_tokens=2)
ok(r.model_extra["tern"]["priority"] == "batch", "batch tenant's request runs in the batch class")

# max_tokens cap 16: over it is a 400 naming the cap (it can never pass: no
# Retry-After), and the openai client, which retries 429s, does not retry it
code, h, body = curl(B, "/v1/chat/completions", key=KEYS["editor"],
                     body=dict(chat, max_tokens=100))
err = json.loads(body).get("error", {})
ok(code == 400 and "retry-after" not in h and err.get("param") == "max_tokens"
   and err.get("code") == "over_tenant_cap" and "cap of 16" in err.get("message", ""),
   f"over the tenant's max_tokens -> 400 naming the cap: {body[:160]}")
n400 = sum(1 for l in srv.access() if l["status"] == 400)
ce = openai.OpenAI(base_url=B + "/v1", api_key=KEYS["editor"], max_retries=2)
try:
    ce.chat.completions.create(model="default", messages=chat["messages"], max_tokens=100)
    ok(False, "openai client: over the cap must raise")
except openai.BadRequestError as e:
    ok(e.status_code == 400 and "16" in str(e), f"openai client: BadRequestError naming the cap: {str(e)[:120]}")
n400b = sum(1 for l in srv.access() if l["status"] == 400)
ok(n400b - n400 == 1, f"openai client sent it once, no retries ({n400b - n400} 400s)")
# no max_tokens: clamped to the cap, and the response says so
raw = ce.chat.completions.with_raw_response.create(
    model="default", messages=[{"role": "user", "content": "Tell me a long story about a dragon."}],
    temperature=0, extra_body={"ignore_eos": True})
r = raw.parse()
ok(raw.headers.get("x-tern-max-tokens", "").startswith("16 ") and r.usage.completion_tokens == 16
   and r.choices[0].finish_reason == "length",
   f"no max_tokens: clamped to the cap, said in X-Tern-Max-Tokens ({raw.headers.get('x-tern-max-tokens')}),"
   f" {r.usage.completion_tokens} tokens, {r.choices[0].finish_reason}")
code, h, body = curl(B, "/v1/chat/completions", key=KEYS["editor"], body=dict(chat, max_tokens=16))
ok(code == 200 and "x-tern-max-tokens" not in h, "max_tokens at the cap: 200, nothing clamped")
# the cap is in /v1/models for this key (the remote engine's default takes it)
code, _, body = curl(B, "/v1/models", key=KEYS["editor"])
ok(json.loads(body)["data"][0]["tern"].get("max_tokens_cap") == 16, "/v1/models gives the key's cap")
code, _, body = curl(B, "/v1/models", key=KEYS["batch"])
ok("max_tokens_cap" not in json.loads(body)["data"][0]["tern"], "an uncapped key's /v1/models has no cap")
# tern run --url --api-key against the capped tenant: its default reply limit
# (1024 or a quarter of the context) is kept within the cap and it works; an
# explicit -n over it fails naming the cap
env = dict(os.environ)
env.pop("TERN_API_KEY", None)
p = subprocess.run([TERN, "run", "--url", B + "/v1", "--api-key", KEYS["editor"], "--no-history",
                    "--temp", "0", "-v", "-p", "Write a long story about the sea."],
                   capture_output=True, text=True, timeout=120 * TIME_SCALE, env=env)
ok(p.returncode == 0 and p.stdout.strip() and "cap per request" in p.stderr,
   f"tern run --url --api-key on a capped tenant: exit {p.returncode}, {p.stdout.strip()[:60]!r}, "
   f"{p.stderr.strip()[-160:]!r}")
p = subprocess.run([TERN, "run", "--url", B + "/v1", "--api-key", KEYS["editor"], "--no-history",
                    "-n", "100", "-p", "Hi"],
                   capture_output=True, text=True, timeout=120 * TIME_SCALE, env=env)
ok(p.returncode != 0 and "cap of 16" in p.stderr and "retry" not in p.stderr,
   f"tern run --url -n 100 over the cap: exit {p.returncode}, {p.stderr.strip()[-200:]!r}")
# tern eval --prompts --url: its default reply limit (256) kept within the cap too
pf = os.path.join(srv.dir, "p.jsonl")
with open(pf, "w") as f:
    f.write(json.dumps({"id": "a", "prompt": "Tell me a long story about a dragon."}) + "\n")
p = subprocess.run([TERN, "eval", "--prompts", pf, "--url", B + "/v1", "--api-key", KEYS["editor"],
                    "--no-save"], capture_output=True, text=True, timeout=120 * TIME_SCALE, env=env)
rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
ok(p.returncode == 0 and len(rows) == 1 and rows[0]["status"] in ("stop", "length")
   and 0 < rows[0]["generated_tokens"] <= 16,
   f"tern eval --url on a capped tenant: exit {p.returncode}, {[(r['status'], r['generated_tokens']) for r in rows]}"
   f" {p.stderr.strip()[-160:]!r}")

# tern chat --url: its reply limit (512 by default) kept within the cap too
n400 = sum(1 for l in srv.access() if l["status"] == 400)
p = subprocess.run([TERN, "chat", "--url", B + "/v1", "--api-key", KEYS["editor"], "--size", "100x30",
                    "--headless-frames", "3000", "--keys", "{wait}Tell me a long story about a dragon.\r{wait}"],
                   capture_output=True, timeout=120 * TIME_SCALE,
                   env=dict(env, XDG_DATA_HOME=srv.dir, XDG_CONFIG_HOME=srv.dir))
scr = p.stdout.decode("utf-8", "replace")
import re
m = re.search(r"assistant · (\d+) tok", scr)
n400b = sum(1 for l in srv.access() if l["status"] == 400)
ok(p.returncode == 0 and m and 0 < int(m.group(1)) <= 16 and n400b == n400,
   f"tern chat --url on a capped tenant: the reply comes ({m.group(0) if m else 'none'}), no 400s ({n400b - n400})")

# rpm: burst 2, then 429 with Retry-After, then allowed after it
# (three at once, so that the test does not depend on how fast a request runs)
out = [None] * 3
def rate_one(k):
    out[k] = curl(B, "/v1/chat/completions", key=KEYS["rate"], body=chat)
ths = [threading.Thread(target=rate_one, args=(k,)) for k in range(3)]
[t.start() for t in ths]
[t.join(120 * TIME_SCALE) for t in ths]
codes = sorted(o[0] for o in out)
refused = [o for o in out if o[0] == 429]
h, body = (refused[0][1], refused[0][2]) if refused else ({}, "")
ra = h.get("retry-after")
ok(codes == [200, 200, 429] and "rpm" in body and ra is not None and int(ra) >= 1,
   f"rpm: three at once -> {codes}, Retry-After {ra}: {body[:90]}")
time.sleep(int(ra or 0) + 0.1)
code, _, _ = curl(B, "/v1/chat/completions", key=KEYS["rate"], body=chat)
ok(code == 200, f"rpm: allowed again after Retry-After ({code})")

# tpm 700 (11.7 tokens/s): prompts of ~250 tokens pass twice, the third waits a few s
big = {"prompt": "one two three four five " * 50, "max_tokens": 1, "temperature": 0}
def tok_one(k):
    out[k] = curl(B, "/v1/completions", key=KEYS["tok"], body=big)
ths = [threading.Thread(target=tok_one, args=(k,)) for k in range(3)]
[t.start() for t in ths]
[t.join(120 * TIME_SCALE) for t in ths]
codes = sorted(o[0] for o in out)
refused = [o for o in out if o[0] == 429]
h, body = (refused[0][1], refused[0][2]) if refused else ({}, "")
ra = h.get("retry-after")
ok(codes == [200, 200, 429] and "tpm" in body and ra is not None,
   f"tpm: three at once -> {codes}, Retry-After {ra}: {body[:90]}")
# more than the whole tpm in one request can never pass: 400, not 429
code, h, body = curl(B, "/v1/completions", key=KEYS["tok"], body=dict(big, max_tokens=600))
ok(code == 400 and "retry-after" not in h and "700" in body and "never" in body,
   f"tpm: prompt + max_tokens over the whole tpm -> 400: {body[:160]}")
if ra and int(ra) <= 60:
    time.sleep(int(ra) + 0.2)
    code, _, body = curl(B, "/v1/completions", key=KEYS["tok"], body=big)
    ok(code == 200, f"tpm: allowed again after Retry-After {ra} s ({code})")
else:
    ok(False, "tpm: no usable Retry-After")

# concurrency 1: a second request while a stream runs is refused
res = {}
def long_stream():
    res["a"] = curl(B, "/v1/chat/completions", key=KEYS["one"],
                    body=dict(chat, max_tokens=1000, stream=True, ignore_eos=True))[0]
th = threading.Thread(target=long_stream)
th.start()
time.sleep(0.4 * TIME_SCALE)  # the stream is running
code, h, body = curl(B, "/v1/chat/completions", key=KEYS["one"], body=chat)
th.join(60 * TIME_SCALE)
ok(res.get("a") == 200 and code == 429 and "concurrency" in body, f"concurrency 1: second -> {code} {body[:80]}")

rc = srv.stop()
ok(rc == 0, "SIGTERM: clean exit")
log = srv.access()
ok(any(l.get("request_id") == "edge-test-42" and l.get("tenant") == "editor" and l["status"] == 200
       and l.get("prompt_tokens", 0) > 0 and "ttft_s" in l for l in log),
   "access log has the request id, tenant, status, tokens and phases")
ok(any(l["status"] == 401 for l in log) and any(l["status"] == 429 for l in log)
   and any(l["status"] == 400 and "cap of 16" in (l.get("error") or "") for l in log),
   "401s, 429s and cap 400s are logged too")
raw = open(srv.access_log).read() + srv.log()
ok(not any(k in raw for k in KEYS.values()), "no key appears in the access log or stderr")
db = sqlite3.connect(srv.db)
rows = db.execute("SELECT params, status, prompt_tokens, ttft_s FROM requests").fetchall()
mine = [r for r in rows if r[0] and json.loads(r[0]).get("request_id") == "edge-test-42"]
ok(len(mine) == 1 and json.loads(mine[0][0])["tenant"] == "editor" and mine[0][2] > 0,
   f"history row tagged with tenant and request id: {mine}")
served = sum(1 for l in log if l["route"].endswith("completions") and l["status"] == 200)
ok(len(rows) == served, f"one history row per completed request: {len(rows)} rows, {served} served")
os.unlink(keyfile)
done()
