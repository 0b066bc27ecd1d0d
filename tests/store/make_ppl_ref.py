#!/usr/bin/env python3
"""Records the reference perplexity that tests/store/test_eval.sh compares
'tern eval --perplexity' with: llama-perplexity (llama.cpp, as vendored by
llama-cpp-python 0.3.36) on ../shared/texts/gpl-3.0.txt with the default
model, context 512, first 3 chunks. Run by hand; writes ppl_ref.json."""
import json, os, re, subprocess, sys

here = os.path.dirname(os.path.abspath(__file__))
src = os.path.dirname(os.path.dirname(here))
ref = "/tmp/ref/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin/llama-perplexity"
model = subprocess.check_output([os.path.join(src, "packaging", "fetch-model"), "--print-path"],
                                text=True).strip()
text = os.path.join(src, "..", "shared", "texts", "gpl-3.0.txt")
ctx, chunks = 512, 3
out = subprocess.run([ref, "-m", model, "-f", text, "-c", str(ctx), "--chunks", str(chunks), "-t", "2"],
                     capture_output=True, text=True, check=True)
log = out.stdout + out.stderr
final = float(re.search(r"Final estimate: PPL = ([0-9.]+)", log).group(1))
running = [float(x) for x in re.findall(r"\[\d+\]([0-9.]+),", log)]
json.dump({"text": "gpl-3.0.txt", "model": os.path.basename(model), "ctx": ctx, "chunks": chunks,
           "perplexity": final, "running": running,
           "reference": "llama-perplexity, llama.cpp vendored by llama-cpp-python 0.3.36"},
          open(os.path.join(here, "ppl_ref.json"), "w"), indent=1)
print(final, running)
