#!/usr/bin/env python3
"""dequant_ref: random blocks of Q2_K, Q3_K, IQ4_NL and IQ4_XS and gguf-py's
dequantization of them, for test_dequant (written at test time, fixed seed).

    python3 tests/e2e/conformance/dequant_ref.py OUT_DIR

OUT_DIR/<TYPE>.bin: u32 type, u32 n (elements), u32 nbytes, bytes[nbytes],
f32 deq[n]. The scales are random f16 of moderate size (finite), every other
byte uniformly random, so every bit of every field is exercised."""
import os
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

TYPES = {QT.Q2_K: [80, 82], QT.Q3_K: [108], QT.IQ4_NL: [0], QT.IQ4_XS: [0]}
N = 64 * 256


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(15)
    for qt, f16_at in TYPES.items():
        bs, ts = gguf.GGML_QUANT_SIZES[qt]
        nb = N // bs
        raw = rng.integers(0, 256, size=(nb, ts), dtype=np.uint8)
        for off in f16_at:
            v = (rng.standard_normal(nb) * 0.05).astype(np.float16)
            raw[:, off:off + 2] = v.view(np.uint8).reshape(nb, 2)
        deq = gguf.quants.dequantize(raw.reshape(1, -1), qt).astype(np.float32).reshape(-1)
        with open(os.path.join(out, qt.name + ".bin"), "wb") as f:
            f.write(struct.pack("<III", int(qt), N, raw.size))
            f.write(raw.tobytes())
            f.write(deq.tobytes())
    return 0


if __name__ == "__main__":
    sys.exit(main())
