"""test_embeddings: POST /v1/embeddings on a real tern serve, through the
official openai client, against the reference's llama-embedding.

On random-weight Qwen3 files with qwen3.pooling_type 3 (last token) and 1
(mean) (embed_lib.make_model): every vector's cosine with llama-embedding's
(--pooling as the file says, --embd-normalize 2) is >= 0.999, single and
batched inputs; base64 encoding decodes to the same vector; dimensions
truncates then re-normalises; usage counts the prompt tokens (tern tokenize);
token-id inputs equal their text; bad input (empty, beyond the context, out
of the vocabulary, a bad dimensions or encoding_format) is a clear 400;
SmolLM2 (no pooling type) gets mean pooling; /metrics counts the requests."""
import base64
import math
import subprocess

import numpy as np
import openai

import embed_lib
import serve_lib
from serve_lib import TERN, Server, diag, done, metric, metrics, ok, request

TEXTS = ["hello world", "The quick brown fox jumps over the lazy dog.", "a",
         "Embeddings are pooled hidden states; this one is longer, with punctuation!"]


def ntok(model, text):
    out = subprocess.run([TERN, "tokenize", "-m", model, "--ids", "--bos", text],
                         capture_output=True, text=True, check=True).stdout.split()
    return len(out)


def client(srv):
    return openai.OpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0, timeout=120)


def err_of(fn):
    try:
        fn()
        return None
    except openai.APIStatusError as e:
        return e


ref_bin, why = embed_lib.ref_bin()
if not ok(ref_bin is not None, "the reference's llama-embedding is built"):
    diag(why)
    done()

