"""test_reasoning_open: a template that opens the thinking in the prompt
(DeepSeek-R1 and its distills: the generation prompt ends with
"<｜Assistant｜><think>\\n"), through the whole server. A small random-weight
Llama file (gen_models' writer, Llama 3's vocabulary) carries R1-Distill's
published template (tests/engine/model/tok/templates/deepseek-r1.jinja).
The prompt tern evaluates (prompt_logprobs' token ids) must be jinja2's
rendering of that template (golden.json) token for token; the reply, which
starts inside the thinking and (random weights) never closes it, must come
back whole as reasoning_content with no content, streamed and not, and be
the same text a raw completion of that prompt gives; with enable_thinking
false the prompt ends with the closing tag and the reply is content."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e", "conformance"))
TDIR = os.path.join(ROOT, "tests", "engine", "model", "tok", "templates")


def make_model():
    import gen_models
    from gguf import GGMLQuantizationType as QT
    d = os.environ.get("TERN_EMBED_MODEL_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "tern", "embed")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "r1-distill-llama.gguf")
    if not os.path.exists(path):
        spec = dict(name="r1-distill-llama", arch="llama", vocab="ggml-vocab-llama-bpe.gguf",
                    heads=(4, 2), tied=True,
                    kv={"tokenizer.chat_template": open(os.path.join(TDIR, "deepseek-r1.jinja")).read()})
        gen_models.write_model(path + ".tmp", "r1-distill-llama", spec, QT.Q8_0)
        os.replace(path + ".tmp", path)
    return path


os.environ["TERN_TEST_MODEL"] = MODEL = make_model()
import openai  # noqa: E402

from serve_lib import TERN, TIME_SCALE, Server, done, ok  # noqa: E402

golden = json.load(open(os.path.join(TDIR, "golden.json")))
conv_i = 1  # a system prompt and one question
case = next(c for c in golden["cases"]
            if c["template"] == "deepseek-r1" and c["conv"] == conv_i and c["agp"])
messages = golden["conversations"][conv_i]


def tokenize(text):
    return [int(x) for x in subprocess.run(
        [TERN, "tokenize", "-m", MODEL, "--special", "--ids", text],
        capture_output=True, text=True, check=True).stdout.split()]


srv = Server()
ok(srv.ready(), f"server up on port {srv.port}")
c = openai.OpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0,
                  timeout=120 * TIME_SCALE)
mid = c.models.list().data[0].id


def prompt_ids(msgs, extra=None):
    body = {"prompt_logprobs": 0}
    body.update(extra or {})
    r = c.chat.completions.with_raw_response.create(model=mid, messages=msgs, max_tokens=1,
                                                     temperature=0, extra_body=body)
    j = json.loads(r.text)
    return [None if e is None else int(next(iter(e))) for e in j["choices"][0]["prompt_logprobs"]]


# the file's vocabulary is Llama 3's: its BOS text, where the template writes DeepSeek's
BOS_DS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"
prompt_text = case["out"].replace(BOS_DS, "<|begin_of_text|>", 1)
want = tokenize(prompt_text)
got = prompt_ids(messages)
ok(case["out"].endswith("<\uff5cAssistant\uff5c><think>\n") and got[1:] == want[1:] and
   len(got) == len(want) and want[0] == 128000,
   f"the prompt is R1-Distill's template rendering, token for token, ending in the opened "
   f"<think> ({len(got)} tokens, want {len(want)})")

r = c.chat.completions.create(model=mid, messages=messages, max_tokens=16, temperature=0)
m = r.choices[0].message
reasoning = (m.model_extra or {}).get("reasoning_content")
raw = c.completions.create(model=mid, prompt=want, max_tokens=16, temperature=0)
raw_text = raw.choices[0].text
ok(reasoning and not m.content and reasoning == raw_text.lstrip() and
   r.choices[0].finish_reason == "length",
   f"not streamed: the reply is reasoning_content, no content ({reasoning!r} vs raw {raw_text!r})")

parts, content = [], []
for ch in c.chat.completions.create(model=mid, messages=messages, max_tokens=16, temperature=0,
                                    stream=True):
    if not ch.choices:
        continue
    d = ch.choices[0].delta
    if (d.model_extra or {}).get("reasoning_content"):
        parts.append(d.model_extra["reasoning_content"])
    if d.content:
        content.append(d.content)
ok("".join(parts) == reasoning and not "".join(content),
   f"streamed: delta.reasoning_content chunks make the same text ({len(parts)} chunks)")

off = {"chat_template_kwargs": {"enable_thinking": False}}
got_off = prompt_ids(messages, off)
want_off = tokenize(prompt_text + "</think>")
ok(got_off[1:] == want_off[1:] and len(got_off) == len(want_off),
   f"thinking off: the prompt closes the opened block ({len(got_off)} tokens)")
r = c.chat.completions.create(model=mid, messages=messages, max_tokens=8, temperature=0,
                              extra_body=off)
m = r.choices[0].message
ok(m.content and not (m.model_extra or {}).get("reasoning_content"),
   f"thinking off: the reply is content ({m.content!r})")
srv.stop()
done()
