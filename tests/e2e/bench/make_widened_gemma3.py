#!/usr/bin/env python3
"""make_widened_gemma3: Gemma 3 270M's real weights zero-padded to Gemma 3
1B's widths, for speed benchmarks of n-gram lookup on a 1B-class model.

SmolLM2 widened by make_widened.py paraphrases instead of copying, so lookup
has little to guess on it; Gemma 3 270M copies an edited file faithfully.
This file computes exactly what Gemma 3 270M computes (up to f16/quant
rounding) while reading a 1B-class model's bytes per token: n_embd 1152,
FFN 6912 (Gemma 3 1B's widths), Gemma 3 270M's 4 heads / 1 KV head of 256,
18 layers and 262,144-token vocabulary.

Why it is the same function:
- every padded row and column is zero, so the padded lanes of the residual
  stream stay zero through every layer (GELU(0) * 0 = 0 in the FFN);
- the graph multiplies the input embedding by sqrt(n_embd): the stored
  token_embd is multiplied by sqrt(640/1152) so the product is unchanged;
  the output head was tied to token_embd, so an explicit output.weight
  holds the original (padded) embedding (tern and the reference both use
  output.weight when it is present);
- every RMS norm over n_embd (attn_norm, post_attention_norm, ffn_norm,
  post_ffw_norm, output_norm) divides by the root mean square over 1152
  lanes instead of 640: its weights are multiplied by sqrt(640/1152) and
  epsilon by 640/1152 (the GGUF weights already hold Gemma's 1 + w, the
  converter adds the 1, so the scale applies to them as stored);
- attn_q_norm / attn_k_norm (over the head dimension 256) keep their
  weights; they share the epsilon key, so theirs shrinks by 640/1152 too
  (the F16 perplexity check in docs/PERFORMANCE.md section 7 does not see it);
- heads, head size, rope, sliding window and the query scale are unchanged.

    tests/e2e/bench/make_widened_gemma3.py GEMMA3-270M-F16.gguf OUT-f16.gguf
    llama-quantize OUT-f16.gguf OUT-q4_0.gguf Q4_0

GEMMA3-270M-F16.gguf: gemma-3-270m-q4_k_m.gguf dequantized by the
reference's `llama-quantize --allow-requantize IN OUT F16`.
"""
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter

from gguf_rewrite import copy_keys, finish

N_EMBD, N_FF = 1152, 6912
EMBD_NORMS = ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm", "output_norm")


def main() -> int:
    src, out = sys.argv[1], sys.argv[2]
    r = GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    if arch != "gemma3":
        sys.exit(f"make_widened_gemma3: {src}: architecture {arch}, want gemma3")
    kv = {f.name: f.contents() for f in r.fields.values()}
    e0 = kv["gemma3.embedding_length"]
    f0 = kv["gemma3.feed_forward_length"]
    hd = kv["gemma3.attention.key_length"]
    h0 = kv["gemma3.attention.head_count"]
    if e0 > N_EMBD or f0 > N_FF:
        sys.exit(f"make_widened_gemma3: {src}: n_embd {e0} / FFN {f0} do not fit the 1B widths")
    if any(t.name == "output.weight" for t in r.tensors):
        sys.exit(f"make_widened_gemma3: {src}: has output.weight; this expects tied embeddings")
    shrink = e0 / N_EMBD
    new_kv = {
        "gemma3.embedding_length": N_EMBD,
        "gemma3.feed_forward_length": N_FF,
        "gemma3.attention.layer_norm_rms_epsilon":
            kv["gemma3.attention.layer_norm_rms_epsilon"] * shrink,
        "general.name": "Gemma 3 270M widened to Gemma 3 1B widths",
    }
    w = GGUFWriter(out, "gemma3")
    copy_keys(r, w, new_kv)

    def pad(a: np.ndarray, rows: int, cols: int, scale: float = 1.0) -> np.ndarray:
        b = np.zeros((rows, cols), a.dtype)
        b[:a.shape[0], :a.shape[1]] = a if scale == 1.0 else (a.astype(np.float32) * scale)
        return b

    def widened(name: str, a: np.ndarray) -> np.ndarray:
        kind = name.split(".")[-2]
        if kind in EMBD_NORMS:
            b = np.zeros(N_EMBD, np.float32)
            b[:e0] = a * np.sqrt(shrink)
            return b
        if kind in ("attn_q_norm", "attn_k_norm"):
            return a
        if kind == "token_embd":
            return pad(a, a.shape[0], N_EMBD, np.sqrt(shrink))
        if kind in ("attn_q", "attn_k", "attn_v"):
            return pad(a, a.shape[0], N_EMBD)
        if kind == "attn_output":
            return pad(a, N_EMBD, h0 * hd)
        if kind in ("ffn_gate", "ffn_up"):
            return pad(a, N_FF, N_EMBD)
        if kind == "ffn_down":
            return pad(a, N_EMBD, N_FF)
        sys.exit(f"make_widened_gemma3: no rule for tensor {name}")

    for t in r.tensors:
        if t.tensor_type not in (GGMLQuantizationType.F16, GGMLQuantizationType.F32):
            sys.exit(f"make_widened_gemma3: {t.name} is {t.tensor_type.name}; give an F16 file")
        a = np.asarray(t.data)
        w.add_tensor(t.name, widened(t.name, a))
        if t.name == "token_embd.weight":  # the untied head: the original embedding
            w.add_tensor("output.weight", pad(a, a.shape[0], N_EMBD))
    finish(w)
    return 0


if __name__ == "__main__":
    sys.exit(main())
