"""test_tools_native: native tool formats through the whole server. A small
random-weight Llama file (gen_models' writer, Llama 3's 128k vocabulary from
../shared/tokenizer-suite) whose tokenizer.chat_template carries the markers
of Llama 3.1's template; the official OpenAI client sends a conversation with
tools, a call and its result; the prompt tern evaluated (vLLM's
prompt_logprobs: the prompt's token ids) must be, token for token, jinja2's
rendering of the published Llama 3.2 template for the same conversation
(tests/engine/model/tok/templates/golden_tools.json, case 2; Llama 3.1's
fixed date in place of 3.2's strftime_now), tokenized by `tern tokenize`.
The same for Mistral Nemo's format on a file with Llama 2's 32k vocabulary
(its [INST]-style markers are plain text there, which changes nothing: both
sides tokenize the same text).
A reply in Llama's call syntax cannot be forced from random weights, so the
parse-back is the unit tests' (tests/engine/wire)."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e", "conformance"))

# The templates' markers: what tern detects them by (the full texts are not
# needed to render them, and stay in the model repositories)
MARKERS = ("{{- bos_token }}<|start_header_id|>system<|end_header_id|> Environment: ipython "
           "Cutting Knowledge Date: December 2023 Today Date: 26 Jul 2024 <|eot_id|>")
MISTRAL_MARKERS = "{{- bos_token }}[INST] [AVAILABLE_TOOLS][ [TOOL_CALLS][ [TOOL_RESULTS]"


def make_model(name, vocab, markers):
    import gen_models
    from gguf import GGMLQuantizationType as QT
    d = os.environ.get("TERN_EMBED_MODEL_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "tern", "embed")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, name + ".gguf")
    if not os.path.exists(path):
        spec = dict(name=name, arch="llama", vocab=vocab, heads=(4, 2), tied=True,
                    kv={"tokenizer.chat_template": markers})
        gen_models.write_model(path + ".tmp", name, spec, QT.Q8_0)
        os.replace(path + ".tmp", path)
    return path


os.environ["TERN_TEST_MODEL"] = make_model("llama31-tools", "ggml-vocab-llama-bpe.gguf", MARKERS)
MISTRAL = make_model("mistral-tools", "ggml-vocab-llama-spm.gguf", MISTRAL_MARKERS)
import openai  # noqa: E402

from serve_lib import TERN, TIME_SCALE, Server, done, ok  # noqa: E402

golden = json.load(open(os.path.join(ROOT, "tests", "engine", "model", "tok", "templates",
                                     "golden_tools.json")))
case = next(c for c in golden["cases"]
            if c["template"] == "llama3.2" and c["case"] == 2 and c["agp"])
want_text = case["out"].replace("Today Date: 01 Jan 2026", "Today Date: 26 Jul 2024")


def tokenize(model, text):
    return [int(x) for x in subprocess.run(
        [TERN, "tokenize", "-m", model, "--special", "--ids", text],
        capture_output=True, text=True, check=True).stdout.split()]


want = tokenize(os.environ["TERN_TEST_MODEL"], want_text)

srv = Server()
ok(srv.ready(), f"server up on port {srv.port}")
c = openai.OpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0,
                  timeout=120 * TIME_SCALE)
mid = c.models.list().data[0].id


def prompt_ids(messages, tools):
    kw = {"tools": tools} if tools else {}
    r = c.chat.completions.with_raw_response.create(
        model=mid, messages=messages, max_tokens=1, temperature=0,
        extra_body={"prompt_logprobs": 0}, **kw)
    j = json.loads(r.text)
    pl = j["choices"][0]["prompt_logprobs"]
    return j["usage"]["prompt_tokens"], [None if e is None else int(next(iter(e))) for e in pl]


n, got = prompt_ids(case["messages"], case["tools"])
ok(n == len(want) and got[1:] == want[1:] and want[0] == 128000,
   f"tools, a call and its result: the prompt is Llama 3.1's native rendering, token for "
   f"token ({n} tokens, want {len(want)})")
ok("<|start_header_id|>ipython<|end_header_id|>" in want_text and "Environment: ipython" in
   want_text and '{"name": "get_weather", "parameters": {' in want_text,
   "that rendering has the ipython turn, Environment: ipython and the {name, parameters} call")

# without tools: Llama 3.1's system header (dates) and no Environment line
plain = [{"role": "user", "content": "Hello!"}]
n2, got2 = prompt_ids(plain, None)
expect2 = ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge "
           "Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user"
           "<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
want2 = tokenize(os.environ["TERN_TEST_MODEL"], expect2)
ok(got2[1:] == want2[1:] and n2 == len(want2),
   f"no tools: Llama 3.1's dated system header without Environment ({n2} tokens)")

# a call turn with two calls: the template raises, so a clear 400
two = case["messages"][:2] + [{"role": "assistant", "content": None, "tool_calls": [
    {"id": "a1B2c3D4e", "type": "function", "function": {"name": "get_weather",
                                                         "arguments": "{\"city\": \"A\"}"}},
    {"id": "b1B2c3D4e", "type": "function", "function": {"name": "get_weather",
                                                         "arguments": "{\"city\": \"B\"}"}}]}]
try:
    c.chat.completions.create(model=mid, messages=two, tools=case["tools"], max_tokens=1)
    ok(False, "two calls in one turn: refused")
except openai.BadRequestError as e:
    ok("single tool-calls" in str(e), f"two calls in one turn: 400 as the template raises ({e})")
srv.stop()

# Mistral Nemo: [AVAILABLE_TOOLS] before the last user message, [TOOL_CALLS] with the
# call's 9-character id, [TOOL_RESULTS]
mcase = next(x for x in golden["cases"]
             if x["template"] == "mistral-nemo" and x["case"] == 3 and not x["agp"])
srv = Server(["-m", MISTRAL])
ok(srv.ready(), f"Mistral server up on port {srv.port}")
c = openai.OpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0,
                  timeout=120 * TIME_SCALE)
mid = c.models.list().data[0].id
wantm = tokenize(MISTRAL, mcase["out"])
n, got = prompt_ids(mcase["messages"], mcase["tools"])
ok(n == len(wantm) and got[1:] == wantm[1:] and "[TOOL_CALLS][" in mcase["out"] and
   "[TOOL_RESULTS]" in mcase["out"],
   f"Mistral Nemo: tools, a call, its result and a new question render as its template does, "
   f"token for token ({n} tokens, want {len(wantm)})")
srv.stop()
done()
