#!/usr/bin/env python3
"""make_fixtures: records the reference engine's (llama.cpp, via
llama-cpp-python 0.3.36) behaviour on the conformance models, for
test_conformance. Run by hand, like tests/e2e/golden/make_golden.py:

    LLAMA_CPP_LIB_PATH=DIR python3 tests/e2e/conformance/make_fixtures.py [NAME...]

DIR holds libllama.so (a llama.cpp build of the same version; the Python
package's own build works too). For each model of gen_models.py it stores,
in tests/e2e/conformance/fixtures/<name>.conf (little endian):
  magic "TCNF", u32 version (2), u32 n_vocab, u32 n_tok, u32 topk, u32 n_gen,
  u32 ppl_from (perplexity over the rows predicting tokens ppl_from..n_tok-1)
  i32 tok[n_tok]                the teacher-forced text (BOS first): 16 tokens of
                                real text, then tokens the reference sampled
  i32 top1[n_tok]               argmax of the row at each position
  f32 lse[n_tok]                logsumexp of the row
  (i32 id, f32 logit)[n_tok][topk]  the top-k logits of each row
  i32 gen[n_gen]                greedy continuation after the text
  f32 self_top1, self_kl_mean, self_kl_max; u32 self_greedy
        the reference against itself with flash attention on: top-1
        agreement, KL(non-FA || FA) per position, greedy tokens agreeing
  f64 ppl, self_ppl             perplexity of the sampled part
Row i predicts token i+1 given tokens[0..i].
"""
import os
import struct
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_models  # noqa: E402

from llama_cpp import Llama  # noqa: E402

N_TOK = 64
N_PROMPT = 16
TOPK = 16
N_GEN = 16
OUT = os.path.join(HERE, "fixtures")


def text():
    with open(os.path.join(gen_models.SHARED, "texts", "gpl-3.0.txt"), encoding="utf-8") as f:
        return f.read()[1800:2600]


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def run(path, toks, flash):
    llm = Llama(model_path=path, n_ctx=256, n_batch=256, n_threads=1, logits_all=True,
                verbose=False, flash_attn=flash)
    llm.reset()
    llm.eval(toks)
    scores = np.array(llm.scores[:len(toks)], dtype=np.float32)
    gen = []
    last = scores[-1]
    for _ in range(N_GEN):
        t = int(np.argmax(last))
        gen.append(t)
        llm.eval([t])
        last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
    return llm, scores, gen


def ppl(lsm, toks):
    n = len(toks)
    return float(np.exp(-np.mean([lsm[i, toks[i + 1]] for i in range(N_PROMPT - 1, n - 1)])))


def sampled_text(path, name):
    """N_PROMPT tokens of real text, then tokens sampled from the reference
    (temperature 1, seeded): text the model itself finds likely, so its
    perplexity measures the model rather than the far tail of its logits
    (a random model gives real text a probability of about 1e-8 per token)."""
    llm = Llama(model_path=path, n_ctx=256, n_batch=256, n_threads=1, logits_all=True,
                verbose=False)
    toks = llm.tokenize(text().encode("utf-8"), add_bos=True, special=False)[:N_PROMPT]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    llm.reset()
    llm.eval(toks)
    while len(toks) < N_TOK:
        row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        p = np.exp(row - row.max())
        t = int(rng.choice(len(p), p=p / p.sum()))
        toks.append(t)
        llm.eval([t])
    n_vocab = llm.n_vocab()
    del llm
    return toks, n_vocab


def record(name, path):
    toks, n_vocab = sampled_text(path, name)
    llm, scores, gen = run(path, toks, False)
    del llm
    fa, other, gen_fa = run(path, toks, True)
    del fa
    a, b = log_softmax(scores), log_softmax(other)
    kl = (np.exp(a) * (a - b)).sum(axis=1)
    agree = float((a.argmax(axis=1) == b.argmax(axis=1)).mean())
    greedy = 0
    for x, y in zip(gen, gen_fa):
        if x != y:
            break
        greedy += 1
    n = len(toks)
    lse = [float(np.log(np.sum(np.exp(scores[i].astype(np.float64) - scores[i].max()))) +
                 scores[i].max()) for i in range(n)]
    os.makedirs(OUT, exist_ok=True)
    out = os.path.join(OUT, name + ".conf")
    with open(out, "wb") as f:
        f.write(b"TCNF" + struct.pack("<IIIIII", 2, n_vocab, n, TOPK, N_GEN, N_PROMPT))
        f.write(struct.pack(f"<{n}i", *toks))
        f.write(struct.pack(f"<{n}i", *[int(np.argmax(scores[i])) for i in range(n)]))
        f.write(struct.pack(f"<{n}f", *lse))
        for i in range(n):
            idx = np.argsort(-scores[i], kind="stable")[:TOPK]
            for j in idx:
                f.write(struct.pack("<if", int(j), float(scores[i][j])))
        f.write(struct.pack(f"<{N_GEN}i", *gen))
        f.write(struct.pack("<fffI", agree, float(kl.mean()), float(kl.max()), greedy))
        f.write(struct.pack("<dd", ppl(a, toks), ppl(b, toks)))
    spread = float(np.mean(np.std(scores, axis=1)))
    print(f"{name}: {n} tokens, logit std {spread:.2f}, top-1 p {np.exp(a.max(axis=1)).mean():.2f}, "
          f"ppl {ppl(a, toks):.2f}; FA: top-1 {agree:.3f} KL mean {kl.mean():.2e} max "
          f"{kl.max():.2e} greedy {greedy}/{N_GEN}; gen {gen[:8]}", flush=True)


def main():
    names = sys.argv[1:]
    out_dir = os.path.join(os.path.expanduser("~"), ".cache", "tern", "conformance")
    for name, spec, qt in gen_models.variants():
        if names and name not in names:
            continue
        path = os.path.join(out_dir, name + ".gguf")
        gen_models.write_model(path, name, spec, qt)
        record(name, path)


if __name__ == "__main__":
    main()
