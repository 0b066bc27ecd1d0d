"""test_structured: structured output through the official OpenAI client against
a real tern serve, on the default model (SmolLM2) and on Gemma 3 270M:
response_format json_schema (nested objects, enums, arrays, $defs, anyOf, a
recursive $ref) on chat and completions, streamed and not, every reply
validated with the jsonschema package; json_object replies parse with
json.loads; bad schemas get a 400 naming the keyword (or the path); a reply
cut by max_tokens reports finish_reason "length"; concurrent constrained
requests (one batch) all validate."""
import concurrent.futures
import json
import os
import subprocess
import tempfile

import jsonschema
import openai

from serve_lib import MODEL, TERN, TIME_SCALE, Server, diag, done, ok, request

GEMMA = os.path.join(os.path.dirname(MODEL), "gemma-3-270m-q4_k_m.gguf")


def text(n):
    # free strings are bounded: a 270M model at temperature 0 may otherwise
    # repeat one character until max_tokens
    return {"type": "string", "maxLength": n}


def obj(props, required=None):
    return {"type": "object", "properties": props,
            "required": list(props) if required is None else required,
            "additionalProperties": False}


SCHEMAS = {
    "nested": (obj({"name": text(40), "age": {"type": "integer"},
                    "address": obj({"city": text(40), "zip": text(10)})}),
               "Give a person named Ann, aged 31, living in Paris, as JSON."),
    "enums": (obj({"sentiment": {"enum": ["positive", "negative", "neutral"]},
                   "confidence": {"type": "number"}, "sarcastic": {"type": "boolean"}}),
              "Classify the sentiment of: 'I love this phone.' Answer in JSON."),
    "arrays": (obj({"colors": {"type": "array", "items": text(20),
                               "minItems": 1, "maxItems": 3},
                    "counts": {"type": "array", "items": {"type": "integer"}, "maxItems": 4}}),
               "List up to three colors of the French flag and some counts, in JSON."),
    "defs": ({"$defs": {"point": obj({"x": {"type": "number"}, "y": {"type": "number"}})},
              **obj({"start": {"$ref": "#/$defs/point"}, "end": {"$ref": "#/$defs/point"},
                     "label": {"anyOf": [text(40), {"type": "null"}]}})},
             "Give a line segment from (0,0) to (3,4) as JSON."),
    "anyof": (obj({"answer": {"anyOf": [{"type": "integer"}, text(20), {"type": "null"}]},
                   "unit": {"enum": ["m", "km", None]},
                   "note": text(60)}, required=["answer", "unit"]),
              "How far is it from Paris to Lyon? JSON please."),
    "recursive": ({"$defs": {"node": obj({"name": text(20),
                                          "children": {"type": "array", "maxItems": 2,
                                                       "items": {"$ref": "#/$defs/node"}}})},
                   "$ref": "#/$defs/node"},
                  "Describe a tiny family tree as JSON."),
}


def rf(name, schema):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def chat(c, mid, schema_name, stream, max_tokens=300, fmt=None, prompt=None, **kw):
    schema, prompt0 = SCHEMAS[schema_name]
    prompt = prompt or prompt0
    fmt = fmt or rf(schema_name, schema)
    msgs = [{"role": "user", "content": prompt}]
    if not stream:
        r = c.chat.completions.create(model=mid, messages=msgs, max_tokens=max_tokens,
                                      temperature=0, response_format=fmt, **kw)
        return r.choices[0].message.content, r.choices[0].finish_reason
    text, finish = "", None
    for ch in c.chat.completions.create(model=mid, messages=msgs, max_tokens=max_tokens,
                                        temperature=0, response_format=fmt, stream=True, **kw):
        if ch.choices:
            text += ch.choices[0].delta.content or ""
            finish = ch.choices[0].finish_reason or finish
    return text, finish


def validates(text, schema):
    try:
        jsonschema.validate(json.loads(text), schema)
        return True, ""
    except (ValueError, jsonschema.ValidationError) as e:
        return False, str(e)[:200]


def check_model(path, label):
    srv = Server(["-m", path])
    if not ok(srv.ready(), f"{label}: server up on port {srv.port}"):
        diag(srv.log()[-2000:])
        return
    c = openai.OpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0,
                      timeout=180 * TIME_SCALE)
    mid = c.models.list().data[0].id
    for name, (schema, _) in SCHEMAS.items():
        for stream in (False, True):
            reply, finish = chat(c, mid, name, stream)
            good, why = validates(reply, schema)
            ok(finish == "stop" and good,
               f"{label}: {name} schema, {'streamed' if stream else 'not streamed'}: "
               f"finish {finish}, validates {good} {why} ({reply[:120]!r})")

    # json_object: any JSON object. Without a schema nothing bounds the keys,
    # and Gemma 3 270M at temperature 0 adds keys until max_tokens; a
    # frequency penalty lets the closing brace win.
    for stream in (False, True):
        reply, finish = chat(c, mid, "nested", stream, fmt={"type": "json_object"},
                             prompt="Reply with a JSON object: the keys name and age of Ann, 31.",
                             frequency_penalty=1.0)
        try:
            parsed = json.loads(reply)
        except ValueError:
            parsed = None
        ok(finish == "stop" and isinstance(parsed, dict),
           f"{label}: json_object {'streamed' if stream else 'not streamed'} parses as an "
           f"object ({reply[:100]!r})")
    schema = SCHEMAS["enums"][0]
    r = c.completions.create(model=mid, prompt="Sentiment of 'great food' as JSON:",
                             max_tokens=200, temperature=0,
                             extra_body={"response_format": rf("s", schema)})
    good, why = validates(r.choices[0].text, schema)
    ok(r.choices[0].finish_reason == "stop" and good,
       f"{label}: /v1/completions with json_schema validates {why} ({r.choices[0].text[:100]!r})")

    # cut by max_tokens: finish_reason length, streamed and not, nothing hangs
    reply, finish = chat(c, mid, "nested", False, max_tokens=4)
    ok(finish == "length", f"{label}: max_tokens 4 under a schema -> length ({reply!r})")
    reply, finish = chat(c, mid, "nested", True, max_tokens=4)
    ok(finish == "length", f"{label}: streamed, max_tokens 4 -> length ({reply!r})")

    # one batch: constrained requests with different schemas at once
    names = list(SCHEMAS) * 2
    with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
        outs = list(pool.map(lambda n: (n, chat(c, mid, n, n.startswith("a"))), names))
    bad = [(n, t[:80]) for n, (t, f) in outs if f != "stop" or not validates(t, SCHEMAS[n][0])[0]]
    ok(not bad, f"{label}: {len(names)} concurrent constrained requests all validate {bad}")
    srv.stop()


