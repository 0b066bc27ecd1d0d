"""bench_http: HTTP overhead of tern serve (a benchmark, not a test; run it
by hand, once, on a quiet machine). For 1, 8 and 32 concurrent streams:
  in-process  `tern bench --profile short` (32-token prompts, 32-token replies)
  tern serve  the same shape through POST /v1/completions, streamed
  llama-server (llama.cpp, from packaging/build-reference) on the same model
              file and threads, when its binary is there
and prints aggregate generated tokens/s and TTFT p50/p99 (client-side for
the HTTP rows) as a Markdown table. Usage:
  python3 tests/e2e/serve/bench_http.py [-t THREADS] [--conc 1,8,32] [--requests-per 4]"""
import argparse
import http.client
import json
import os
import re
import subprocess
import tempfile
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("-t", "--threads", type=int, default=1)
ap.add_argument("--conc", default="1,8,32")
ap.add_argument("--requests-per", type=int, default=4, help="requests per concurrent stream")
ap.add_argument("--tern", default=os.environ.get("TERN_BIN", "build/app/tern"))
ap.add_argument("--model", default=os.path.expanduser(
    "~/.local/share/tern/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
a = ap.parse_args()
WORDS = open("data/bench-texts.txt").read().split()


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] if v else float("nan")


def http_load(port, conc, n, tokens_field):
    """n streamed completions, conc at a time: (gen tok/s, ttft p50, ttft p99)."""
    res, lock, nxt = [], threading.Lock(), [0]

    def one(i):
        prompt = " ".join(WORDS[i * 24:(i * 24) + 24])  # ~32 tokens, distinct per request
        body = {"prompt": prompt, "max_tokens": 32, "stream": True, "ignore_eos": True,
                "temperature": 0.8, "seed": i, tokens_field: 32}
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        t0 = time.time()
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        ttft, n_tok = None, 0
        for line in r:
            if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
                continue
            j = json.loads(line[6:])
            ch = j.get("choices") or []
            if ch and ch[0].get("text"):
                n_tok += 1
                ttft = ttft or time.time() - t0
        c.close()
        return ttft, n_tok

    def worker():
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= n:
                return
            r = one(i)
            with lock:
                res.append(r)

    t0 = time.time()
    ths = [threading.Thread(target=worker) for _ in range(conc)]
    [t.start() for t in ths]
    [t.join() for t in ths]
    wall = time.time() - t0
    tt = [r[0] for r in res if r[0]]
    return sum(r[1] for r in res) / wall, pct(tt, 50), pct(tt, 99)


def wait_port(proc, pattern, logf, timeout=120):
    end = time.time() + timeout
    while time.time() < end and proc.poll() is None:
        m = re.search(pattern, open(logf).read())
        if m:
            return int(m.group(1)) if m.groups() else 0
        time.sleep(0.1)
    raise RuntimeError(open(logf).read()[-2000:])


def inproc(conc, n):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([a.tern, "bench", "-m", a.model, "--profile", "short", "--requests", str(n),
                        "--concurrency", str(conc), "-t", str(a.threads), "--json", f.name, "-q"],
                       check=True, capture_output=True)
        j = json.load(open(f.name))
    p = j["short"]
    return p["output_tok_s"], p["ttft"]["p50"], p["ttft"]["p99"]


def tern_http(conc, n):
    logf = tempfile.mktemp()
    proc = subprocess.Popen([a.tern, "serve", "-m", a.model, "--port", "0", "-t", str(a.threads),
                             "--no-history", "--access-log", "/dev/null"],
                            stderr=open(logf, "w"))
    try:
        wait_port(proc, r"ready:", logf)
        port = wait_port(proc, r"listening on http://[\d.]+:(\d+)", logf)
        http_load(port, min(conc, 4), min(conc, 4), "max_tokens")  # warm the path
        return http_load(port, conc, n, "max_tokens")
    finally:
        proc.terminate()
        proc.wait(60)


def llama(conc, n):
    try:
        bindir = subprocess.run(["packaging/build-reference"], capture_output=True, text=True,
                                timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    exe = os.path.join(bindir, "llama-server")
    if not os.path.exists(exe):
        return None
    logf = tempfile.mktemp()
    port = 18000 + os.getpid() % 1000
    proc = subprocess.Popen([exe, "-m", a.model, "-t", str(a.threads), "--port", str(port),
                             "--host", "127.0.0.1", "-np", str(conc), "-c", str(256 * conc),
                             "--no-webui"], stderr=open(logf, "w"), stdout=subprocess.DEVNULL)
    try:
        end = time.time() + 120
        while time.time() < end:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        http_load(port, min(conc, 4), min(conc, 4), "n_predict")
        return http_load(port, conc, n, "n_predict")
    finally:
        proc.terminate()
        proc.wait(60)


print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
print(f"threads {a.threads}; {a.requests_per} requests per stream; 32-token prompts and replies\n")
print("| streams | system | gen tok/s | TTFT p50 ms | TTFT p99 ms |")
print("|---|---|---|---|---|")
for conc in [int(x) for x in a.conc.split(",")]:
    n = conc * a.requests_per
    for name, fn in [("tern in-process", inproc), ("tern serve (HTTP)", tern_http),
                     ("llama-server (HTTP)", llama)]:
        r = fn(conc, n)
        if r:
            print(f"| {conc} | {name} | {r[0]:.1f} | {r[1] * 1e3:.1f} | {r[2] * 1e3:.1f} |", flush=True)
print(f"\nuptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