pooled = {}
for pooling, name in ((3, "last"), (1, "mean")):
    path = embed_lib.make_model(pooling)
    ref = embed_lib.reference(ref_bin, path, TEXTS, name)
    serve_lib.MODEL = path
    srv = Server(["--ctx", "64"])
    ok(srv.ready(), f"{name}: server up on {path}")
    c = client(srv)
    mid = c.models.list().data[0].id

    # single inputs, float encoding
    one = [c.embeddings.create(model=mid, input=t, encoding_format="float") for t in TEXTS]
    cos = [embed_lib.cosine(r.data[0].embedding, v) for r, v in zip(one, ref)]
    ok(min(cos) >= 0.999, f"{name}: single inputs, cosine with llama-embedding "
                          f"{', '.join(f'{x:.6f}' for x in cos)} >= 0.999")
    norms = [np.linalg.norm(r.data[0].embedding) for r in one]
    ok(all(abs(n - 1) < 1e-4 for n in norms), f"{name}: L2-normalised (norms {norms[0]:.6f}..)")
    r = one[1]
    ok(r.object == "list" and r.data[0].object == "embedding" and r.data[0].index == 0 and
       r.model == mid and len(r.data[0].embedding) == 256,
       f"{name}: response shape (object list, embedding, index 0, model, 256 dims)")
    want = ntok(path, TEXTS[1])
    ok(r.usage.prompt_tokens == want and r.usage.total_tokens == want,
       f"{name}: usage prompt_tokens {r.usage.prompt_tokens} == total == tern tokenize {want}")

    # a batch, with the client's default encoding (base64, decoded by the client)
    b = c.embeddings.create(model=mid, input=TEXTS)
    cos_b = [embed_lib.cosine(d.embedding, v) for d, v in zip(b.data, ref)]
    ok([d.index for d in b.data] == list(range(len(TEXTS))) and min(cos_b) >= 0.999,
       f"{name}: batch of {len(TEXTS)} (base64 by default), cosine "
       f"{', '.join(f'{x:.6f}' for x in cos_b)} >= 0.999")
    same = max(float(np.max(np.abs(np.array(d.embedding) - np.array(s.data[0].embedding))))
               for d, s in zip(b.data, one))
    ok(same < 1e-6, f"{name}: batched vectors equal the single ones (max diff {same:.2e})")
    ok(b.usage.prompt_tokens == sum(ntok(path, t) for t in TEXTS),
       f"{name}: batch usage sums the inputs ({b.usage.prompt_tokens})")
    pooled[name] = b

    # base64 asked explicitly: little-endian float32
    st, _, body = request(srv.base, "POST", "/v1/embeddings",
                          {"input": TEXTS[0], "encoding_format": "base64"})
    import json
    j = json.loads(body)
    v = np.frombuffer(base64.b64decode(j["data"][0]["embedding"]), dtype="<f4")
    ok(st == 200 and len(v) == 256 and
       float(np.max(np.abs(v - np.array(one[0].data[0].embedding)))) < 1e-6,
       "base64: decodes to the float vector")

    # dimensions: the first N, re-normalised
    d = c.embeddings.create(model=mid, input=TEXTS[1], dimensions=64, encoding_format="float")
    full = np.array(one[1].data[0].embedding[:64])
    full /= np.linalg.norm(full)
    ok(len(d.data[0].embedding) == 64 and
       float(np.max(np.abs(np.array(d.data[0].embedding) - full))) < 1e-5,
       "dimensions 64: the first 64 of the full vector, re-normalised")

    # token ids: the same as the text they spell
    ids = [int(x) for x in subprocess.run(
        [TERN, "tokenize", "-m", path, "--ids", "--bos", TEXTS[1]],
        capture_output=True, text=True, check=True).stdout.split()]
    t = c.embeddings.create(model=mid, input=ids, encoding_format="float")
    tt = c.embeddings.create(model=mid, input=[ids, ids[:3]], encoding_format="float")
    ok(embed_lib.cosine(t.data[0].embedding, one[1].data[0].embedding) > 0.99999 and
       len(tt.data) == 2 and t.usage.prompt_tokens == len(ids),
       "token-id input (and a list of them) equals the text's vector")

    # bad input: clear 400s
    m0 = metrics(srv.base)
    e = err_of(lambda: c.embeddings.create(model=mid, input=""))
    ok(e is not None and e.status_code == 400 and "empty" in str(e), f"empty string: 400 ({e})")
    e = err_of(lambda: c.embeddings.create(model=mid, input=[]))
    ok(e is not None and e.status_code == 400 and "empty" in str(e), f"empty list: 400 ({e})")
    e = err_of(lambda: c.embeddings.create(model=mid, input=["ok", ""]))
    ok(e is not None and e.status_code == 400 and "input[1]" in str(e),
       f"an empty item names its index: 400 ({e})")
    long = " ".join(["word"] * 200)
    e = err_of(lambda: c.embeddings.create(model=mid, input=["fine", long]))
    ok(e is not None and e.status_code == 400 and "too large" in str(e) and "input[1]" in str(e),
       f"input beyond the 64-token context: 400 ({e})")
    e = err_of(lambda: c.embeddings.create(model=mid, input=[1, 999999]))
    ok(e is not None and e.status_code == 400 and "vocabulary" in str(e),
       f"token id outside the vocabulary: 400 ({e})")
    e = err_of(lambda: c.embeddings.create(model=mid, input="x", dimensions=100000))
    ok(e is not None and e.status_code == 400 and "dimensions" in str(e), f"dimensions too big: 400 ({e})")
    st, _, body = request(srv.base, "POST", "/v1/embeddings",
                          {"input": "x", "encoding_format": "int8"})
    ok(st == 400 and b"encoding_format" in body, f"unknown encoding_format: 400 ({body[:80]})")
    st, _, body = request(srv.base, "POST", "/v1/embeddings",
                          b'{"input": ["ok", "caf\xc3"]}')
    ok(st == 400 and b"input[1]" in body and b"UTF-8" in body, f"invalid UTF-8: 400 ({body[:80]})")
    st, _, body = request(srv.base, "POST", "/v1/embeddings", b'{"input": ')
    ok(st == 400, f"malformed JSON: 400 ({body[:80]})")
    st, _, body = request(srv.base, "POST", "/v1/embeddings", {"input": [{"a": 1}]})
    ok(st == 400, f"an object in input: 400 ({body[:80]})")
    st, _, body = request(srv.base, "POST", "/v1/embeddings", {"input": "x", "model": "nope"})
    ok(st == 404 and b"model_not_found" in body, "unknown model: 404")
    st, _, body = request(srv.base, "GET", "/v1/embeddings")
    ok(st == 405, "GET /v1/embeddings: 405")

    # in the same steps as a completion's decodes (logits and hidden-state
    # rows in one batch): the same vectors
    import threading
    res = {}
    th = threading.Thread(target=lambda: res.update(r=c.completions.create(
        model=mid, prompt="hello", max_tokens=40, temperature=0)))
    th.start()
    mixed = c.embeddings.create(model=mid, input=TEXTS, encoding_format="float")
    th.join()
    diff = max(float(np.max(np.abs(np.array(d.embedding) - np.array(s.data[0].embedding))))
               for d, s in zip(mixed.data, one))
    ok(diff < 1e-5 and res.get("r") is not None and res["r"].usage.completion_tokens >= 1,
       f"beside a running completion: the same vectors (max diff {diff:.2e}), and it completes")

    # /metrics: each input is a finished request; the rejections are counted
    m1 = metrics(srv.base)
    succ = metric(m1, "vllm:request_success_total", finished_reason="stop")
    n_ok = len(TEXTS) * 3 + 1 + 1 + 1 + 2  # singles, batch, mixed, base64, dims, ids (1 + 2)
    ok(succ >= n_ok, f"/metrics: vllm:request_success_total{{stop}} {succ:.0f} >= {n_ok}")
    ok(metric(m1, "vllm:prompt_tokens_total") >= b.usage.prompt_tokens * 2,
       f"/metrics: prompt tokens counted ({metric(m1, 'vllm:prompt_tokens_total'):.0f})")
    rej = sum(v for (k, _), v in m1.items() if k == "tern:rejected_requests_total") - \
        sum(v for (k, _), v in m0.items() if k == "tern:rejected_requests_total")
    ok(rej >= 6, f"/metrics: the bad requests are counted as rejected (+{rej:.0f})")
    log = srv.access()
    emb = [l for l in log if l.get("route") == "/v1/embeddings"]
    ok(len(emb) >= 10 and any(l.get("status") == 400 for l in emb),
       f"access log: {len(emb)} /v1/embeddings lines, the 400s among them")
    ok(srv.stop() == 0, f"{name}: server exits cleanly")

ok(embed_lib.cosine(pooled["last"].data[1].embedding, pooled["mean"].data[1].embedding) < 0.999,
   "last-token and mean pooling give different vectors")

# SmolLM2 has no pooling type: mean pooling, as llama-server does
serve_lib.MODEL = serve_lib.os.environ.get("TERN_TEST_MODEL", serve_lib.os.path.expanduser(
    "~/.local/share/tern/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
srv = Server()
ok(srv.ready(), "SmolLM2 server up")
c = client(srv)
r = c.embeddings.create(model="default", input=TEXTS[:2], encoding_format="float")
ref = embed_lib.reference(ref_bin, serve_lib.MODEL, TEXTS[:2], "mean")
cos = [embed_lib.cosine(d.embedding, v) for d, v in zip(r.data, ref)]
ok(len(r.data[0].embedding) == 576 and min(cos) >= 0.999,
   f"SmolLM2 (no pooling type): mean pooling, cosine with llama-embedding --pooling mean "
   f"{', '.join(f'{x:.6f}' for x in cos)}")
ok(srv.stop() == 0, "SmolLM2 server exits cleanly")
done()
