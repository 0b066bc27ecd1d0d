#!/usr/bin/env python3
"""gen_models: writes the conformance suite's small random-weight models.

    python3 tests/e2e/conformance/gen_models.py [--out DIR] [--list] [NAME...]

Each model has a few layers, width 256, a real tokenizer copied from a
vocabulary of ../shared/tokenizer-suite, and random weights scaled so that its
outputs are not flat (logits with a spread of a few units, attention that is
neither uniform nor one-hot). Quantized weights are random valid blocks of the
type: random quant bytes, with the block scales set so every matrix has the
standard deviation its width calls for. Everything comes from fixed seeds, so
every run (here and in CI) writes the same bytes; --out defaults to
~/.cache/tern/conformance, and a model already there with the right SHA-256
(models.sha256 beside this script) is kept. Prints one path per model.

The reference's outputs on these models are recorded by make_fixtures.py
(run by hand) in tests/e2e/conformance/fixtures/; test_conformance compares.
"""
import argparse
import hashlib
import os
import sys
import zlib

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SHARED = os.environ.get("TERN_SHARED", os.path.join(ROOT, "..", "shared"))
SUITE = os.path.join(SHARED, "tokenizer-suite")

D = 256          # width: a multiple of 256 so every K-quant fits every matrix
FF = 512
LAYERS = 2
CTX = 4096

# The f16 block scales of each type: (offset, role); 'd' scales the quants,
# 'm' is a min subtracted (set from d so the weights centre near 0).
SCALES = {
    QT.Q4_0: [(0, "d")], QT.Q4_1: [(0, "d"), (2, "m1")], QT.Q5_0: [(0, "d")],
    QT.Q5_1: [(0, "d"), (2, "m1")], QT.Q8_0: [(0, "d")],
    QT.Q2_K: [(80, "d"), (82, "m2")], QT.Q3_K: [(108, "d")],
    QT.Q4_K: [(0, "d"), (2, "m4")], QT.Q5_K: [(0, "d"), (2, "m5")], QT.Q6_K: [(208, "d")],
    QT.IQ4_NL: [(0, "d")], QT.IQ4_XS: [(0, "d")],
}
# min relative to d: the mean of the quant times the mean sub-block scale,
# over the mean sub-block min, for each layout (q4_1: q in 0..15, min
# added: -8 d; K-quants: 6-bit scale and min, min subtracted).
MIN_RATIO = {"m1": -8.0, "m2": 1.5, "m4": 7.5, "m5": 15.5}


