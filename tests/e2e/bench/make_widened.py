#!/usr/bin/env python3
"""make_widened: SmolLM2-135M's real weights zero-padded to Llama-3.2-1B's
widths, for speed benchmarks of speculative decoding on a 1B-class model.

A 1B model with random weights (make_llama1b.py) has no margin between its
top tokens, so a draft or an n-gram guess is almost never kept and
speculation cannot be measured on it; real 1B weights cannot be fetched
here. This file computes exactly what SmolLM2 computes (up to f16/quant
rounding) while reading the bytes of a 1B-class model per token: n_embd
2048, 32 heads / 8 KV heads of 64, FFN 8192, SmolLM2's 30 layers and
vocabulary (about 1.8 B parameters; Q4_0 is about 1.1 GB).

Why it is the same function:
- every padded row and column is zero, so the padded lanes of the residual
  stream stay zero through every layer;
- RMS norm divides by the root mean square over 2048 lanes instead of 576:
  the norm weights are multiplied by sqrt(576/2048) and epsilon by
  576/2048, which makes each norm's output equal to the original;
- query head h of KV group g = h // 3 moves to head 4g + h % 3 (groups of
  four), KV head g stays g, so each query still reads its own K and V; the
  added heads' output columns are zero;
- head size, rope and the attention scale are unchanged.

    tests/e2e/bench/make_widened.py SMOLLM2-F16.gguf OUT-f16.gguf
    $(packaging/build-reference)/llama-quantize OUT-f16.gguf OUT-q4_0.gguf Q4_0

SMOLLM2-F16.gguf: the default model dequantized by llama-quantize (as
bench_draft.sh makes it).
"""
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter

from gguf_rewrite import copy_keys, finish

N_EMBD, N_HEAD, N_KV, N_FF = 2048, 32, 8, 8192


def main() -> int:
    src, out = sys.argv[1], sys.argv[2]
    r = GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    if arch != "llama":
        sys.exit(f"make_widened: {src}: architecture {arch}, want llama")
    kv = {f.name: f.contents() for f in r.fields.values()}
    e0 = kv["llama.embedding_length"]
    h0 = kv["llama.attention.head_count"]
    g0 = kv["llama.attention.head_count_kv"]
    f0 = kv["llama.feed_forward_length"]
    hd = e0 // h0
    per = h0 // g0
    if hd != 64 or g0 > N_KV or per > N_HEAD // N_KV or f0 > N_FF or e0 > N_EMBD:
        sys.exit(f"make_widened: {src}: shape {e0}/{h0}/{g0}/{f0} does not fit the 1B widths")
    shrink = e0 / N_EMBD
    new_kv = {
        "llama.embedding_length": N_EMBD,
        "llama.feed_forward_length": N_FF,
        "llama.attention.head_count": N_HEAD,
        "llama.attention.head_count_kv": N_KV,
        "llama.attention.layer_norm_rms_epsilon": kv["llama.attention.layer_norm_rms_epsilon"] * shrink,
        "general.name": "SmolLM2-135M widened to Llama-3.2-1B widths",
    }
    w = GGUFWriter(out, "llama")
    copy_keys(r, w, new_kv)

    new_head = [(h // per) * (N_HEAD // N_KV) + h % per for h in range(h0)]

    def widened(name: str, a: np.ndarray) -> np.ndarray:
        kind = name.split(".")[-2]
        if a.ndim == 1:  # a norm's weights
            b = np.zeros(N_EMBD, np.float32)
            b[:e0] = a * np.sqrt(shrink)
            return b
        if kind == "token_embd" or kind == "output":
            b = np.zeros((a.shape[0], N_EMBD), a.dtype)
            b[:, :e0] = a
            return b
        if kind == "attn_q":
            b = np.zeros((N_HEAD * hd, N_EMBD), a.dtype)
            for h, n in enumerate(new_head):
                b[n * hd:(n + 1) * hd, :e0] = a[h * hd:(h + 1) * hd]
            return b
        if kind in ("attn_k", "attn_v"):
            b = np.zeros((N_KV * hd, N_EMBD), a.dtype)
            b[:g0 * hd, :e0] = a
            return b
        if kind == "attn_output":
            b = np.zeros((N_EMBD, N_HEAD * hd), a.dtype)
            for h, n in enumerate(new_head):
                b[:e0, n * hd:(n + 1) * hd] = a[:, h * hd:(h + 1) * hd]
            return b
        if kind in ("ffn_gate", "ffn_up"):
            b = np.zeros((N_FF, N_EMBD), a.dtype)
            b[:f0, :e0] = a
            return b
        if kind == "ffn_down":
            b = np.zeros((N_EMBD, N_FF), a.dtype)
            b[:e0, :f0] = a
            return b
        sys.exit(f"make_widened: no rule for tensor {name}")

    for t in r.tensors:
        if t.tensor_type not in (GGMLQuantizationType.F16, GGMLQuantizationType.F32):
            sys.exit(f"make_widened: {t.name} is {t.tensor_type.name}; give an F16 file")
        w.add_tensor(t.name, widened(t.name, np.asarray(t.data)))
    finish(w)
    return 0


if __name__ == "__main__":
    sys.exit(main())
