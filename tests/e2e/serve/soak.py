"""soak: `make soak` (outside CI, loopback, bounded). SOAK_REQUESTS (default
10,000) requests against one tern serve, mixing the seven load profiles of
`tern bench` (short, long-prompt, long-reply, mixed-priority, cancel,
slow-consumer, multi-turn) with client disconnects. At the end: 0 KV blocks
in use, no leaked file descriptors, RSS within 5 % of its plateau, every
request accounted for in the access log and the history. Prints TAP and the
figures. SOAK_CONC clients (default 48), SOAK_THREADS engine threads (2);
SOAK_MAX_S bounds the run (3600). Replies are short (most 8 tokens, the
long-reply profile 48) so that 10,000 requests fit in well under an hour on
2 cores: the soak is about leaks and accounting over many requests, not
about long generations."""
import http.client
import json
import os
import random
import socket
import sqlite3
import threading
import time

from serve_lib import Server, diag, done, metric, metrics, ok

N = int(os.environ.get("SOAK_REQUESTS", "10000"))
CONC = int(os.environ.get("SOAK_CONC", "48"))
THREADS = os.environ.get("SOAK_THREADS", "2")
MAX_S = float(os.environ.get("SOAK_MAX_S", "3600"))
KEYS = {"interactive": "sk-soak-inter-000000", "batch": "sk-soak-batch-000000"}
keyfile = f"/tmp/tern-soak-keys-{os.getpid()}"
with open(keyfile, "w") as f:
    f.write(f"{KEYS['interactive']} tenant=editor priority=interactive\n")
    f.write(f"{KEYS['batch']} tenant=batch priority=batch\n")
srv = Server(["--api-key-file", keyfile, "--timeout", "5", "--max-queue", "1024", "-t", THREADS,
              "--queue-timeout", "300"],
             history=True)
ok(srv.ready(), "server up")
WORDS = open(os.path.join(os.environ.get("TERN_SRC", "."), "data", "bench-texts.txt")).read().split()
PROFILES = ["short", "long-prompt", "long-reply", "mixed-priority", "cancel", "slow-consumer",
            "multi-turn"]


def text(rng, n_words):
    i = rng.randrange(0, max(1, len(WORDS) - n_words))
    return " ".join(WORDS[i:i + n_words])


def shape(i, rng):
    """(profile, body, key, action) of request i."""
    p = PROFILES[i % len(PROFILES)]
    key, act = KEYS["interactive"], "read"
    msgs = [{"role": "user", "content": text(rng, 8)}]
    mt = 8
    if p == "long-prompt":
        msgs = [{"role": "user", "content": text(rng, 100)}]  # ~150 tokens: 3 prefill chunks of 64
        mt = 4
    elif p == "long-reply":
        mt = 48
    elif p == "mixed-priority":
        key = KEYS["batch"] if i % 3 else KEYS["interactive"]
    elif p == "cancel":
        mt, act = 64, "hangup"
    elif p == "slow-consumer":
        mt, act = 24, "slow"
    elif p == "multi-turn":
        msgs = [{"role": "system", "content": "Answer briefly."}]
        for t in range(rng.randrange(1, 3)):
            msgs += [{"role": "user", "content": text(rng, 8)},
                     {"role": "assistant", "content": text(rng, 8)}]
        msgs.append({"role": "user", "content": text(rng, 8)})
    body = {"messages": msgs, "max_tokens": mt, "stream": True, "seed": i,
            "stream_options": {"include_usage": True}}
    return p, body, key, act


def one(i):
    rng = random.Random(i)
    p, body, key, act = shape(i, rng)
    rid = f"soak-{i}"
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=300)
    c.request("POST", "/v1/chat/completions", json.dumps(body),
              {"Authorization": f"Bearer {key}", "Content-Type": "application/json",
               "X-Request-Id": rid})
    r = c.getresponse()
    if r.status != 200:
        r.read()
        c.close()
        return p, r.status, False
    n = 0
    done_ = False
    for line in r:
        if line.startswith(b"data: "):
            n += 1
            if line.strip() == b"data: [DONE]":
                done_ = True
                break
            if act == "hangup" and n >= 4:
                c.sock.shutdown(socket.SHUT_RDWR)
                c.close()
                return p, 200, True
            if act == "slow" and n % 6 == 0:
                time.sleep(0.05)
    c.close()
    return p, r.status, done_