def check_run():
    """tern run --json-schema FILE: the reply on stdout validates; a schema
    the grammar cannot enforce exits 1 naming the keyword."""
    schema, prompt = SCHEMAS["nested"]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(schema, f)
    p = subprocess.run([TERN, "run", "-m", MODEL, "--no-history", "--temp", "0", "-t", "1",
                        "-n", "300", "--json-schema", f.name, prompt],
                       capture_output=True, text=True, timeout=120 * TIME_SCALE)
    good, why = validates(p.stdout, schema)
    ok(p.returncode == 0 and good, f"tern run --json-schema: exit {p.returncode}, validates "
                                   f"{good} {why} ({p.stdout[:100]!r})")
    with open(f.name, "w") as g:
        json.dump({"type": "string", "format": "email"}, g)
    p = subprocess.run([TERN, "run", "-m", MODEL, "--no-history", "--json-schema", f.name, "hi"],
                       capture_output=True, text=True, timeout=120 * TIME_SCALE)
    ok(p.returncode == 1 and "'format' is not supported" in p.stderr,
       f"tern run --json-schema with 'format': exit {p.returncode} ({p.stderr.strip()[:120]!r})")
    p = subprocess.run([TERN, "run", "-m", MODEL, "--no-history", "--json-schema",
                        f.name + ".missing", "hi"], capture_output=True, text=True,
                       timeout=60 * TIME_SCALE)
    ok(p.returncode != 0 and ".missing" in p.stderr,
       f"tern run --json-schema with a missing file: exit {p.returncode}")
    os.unlink(f.name)


def check_errors():
    srv = Server()
    base = srv.base
    msgs = [{"role": "user", "content": "hi"}]

    def post(fmt, path="/v1/chat/completions"):
        body = {"model": "m", "max_tokens": 8, "response_format": fmt}
        if path.endswith("chat/completions"):
            body["messages"] = msgs
        else:
            body["prompt"] = "hi"
        st, _, b = request(base, "POST", path, body)
        try:
            err = json.loads(b)["error"]
        except (ValueError, KeyError, TypeError):
            err = {"message": b[:200].decode(errors="replace")}
        return st, err

    cases = [
        ({"type": "string", "pattern": "^a"}, "'pattern'"),
        (obj({"n": {"type": "integer", "minimum": 0}}), "'minimum'"),
        (obj({"e": {"type": "string", "format": "email"}}), "#/properties/e"),
        ({"oneOf": [{"type": "string"}]}, "'oneOf'"),
        (obj({"t": {"type": "strin"}}), "'strin'"),
        ({"type": "array", "minItems": 5, "maxItems": 1}, "unsatisfiable"),
        ({"$ref": "#/$defs/missing"}, "names no definition"),
        ({"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(5000)}},
         "more than"),
    ]
    for schema, want in cases:
        for path in ("/v1/chat/completions", "/v1/completions"):
            st, err = post(rf("x", schema), path)
            ok(st == 400 and want in err.get("message", "") and
               err.get("param") == "response_format.json_schema.schema",
               f"400 naming {want} on {path}: {st} {err.get('message', '')[:120]!r}")
    st, err = post({"type": "json_schema", "json_schema": {"name": "x", "schema": "nope"}})
    ok(st == 400 and "must be an object" in err.get("message", ""),
       f"schema that is not an object: 400 ({err.get('message', '')[:80]!r})")
    st, err = post({"type": "xml"})
    ok(st == 400 and "xml" in err.get("message", ""), f"unknown response_format type: 400 ({st})")
    st, err = post({"type": "json_schema"})
    ok(st == 400 and err.get("param") == "response_format.json_schema",
       f"json_schema without its object: 400 ({err.get('message', '')[:80]!r})")
    # the official client raises BadRequestError with the message
    c = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0, timeout=60)
    try:
        c.chat.completions.create(model="m", messages=msgs,
                                  response_format=rf("x", {"type": "string", "pattern": "a"}))
        ok(False, "openai client: a bad schema raises")
    except openai.BadRequestError as e:
        ok("'pattern' is not supported" in str(e), f"openai client: BadRequestError ({e})")
    ok(srv.alive(), "server alive after the bad schemas")
    srv.stop()


check_run()
check_errors()
check_model(MODEL, "SmolLM2")
if os.path.exists(GEMMA):
    check_model(GEMMA, "Gemma 3 270M")
else:
    ok(True, "# SKIP Gemma 3 270M not fetched (packaging/fetch-model --model gemma3-270m)")
done()
