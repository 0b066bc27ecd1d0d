"""test_remote_embed: `tern embed --url` through the remote engine, which
relays each text to the server's /v1/embeddings: against tern serve (the
same vectors as in-process `tern embed` on the same file) and against the
reference's llama-server --embeddings (the vectors of its own
llama-embedding), on embed_lib's random-weight Qwen3 file (pooling_type 3,
last token). Also: pooling asked of a server (refused, naming why),
--dimensions relayed, the server's refusal passed on, and answers a server
should not give (fault_server.py's emb-* modes: not JSON, strings, base64,
all zeros, two vectors, none) each a clear error, an unnormalised one
normalised."""
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np

import embed_lib
from serve_lib import TERN, TIME_SCALE, Server, diag, done, ok

TEXTS = ["hello world", "The quick brown fox jumps over the lazy dog.", "a",
         "Embeddings are pooled hidden states; this one is longer, with punctuation!"]


def embed(args, stdin=None):
    return subprocess.run([TERN, "embed"] + args, input=stdin, capture_output=True, text=True,
                          timeout=300 * TIME_SCALE)


def vectors(text_out):
    return [np.array([float(x) for x in l.split()]) for l in text_out.splitlines()]


path = embed_lib.make_model(3)
local = embed(["-m", path, "-t", "1", "--format", "text"] + TEXTS)
ok(local.returncode == 0, "in-process tern embed: exit 0")
lv = vectors(local.stdout)

srv = Server(["-m", path])
if not ok(srv.ready(), "tern serve on the embedding model is ready"):
    diag(srv.log()[-2000:])
    done()
url = srv.base + "/v1"
r = embed(["--url", url, "--format", "text"] + TEXTS)
rv = vectors(r.stdout) if r.returncode == 0 else []
ok(r.returncode == 0 and len(rv) == len(TEXTS), f"embed --url tern serve: exit {r.returncode} "
   f"{r.stderr.strip()[:200]}")
cos = [embed_lib.cosine(a, b) for a, b in zip(rv, lv)]
diff = max((float(np.max(np.abs(a - b))) for a, b in zip(rv, lv)), default=1.0)
ok(len(cos) == len(TEXTS) and min(cos) >= 0.99999 and diff < 1e-4,
   f"through tern serve = in-process (cosine min {min(cos, default=0):.7f}, max diff {diff:.1e})")
ok(all(abs(np.linalg.norm(v) - 1) < 1e-5 for v in rv) and all(len(v) == 256 for v in rv),
   "relayed vectors: 256 wide, L2-normalised")

j_local = json.loads(embed(["-m", path, "-t", "1"] + TEXTS).stdout or "{}")
rj = embed(["--url", url] + TEXTS)
j = json.loads(rj.stdout) if rj.returncode == 0 else {}
ok(j.get("object") == "list" and len(j.get("data", [])) == len(TEXTS) and
   j.get("usage", {}).get("prompt_tokens") == j_local.get("usage", {}).get("prompt_tokens"),
   f"JSON through --url: {len(j.get('data', []))} vectors, usage {j.get('usage')} "
   f"(in-process {j_local.get('usage')})")

r = embed(["--url", url, "--format", "text", "--dimensions", "32", TEXTS[1]])
v = vectors(r.stdout)[0] if r.returncode == 0 else np.zeros(1)
full = lv[1][:32]
ok(len(v) == 32 and float(np.max(np.abs(v - full / np.linalg.norm(full)))) < 1e-4,
   "--dimensions 32 relayed: the first 32, re-normalised")
r = embed(["--url", url, "--dimensions", "4096", "x"])
ok(r.returncode == 1 and "HTTP 400" in r.stderr and "dimensions" in r.stderr,
   f"--dimensions over the model's: the server's 400 passed on ({r.stderr.strip()[:160]})")
r = embed(["--url", url, "--pooling", "mean", "x"])
ok(r.returncode == 1 and "pools embeddings its own way" in r.stderr,
   f"--pooling with --url: refused, saying why ({r.stderr.strip()[:160]})")
srv.stop()

# A misbehaving server: every bad answer is a clear error naming it, never a vector.
fs = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "engine", "remote", "fault_server.py"), "0"],
    stdout=subprocess.PIPE, text=True)
try:
    fport = int(fs.stdout.readline().split()[1])
    r = embed(["--url", f"http://127.0.0.1:{fport}/emb-ok/v1", "--format", "text", "x"])
    v = vectors(r.stdout)[0] if r.returncode == 0 else np.zeros(1)
    ok(r.returncode == 0 and np.allclose(v, [0.6, 0.8]), f"an unnormalised [3, 4] comes out "
       f"normalised ({r.stdout.strip()} {r.stderr.strip()[:120]})")
    for mode, want in (("emb-notjson", "not JSON"), ("emb-strings", "finite number"),
                       ("emb-base64", "base64"), ("emb-zeros", "all zeros"),
                       ("emb-two", "array of one"), ("emb-empty", "array of one")):
        r = embed(["--url", f"http://127.0.0.1:{fport}/{mode}/v1", "x"])
        ok(r.returncode == 1 and want in r.stderr and "no usable embedding" in r.stderr,
           f"{mode}: refused ({r.stderr.strip()[:160]})")
finally:
    fs.kill()
    fs.wait()

# llama-server: the reference's own server, its /v1/embeddings with the
# same pooling as the file's (last), against its llama-embedding.
ref_bin, why = embed_lib.ref_bin()
if not ok(ref_bin is not None, "the reference's llama-embedding is built"):
    diag(why)
    done()
server_bin = os.path.join(os.path.dirname(ref_bin), "llama-server")
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
log = open(os.path.join(srv.dir, "llama-server.log"), "w")
ls = subprocess.Popen([server_bin, "-m", path, "--host", "127.0.0.1", "--port", str(port),
                       "--embeddings", "--pooling", "last", "-t", "1", "-c", "512"],
                      stdout=log, stderr=subprocess.STDOUT)
try:
    up = False
    end = time.time() + 60 * TIME_SCALE
    while time.time() < end and ls.poll() is None and not up:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            h = subprocess.run(["curl", "-sf", f"http://127.0.0.1:{port}/health"],
                               capture_output=True, timeout=10)
            up = h.returncode == 0
        except OSError:
            pass
        time.sleep(0.2)
    if ok(up, f"llama-server --embeddings is up (port {port})"):
        r = embed(["--url", f"http://127.0.0.1:{port}/v1", "--format", "text"] + TEXTS)
        rv = vectors(r.stdout) if r.returncode == 0 else []
        ref = embed_lib.reference(ref_bin, path, TEXTS, "last")
        cos = [embed_lib.cosine(a, b) for a, b in zip(rv, ref)]
        ok(r.returncode == 0 and len(cos) == len(TEXTS) and min(cos) >= 0.999,
           f"embed --url llama-server = llama-embedding (cosine "
           f"{', '.join(f'{x:.6f}' for x in cos)}) {r.stderr.strip()[:200]}")
        cl = [embed_lib.cosine(a, b) for a, b in zip(rv, lv)]
        ok(len(cl) == len(TEXTS) and min(cl) >= 0.999,
           f"embed --url llama-server = in-process tern (cosine min {min(cl, default=0):.6f})")
finally:
    ls.kill()
    ls.wait()
    log.close()
done()
