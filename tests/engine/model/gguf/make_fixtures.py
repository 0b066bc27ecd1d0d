#!/usr/bin/env python3
"""Fixtures for tests/engine/model and tests/kernels from an independent oracle: the PyPI `gguf` package.

Run by hand from the repository root; the outputs are committed:
  python3 tests/engine/model/gguf/make_fixtures.py [--models]

1. fixtures/<TYPE>.bin for every tensor format tern reads: random f32 input,
   the bytes gguf-py's numpy quantizer makes of it (or, for types gguf-py
   cannot quantize, random but well-formed blocks), and gguf-py's
   dequantization of those bytes. Layout (little endian):
     "TQFX" u32 type  u32 n_elements  u32 n_bytes  u32 has_input
     f32 input[n]  u8 quantized[n_bytes]  f32 dequantized[n]
2. fixtures/models.json (with --models): what gguf-py reads from the two real
   models (packaging/fetch-model), for the reader and `tern info` tests.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
from collections import Counter

import numpy as np
import gguf
from gguf.constants import GGMLQuantizationType as T, GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")
N = 512  # two K-quant super-blocks, sixteen 32-blocks

QUANTIZABLE = [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1]
BYTES_ONLY = [T.Q4_K, T.Q5_K, T.Q6_K]


def f16_bytes(rng, n, lo, hi):
    return rng.uniform(lo, hi, n).astype(np.float16).view(np.uint8).reshape(n, 2)


def random_blocks(rng, t):
    """Random K-quant blocks whose f16 scales are finite and moderate."""
    bs, ts = GGML_QUANT_SIZES[t]
    nb = N // bs
    raw = rng.integers(0, 256, size=(nb, ts), dtype=np.uint8)
    if t in (T.Q4_K, T.Q5_K):  # d, dmin first
        raw[:, 0:2] = f16_bytes(rng, nb, 0.001, 0.05)
        raw[:, 2:4] = f16_bytes(rng, nb, 0.001, 0.05)
    elif t == T.Q6_K:  # d last
        raw[:, ts - 2:ts] = f16_bytes(rng, nb, -0.02, 0.02)
    return raw.reshape(-1)


def write_fixture(t, inp, q, deq):
    path = os.path.join(OUT, f"{t.name}.bin")
    with open(path, "wb") as f:
        f.write(b"TQFX")
        f.write(struct.pack("<IIII", int(t), N, q.size, 0 if inp is None else 1))
        f.write((np.zeros(N, np.float32) if inp is None else inp).astype("<f4").tobytes())
        f.write(q.astype(np.uint8).tobytes())
        f.write(deq.astype("<f4").tobytes())
    print(path, os.path.getsize(path))


def f16_specials():
    """Values that exercise f16 rounding edges: subnormals, ties, overflow."""
    v = [0.0, -0.0, 1.0, -2.5, 65504.0, 65519.99, 65520.0, 1e6, -1e6, 6.1035156e-05,
         6.0e-08, 5.96e-08, 2.98e-08, 2.99e-08, 1e-10, 1.00048828125, 1.000732421875,
         np.inf, -np.inf, 3.0517578e-05, 0.333333]
    return np.array(v, np.float32)


def make_formats():
    rng = np.random.default_rng(20261129)
    os.makedirs(OUT, exist_ok=True)
    for t in QUANTIZABLE:
        x = rng.standard_normal(N).astype(np.float32) * np.float32(0.1)
        x[::37] *= 8  # a few outliers, like real weights
        if t in (T.F16, T.BF16):
            sp = f16_specials()
            x[: sp.size] = sp
        q = quantize(x.reshape(1, N), t).reshape(-1).view(np.uint8)
        write_fixture(t, x, q, dequantize(q, t).reshape(-1))
    for t in BYTES_ONLY:
        q = random_blocks(rng, t)
        write_fixture(t, None, q, dequantize(q, t).reshape(-1))


def fnv1a64(data: bytes) -> int:
    """FNV-1a folded over little-endian u64 words (test_quant.c does the same)."""
    h = 0xcbf29ce484222325
    words = np.frombuffer(data, "<u8")
    for w in words.tolist():
        h = ((h ^ w) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def make_conversions():
    """f16 <-> f32 and f32 -> bf16 over wide input sets, summarised as hashes
    (the full tables would be MBs): every f16 bit pattern to f32, and f32 bit
    patterns 0, 4099, 2*4099, ... (about a million, all exponents) to f16/bf16."""
    all16 = np.arange(65536, dtype=np.uint16)
    f32 = all16.view(np.float16).astype(np.float32)
    f32 = np.where(np.isnan(f32), np.float32(0), f32)  # NaN payloads: not compared
    bits = (np.arange(0, 2**32, 4099, dtype=np.uint64)).astype(np.uint32)
    src = bits.view(np.float32)
    finite = ~np.isnan(src)
    with np.errstate(over="ignore"):
        h16 = src[finite].astype(np.float16).view(np.uint16).astype("<u2")
    b16 = quantize(src[finite], T.BF16).view("<u2")
    pad = lambda a: a.tobytes() + bytes(-a.nbytes % 8)
    out = {
        "f16_to_f32_all": fnv1a64(pad(f32.astype("<f4"))),
        "f32_stride": 4099,
        "f32_to_f16_stride": fnv1a64(pad(h16)),
        "f32_to_bf16_stride": fnv1a64(pad(b16)),
        "n_strided_finite": int(finite.sum()),
    }
    path = os.path.join(OUT, "conversions.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(path, out)


def fetch(model):
    cmd = [os.path.join(HERE, "..", "..", "..", "..", "packaging", "fetch-model"), "--model", model, "--print-path"]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def field(r, key, default=None):
    f = r.fields.get(key)
    if f is None:
        return default
    v = f.contents()
    return v


# The reference engine's llama-tokenize: $LLAMA_TOKENIZE, else on PATH, else
# where this project's reference build lives.
REF_BIN = (os.environ.get("LLAMA_TOKENIZE") or shutil.which("llama-tokenize")
           or "/tmp/ref/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin/llama-tokenize")


def reference_eot(path):
    """EOT id as the reference engine (llama.cpp) resolves it: from metadata,
    else by token text. Read from llama-tokenize's verbose vocabulary dump."""
    out = subprocess.run([REF_BIN, "-v", "-m", path, "-p", "x"], capture_output=True, text=True)
    for line in (out.stdout + out.stderr).splitlines():
        if "print_info: EOT token" in line:
            return int(line.split("=")[1].split()[0])
    return -1


