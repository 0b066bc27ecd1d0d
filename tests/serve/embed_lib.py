"""embed_lib: the embeddings tests' model files and reference.

make_model(pooling) writes a small random-weight Qwen3 GGUF with
qwen3.pooling_type set (1 mean, 3 last; None: no key), the way
tests/conformance/gen_models.py writes its models (same writer, fixed seed,
a real tokenizer from ../shared/tokenizer-suite: Llama's 32k SentencePiece
vocabulary keeps the file at about 10 MB with q8_0 weights and tied
embeddings). Files go to TERN_EMBED_MODEL_DIR (meson: the build dir), or
~/.cache/tern/embed, and are rewritten only when missing.

reference(path, texts, pooling) runs the reference's llama-embedding
(packaging/build-reference builds it) with L2 normalisation and returns
one vector per text."""
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "conformance"))

POOLING_NAMES = {1: "mean", 2: "cls", 3: "last"}


def model_dir():
    d = os.environ.get("TERN_EMBED_MODEL_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "tern", "embed")
    os.makedirs(d, exist_ok=True)
    return d


def make_model(pooling):
    import gen_models
    from gguf import GGMLQuantizationType as QT
    tag = POOLING_NAMES.get(pooling, "unset")
    path = os.path.join(model_dir(), f"qwen3-embed-{tag}.gguf")
    if os.path.exists(path):
        return path
    spec = dict(name="qwen3-embed", arch="qwen3", vocab="ggml-vocab-llama-spm.gguf",
                heads=(4, 2), head_dim=64, qk_norm=True, tied=True)
    if pooling is not None:
        spec["kv"] = {"qwen3.pooling_type": pooling}
    # the same seed for every pooling: the same weights, only the key differs
    gen_models.write_model(path + ".tmp", "qwen3-embed", spec, QT.Q8_0)
    os.replace(path + ".tmp", path)
    return path


def ref_bin():
    out = subprocess.run([os.path.join(ROOT, "packaging", "build-reference")],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip()[-400:]
    b = os.path.join(out.stdout.strip().splitlines()[-1], "llama-embedding")
    return (b if os.access(b, os.X_OK) else None), f"{b} missing"


def reference(binary, path, texts, pooling):
    """llama-embedding's L2-normalised vectors for texts (one sequence each,
    all in one batch, as it runs a prompt of several lines)."""
    sep = "<#tern#>"
    cmd = [binary, "-m", path, "-p", sep.join(texts), "--embd-separator", sep,
           "--pooling", pooling, "--embd-normalize", "2", "--embd-output-format", "json",
           "-t", "1", "-c", "512", "-b", "512", "-ub", "512", "--no-warmup"]
    # its JSON goes through the reference's asynchronous log, where another
    # line can land inside it now and then: parsed, else run again
    for attempt in range(3):
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            raise RuntimeError(f"llama-embedding failed: {out.stderr[-600:]}")
        text = out.stdout[out.stdout.find("{"):]
        try:
            j, _ = json.JSONDecoder().raw_decode(text)
            break
        except ValueError as e:
            if attempt == 2:
                raise RuntimeError(f"llama-embedding's JSON: {e}: "
                                   f"{text[max(0, e.pos - 300):e.pos + 300]!r}")
    return [np.array(d["embedding"], dtype=np.float64) for d in j["data"]]


def cosine(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