def rand_blocks(rng, qt, rows, cols, std):
    """rows x cols of type qt as random valid blocks with weight std `std`."""
    bs, ts = gguf.GGML_QUANT_SIZES[qt]
    nb = rows * (cols // bs)
    raw = rng.integers(0, 256, size=(nb, ts), dtype=np.uint8)
    if qt == QT.Q6_K:   # int8 sub-block scales: keep them small and nonzero
        raw[:, 192:208] = rng.integers(1, 32, size=(nb, 16), dtype=np.uint8)
    elif qt == QT.Q3_K:   # hmask/qs/scales random; nothing to fix
        pass
    # unit d (per block a factor in [0.5, 1.5) so blocks differ), mins from d
    dvals = (0.5 + rng.random(nb)).astype(np.float32)

    def put(off, vals):
        raw[:, off:off + 2] = vals.astype(np.float16).view(np.uint8).reshape(nb, 2)

    def fill(scale):
        for off, role in SCALES[qt]:
            v = dvals * scale
            put(off, v if role == "d" else v * MIN_RATIO[role])

    fill(1.0)
    sample = min(rows, 64)   # the std of 64 rows is close enough, and fast
    deq = gguf.quants.dequantize(raw.reshape(rows, -1)[:sample], qt)
    cur = float(np.std(deq))
    fill(std / cur)
    return raw.reshape(rows, cols // bs * ts)


_RETYPE = {}


def tensor(w, rng, name, qt, rows, cols, std, experts=0):
    """Adds a (rows x cols) matrix, or experts of them (3-D), of type qt."""
    n = experts or 1
    if name in _RETYPE:   # malformed variants: random bytes of another type
        qt = _RETYPE[name]
        bs, ts = gguf.GGML_QUANT_SIZES[qt]
        raw = rng.integers(0, 256, size=(rows, cols // bs * ts), dtype=np.uint8)
        w.add_tensor(name, raw, raw_dtype=qt)
        return
    if qt in (QT.F16, QT.F32):
        a = (rng.standard_normal((n * rows, cols)) * std).astype(
            np.float16 if qt == QT.F16 else np.float32)
        if experts:
            a = a.reshape(experts, rows, cols)
        w.add_tensor(name, a)
        return
    raw = rand_blocks(rng, qt, n * rows, cols, std)
    if experts:
        raw = raw.reshape(experts, rows, -1)
    w.add_tensor(name, raw, raw_dtype=qt)


def norm(w, rng, name, n, base=1.0):
    w.add_tensor(name, (base + 0.1 * rng.standard_normal(n)).astype(np.float32))


def vec(w, rng, name, n, std):
    w.add_tensor(name, (std * rng.standard_normal(n)).astype(np.float32))


_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
           10: "<Q", 11: "<q", 12: "<d"}


def read_kv(path):
    """The key/value section of a GGUF file: [(key, vtype, value, subtype)].
    A plain struct parser: gguf-py's reader takes seconds on a 50k vocabulary."""
    import struct
    buf = open(path, "rb").read()
    assert buf[:4] == b"GGUF"
    _, _, n_kv = struct.unpack_from("<IQQ", buf, 4)
    off = 24

    def string(o):
        n = struct.unpack_from("<Q", buf, o)[0]
        return buf[o + 8:o + 8 + n].decode("utf-8"), o + 8 + n

    def value(t, o):
        if t == 8:
            return string(o)
        f = _SCALAR[t]
        return struct.unpack_from(f, buf, o)[0], o + struct.calcsize(f)

    out = []
    for _ in range(n_kv):
        key, off = string(off)
        t = struct.unpack_from("<I", buf, off)[0]
        off += 4
        if t == 9:
            st, n = struct.unpack_from("<IQ", buf, off)
            off += 12
            if st == 8:
                vals = []
                for _ in range(n):
                    v, off = string(off)
                    vals.append(v)
            else:
                f = _SCALAR[st]
                sz = struct.calcsize(f)
                vals = list(struct.unpack_from("<%d%s" % (n, f[1]), buf, off))
                off += sz * n
            out.append((key, 9, vals, st))
        else:
            v, off = value(t, off)
            out.append((key, t, v, None))
    return out


_VOCABS = {}


def copy_tokenizer(w, vocab):
    if vocab not in _VOCABS:
        _VOCABS[vocab] = [kv for kv in read_kv(os.path.join(SUITE, vocab))
                          if kv[0].startswith("tokenizer.")]
    n = 0
    for key, t, val, st in _VOCABS[vocab]:
        if key == "tokenizer.ggml.tokens":
            n = len(val)
        w.add_key_value(key, val, gguf.GGUFValueType(t),
                        sub_type=gguf.GGUFValueType(st) if st is not None else None)
    return n


# name: architecture, vocabulary and variant; types: the weight types made.
SPECS = [
    dict(name="llama", arch="llama", vocab="ggml-vocab-llama-spm.gguf", heads=(4, 2),
         types=[QT.F16, QT.Q8_0, QT.Q4_K, QT.Q2_K, QT.Q3_K, QT.IQ4_NL, QT.IQ4_XS]),
    dict(name="llama-tied-l3rope", arch="llama", vocab="ggml-vocab-gpt-2.gguf",
         heads=(4, 4), tied=True, rope_freqs=True),
    dict(name="llama-headdim", arch="llama", vocab="ggml-vocab-llama-spm.gguf", heads=(4, 1),
         head_dim=128),
    dict(name="llama-bias", arch="llama", vocab="ggml-vocab-llama-spm.gguf", heads=(4, 2),
         bias=True),
    dict(name="mixtral", arch="llama", vocab="ggml-vocab-llama-spm.gguf", heads=(4, 2),
         experts=(8, 2)),
    dict(name="qwen2", arch="qwen2", vocab="ggml-vocab-gpt-2.gguf", heads=(4, 2), bias=True,
         tied=True),
    dict(name="qwen3", arch="qwen3", vocab="ggml-vocab-gpt-2.gguf", heads=(4, 2), head_dim=128,
         qk_norm=True),
    dict(name="qwen3moe", arch="qwen3moe", vocab="ggml-vocab-gpt-2.gguf", heads=(4, 2),
         head_dim=128, qk_norm=True, experts=(16, 4), ff_exp=256,
         types=[QT.F16, QT.Q8_0, QT.Q4_K, QT.Q2_K, QT.IQ4_XS]),
    # phi3: fused attn_qkv and gate/up, LongRoPE; the fixtures run a
    # 256-token context, so orig_ctx 1024 picks the short factors, 128 the long
    dict(name="phi3", arch="phi3", vocab="ggml-vocab-phi-3.gguf", heads=(4, 4), fused=True,
         longrope=1024),
    dict(name="phi3-long", arch="phi3", vocab="ggml-vocab-phi-3.gguf", heads=(4, 2), fused=True,
         longrope=128, types=[QT.Q8_0]),
    # gemma2: soft caps small enough to bite on these logits (the real ones
    # are 50 and 30), every other layer a 16-token sliding window
    dict(name="gemma2", arch="gemma2", vocab="ggml-vocab-llama-spm.gguf", heads=(4, 2),
         head_dim=128, tied=True, layers=3, softcap=(5.0, 20.0)),
    dict(name="gemma3", arch="gemma3", vocab="ggml-vocab-llama-spm.gguf", heads=(4, 1),
         head_dim=128, qk_norm=True, tied=True, layers=3),
    # YaRN: factor 4 over an original context of 4096 (the correction dims
    # then fall inside the rotary dims); qwen3's with an attention factor too
    dict(name="llama-yarn", arch="llama", vocab="ggml-vocab-llama-spm.gguf", heads=(4, 2),
         yarn=(4.0, 4096, None), types=[QT.F16, QT.Q8_0]),
    dict(name="qwen2-yarn", arch="qwen2", vocab="ggml-vocab-gpt-2.gguf", heads=(4, 2), bias=True,
         tied=True, yarn=(4.0, 4096, None), types=[QT.Q8_0]),
    dict(name="qwen3-yarn", arch="qwen3", vocab="ggml-vocab-gpt-2.gguf", heads=(4, 2),
         head_dim=128, qk_norm=True, yarn=(8.0, 2048, 0.9), types=[QT.F16, QT.Q4_K]),
]
TYPES = [QT.F16, QT.Q8_0, QT.Q4_K]

# Malformed files (test_malformed expects a clear load error for each):
# a base spec, then keys overwritten (kv), tensors dropped or retyped.
MIXTRAL = SPECS[4]
BAD = [
    ("bad-missing-expert", MIXTRAL, dict(drop=["blk.1.ffn_up_exps.weight"])),
    ("bad-expert-count", MIXTRAL, dict(kv={"llama.expert_count": 7})),
    ("bad-expert-used", MIXTRAL, dict(kv={"llama.expert_used_count": 9})),
    ("bad-moe-no-count", MIXTRAL, dict(kv_drop=["llama.expert_count",
                                                "llama.expert_used_count"])),
    ("bad-fused-width", SPECS[0], dict(fused_qkv=-32)),
    ("bad-arch", SPECS[0], dict(kv={"general.architecture": "falcon"})),
    ("bad-iq2", SPECS[0], dict(retype={"blk.0.ffn_down.weight": QT.IQ2_XXS})),
    ("bad-qwen3-bias", SPECS[6], dict(extra_bias=True)),
]
TYPE_NAMES = {QT.F16: "f16", QT.Q8_0: "q8_0", QT.Q4_K: "q4_k", QT.Q6_K: "q6_k",
              QT.Q4_0: "q4_0", QT.Q2_K: "q2_k", QT.Q3_K: "q3_k", QT.IQ4_NL: "iq4_nl",
              QT.IQ4_XS: "iq4_xs"}


def variants():
    for s in SPECS:
        for t in s.get("types", TYPES):
            yield f"{s['name']}-{TYPE_NAMES[t]}", s, t


def bad_variants():
    for name, base, mut in BAD:
        yield name, dict(base, **mut), QT.Q8_0


def write_model(path, name, spec, qt):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    arch = spec["arch"]
    nh, nkv = spec["heads"]
    hd = spec.get("head_dim", D // nh)
    nl = spec.get("layers", LAYERS)
    ne, nu = spec.get("experts", (0, 0))
    fe = spec.get("ff_exp", FF)
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"tern conformance {name}")
    n_vocab = copy_tokenizer(w, spec["vocab"])
    w.add_context_length(CTX)
    w.add_embedding_length(D)
    w.add_block_count(nl)
    w.add_feed_forward_length(FF)
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_layer_norm_rms_eps(1e-6 if arch != "llama" else 1e-5)
    w.add_rope_freq_base(10000.0 if arch == "llama" else 1000000.0)
    if hd != D // nh or "head_dim" in spec:
        w.add_key_length(hd)
        w.add_value_length(hd)
    w.add_rope_dimension_count(hd)
    if ne:
        w.add_expert_count(ne)
        w.add_expert_used_count(nu)
        if arch == "qwen3moe":
            w.add_expert_feed_forward_length(fe)
    if arch in ("gemma2", "gemma3"):
        w.add_sliding_window(16)
        w.add_uint32(f"{arch}.attention.sliding_window_pattern", 3 if arch == "gemma3" else 2)
    if spec.get("softcap"):
        w.add_float32(f"{arch}.attn_logit_softcapping", spec["softcap"][0])
        w.add_float32(f"{arch}.final_logit_softcapping", spec["softcap"][1])
    w.add_file_type(int(qt) if qt != QT.F16 else 1)

    qd, kd = nh * hd, nkv * hd
    _RETYPE.clear()
    _RETYPE.update(spec.get("retype", {}))
    # tied: the embeddings are the output matrix too, so they get its std
    # (logits with a spread of about 4); gemma3 multiplies them by sqrt(D)
    emb_std = 4.0 / np.sqrt(D) if spec.get("tied") else 1.0
    out_gain = 1.0
    if arch in ("gemma2", "gemma3"):   # scaled embeddings of rms 1, like each layer's output;
        emb_std, out_gain = 1.0 / np.sqrt(D), 4.0   # the output norm restores the spread
    tensor(w, rng, "token_embd.weight", qt, n_vocab, D, emb_std)
    norm(w, rng, "output_norm.weight", D, out_gain)
    if not spec.get("tied"):
        tensor(w, rng, "output.weight", qt, n_vocab, D, 4.0 / np.sqrt(D))
    if spec.get("longrope"):
        w.add_uint32(f"{arch}.rope.scaling.original_context_length", spec["longrope"])
        w.add_float32(f"{arch}.rope.scaling.attn_factor", 1.1902381)
        w.add_tensor("rope_factors_long.weight",
                     np.linspace(1.0, 40.0, hd // 2, dtype=np.float32))
        w.add_tensor("rope_factors_short.weight",
                     np.linspace(1.0, 2.5, hd // 2, dtype=np.float32))
    if spec.get("yarn"):
        factor, orig, attn = spec["yarn"]
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(factor)
        w.add_rope_scaling_orig_ctx_len(orig)
        if attn is not None:
            w.add_float32(f"{arch}.rope.scaling.attn_factor", attn)
    if spec.get("rope_freqs"):
        # llama3 scaling as the converter writes it: divisors 1 for high
        # frequencies, 8 for low, a smooth ramp between
        f = np.ones(hd // 2, dtype=np.float32)
        f[hd // 4:] = np.linspace(1.0, 8.0, hd // 2 - hd // 4, dtype=np.float32)
        w.add_tensor("rope_freqs.weight", f)
    for l in range(nl):
        b = f"blk.{l}."
        norm(w, rng, b + "attn_norm.weight", D)
        if "fused_qkv" in spec or spec.get("fused"):   # attn_qkv (rows off by fused_qkv)
            tensor(w, rng, b + "attn_qkv.weight", qt, qd + 2 * kd + spec.get("fused_qkv", 0), D,
                   1.5 / np.sqrt(D))
        else:
            tensor(w, rng, b + "attn_q.weight", qt, qd, D, 1.5 / np.sqrt(D))
            tensor(w, rng, b + "attn_k.weight", qt, kd, D, 1.5 / np.sqrt(D))
            tensor(w, rng, b + "attn_v.weight", qt, kd, D, 1.0 / np.sqrt(D))
        tensor(w, rng, b + "attn_output.weight", qt, D, qd, 1.0 / np.sqrt(qd))
        if spec.get("bias"):
            vec(w, rng, b + "attn_q.bias", qd, 0.5)
            vec(w, rng, b + "attn_k.bias", kd, 0.5)
            vec(w, rng, b + "attn_v.bias", kd, 0.5)
            if arch == "llama":
                vec(w, rng, b + "attn_output.bias", D, 0.3)
        if spec.get("extra_bias"):
            vec(w, rng, b + "attn_output.bias", D, 0.3)
        if spec.get("qk_norm"):
            norm(w, rng, b + "attn_q_norm.weight", hd)
            norm(w, rng, b + "attn_k_norm.weight", hd)
        if arch in ("gemma2", "gemma3"):
            norm(w, rng, b + "post_attention_norm.weight", D)
            norm(w, rng, b + "post_ffw_norm.weight", D)
        norm(w, rng, b + "ffn_norm.weight", D)
        if ne:
            tensor(w, rng, b + "ffn_gate_inp.weight", QT.F32, ne, D, 2.0 / np.sqrt(D))
            tensor(w, rng, b + "ffn_gate_exps.weight", qt, fe, D, 1.0 / np.sqrt(D), ne)
            tensor(w, rng, b + "ffn_up_exps.weight", qt, fe, D, 1.0 / np.sqrt(D), ne)
            tensor(w, rng, b + "ffn_down_exps.weight", qt, D, fe, 1.0 / np.sqrt(fe), ne)
        elif spec.get("fused"):   # phi3: gate rows then up rows in ffn_up
            tensor(w, rng, b + "ffn_up.weight", qt, 2 * FF, D, 1.0 / np.sqrt(D))
            tensor(w, rng, b + "ffn_down.weight", qt, D, FF, 1.0 / np.sqrt(FF))
        else:
            tensor(w, rng, b + "ffn_gate.weight", qt, FF, D, 1.0 / np.sqrt(D))
            tensor(w, rng, b + "ffn_up.weight", qt, FF, D, 1.0 / np.sqrt(D))
            tensor(w, rng, b + "ffn_down.weight", qt, D, FF, 1.0 / np.sqrt(FF))
            if spec.get("bias") and arch == "llama":
                vec(w, rng, b + "ffn_gate.bias", FF, 0.3)
                vec(w, rng, b + "ffn_up.bias", FF, 0.3)
                vec(w, rng, b + "ffn_down.bias", D, 0.3)
    for key, val in spec.get("kv", {}).items():
        t = gguf.GGUFValueType.STRING if isinstance(val, str) else gguf.GGUFValueType.UINT32
        w.kv_data[0][key] = gguf.GGUFValue(value=val, type=t, sub_type=None)
    for key in spec.get("kv_drop", []):
        del w.kv_data[0][key]
    for name in spec.get("drop", []):
        del w.tensors[0][name]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def known_hashes():
    p = os.path.join(HERE, "models.sha256")
    out = {}
    if os.path.exists(p):
        for line in open(p):
            if line.strip():
                h, n = line.split()
                out[n] = h
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.expanduser("~"), ".cache", "tern",
                                                  "conformance"))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--malformed", action="store_true", help="the malformed variants instead")
    ap.add_argument("--record-hashes", action="store_true",
                    help="rewrite models.sha256 (after a deliberate change)")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    all_v = list(bad_variants() if a.malformed else variants())
    if a.list:
        for n, _, _ in all_v:
            print(n)
        return 0
    os.makedirs(a.out, exist_ok=True)
    known = known_hashes()
    todo = [v for v in all_v if not a.names or v[0] in a.names]
    if a.names and len(todo) != len(a.names):
        sys.exit(f"gen_models: unknown model in {a.names}")
    rc = 0
    for n, spec, qt in todo:
        path = os.path.join(a.out, n + ".gguf")
        if not (os.path.exists(path) and n in known and sha256(path) == known[n]):
            write_model(path + ".tmp", n, spec, qt)
            os.replace(path + ".tmp", path)
            h = sha256(path)
            if a.record_hashes:
                known[n] = h
            elif n in known and h != known[n]:
                print(f"gen_models: {n}: SHA-256 {h} differs from the recorded {known[n]} "
                      f"(numpy or gguf changed the bytes; re-record the fixtures)",
                      file=sys.stderr)
                rc = 1
        print(path)
    if a.record_hashes:
        with open(os.path.join(HERE, "models.sha256"), "w") as f:
            for n in sorted(known):
                f.write(f"{known[n]} {n}\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())
