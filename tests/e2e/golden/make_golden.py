#!/usr/bin/env python3
"""make_golden: records the reference engine's (llama.cpp via llama-cpp-python)
behaviour on fixed prompts, for tests/e2e/golden/test_golden.c. Run by hand:

    python3 tests/e2e/golden/make_golden.py            # both models
    python3 tests/e2e/golden/make_golden.py smollm2    # one

For each model and prompt it stores the token ids, at teacher-forced positions
the top-50 logits and the logsumexp of the full row, the top-1 id at every
position, and the reference's greedy 64-token continuation. It also runs the
reference's llama-perplexity on gpl-3.0.txt (context 512, first PPL_CHUNKS
chunks) and stores the figure.

Output: tests/e2e/golden/<model>.gold, little-endian binary:
  magic "TGLD", u32 version (2), u32 n_vocab, u32 n_prompts,
  f64 ppl, u32 ppl_ctx, u32 ppl_chunks, u32 n_ppl_tokens,
  f64 running_ppl[ppl_chunks] (PPL after 1, 2, ... chunks), i32 ppl_tokens[n]
  per prompt: char name[32], u32 n_tok, i32 tok[n_tok],
              i32 top1[n_tok]              (argmax of the row at each position)
              f32 lse[n_tok]               (logsumexp of the row)
              u32 n_full, per full position: u32 pos, (i32 id, f32 logit)[TOPK]
              u32 n_gen, i32 gen[n_gen]    (greedy continuation)
              f32 self_top1, self_kl_mean, self_kl_max, u32 self_greedy:
                 the reference against itself with flash attention on (a
                 different but equally valid rounding of the same model):
                 top-1 agreement, KL(non-FA || FA) over the positions, and
                 how many greedy tokens agree. This is the reference's own
                 noise floor, which the tests use to scale their limits.
Teacher forcing: the row at position i predicts token i+1 given tokens[0..i].
"""
import os
import re
import struct
import subprocess
import sys
import time

import gguf
import jinja2
import numpy as np
from llama_cpp import Llama

TOPK = 50
N_GEN = 64
PPL_CTX = 512
PPL_CHUNKS = 4
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SHARED = os.environ.get("TERN_SHARED", os.path.join(ROOT, "..", "shared"))
REF_BIN = "/tmp/ref/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin"

CODE = '''#include <stdio.h>

/* Returns the n-th Fibonacci number, iteratively. */
static unsigned long fib(unsigned n)
{
    unsigned long a = 0, b = 1;
    for (unsigned i = 0; i < n; i++) {
        unsigned long t = a + b;
        a = b;
        b = t;
    }
    return a;
}

int main(void)
{
    for (unsigned i = 0; i < 10; i++)
        printf("%u: %lu\\n", i, fib(i));
'''

CHAT_USER = "Explain in two sentences why the sky is blue."


def text(name, start, length):
    with open(os.path.join(SHARED, "texts", name), encoding="utf-8") as f:
        return f.read()[start:start + length]


