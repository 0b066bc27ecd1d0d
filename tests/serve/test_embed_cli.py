"""test_embed_cli: `tern embed` against the reference's llama-embedding on the
random-weight Qwen3 file of embed_lib (pooling_type 3, last token): the
model's pooling and --pooling mean / cls / last each give vectors whose
cosine with llama-embedding's (same --pooling, --embd-normalize 2) is
>= 0.999; texts as arguments and as lines of standard input; JSON and text
output; --dimensions; usage errors with exit status 2."""
import json
import subprocess

import numpy as np

import embed_lib
from serve_lib import TERN, diag, done, ok

TEXTS = ["hello world", "The quick brown fox jumps over the lazy dog.", "a",
         "Embeddings are pooled hidden states; this one is longer, with punctuation!"]


def embed(args, stdin=None):
    return subprocess.run([TERN, "embed", "-t", "1"] + args, input=stdin, capture_output=True,
                          text=True, timeout=300)


def vectors(text_out):
    return [np.array([float(x) for x in l.split()]) for l in text_out.splitlines()]


ref_bin, why = embed_lib.ref_bin()
if not ok(ref_bin is not None, "the reference's llama-embedding is built"):
    diag(why)
    done()
path = embed_lib.make_model(3)

info = subprocess.run([TERN, "info", "-m", path], capture_output=True, text=True, timeout=60)
ok(info.returncode == 0 and "pooling       last" in info.stdout,
   "tern info shows the file's pooling type (last)")
j = json.loads(subprocess.run([TERN, "info", "-m", path, "--json"], capture_output=True,
                              text=True, timeout=60).stdout or "{}")
ok(j.get("pooling_type") == 3, f"tern info --json: pooling_type {j.get('pooling_type')}")

for pooling in ("model", "last", "mean", "cls"):
    r = embed(["-m", path, "--format", "text", "--pooling", pooling] + TEXTS)
    if not ok(r.returncode == 0, f"--pooling {pooling}: exit 0"):
        diag(r.stderr)
        continue
    ref = embed_lib.reference(ref_bin, path, TEXTS, "last" if pooling == "model" else pooling)
    cos = [embed_lib.cosine(a, b) for a, b in zip(vectors(r.stdout), ref)]
    ok(len(cos) == len(TEXTS) and min(cos) >= 0.999,
       f"--pooling {pooling}: cosine with llama-embedding {', '.join(f'{x:.6f}' for x in cos)}")

# standard input, JSON output (OpenAI's shape)
r = embed(["-m", path], stdin="\n".join(TEXTS) + "\n\n")
j = json.loads(r.stdout) if r.returncode == 0 else {}
ok(r.returncode == 0 and j.get("object") == "list" and len(j.get("data", [])) == len(TEXTS) and
   [d["index"] for d in j["data"]] == list(range(len(TEXTS))) and
   j["usage"]["prompt_tokens"] > len(TEXTS),
   f"lines of stdin, JSON out: {len(j.get('data', []))} vectors, usage {j.get('usage')}")
args = embed(["-m", path, "--format", "text"] + TEXTS)
same = max(float(np.max(np.abs(np.array(d["embedding"]) - v)))
           for d, v in zip(j.get("data", []), vectors(args.stdout))) if j else 1
ok(same < 1e-6, f"stdin and arguments give the same vectors (max diff {same:.2e})")
norms = [np.linalg.norm(d["embedding"]) for d in j.get("data", [])]
ok(norms and all(abs(n - 1) < 1e-5 for n in norms), "vectors are L2-normalised")

r = embed(["-m", path, "--format", "text", "--dimensions", "32", TEXTS[1]])
v = vectors(r.stdout)[0] if r.returncode == 0 else np.zeros(1)
full = vectors(args.stdout)[1][:32]
ok(len(v) == 32 and float(np.max(np.abs(v - full / np.linalg.norm(full)))) < 1e-5,
   "--dimensions 32: the first 32, re-normalised")

for bad, want in ((["--pooling", "max", "x"], "--pooling"),
                  (["--format", "csv", "x"], "--format"),
                  (["--dimensions", "4096", "x"], "--dimensions")):
    r = embed(["-m", path] + bad)
    ok(r.returncode == 2 and want in r.stderr, f"{' '.join(bad)}: exit 2 ({r.stderr.strip()})")
r = embed(["-m", path], stdin="")
ok(r.returncode == 2 and "no text" in r.stderr, f"no text: exit 2 ({r.stderr.strip()})")
r = embed(["-m", path, "--ctx", "16", " ".join(["word"] * 40)])
ok(r.returncode == 1 and "too large" in r.stderr, f"a text beyond --ctx: exit 1 ({r.stderr.strip()})")
done()
