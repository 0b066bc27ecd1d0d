#!/usr/bin/env python3
"""Records the reference perplexities that tests/e2e/store/test_eval.sh compares
'tern eval --perplexity' with, for the default model on
../shared/texts/gpl-3.0.txt at context 512 (llama-perplexity's method: chunks
of 512 tokens, BOS first if the model adds one, the predictions at positions
256..510 of each chunk scored). Run by hand; writes ppl_ref.json.

- "llama_cpp": the reference engine through its Python package, each chunk
  evaluated alone with every position's logits: exactly the scored positions,
  so an off-by-one in the scoring shows (shifting the window by one position
  moves chunk 1's figure by 0.7 % or more).
- "llama_perplexity": the reference's llama-perplexity binary on the first
  3 chunks (running figures), for the record: it batches 4 chunks at once and
  its chunk-level figures differ from the single-sequence ones by up to ~2 %
  (the 14-chunk whole-file figures agree within 0.1 %)."""
import json, os, re, subprocess

import numpy as np
from llama_cpp import Llama

here = os.path.dirname(os.path.abspath(__file__))
src = os.path.dirname(os.path.dirname(os.path.dirname(here)))
ref_bin = "/tmp/ref/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin/llama-perplexity"
model = subprocess.check_output([os.path.join(src, "packaging", "fetch-model"), "--print-path"],
                                text=True).strip()
text = os.path.join(src, "..", "shared", "texts", "gpl-3.0.txt")
ctx, n_py = 512, 2

llm = Llama(model_path=model, n_ctx=ctx, n_batch=ctx, logits_all=True, verbose=False, n_threads=2)
ids = llm.tokenize(open(text, "rb").read(), add_bos=llm._model.add_bos_token(), special=False)
bos = llm.token_bos() if llm._model.add_bos_token() else None
nll, count, running = 0.0, 0, []
for c in range(n_py):
    chunk = list(ids[c * ctx:(c + 1) * ctx])
    if bos is not None:
        chunk[0] = bos
    llm.reset()
    llm.eval(chunk)
    lg = np.array(llm.scores[:ctx], dtype=np.float64)
    m = lg.max(1)
    lse = np.log(np.exp(lg - m[:, None]).sum(1)) + m
    for j in range(ctx // 2, ctx - 1):
        nll += lse[j] - lg[j, chunk[j + 1]]
        count += 1
    running.append(float(np.exp(nll / count)))

out = subprocess.run([ref_bin, "-m", model, "-f", text, "-c", str(ctx), "--chunks", "3", "-t", "2"],
                     capture_output=True, text=True, check=True)
log = out.stdout + out.stderr
bin_running = [float(x) for x in re.findall(r"\[\d+\]([0-9.]+),", log)]

json.dump({"text": "gpl-3.0.txt", "model": os.path.basename(model), "ctx": ctx, "tokens": len(ids),
           "llama_cpp": {"running": running, "scored_per_chunk": ctx - ctx // 2 - 1},
           "llama_perplexity": {"running": bin_running},
           "reference": "llama.cpp vendored by llama-cpp-python 0.3.36 (Python package and "
                        "llama-perplexity binary)"},
          open(os.path.join(here, "ppl_ref.json"), "w"), indent=1)
print(len(ids), running, bin_running)
