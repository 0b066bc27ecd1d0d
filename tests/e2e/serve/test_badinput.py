"""test_badinput: hostile and broken clients against a real tern serve, each a
clean 4xx (never a 500) with the server still serving after it: malformed
JSON, wrong types, huge numbers, negative max_tokens, invalid UTF-8, a 100 MB
body, 10,000 headers, a slow-loris connection, an unknown route, 1,000
messages; and a client that hangs up mid-stream: its request is cancelled at
once, its KV blocks return (seen in /metrics), another stream is unaffected."""
import json
import socket
import threading
import time

from serve_lib import TIME_SCALE, Server, done, metric, metrics, ok, request

srv = Server(["--ctx", "2048", "--timeout", "2"])
ok(srv.ready(), "server up (ctx 2048, 2 s client timeout)")
B = srv.base
chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}


def post(body, path="/v1/chat/completions"):
    return request(B, "POST", path, body if isinstance(body, bytes) else json.dumps(body).encode())


def serving():
    st, _, body = post(chat)
    return st == 200 and b"choices" in body


def raw(data, timeout=10, read=True):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
    s.sendall(data)
    out = b""
    if read:
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                out += b
                if b"\r\n\r\n" in out and b"Content-Length" not in out.split(b"\r\n\r\n")[0]:
                    break
                hdr, _, body = out.partition(b"\r\n\r\n")
                for l in hdr.split(b"\r\n"):
                    if l.lower().startswith(b"content-length:") and len(body) >= int(l.split(b":")[1]):
                        s.close()
                        return out
        except (socket.timeout, ConnectionResetError):
            pass
    s.close()
    return out


def status_of(resp):
    try:
        return int(resp.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0


cases = [
    ("malformed JSON", b'{"messages": [', 400, None),
    ("not an object", b'[1, 2, 3]', 400, None),
    ("trailing garbage", b'{"messages":[{"role":"user","content":"x"}]} {}', 400, None),
    ("messages wrong type", {"messages": "hello"}, 400, "messages"),
    ("content wrong type", {"messages": [{"role": "user", "content": {"a": 1}}]}, 400,
     "messages[0].content"),
    ("max_tokens a string", dict(chat, max_tokens="5"), 400, "max_tokens"),
    ("huge max_tokens", b'{"messages":[{"role":"user","content":"x"}],"max_tokens":1e308}', 400,
     "max_tokens"),
    ("overflowing number", b'{"messages":[{"role":"user","content":"x"}],"temperature":1e999}', 400,
     "temperature"),
    ("negative max_tokens", dict(chat, max_tokens=-7), 400, "max_tokens"),
    ("huge seed", b'{"messages":[{"role":"user","content":"x"}],"seed":123456789012345678901234567890}',
     400, "seed"),
    ("invalid UTF-8", b'{"messages":[{"role":"user","content":"\xc3\x28 bad"}]}', 400, None),
    ("lone surrogate escape", b'{"messages":[{"role":"user","content":"\\ud800"}]}', 400, None),
    ("deep nesting", b'[' * 5000 + b']' * 5000, 400, None),
    ("empty body", b'', 400, None),
]
for name, body, want, param in cases:
    st, _, resp = post(body)
    try:
        err = json.loads(resp)["error"]
    except (ValueError, KeyError):
        err = {}
    good = st == want and "message" in err and (param is None or err.get("param") == param)
    ok(good, f"{name}: {st} {err.get('message', resp[:80])!r}")
ok(serving(), "still serving after the malformed bodies")

# 1,000 messages: parsed, then refused by the engine as too long for ctx 2048
many = {"messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": "hello there"}
                     for i in range(1000)], "max_tokens": 2}
t0 = time.time()
st, _, resp = post(many)
ok(st == 400 and (b"context" in resp.lower() or b"too large" in resp),
   f"1,000 messages: {st} in {time.time() - t0:.2f} s: {resp[:100]!r}")

# 100 MB body: refused from its Content-Length before a byte of it is read
hdr = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
       b"Content-Length: 104857600\r\n\r\n")
resp = raw(hdr + b"{" * 65536)
ok(status_of(resp) == 413 and b'"error"' in resp, f"100 MB Content-Length -> {status_of(resp)}")
# a chunked body that grows past the limit (no length given)
s = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
chunk = b"x" * (1 << 20)
try:
    for _ in range(10):
        s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
    s.sendall(b"0\r\n\r\n")
    resp = s.recv(4096)
except (BrokenPipeError, ConnectionResetError):
    resp = b""
s.close()
ok(status_of(resp) == 413, f"10 MiB chunked body -> {status_of(resp)}")

# 10,000 headers: over the per-connection header memory -> 4xx
many_h = b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(10000)) + b"\r\n"
resp = raw(many_h)
st = status_of(resp)
ok(400 <= st < 500, f"10,000 headers -> {st}")

# slow loris: partial headers then silence; dropped after the 2 s timeout
s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Le")
t0 = time.time()
ok(serving(), "serving while a slow-loris connection is open")
try:
    got = s.recv(100)
