"""test_tools: tool calling through the official OpenAI client against a real
tern serve on the default model: tool_choice required and named (the call is
decoded under the tools' grammar: its arguments always parse and validate
against the tool's parameters with jsonschema), streamed and not (delta.tool_calls
chunks), a round trip (call, tool result, final answer), parallel_tool_calls
false, auto (a reply is either text or well-formed calls), a call cut by
max_tokens (finish_reason length, nothing hangs), and malformed tools and
tool_choice refused with a 400 naming the field."""
import json
import os

import jsonschema
import openai

from serve_lib import MODEL, TIME_SCALE, Server, diag, done, ok, request

GEMMA = os.path.join(os.path.dirname(MODEL), "gemma-3-270m-q4_k_m.gguf")

WEATHER = {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
           "properties": {"city": {"type": "string", "maxLength": 40},
                          "unit": {"enum": ["celsius", "fahrenheit"]}}}
TIME = {"type": "object", "required": ["timezone"],
        "properties": {"timezone": {"type": "string", "maxLength": 40}}}
TOOLS = [{"type": "function", "function": {"name": "get_weather",
                                           "description": "The current weather in a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time",
                                           "description": "The current time in a timezone",
                                           "parameters": TIME}}]
PARAMS = {"get_weather": WEATHER, "get_time": TIME}
USER = [{"role": "user", "content": "What is the weather like in Paris today?"}]


def valid_call(call, want=None):
    try:
        args = json.loads(call.function.arguments)
        jsonschema.validate(args, PARAMS[call.function.name])
    except (ValueError, KeyError, jsonschema.ValidationError) as e:
        return False, str(e)[:120]
    if want and call.function.name != want:
        return False, f"name {call.function.name}"
    return call.type == "function" and call.id.startswith("call_"), ""


def streamed(c, mid, **kw):
    """(content, calls as [(id, name, arguments)], finish, chunks with tool_calls)."""
    content, calls, finish, n_tc = "", {}, None, 0
    for ch in c.chat.completions.create(model=mid, stream=True, **kw):
        if not ch.choices:
            continue
        d = ch.choices[0].delta
        content += d.content or ""
        for tc in d.tool_calls or []:
            n_tc += 1
            e = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            e["id"] = tc.id or e["id"]
            if tc.function:
                e["name"] += tc.function.name or ""
                e["arguments"] += tc.function.arguments or ""
        finish = ch.choices[0].finish_reason or finish
    return content, [calls[i] for i in sorted(calls)], finish, n_tc


srv = Server()
ok(srv.ready(), f"server up on port {srv.port}")
c = openai.OpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0,
                  timeout=120 * TIME_SCALE)
mid = c.models.list().data[0].id

# required: a call under the grammar of all tools
r = c.chat.completions.create(model=mid, messages=USER, tools=TOOLS, tool_choice="required",
                              temperature=0, max_tokens=120)
ch = r.choices[0]
calls = ch.message.tool_calls or []
good = [valid_call(x) for x in calls]
ok(ch.finish_reason == "tool_calls" and len(calls) == 1 and all(g for g, _ in good),
   f"required: finish {ch.finish_reason}, {len(calls)} call(s) validating {good} "
   f"({[(x.function.name, x.function.arguments) for x in calls]})")
ok(ch.message.content is None, f"required: no content beside the call ({ch.message.content!r})")

# named, not streamed and streamed
named = {"type": "function", "function": {"name": "get_time"}}
for stream in (False, True):
    kw = dict(messages=USER, tools=TOOLS, tool_choice=named, temperature=0, max_tokens=120)
    if not stream:
        r = c.chat.completions.create(model=mid, **kw)
        calls = r.choices[0].message.tool_calls or []
        finish = r.choices[0].finish_reason
        good = [valid_call(x, "get_time") for x in calls]
        desc = [(x.function.name, x.function.arguments) for x in calls]
    else:
        content, scalls, finish, n_tc = streamed(c, mid, **kw)
        good = []
        for e in scalls:
            try:
                jsonschema.validate(json.loads(e["arguments"]), TIME)
                good.append((e["name"] == "get_time" and e["id"].startswith("call_"), ""))
            except (ValueError, jsonschema.ValidationError) as ex:
                good.append((False, str(ex)[:100]))
        calls = scalls
        desc = scalls
        # the name first, then the arguments as they are decoded
        ok(n_tc >= 3 and content == "", f"streamed: the call came as delta.tool_calls, its "
                                         f"arguments as they arrived ({n_tc} chunks, content "
                                         f"{content!r})")
    ok(finish == "tool_calls" and len(calls) == 1 and all(g for g, _ in good),
       f"named get_time {'streamed' if stream else 'not streamed'}: finish {finish}, "
       f"validates {good} ({desc})")

