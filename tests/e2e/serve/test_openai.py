"""test_openai: the official OpenAI Python client against a real tern serve on
the default model: chat and completions, streaming and not, stop strings,
max_tokens -> length, usage equal to `tern tokenize` counts, cached prompt
tokens on a second turn, /health /ready /v1/models, errors with statuses."""
import subprocess

import openai

from serve_lib import MODEL, TERN, Server, diag, done, ok, request


def ntok(text):
    out = subprocess.run([TERN, "tokenize", "-m", MODEL, "--ids", "--special", "--bos", text],
                         capture_output=True, text=True, check=True).stdout.split()
    return len(out)


srv = Server()
ok(srv.ready(), f"server up and warmed up on port {srv.port}")
st, _, body = request(srv.base, "GET", "/health")
ok(st == 200, f"/health 200 ({body[:40]})")
st, _, body = request(srv.base, "GET", "/ready")
ok(st == 200 and b"ready" in body, "/ready 200 after warm-up")

c = openai.OpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0, timeout=60)
models = c.models.list()
mid = models.data[0].id
ok(mid == "SmolLM2-135M-Instruct.Q4_1", f"models.list: {mid}")

# chat, not streamed, max_tokens -> length
sysmsg, user = "You are terse.", "Name three colors."
r = c.chat.completions.create(model=mid, max_tokens=8, temperature=0,
                              messages=[{"role": "system", "content": sysmsg},
                                        {"role": "user", "content": user}])
ok(r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 8,
   f"chat: finish length at max_tokens 8 ({r.choices[0].message.content!r})")
rendered = (f"<|im_start|>system\n{sysmsg}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            f"<|im_start|>assistant\n")
want = ntok(rendered)
ok(r.usage.prompt_tokens == want, f"chat usage.prompt_tokens {r.usage.prompt_tokens} == tern tokenize {want}")
ok(r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, "total_tokens adds up")
first = r.choices[0].message.content
ok(ntok(first) - ntok("") <= 8, "completion text is at most 8 tokens")
tern = r.model_extra.get("tern", {})
ok(tern.get("generated_tokens") == 8 and tern.get("ttft_s", 0) > 0 and "request_id" in tern,
   f"tern phase block: ttft {tern.get('ttft_s')} s, e2e {tern.get('e2e_s')} s")

# second turn: the first turn's prompt is a cached prefix
r2 = c.chat.completions.create(model=mid, max_tokens=4, temperature=0,
                               messages=[{"role": "system", "content": sysmsg},
                                         {"role": "user", "content": user},
                                         {"role": "assistant", "content": first},
                                         {"role": "user", "content": "One more."}])
cached = r2.usage.prompt_tokens_details.cached_tokens
ok(cached >= 16 and cached < r2.usage.prompt_tokens,
   f"second turn reports cached prompt tokens: {cached} of {r2.usage.prompt_tokens}")

# chat, streamed, with usage
chunks = list(c.chat.completions.create(model=mid, max_tokens=12, temperature=0, stream=True,
                                        stream_options={"include_usage": True},
                                        messages=[{"role": "system", "content": sysmsg},
                                                  {"role": "user", "content": user}]))
text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
fins = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
usage = chunks[-1].usage
ok(chunks[0].choices[0].delta.role == "assistant", "stream: first delta has the role")
ok(fins == ["length"], f"stream: one finish_reason {fins}")
ok(usage is not None and usage.completion_tokens == 12 and usage.prompt_tokens == want,
   f"stream: usage chunk {usage}")
ok(usage is not None and usage.prompt_tokens_details.cached_tokens >= 16,
   "stream: repeated prompt is served from the prefix cache")
r3 = c.chat.completions.create(model=mid, max_tokens=12, temperature=0,
                               messages=[{"role": "system", "content": sysmsg},
                                         {"role": "user", "content": user}])
ok(r3.choices[0].message.content == text, "greedy: streamed text equals the non-streamed text")

# stop string: cut before it, never emitted, finish stop
full = r3.choices[0].message.content
words = full.split()
if len(words) >= 2:
    stop = words[1]
    r4 = c.chat.completions.create(model=mid, max_tokens=12, temperature=0, stop=[stop],
                                   messages=[{"role": "system", "content": sysmsg},
                                             {"role": "user", "content": user}])
    got = r4.choices[0].message.content
    ok(r4.choices[0].finish_reason == "stop" and stop not in got and full.startswith(got),
       f"stop {stop!r}: {got!r} finish {r4.choices[0].finish_reason}")
else:
    ok(False, f"need two words for the stop test, got {full!r}")

# completions: raw prompt, usage equals tern tokenize (BOS per metadata)
prompt = "The capital of France is"
r5 = c.completions.create(model=mid, prompt=prompt, max_tokens=5, temperature=0)
ok(r5.usage.prompt_tokens == ntok(prompt),
   f"completions usage.prompt_tokens {r5.usage.prompt_tokens} == tern tokenize {ntok(prompt)}")
ok(r5.choices[0].finish_reason == "length" and r5.object == "text_completion",
   f"completions: {r5.choices[0].text!r}")
s5 = list(c.completions.create(model=mid, prompt=prompt, max_tokens=5, temperature=0, stream=True))
stext = "".join(ch.choices[0].text for ch in s5 if ch.choices)
ok(stext == r5.choices[0].text, f"completions stream equals non-stream: {stext!r}")

# errors through the client: the right exception classes (status codes)
def err_of(fn):
    try:
        fn()
        return None
    except openai.APIStatusError as e:
        return e


e = err_of(lambda: c.chat.completions.create(model=mid, messages=[], max_tokens=3))
ok(isinstance(e, openai.BadRequestError) and "messages" in str(e), f"empty messages -> 400: {e}")
e = err_of(lambda: c.chat.completions.create(model="no-such-model", max_tokens=3,
                                             messages=[{"role": "user", "content": "x"}]))
ok(isinstance(e, openai.NotFoundError), f"unknown model -> 404: {e}")
e = err_of(lambda: c.chat.completions.create(model=mid, max_tokens=3, n=2,
                                             messages=[{"role": "user", "content": "x"}]))
ok(isinstance(e, openai.BadRequestError) and "'n'" in str(e), f"n=2 -> 400: {e}")
e = err_of(lambda: c.chat.completions.create(model=mid, max_tokens=3, top_logprobs=2,
                                             messages=[{"role": "user", "content": "x"}]))
ok(isinstance(e, openai.BadRequestError) and "top_logprobs" in str(e),
   f"top_logprobs without logprobs -> 400: {e}")
e = err_of(lambda: c.chat.completions.create(model=mid, max_tokens=-1,
                                             messages=[{"role": "user", "content": "x"}]))
ok(isinstance(e, openai.BadRequestError) and "max_tokens" in str(e), f"max_tokens -1 -> 400: {e}")
e = err_of(lambda: c.completions.create(model=mid, prompt="hi " * 9000, max_tokens=5))
ok(isinstance(e, openai.BadRequestError), f"prompt over the context -> 400: {str(e)[:160]}")
st, _, body = request(srv.base, "GET", "/nope")
ok(st == 404 and b'"error"' in body, f"unknown route 404: {body[:80]}")
ok(srv.alive(), "server still running")
rc = srv.stop()
ok(rc == 0, f"SIGTERM: clean exit {rc}")
done()