EOT_TEXTS = ["<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
             "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<\uff5cend\u2581of\u2581sentence\uff5c>",
             "<end_of_utterance>"]


def eot_candidates(r):
    """Ids whose text the reference engine accepts as EOT when metadata has
    none (llama-vocab.cpp); it picks one of them in hash-map order."""
    f = r.fields["tokenizer.ggml.tokens"]
    return [i for i in range(len(f.data)) if f.contents(i) in EOT_TEXTS]


def first_rows_sum(r):
    """Sum of the dequantized first row of every tensor: checks every tensor
    type of the real models against gguf-py's dequantizers."""
    s = 0.0
    for t in r.tensors:
        bs, ts = GGML_QUANT_SIZES[t.tensor_type]
        ne0 = int(t.shape[0])
        raw = np.asarray(t.data).reshape(-1).view(np.uint8)[: ne0 // bs * ts]
        s += float(dequantize(raw, t.tensor_type).astype(np.float64).sum())
    return s


def template_family(tmpl):
    """Family by what the model's own Jinja template renders (jinja2)."""
    if not tmpl:
        return "none"
    import jinja2
    env = jinja2.Environment(loader=jinja2.BaseLoader())
    out = env.from_string(tmpl).render(
        messages=[{"role": "user", "content": "hi"}], add_generation_prompt=True,
        bos_token="<s>", eos_token="</s>")
    if "<|im_start|>user\nhi<|im_end|>" in out:
        return "chatml"
    if "<start_of_turn>user\nhi<end_of_turn>" in out:
        return "gemma"
    if "<|start_header_id|>user<|end_header_id|>" in out:
        return "llama3"
    return "unknown"


def describe(path):
    r = gguf.GGUFReader(path)
    arch = field(r, "general.architecture")
    types = Counter()
    tbytes = Counter()
    params = 0
    for t in r.tensors:
        types[t.tensor_type.name] += 1
        tbytes[t.tensor_type.name] += int(t.n_bytes)
        params += int(t.n_elements)
    first = r.tensors[0]
    tmpl = field(r, "tokenizer.chat_template", "")
    return {
        "file": os.path.basename(path),
        "version": int(field(r, "GGUF.version")),
        "n_kv": len(r.fields) - 3,  # GGUF.version / tensor_count / kv_count are pseudo-fields
        "n_tensors": len(r.tensors),
        "alignment": int(field(r, "general.alignment", 32)),
        "data_offset": int(r.data_offset),
        "architecture": arch,
        "name": field(r, "general.name"),
        "parameters": params,
        "tensor_types": {k: {"count": types[k], "bytes": tbytes[k]} for k in sorted(types)},
        "weight_bytes": sum(tbytes.values()),
        "context_length": int(field(r, f"{arch}.context_length")),
        "block_count": int(field(r, f"{arch}.block_count")),
        "embedding_length": int(field(r, f"{arch}.embedding_length")),
        "head_count": int(field(r, f"{arch}.attention.head_count")),
        "head_count_kv": int(field(r, f"{arch}.attention.head_count_kv")),
        "key_length": int(field(r, f"{arch}.attention.key_length",
                                field(r, f"{arch}.embedding_length") // field(r, f"{arch}.attention.head_count"))),
        "vocab_size": len(r.fields["tokenizer.ggml.tokens"].data),
        "tokenizer_model": field(r, "tokenizer.ggml.model"),
        "tokenizer_pre": field(r, "tokenizer.ggml.pre"),
        "bos": int(field(r, "tokenizer.ggml.bos_token_id", -1)),
        "eos": int(field(r, "tokenizer.ggml.eos_token_id", -1)),
        "eot": int(field(r, "tokenizer.ggml.eot_token_id", -1)),
        "ref_eot": reference_eot(path),
        "eot_candidates": eot_candidates(r),
        "first_rows_sum": first_rows_sum(r),
        "chat_template_len": len(tmpl.encode()),
        "chat_template_family": template_family(tmpl),
        "rope_freq_base": float(field(r, f"{arch}.rope.freq_base")),
        "first_tensor": {"name": first.name, "type": first.tensor_type.name,
                         "ne": [int(d) for d in first.shape], "offset": int(first.data_offset)},
        "last_tensor": {"name": r.tensors[-1].name, "type": r.tensors[-1].tensor_type.name,
                        "ne": [int(d) for d in r.tensors[-1].shape],
                        "offset": int(r.tensors[-1].data_offset)},
        "token_100": bytes(r.fields["tokenizer.ggml.tokens"].contents(100).encode()).decode(),
    }


def make_models():
    out = {"smollm2": describe(fetch("smollm2")), "gemma3-270m": describe(fetch("gemma3-270m"))}
    path = os.path.join(OUT, "models.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(path, os.path.getsize(path))


if __name__ == "__main__":
    make_formats()
    make_conversions()
    if "--models" in sys.argv:
        make_models()
