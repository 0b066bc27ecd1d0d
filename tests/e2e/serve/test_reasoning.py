"""test_reasoning: <think>...</think> replies returned as reasoning_content.
The fixture goes through the real engine and chat template: a few-shot
conversation whose assistant turns open with <think>, which the default model
(SmolLM2, greedy) continues in kind. The official OpenAI client reads the
reply streamed (delta.reasoning_content) and not (message.reasoning_content);
the thinking never appears in content; a reply cut inside its thinking ends
with finish_reason length and an empty answer; a reply without <think> has
no reasoning_content; chat_template_kwargs enable_thinking false opens the
turn with an empty thinking block (the answer alone, a longer prompt)."""
import openai

from serve_lib import TIME_SCALE, Server, done, ok

FEW_SHOT = [
    {"role": "system", "content": "Think first inside <think></think>, then answer with one word."},
    {"role": "user", "content": "Color of the sky?"},
    {"role": "assistant", "content": "<think>The sky is blue on a clear day.</think>Blue"},
    {"role": "user", "content": "Color of grass?"},
    {"role": "assistant", "content": "<think>Grass is green.</think>Green"},
    {"role": "user", "content": "Color of snow?"},
]


def reasoning_of(x):
    return (x.model_extra or {}).get("reasoning_content")


def stream(c, mid, **kw):
    r, a, finish, mixed = "", "", None, False
    for ch in c.chat.completions.create(model=mid, stream=True, temperature=0, **kw):
        if not ch.choices:
            continue
        d = ch.choices[0].delta
        rc = reasoning_of(d) or ""
        mixed |= bool(rc and d.content)
        r += rc
        a += d.content or ""
        finish = ch.choices[0].finish_reason or finish
    return r, a, finish, mixed


srv = Server()
ok(srv.ready(), f"server up on port {srv.port}")
c = openai.OpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0,
                  timeout=120 * TIME_SCALE)
mid = c.models.list().data[0].id

r = c.chat.completions.create(model=mid, messages=FEW_SHOT, temperature=0, max_tokens=40)
base_prompt = r.usage.prompt_tokens
m = r.choices[0].message
ok(reasoning_of(m) == "Snow is white." and m.content == "White" and
   r.choices[0].finish_reason == "stop",
   f"not streamed: reasoning_content {reasoning_of(m)!r}, content {m.content!r}")

rs, cs, finish, mixed = stream(c, mid, messages=FEW_SHOT, max_tokens=40)
ok(rs == "Snow is white." and cs == "White" and finish == "stop" and not mixed,
   f"streamed: delta.reasoning_content {rs!r}, content {cs!r}, {finish}, mixed {mixed}")

r = c.chat.completions.create(model=mid, messages=FEW_SHOT, temperature=0, max_tokens=4)
m = r.choices[0].message
ok(r.choices[0].finish_reason == "length" and reasoning_of(m) and "<think>" not in
   (m.content or "") and not m.content,
   f"cut inside the thinking: length, reasoning {reasoning_of(m)!r}, content {m.content!r}")
rs, cs, finish, _ = stream(c, mid, messages=FEW_SHOT, max_tokens=4)
ok(finish == "length" and rs and not cs, f"streamed, cut: reasoning {rs!r}, content {cs!r}")

# thinking off (Qwen3's switch): the turn opens with an empty thinking block,
# so the reply is the answer alone, and the prompt is longer by that block
r = c.chat.completions.create(model=mid, messages=FEW_SHOT, temperature=0, max_tokens=40,
                              extra_body={"chat_template_kwargs": {"enable_thinking": False}})
m = r.choices[0].message
ok(not reasoning_of(m) and m.content and "<think>" not in m.content and "</think>" not in m.content
   and r.usage.prompt_tokens > base_prompt,
   f"enable_thinking false: answer only ({m.content!r}, reasoning {reasoning_of(m)!r}), "
   f"prompt {r.usage.prompt_tokens} tokens against {base_prompt}")
rs, cs, finish, _ = stream(c, mid, messages=FEW_SHOT, max_tokens=40,
                           extra_body={"chat_template_kwargs": {"enable_thinking": False}})
ok(not rs and cs and "<think>" not in cs, f"streamed, thinking off: content {cs!r}, reasoning {rs!r}")
try:
    c.chat.completions.create(model=mid, messages=FEW_SHOT, max_tokens=4,
                              extra_body={"chat_template_kwargs": {"enable_thinking": "no"}})
    ok(False, "enable_thinking 'no' accepted")
except openai.BadRequestError as e:
    ok("enable_thinking" in str(e), f"enable_thinking not a boolean: 400 naming it ({e})")

r = c.chat.completions.create(model=mid, temperature=0, max_tokens=8,
                              messages=[{"role": "user", "content": "Say hello."}])
m = r.choices[0].message
ok(reasoning_of(m) is None and m.content, f"no <think>: no reasoning_content ({m.content!r})")
done()