# the round trip: call, result, final answer (streamed and not)
r = c.chat.completions.create(model=mid, messages=USER, tools=TOOLS, tool_choice="required",
                              temperature=0, max_tokens=120)
call = r.choices[0].message.tool_calls[0]
conv = USER + [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
               {"role": "tool", "tool_call_id": call.id,
                "content": json.dumps({"temperature": 21, "sky": "sunny"})}]
r2 = c.chat.completions.create(model=mid, messages=conv, tools=TOOLS, tool_choice="none",
                               temperature=0, max_tokens=60)
m2 = r2.choices[0]
ok(m2.finish_reason in ("stop", "length") and isinstance(m2.message.content, str) and
   m2.message.content.strip() and not m2.message.tool_calls,
   f"round trip: a final answer after the tool result ({m2.finish_reason}: "
   f"{m2.message.content!r:.120})")
base = c.chat.completions.create(model=mid, messages=USER, tools=TOOLS, tool_choice="none",
                                 temperature=0, max_tokens=1)
# the call and the result as text: <tool_call>{..}</tool_call>, <tool_response>{..}</tool_response>
ok(r2.usage.prompt_tokens >= base.usage.prompt_tokens + 25,
   f"round trip: the call and its result are in the prompt ({r2.usage.prompt_tokens} prompt "
   f"tokens against {base.usage.prompt_tokens} without them)")
content, scalls, finish, _ = streamed(c, mid, messages=conv, tools=TOOLS, tool_choice="none",
                                      temperature=0, max_tokens=60)
ok(finish in ("stop", "length") and content.strip() and not scalls,
   f"round trip streamed: final answer {finish} {content!r:.80}")

# parallel_tool_calls false: one call at most
r = c.chat.completions.create(model=mid, messages=USER, tools=TOOLS, tool_choice="required",
                              parallel_tool_calls=False, temperature=0, max_tokens=120)
ok(len(r.choices[0].message.tool_calls or []) == 1,
   "parallel_tool_calls false: one call")

# auto: text or calls, never a broken mix (streamed and not)
for stream in (False, True):
    kw = dict(messages=[{"role": "user", "content": "What time is it in Tokyo? Use a tool."}],
              tools=TOOLS, tool_choice="auto", temperature=0, max_tokens=80)
    if stream:
        content, scalls, finish, _ = streamed(c, mid, **kw)
        good = all(e["name"] in PARAMS and json.loads(e["arguments"]) is not None for e in scalls)
        ok((finish == "tool_calls" and scalls and good) or (finish in ("stop", "length") and
                                                            not scalls),
           f"auto streamed: {finish}, {len(scalls)} calls, content {content[:60]!r}")
    else:
        r = c.chat.completions.create(model=mid, **kw)
        m = r.choices[0]
        calls = m.message.tool_calls or []
        ok((m.finish_reason == "tool_calls" and calls and all(valid_call(x)[0] for x in calls)) or
           (m.finish_reason in ("stop", "length") and not calls and m.message.content),
           f"auto: {m.finish_reason}, {len(calls)} calls, content {m.message.content!r:.60}")

# auto calls stream piecewise: a conversation whose earlier assistant turns
# called get_weather (one call, then two in parallel) has the model (greedy)
# call in kind; streamed, each call's head (index, id, name) comes once its
# name is complete and its arguments in several pieces as they are decoded;
# the pieces join to the arguments the unstreamed reply reads back.
def wcall(i, city):
    return {"id": f"call_{i}", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}