results, lock, nxt, plateau = [], threading.Lock(), [0], []
t0 = time.time()


def worker():
    while time.time() - t0 < MAX_S:
        with lock:
            i = nxt[0]
            nxt[0] += 1
        if i >= N:
            return
        try:
            res = one(i)
        except Exception as e:
            res = ("error", 0, repr(e))
        res = res + (i,)
        with lock:
            results.append(res)
            if len(results) == N // 2:
                plateau.append(srv.rss_kb())  # the KV pool and arenas are touched by now
            if len(results) % 500 == 0:
                diag(f"{len(results)} requests, {time.time() - t0:.0f} s, RSS {srv.rss_kb() / 1024:.1f} MiB")


# plateau: a warm-up round of every profile, then the baseline
for i in range(N, N + 2 * len(PROFILES)):
    one(i)
fd0, rss0 = srv.fds(), srv.rss_kb()
ths = [threading.Thread(target=worker) for _ in range(CONC)]
for t in ths:
    t.start()
for t in ths:
    t.join()
wall = time.time() - t0
n_sent = len(results)
# 200 (streamed to [DONE] or hung up on purpose), or an admission answer: 429
# queue full, 504 a batch request that waited past --queue-timeout behind the
# interactive flood (the scheduler's priority at work, counted below)
bad = [r for r in results if r[1] not in (200, 429, 504) or (r[1] == 200 and not r[2])]
ok(n_sent == N, f"{n_sent} of {N} requests sent in {wall:.0f} s ({CONC} clients)")
ok(not bad, f"every request ended with a valid status ({len(bad)} did not: {bad[:3]})")
time.sleep(1)
m = metrics(srv.base)
ok(metric(m, "tern:kv_blocks", state="used") == 0 and metric(m, "vllm:num_requests_running") == 0,
   "0 KV blocks in use at the end")
fd1, rss1 = srv.fds(), srv.rss_kb()
ok(fd1 <= fd0, f"file descriptors {fd0} -> {fd1}")
rss_half = plateau[0] if plateau else rss0
ok(rss1 <= rss_half * 1.05, f"RSS {rss0 / 1024:.1f} MiB at the start, {rss_half / 1024:.1f} at half "
   f"way (plateau), {rss1 / 1024:.1f} at the end (within 5 % of the plateau)")
by = {}
for p, st, _, _ in results:
    by[p] = by.get(p, 0) + 1
diag(f"by profile: {by}; disconnects {metric(m, 'tern:client_disconnects_total'):g}")
ok(srv.stop() == 0, "clean exit")
log = [l for l in srv.access() if l["route"] == "/v1/chat/completions"]
ids = {l["request_id"] for l in log}
ok(all(f"soak-{i}" in ids for i in range(n_sent)), f"every request is in the access log ({len(log)} lines)")
st_of = {l["request_id"]: l["status"] for l in log}
ok(all(st_of.get(f"soak-{i}") == st for _, st, _, i in results),
   "the access log's status of every request is the one its client saw")
n_disc = sum(1 for l in log if l.get("client_disconnected"))
diag(f"access log: {n_disc} lines flagged client_disconnected, "
     f"{sum(1 for l in log if l['status'] == 429)} 429s")
rows = sqlite3.connect(srv.db).execute("SELECT params FROM requests").fetchall()
served = sum(1 for l in log if l["status"] == 200)
timed_out = sum(1 for l in log if l["status"] == 504)  # admitted to the queue: a history row too
ok(len(rows) == served + timed_out,
   f"history rows {len(rows)} = served requests {served} + queue timeouts {timed_out}")
hist_ids = {json.loads(r[0] or "{}").get("request_id") for r in rows}
ok(all(f"soak-{i}" in hist_ids for _, st, _, i in results if st in (200, 504)),
   "every served request's id is in the history")
os.unlink(keyfile)
done()
