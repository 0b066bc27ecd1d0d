"""bench_profiles: the seven load profiles of `tern bench --profile` through
--url, against `tern serve` and against llama.cpp's llama-server on the same
model file and thread count, side by side in one run (a benchmark, not a
test: run it by hand under the benchmark lock, on a machine as quiet as it
gets). Prints a Markdown table per profile: TTFT / TPOT / E2E p50, p90, p99
(client side, as `tern bench` measures them), goodput against its SLO,
output tokens/s, statuses. Usage:
  python3 tests/e2e/serve/bench_profiles.py [-t 1]   (alone on the machine: never beside another benchmark)
      [--requests 16] [--concurrency 4] [--scale 1] [--profiles all]
llama-server comes from $(packaging/build-reference) or --llama-server;
it gets -np = concurrency slots of 2,048 tokens each (the longest profile
needs 1,040)."""
import argparse
import http.client
import json
import os
import re
import socket
import subprocess
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("-t", "--threads", type=int, default=1)
ap.add_argument("--requests", type=int, default=16)
ap.add_argument("--concurrency", type=int, default=4)
ap.add_argument("--scale", default="1")
ap.add_argument("--profiles", default="all")
ap.add_argument("--tern", default=os.environ.get("TERN_BIN", "build/app/tern"))
ap.add_argument("--llama-server", default=None)
ap.add_argument("--model", default=os.path.expanduser(
    "~/.local/share/tern/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
ap.add_argument("--json", default=None, help="write every figure here")
a = ap.parse_args()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def healthy(port, path):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        c.request("GET", path)
        return c.getresponse().status == 200
    except OSError:
        return False


def start(cmd, port, path, logf):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(logf, "w"))
    end = time.time() + 180
    while time.time() < end and proc.poll() is None:
        if healthy(port, path):
            return proc
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"{cmd[0]} did not come up: {open(logf).read()[-1500:]}")


def bench(url):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [a.tern, "bench", "--profile", a.profiles, "--url", url, "--requests",
               str(a.requests), "--concurrency", str(a.concurrency), "--scale", a.scale,
               "--json", f.name, "-q"]
        t0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            raise RuntimeError(f"tern bench failed: {p.stderr[-1500:]}")
        return json.load(open(f.name)), time.time() - t0


def loadavg():
    return open("/proc/loadavg").read().split()[:3]


tmp = tempfile.mkdtemp(prefix="tern-bench-profiles-")
info = subprocess.run([a.tern, "info", "-m", a.model], capture_output=True, text=True).stdout
isa = next((l.strip() for l in info.splitlines() if l.startswith("CPU kernels")), "CPU kernels: ?")
runs, meta = {}, {"load_start": loadavg(), "threads": a.threads, "requests": a.requests,
                  "concurrency": a.concurrency, "scale": a.scale}
# tern serve
port = free_port()
proc = start([a.tern, "serve", "-m", a.model, "--port", str(port), "-t", str(a.threads),
              "--no-history", "--access-log", os.path.join(tmp, "access.log"),
              "--max-queue", "1024"], port, "/ready", os.path.join(tmp, "tern.log"))
try:
    meta["tern_log"] = open(os.path.join(tmp, "tern.log")).read().strip().splitlines()[:6]
    runs["tern serve"], meta["tern_wall_s"] = bench(f"http://127.0.0.1:{port}/v1")
finally:
    proc.terminate()
    proc.wait(60)
# llama-server
exe = a.llama_server
if not exe:
    bindir = subprocess.run(["packaging/build-reference"], capture_output=True, text=True,
                            timeout=3600).stdout.strip()
    exe = os.path.join(bindir, "llama-server")
port = free_port()
proc = start([exe, "-m", a.model, "-t", str(a.threads), "--host", "127.0.0.1", "--port", str(port),
              "-np", str(a.concurrency), "-c", str(2048 * a.concurrency), "--metrics",
              "--no-webui"], port, "/health", os.path.join(tmp, "llama.log"))
try:
    meta["llama_version"] = subprocess.run([exe, "--version"], capture_output=True,
                                           text=True).stderr.strip().splitlines()[:2]
    sysinfo = [l for l in open(os.path.join(tmp, "llama.log")).read().splitlines()
               if "system_info" in l or "CPU :" in l]
    meta["llama_system_info"] = sysinfo[:2]
    runs["llama-server"], meta["llama_wall_s"] = bench(f"http://127.0.0.1:{port}/v1")
finally:
    proc.terminate()
    proc.wait(60)
meta["load_end"] = loadavg()

print(f"threads {a.threads}; {a.requests} requests per profile, concurrency {a.concurrency}, "
      f"scale {a.scale}; load average {' '.join(meta['load_start'])} at the start, "
      f"{' '.join(meta['load_end'])} at the end")
print(f"tern serve: {meta['tern_wall_s']:.0f} s ({isa}); llama-server: {meta['llama_wall_s']:.0f} s")
for l in meta.get("llama_version", []) + meta.get("llama_system_info", []):
    print(f"llama-server: {l.strip()}")
print()
print("| profile | server | TTFT p50 / p90 / p99 ms | TPOT p50 / p90 / p99 ms | "
      "E2E p50 / p90 / p99 s | goodput req/s | out tok/s | statuses |")
print("|---|---|---|---|---|---|---|---|")
for prof in runs["tern serve"]:
    for name in ("tern serve", "llama-server"):
        r = runs[name].get(prof)
        if not r:
            continue
        def q(k, fmt, mul):
            v = r.get(k) or {}
            return " / ".join(fmt % (v[p] * mul) if v.get(p) is not None else "n/a"
                              for p in ("p50", "p90", "p99"))
        st = ", ".join(f"{k} {v}" for k, v in sorted(r["statuses"].items()))
        print(f"| {prof} | {name} | {q('ttft', '%.0f', 1e3)} | {q('tpot', '%.1f', 1e3)} | "
              f"{q('e2e', '%.2f', 1)} | {r['goodput_rps']:.2f} | {r['output_tok_s']:.1f} | {st} |")
if a.json:
    with open(a.json, "w") as f:
        json.dump({"meta": meta, "runs": runs}, f, indent=1)