def model_path(name):
    out = subprocess.run([os.path.join(ROOT, "packaging", "fetch-model"), "--model", name,
                          "--print-path"], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def chat_prompt(path, model):
    """Renders one user turn with the model's own template (jinja2), or
    Gemma's documented turn format when the file carries no template."""
    r = gguf.GGUFReader(path)
    f = r.fields.get("tokenizer.chat_template")
    if f is None:
        assert model == "gemma3-270m"
        return ("<start_of_turn>user\n" + CHAT_USER + "<end_of_turn>\n"
                "<start_of_turn>model\n")
    tmpl = jinja2.Environment().from_string(f.contents())
    return tmpl.render(messages=[{"role": "user", "content": CHAT_USER}],
                       add_generation_prompt=True)


def prompts(path, model):
    """(name, text, parse_special, max_tokens, full_every)."""
    return [
        ("prose", text("gpl-3.0.txt", 1800, 700), False, 96, 1),
        ("code", CODE, False, 96, 1),
        ("chinese", text("zh-inference-guide.txt", 200, 300), False, 96, 1),
        ("russian", text("ru-inference-guide.txt", 300, 600), False, 96, 1),
        ("chat", chat_prompt(path, model), True, 96, 1),
        # long context: top-50 at every 16th position and the last 16
        ("long", text("gpl-3.0.txt", 6000, 9000), False, 1500, 16),
    ]


def logsumexp(row):
    m = float(np.max(row))
    return m + float(np.log(np.sum(np.exp(row.astype(np.float64) - m))))


def run_prompt(llm, name, txt, special, max_tok, every):
    t0 = time.time()
    toks = llm.tokenize(txt.encode("utf-8"), add_bos=True, special=special)[:max_tok]
    llm.reset()
    llm.eval(toks)
    scores = np.array(llm.scores[:len(toks)], dtype=np.float32)
    n = len(toks)
    top1 = [int(np.argmax(scores[i])) for i in range(n)]
    lse = [logsumexp(scores[i]) for i in range(n)]
    full = [i for i in range(n) if i % every == 0 or i >= n - 16]
    fulls = []
    for i in full:
        idx = np.argsort(-scores[i], kind="stable")[:TOPK]
        fulls.append((i, [(int(j), float(scores[i][j])) for j in idx]))
    gen = []
    last = scores[n - 1]
    for _ in range(N_GEN):
        t = int(np.argmax(last))
        gen.append(t)
        llm.eval([t])
        last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
    print(f"  {name}: {n} tokens, {time.time() - t0:.1f} s, {len(fulls)} full rows, gen {gen[:8]}...", flush=True)
    return name, toks, top1, lse, fulls, gen, scores


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def self_check(llm, rec):
    """The reference with flash attention vs the recorded (non-FA) run."""
    name, toks, top1, lse, fulls, gen, scores = rec
    llm.reset()
    llm.eval(toks)
    other = np.array(llm.scores[:len(toks)], dtype=np.float32)
    a, b = log_softmax(scores), log_softmax(other)
    kl = (np.exp(a) * (a - b)).sum(axis=1)
    agree = float((a.argmax(axis=1) == b.argmax(axis=1)).mean())
    last = other[len(toks) - 1]
    match = 0
    for i in range(N_GEN):
        t = int(np.argmax(last))
        if t != gen[i]:
            break
        match += 1
        llm.eval([t])
        last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
    print(f"  self-check {name}: top-1 {agree:.3f}, KL mean {kl.mean():.5f} max {kl.max():.5f}, "
          f"greedy {match}/{N_GEN}", flush=True)
    return agree, float(kl.mean()), float(kl.max()), match


def reference_ppl(path, model, n_vocab):
    """Runs llama-perplexity; returns (ppl, tokens of the first chunks)."""
    out = subprocess.run([os.path.join(REF_BIN, "llama-perplexity"), "-m", path, "-f",
                          os.path.join(SHARED, "texts", "gpl-3.0.txt"), "-c", str(PPL_CTX),
                          "-b", str(PPL_CTX), "--chunks", str(PPL_CHUNKS), "-t", "1"],
                         capture_output=True, text=True)
    text_out = out.stdout + out.stderr
    m = re.search(r"Final estimate: PPL = ([0-9.]+)", text_out)
    if not m:
        sys.exit(f"llama-perplexity failed:\n{out.stderr[-2000:]}")
    running = [float(v) for _, v in re.findall(r"\[(\d+)\]([0-9.]+),", text_out)]
    assert len(running) == PPL_CHUNKS, running
    return float(m.group(1)), running


def main():
    names = sys.argv[1:] or ["smollm2", "gemma3-270m"]
    for model in names:
        path = model_path(model)
        print(f"{model}: {path}", flush=True)
        t0 = time.time()
        llm = Llama(model_path=path, n_ctx=2048, n_batch=512, n_threads=1, logits_all=True,
                    verbose=False)
        n_vocab = llm.n_vocab()
        recs = [run_prompt(llm, *p) for p in prompts(path, model)]
        with open(os.path.join(SHARED, "texts", "gpl-3.0.txt"), encoding="utf-8") as f:
            ppl_toks = llm.tokenize(f.read().encode("utf-8"), add_bos=True, special=False)
        ppl_toks = ppl_toks[:PPL_CTX * PPL_CHUNKS]
        del llm
        fa = Llama(model_path=path, n_ctx=2048, n_batch=512, n_threads=1, logits_all=True,
                   verbose=False, flash_attn=True)
        selfs = [self_check(fa, r) for r in recs]
        del fa
        ppl, running = reference_ppl(path, model, n_vocab)
        print(f"  perplexity (ctx {PPL_CTX}, {PPL_CHUNKS} chunks): {ppl} {running}", flush=True)
        out = os.path.join(HERE, ("smollm2" if model == "smollm2" else "gemma3") + ".gold")
        with open(out, "wb") as f:
            f.write(b"TGLD" + struct.pack("<III", 2, n_vocab, len(recs)))
            f.write(struct.pack("<dIII", ppl, PPL_CTX, PPL_CHUNKS, len(ppl_toks)))
            f.write(struct.pack(f"<{PPL_CHUNKS}d", *running))
            f.write(struct.pack(f"<{len(ppl_toks)}i", *ppl_toks))
            for (name, toks, top1, lse, fulls, gen, _), sc in zip(recs, selfs):
                n = len(toks)
                f.write(name.encode().ljust(32, b"\0"))
                f.write(struct.pack("<I", n))
                f.write(struct.pack(f"<{n}i", *toks))
                f.write(struct.pack(f"<{n}i", *top1))
                f.write(struct.pack(f"<{n}f", *lse))
                f.write(struct.pack("<I", len(fulls)))
                for pos, top in fulls:
                    f.write(struct.pack("<I", pos))
                    for j, v in top:
                        f.write(struct.pack("<if", j, v))
                f.write(struct.pack("<I", len(gen)))
                f.write(struct.pack(f"<{len(gen)}i", *gen))
                f.write(struct.pack("<fffI", *sc))
        print(f"  {time.time() - t0:.0f} s; wrote {out} ({os.path.getsize(out)} bytes)", flush=True)


if __name__ == "__main__":
    main()
