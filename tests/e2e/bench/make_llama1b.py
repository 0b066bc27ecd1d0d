#!/usr/bin/env python3
"""make_llama1b: a Llama-3.2-1B-shaped GGUF with random f16 weights, for
speed benchmarks only (the output is noise). Shape: 16 layers, n_embd 2048,
32 heads / 8 KV heads of 64, FFN 8192, vocab 128,256, tied output. The
tokenizer is SmolLM2's (SRC), padded to the vocabulary with unused tokens.
Quantize the result with the reference's llama-quantize (Q4_0, Q4_K_M):

    tests/e2e/bench/make_llama1b.py SMOLLM2.gguf OUT-f16.gguf
    $(packaging/build-reference)/llama-quantize OUT-f16.gguf OUT-q4_0.gguf Q4_0
"""
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter, TokenType

from gguf_rewrite import finish

N_EMBD, N_LAYER, N_HEAD, N_KV, HD, N_FF, N_VOCAB = 2048, 16, 32, 8, 64, 8192, 128256


def main() -> int:
    src, out = sys.argv[1], sys.argv[2]
    r = GGUFReader(src)
    toks = [bytes(r.fields["tokenizer.ggml.tokens"].parts[i]).decode("utf-8")
            for i in r.fields["tokenizer.ggml.tokens"].data]
    types = [int(r.fields["tokenizer.ggml.token_type"].parts[i][0])
             for i in r.fields["tokenizer.ggml.token_type"].data]
    merges = [bytes(r.fields["tokenizer.ggml.merges"].parts[i]).decode("utf-8")
              for i in r.fields["tokenizer.ggml.merges"].data]
    n0 = len(toks)
    toks += [f"<unused_{i}>" for i in range(n0, N_VOCAB)]
    types += [int(TokenType.USER_DEFINED)] * (N_VOCAB - n0)
    w = GGUFWriter(out, "llama")
    w.add_name("llama-3.2-1b-shape-random")
    w.add_context_length(8192)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_KV)
    w.add_rope_dimension_count(HD)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(1)  # mostly f16
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    rng = np.random.default_rng(1)

    def mat(rows, cols, scale):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * scale).astype(np.float16)

    w.add_tensor("token_embd.weight", mat(N_VOCAB, N_EMBD, 0.02))
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, np.float32))
    for l in range(N_LAYER):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", np.ones(N_EMBD, np.float32))
        w.add_tensor(p + "attn_q.weight", mat(N_HEAD * HD, N_EMBD, 0.02))
        w.add_tensor(p + "attn_k.weight", mat(N_KV * HD, N_EMBD, 0.02))
        w.add_tensor(p + "attn_v.weight", mat(N_KV * HD, N_EMBD, 0.02))
        w.add_tensor(p + "attn_output.weight", mat(N_EMBD, N_HEAD * HD, 0.02))
        w.add_tensor(p + "ffn_norm.weight", np.ones(N_EMBD, np.float32))
        w.add_tensor(p + "ffn_gate.weight", mat(N_FF, N_EMBD, 0.02))
        w.add_tensor(p + "ffn_up.weight", mat(N_FF, N_EMBD, 0.02))
        w.add_tensor(p + "ffn_down.weight", mat(N_EMBD, N_FF, 0.02))
    finish(w)
    return 0


if __name__ == "__main__":
    sys.exit(main())
