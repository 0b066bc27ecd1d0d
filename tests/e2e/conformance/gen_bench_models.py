#!/usr/bin/env python3
"""gen_bench_models: the random-weight models of the models speed figures
(docs/PERFORMANCE.md, "models"), written with gen_models.py's writer at real
widths: random valid Q4_K blocks (every matrix; norms and the MoE router
F32), a real vocabulary (GPT-2's, 50,257 tokens), fixed seeds.

    python3 tests/e2e/conformance/gen_bench_models.py [--out DIR] [NAME...]

  qwen3moe-a3b-cut  Qwen3-30B-A3B's shape cut to 4 layers: n_embd 2048,
                    128 experts of ff 768, 8 used, 32 query / 4 KV heads of
                    128 (the real model has 48 layers)
  qwen3-1b          qwen3, n_embd 2048, 16 layers, ff 6144, 16 / 8 heads of 128
  phi3-1b           phi3, n_embd 2048, 16 layers, ff 5632, 32 / 32 heads of 64
                    (phi-3's vocabulary, 32,064 tokens)
  gemma2-1b         gemma2, n_embd 2048, 12 layers, ff 8192, 8 / 4 heads of 256,
                    4096-token windows on every other layer, soft caps 50 / 30
Speed does not depend on the weights' values, only on their types and
shapes (and, for the MoE, on the router spreading tokens over experts).
Default DIR: ~/.cache/tern/bench. Never committed (1-1.5 GB each).
"""
import argparse
import os
import sys

from gguf import GGMLQuantizationType as QT

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_models as G  # noqa: E402

V = "ggml-vocab-gpt-2.gguf"
MODELS = {
    "qwen3moe-a3b-cut": (dict(arch="qwen3moe", vocab=V, heads=(32, 4), head_dim=128, qk_norm=True,
                              experts=(128, 8), ff_exp=768, layers=4), 2048, 6144),
    "qwen3-1b": (dict(arch="qwen3", vocab=V, heads=(16, 8), head_dim=128, qk_norm=True,
                      layers=16), 2048, 6144),
    # phi3 with its own vocabulary (the reference refuses phi3 with GPT-2's)
    "phi3-1b": (dict(arch="phi3", vocab="ggml-vocab-phi-3.gguf", heads=(32, 32), fused=True,
                     layers=16), 2048, 5632),
    "gemma2-1b": (dict(arch="gemma2", vocab=V, heads=(8, 4), head_dim=256, tied=True, layers=12,
                       softcap=(50.0, 30.0), kv={"gemma2.attention.sliding_window": 4096}),
                  2048, 8192),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.expanduser("~"), ".cache", "tern", "bench"))
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name, (spec, d, ff) in MODELS.items():
        if a.names and name not in a.names:
            continue
        path = os.path.join(a.out, name + ".gguf")
        if not os.path.exists(path):
            G.D, G.FF = d, ff   # gen_models' widths are module constants
            G.write_model(path + ".tmp", name, dict(spec, name=name), QT.Q4_K)
            os.replace(path + ".tmp", path)
        print(path, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
