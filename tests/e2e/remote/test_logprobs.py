"""test_logprobs: log-probabilities through the official OpenAI Python client
against a running tern serve (argv[1] = API base): chat logprobs and
top_logprobs, streamed and not; completions logprobs + echo (the prompt's
entries first, the first null), echo with max_tokens 0 (the prompt only),
vLLM's prompt_logprobs (extra_body) agreeing with echo; the shapes the
client's typed objects expect. TAP on stdout."""
import json
import math
import sys
import urllib.request

import openai

base = sys.argv[1]
n = 0
fails = 0


def ok(cond, what):
    global n, fails
    n += 1
    fails += not cond
    print(("ok" if cond else "not ok"), n, "-", what, flush=True)


def post(path, body):
    req = urllib.request.Request(base + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


c = openai.OpenAI(base_url=base, api_key="none", max_retries=0, timeout=60)
mid = c.models.list().data[0].id
msgs = [{"role": "user", "content": "Name three colors."}]

# chat, not streamed: one entry per generated token; greedy, so the sampled
# token is the most likely one, and the alternatives are sorted.
r = c.chat.completions.create(model=mid, messages=msgs, max_tokens=6, temperature=0,
                              logprobs=True, top_logprobs=3)
lp = r.choices[0].logprobs.content
ok(len(lp) == r.usage.completion_tokens == 6, f"chat: {len(lp)} entries for 6 tokens")
ok("".join(e.token for e in lp) == r.choices[0].message.content,
   f"chat: the entries' tokens spell the reply {r.choices[0].message.content!r}")
ok(all(len(e.top_logprobs) == 3 and e.top_logprobs[0].token == e.token and
       abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6 for e in lp),
   "chat: greedy token = the first of top_logprobs (3 each), same logprob")
ok(all(e.top_logprobs[i].logprob >= e.top_logprobs[i + 1].logprob for e in lp for i in range(2)),
   "chat: top_logprobs in descending order")
ok(all(e.logprob <= 0 and bytes(e.bytes).decode("utf-8", "replace") == e.token for e in lp),
   "chat: logprob <= 0 and bytes = the token's UTF-8")
ok(all(sum(math.exp(t.logprob) for t in e.top_logprobs) <= 1.0 + 1e-5 for e in lp),
   "chat: probabilities of the alternatives sum to at most 1")

# chat streamed: the same entries, chunk by chunk.
s = c.chat.completions.create(model=mid, messages=msgs, max_tokens=6, temperature=0,
                              logprobs=True, top_logprobs=3, stream=True)
got = []
for ch in s:
    if ch.choices and ch.choices[0].logprobs and ch.choices[0].logprobs.content:
        got += ch.choices[0].logprobs.content
ok([(e.token, round(e.logprob, 5)) for e in got] == [(e.token, round(e.logprob, 5)) for e in lp],
   f"chat streamed: the same {len(got)} entries as not streamed")

# chat without logprobs: null.
r0 = c.chat.completions.create(model=mid, messages=msgs, max_tokens=2, temperature=0)
ok(r0.choices[0].logprobs is None, "chat without logprobs: logprobs null")

# completions + echo: the prompt's tokens first (first null), then the reply.
prompt = "The capital of France is"
r = c.completions.create(model=mid, prompt=prompt, max_tokens=3, temperature=0, logprobs=2,
                         echo=True)
L = r.choices[0].logprobs
np_, ng = r.usage.prompt_tokens, r.usage.completion_tokens
ok(r.choices[0].text.startswith(prompt), f"echo: text starts with the prompt ({r.choices[0].text!r})")
ok(len(L.tokens) == len(L.token_logprobs) == len(L.top_logprobs) == len(L.text_offset) == np_ + ng,
   f"echo: {len(L.tokens)} entries = {np_} prompt + {ng} generated")
ok(L.token_logprobs[0] is None and L.top_logprobs[0] is None and
   all(v is not None and v <= 0 for v in L.token_logprobs[1:]),
   "echo: the first prompt token has no logprob, every other one has")
ok("".join(L.tokens) == r.choices[0].text, "echo: the tokens spell the whole text")
ok(all(L.text_offset[i] + len(L.tokens[i].encode()) == L.text_offset[i + 1]
       for i in range(len(L.tokens) - 1)), "echo: text_offset advances by each token's bytes")
ok(all(len(d) >= 1 and L.tokens[i] in d for i, d in enumerate(L.top_logprobs) if d),
   "echo: each top_logprobs dict holds its token")
prompt_lp = L.token_logprobs[:np_]

# echo with max_tokens 0: the prompt alone, the same log-probabilities.
r = c.completions.create(model=mid, prompt=prompt, max_tokens=0, logprobs=0, echo=True)
P = r.choices[0].logprobs
ok(r.choices[0].text == prompt and r.usage.completion_tokens == 0,
   f"echo + max_tokens 0: the prompt only ({r.choices[0].text!r}, 0 generated)")
ok(P.token_logprobs[0] is None and
   all(abs(a - b) < 1e-4 for a, b in zip(P.token_logprobs[1:], prompt_lp[1:])) and
   len(P.token_logprobs) == np_, "echo + max_tokens 0: the same prompt log-probabilities")

# vLLM's prompt_logprobs: entries keyed by token id, agreeing with echo.
j = post("/completions", {"model": mid, "prompt": prompt, "max_tokens": 1, "temperature": 0,
                          "prompt_logprobs": 2})
pl = j["choices"][0]["prompt_logprobs"]
ok(len(pl) == np_ and pl[0] is None, f"prompt_logprobs: {len(pl)} entries, the first null")
own = []
for i, d in enumerate(pl[1:], 1):
    # the prompt's own token is the entry whose decoded_token is echo's token i
    m = [v for v in d.values() if v["decoded_token"] == L.tokens[i]]
    own.append(m[0]["logprob"] if m else None)
ok(all(o is not None and abs(o - b) < 1e-4 for o, b in zip(own, prompt_lp[1:])),
   "prompt_logprobs: the prompt tokens' values equal echo's")
ok(all(1 <= v["rank"] for d in pl[1:] for v in d.values()) and
   all(any(v["rank"] == 1 for v in d.values()) for d in pl[1:]),
   "prompt_logprobs: ranks from 1, the most likely token listed")

# bad combinations: clear 400s naming the field.
for kw, field in [(dict(logprobs=21), "logprobs"),
                  (dict(logprobs=1, echo=True, stream=True), "stream")]:
    try:
        c.completions.create(model=mid, prompt=prompt, max_tokens=2, **kw)
        ok(False, f"{kw}: refused")
    except openai.BadRequestError as e:
        ok(field in str(e), f"{kw}: 400 naming '{field}'")
print(f"1..{n}")
sys.exit(1 if fails else 0)