for label, pairs, ask in (("one call", [["Paris"], ["Berlin"], ["Madrid"]], "Rome"),
                          ("two calls", [["Paris", "Berlin"], ["Madrid", "Lisbon"]],
                           "Rome and Oslo")):
    conv, k = [], 0
    for cities in pairs:
        conv.append({"role": "user", "content": "What is the weather in " + " and ".join(cities) +
                     "?"})
        conv.append({"role": "assistant", "content": None,
                     "tool_calls": [wcall(k + j, x) for j, x in enumerate(cities)]})
        k += len(cities)
    conv.append({"role": "user", "content": f"What is the weather in {ask}?"})
    kw = dict(messages=conv, tools=[TOOLS[0]], tool_choice="auto", temperature=0, max_tokens=80)
    r = c.chat.completions.create(model=mid, **kw)
    want = [(x.function.name, json.loads(x.function.arguments))
            for x in r.choices[0].message.tool_calls or []]
    heads, pieces, finish = [], {}, None
    for ch in c.chat.completions.create(model=mid, stream=True, **kw):
        if not ch.choices:
            continue
        for tc in ch.choices[0].delta.tool_calls or []:
            if tc.id:
                heads.append((tc.index, tc.function.name, tc.function.arguments))
            else:
                pieces.setdefault(tc.index, []).append(tc.function.arguments)
        finish = ch.choices[0].finish_reason or finish
    got = [(h[1], json.loads("".join(pieces.get(h[0], [])) or "null")) for h in heads]
    n = 1 if label == "one call" else 2
    ok(len(want) == n and all(w[0] == "get_weather" for w in want),
       f"auto, {label}: the model calls in kind ({want})")
    ok([h[0] for h in heads] == list(range(n)) and all(h[2] == "" for h in heads) and
       all(len(pieces.get(i, [])) >= 2 for i in range(n)),
       f"auto streamed, {label}: a head per call, then its arguments in pieces "
       f"({heads}, {pieces})")
    ok(got == want and finish == "tool_calls",
       f"auto streamed, {label}: the pieces join to the unstreamed calls ({got}), {finish}")

# a forced call cut by max_tokens: length, its text, no calls, nothing hangs
for stream in (False, True):
    kw = dict(messages=USER, tools=TOOLS, tool_choice="required", temperature=0, max_tokens=5)
    if stream:
        content, scalls, finish, _ = streamed(c, mid, **kw)
        ok(finish == "length" and not scalls, f"cut call streamed: {finish} ({content!r})")
    else:
        r = c.chat.completions.create(model=mid, **kw)
        m = r.choices[0]
        ok(m.finish_reason == "length" and not m.message.tool_calls,
           f"cut call: {m.finish_reason} ({m.message.content!r})")

# the forced calls on Gemma 3 270M too (another template and tokenizer)
if os.path.exists(GEMMA):
    g = Server(["-m", GEMMA])
    gc = openai.OpenAI(base_url=g.base + "/v1", api_key="none", max_retries=0,
                       timeout=120 * TIME_SCALE)
    gid = gc.models.list().data[0].id
    for choice, want in (("required", None), (named, "get_time")):
        for stream in (False, True):
            kw = dict(messages=USER, tools=TOOLS, tool_choice=choice, temperature=0,
                      max_tokens=120)
            if stream:
                content, scalls, finish, _ = streamed(gc, gid, **kw)
                try:
                    good = len(scalls) == 1 and scalls[0]["name"] in PARAMS and \
                        (want is None or scalls[0]["name"] == want)
                    if good:
                        jsonschema.validate(json.loads(scalls[0]["arguments"]),
                                            PARAMS[scalls[0]["name"]])
                except (ValueError, jsonschema.ValidationError):
                    good = False
                desc = scalls
            else:
                r = gc.chat.completions.create(model=gid, **kw)
                calls = r.choices[0].message.tool_calls or []
                finish = r.choices[0].finish_reason
                good = len(calls) == 1 and valid_call(calls[0], want)[0]
                desc = [(x.function.name, x.function.arguments) for x in calls]
            ok(finish == "tool_calls" and good,
               f"Gemma 3 270M: {choice if isinstance(choice, str) else 'named'} "
               f"{'streamed' if stream else 'not streamed'}: {finish} {desc}")
    g.stop()
else:
    ok(True, "# SKIP Gemma 3 270M not fetched")

# bad input: 400 naming the field
bad = [
    ({"tools": "x"}, "tools"),
    ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools[0]"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}}}}]},
     "tools[0].function.parameters"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "tool_choice"),
    ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice"),
    ({"tools": TOOLS, "parallel_tool_calls": "yes"}, "parallel_tool_calls"),
    ({"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}},
     "tool_choice"),
]
for extra, param in bad:
    st, _, body = request(srv.base, "POST", "/v1/chat/completions",
                          {"model": mid, "messages": USER, "max_tokens": 4, **extra})
    try:
        err = json.loads(body)["error"]
    except (ValueError, KeyError):
        err = {}
    ok(st == 400 and err.get("param") == param,
       f"400 with param {param}: {st} {err.get('message', body[:80])!r}")
st, _, body = request(srv.base, "POST", "/v1/chat/completions",
                      {"model": mid, "max_tokens": 4, "messages": USER + [
                          {"role": "assistant", "content": None, "tool_calls": "x"}]})
ok(st == 400 and b"tool_calls" in body, f"malformed assistant tool_calls: 400 ({body[:100]!r})")
ok(srv.alive(), "server alive after the bad requests")
done()
