#!/usr/bin/env python3
"""Expected `tern run` replies from the reference engine (llama-cpp-python),
greedy, 12 new tokens, for a raw prompt and a chat prompt. Run by hand:
    python3 tests/e2e/app/make_run_fixture.py $(packaging/fetch-model --print-path)
writes tests/e2e/app/fixtures/run_expected.json."""
import json
import os
import sys

import llama_cpp

path = sys.argv[1]
llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_threads=2, verbose=False, seed=0)
raw_prompt = "The GNU General Public License is a free, copyleft license for"
chat_prompt = "Name three colors of the rainbow."
N = 12  # greedy ties: the 16th token of the chat reply is a near-tie (EOS vs " These")

raw = llm.create_completion(raw_prompt, max_tokens=N, temperature=0.0, top_k=1)
raw_text = raw["choices"][0]["text"]
chat = llm.create_chat_completion(messages=[{"role": "user", "content": chat_prompt}],
                                  max_tokens=N, temperature=0.0, top_k=1)
chat_text = chat["choices"][0]["message"]["content"]
out = {
    "model": os.path.basename(path),
    "max_tokens": N,
    "reference": "llama-cpp-python " + llama_cpp.__version__,
    "raw": {"prompt": raw_prompt, "reply": raw_text,
            "finish": raw["choices"][0]["finish_reason"]},
    "chat": {"prompt": chat_prompt, "reply": chat_text,
             "finish": chat["choices"][0]["finish_reason"]},
}
dst = os.path.join(os.path.dirname(__file__), "fixtures", "run_expected.json")
with open(dst, "w") as f:
    json.dump(out, f, indent=1, ensure_ascii=False)
    f.write("\n")
print(json.dumps(out, indent=1, ensure_ascii=False))