except (socket.timeout, ConnectionResetError):
    got = b"timeout"
dt = time.time() - t0
s.close()
ok(got != b"timeout" and dt < 6, f"slow-loris connection dropped by the server after {dt:.1f} s")
# slow body: headers complete, body never finishes
s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mess")
t0 = time.time()
try:
    got = s.recv(100)
except (socket.timeout, ConnectionResetError):
    got = b"timeout"
s.close()
ok(got != b"timeout" and time.time() - t0 < 6, f"stalled body dropped after {time.time() - t0:.1f} s")

st, _, resp = request(B, "GET", "/v2/anything")
ok(st == 404 and b'"error"' in resp, "unknown route 404")
st, _, resp = request(B, "DELETE", "/v1/chat/completions")
ok(st in (404, 405) and b'"error"' in resp, f"wrong method -> {st}")
ok(serving(), "still serving after the hostile connections")

# hang up mid-stream: cancelled at once, blocks back, the other stream finishes
other = {}
def other_stream():
    st, _, body = post({"messages": [{"role": "user", "content": "Tell a story."}],
                        "max_tokens": 40, "stream": True, "ignore_eos": True})
    other["st"] = st
    other["done"] = body.rstrip().endswith(b"data: [DONE]")
    other["len"] = body.count(b'"content"')
th = threading.Thread(target=other_stream)
th.start()
body = json.dumps({"messages": [{"role": "user", "content": "Write a long essay."}],
                   "max_tokens": 1000, "stream": True, "ignore_eos": True}).encode()
s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"X-Request-Id: hangup-1\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
got = b""
while got.count(b"data:") < 4:
    b = s.recv(4096)
    if not b:
        break
    got += b
m = metrics(B)
used_during = metric(m, "tern:kv_blocks", state="used")
s.close()
t_close = time.time()
freed = None
while time.time() - t_close < 3:
    m = metrics(B)
    rec = [l for l in srv.access() if l.get("request_id") == "hangup-1"]
    if rec and metric(m, "vllm:num_requests_running") <= (0 if other.get("st") else 1):
        freed = time.time() - t_close
        break
    time.sleep(0.05)
th.join(60 * TIME_SCALE)
rec = [l for l in srv.access() if l.get("request_id") == "hangup-1"]
ok(used_during > 0 and freed is not None and freed < 1.0,
   f"hang-up seen and request cancelled {freed if freed is None else round(freed, 3)} s after close "
   f"(KV blocks in use during the streams: {used_during:g})")
ok(rec and rec[0]["client_disconnected"] and rec[0]["engine_status"] == "cancelled"
   and rec[0]["generated_tokens"] < 1000,
   f"access log: disconnected, cancelled after {rec[0]['generated_tokens'] if rec else '?'} tokens")
m = metrics(B)
ok(metric(m, "tern:kv_blocks", state="used") == 0 and metric(m, "vllm:num_requests_running") == 0,
   "all KV blocks returned after both streams")
ok(metric(m, "tern:client_disconnects_total") == 1 and
   metric(m, "vllm:request_success_total", finished_reason="abort") == 1, "one abort, one disconnect")
ok(other.get("st") == 200 and other.get("done") and other.get("len", 0) >= 40,
   f"the other stream ran to the end ({other.get('len')} content chunks)")
ok(serving() and srv.alive(), "still serving")
ok(srv.stop() == 0, "clean exit")

# admission statuses: one running slot, one queue place, 1.5 s queue timeout
srv = Server(["--max-running", "1", "--max-queue", "1", "--queue-timeout", "1.5"])
B = srv.base
ok(srv.ready(), "server with --max-running 1 --max-queue 1 --queue-timeout 1.5")
res = {}
def long_one():
    # long enough to outlast the queued one's 1.5 s timeout on a fast engine
    # (150 tokens took ~0.6 s at 2 threads once decode passed 240 tok/s)
    res["a"] = post({"messages": [{"role": "user", "content": "Go on."}], "max_tokens": 1200,
                     "ignore_eos": True})[0]
def queued_one():
    res["b"] = post(chat)
def wait_metric(name, v, limit=20):
    end = time.time() + limit * TIME_SCALE
    while time.time() < end and metric(metrics(B), name) != v:
        time.sleep(0.02)
ta = threading.Thread(target=long_one)
ta.start()
wait_metric("vllm:num_requests_running", 1)
tb = threading.Thread(target=queued_one)
tb.start()
wait_metric("vllm:num_requests_waiting", 1)
st, h, resp = post(chat)
ok(st == 429 and b"queue full" in resp and "Retry-After" in h, f"queue full -> {st} {resp[:90]!r}")
tb.join(30 * TIME_SCALE)
st, h, resp = res["b"]
ok(st == 504 and json.loads(resp)["error"]["code"] == "timeout", f"queue timeout -> {st} {resp[:90]!r}")
ta.join(60 * TIME_SCALE)
ok(res.get("a") == 200, "the running request finished")
ok(serving(), "still serving")
ok(srv.stop() == 0, "clean exit")
done()
