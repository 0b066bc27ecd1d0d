#!/usr/bin/env python3
"""make_small_model: cut a GGUF model to its first N layers (same tokenizer,
embeddings, output and metadata; block_count set to N) with the `gguf`
package, so a real-weights model small enough to travel with the source tree
reaches the GPU machine (which has no network).

    tests/e2e/gpu/make_small_model.py SRC.gguf OUT.gguf [--layers 6] [--embd-type Q4_0] [--max-mib 40]

--embd-type requantizes token_embd (also the tied output) from its stored
weights, trading a little accuracy for room for more layers.
"""
import argparse
import os
import sys

from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
from gguf import quants


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--keep", default=None,
                    help="layers to keep instead of the first N, e.g. 0-4,25-29 (renumbered in order)")
    ap.add_argument("--embd-type", default=None, help="e.g. Q4_0")
    ap.add_argument("--max-mib", type=float, default=40.0)
    a = ap.parse_args()

    r = GGUFReader(a.src)
    arch = r.fields["general.architecture"].contents()
    n_layer_key = f"{arch}.block_count"
    n_src = r.fields[n_layer_key].contents()
    keep = list(range(a.layers))
    if a.keep:
        keep = []
        for part in a.keep.split(","):
            lo, _, hi = part.partition("-")
            keep += list(range(int(lo), int(hi or lo) + 1))
        a.layers = len(keep)
    if not 0 < a.layers <= n_src or any(not 0 <= k < n_src for k in keep):
        print(f"make_small_model: layers {keep} not within 0..{n_src - 1}", file=sys.stderr)
        return 2
    new_index = {old: new for new, old in enumerate(keep)}

    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    w = GGUFWriter(a.out, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = f.types[0]
        val = a.layers if name == n_layer_key else f.contents()
        if name == "general.name":
            val = f"{val} (layers {a.keep or f'0-{a.layers - 1}'})"
        sub = f.types[-1] if vtype == GGUFValueType.ARRAY and len(f.types) > 1 else None
        w.add_key_value(name, val, vtype, sub_type=sub)
    kept = 0
    for t in r.tensors:
        name = t.name
        if name.startswith("blk."):
            old = int(name.split(".")[1])
            if old not in new_index:
                continue
            name = f"blk.{new_index[old]}." + name.split(".", 2)[2]
        if name == "token_embd.weight" and a.embd_type:
            qt = GGMLQuantizationType[a.embd_type.upper()]
            f32 = quants.dequantize(t.data, t.tensor_type)
            w.add_tensor(name, quants.quantize(f32, qt), raw_dtype=qt)
        else:
            w.add_tensor(name, t.data, raw_dtype=t.tensor_type)
        kept += 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    mib = os.path.getsize(a.out) / 1048576
    print(f"make_small_model: {a.out}: {arch}, layers {keep} of {n_src}, {kept} tensors, {mib:.1f} MiB")
    if mib > a.max_mib:
        print(f"make_small_model: {mib:.1f} MiB exceeds --max-mib {a.max_mib}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
