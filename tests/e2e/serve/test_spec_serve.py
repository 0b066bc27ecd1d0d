"""test_spec_serve: tern serve --lookup (speculative decoding by n-gram
prompt lookup). The same greedy editing requests on a plain server and on a
--lookup server give the same text, one at a time and several at once;
/metrics carries vLLM's spec_decode counters (drafts, draft tokens, accepted
tokens) with accepted <= drafted; a request's own lookup_k on a plain server
does the same, and an out-of-range one is a 400. tern run --lookup: the same
reply, acceptance in --json's metrics and in -v."""
import concurrent.futures
import json
import subprocess

from serve_lib import MODEL, TERN, Server, done, metric, metrics, ok, request

PASSAGE = ("The licenses for most software and other practical works are designed to take away "
           "your freedom to share and change the works. By contrast, the GNU General Public "
           "License is intended to guarantee your freedom to share and change all versions of a "
           "program--to make sure it remains free software for all its users.")
PROMPTS = [f"Rewrite this passage exactly, replacing 'software' with 'code':\n\n{PASSAGE}",
           f"Repeat this text twice:\n\n{PASSAGE}",
           "Write a short story about a cat."]


def ask(base, prompt, **extra):
    body = json.dumps(dict({"model": "default", "messages": [{"role": "user", "content": prompt}],
                            "max_tokens": 120, "temperature": 0}, **extra)).encode()
    st, _, out = request(base, "POST", "/v1/chat/completions", body, timeout=300)
    return st, json.loads(out) if st == 200 else None


plain = Server()
ok(plain.ready(), "plain server up")
want = [ask(plain.base, p)[1]["choices"][0]["message"]["content"] for p in PROMPTS]
m0 = metrics(plain.base)
ok(metric(m0, "vllm:spec_decode_num_drafts_total") == 0, "plain server: no drafts")
# per request: lookup_k on a server without --lookup
st, j = ask(plain.base, PROMPTS[0], lookup_k=4)
ok(st == 200 and j["choices"][0]["message"]["content"] == want[0],
   "request lookup_k 4 on a plain server: same text")
m1 = metrics(plain.base)
ok(metric(m1, "vllm:spec_decode_num_drafts_total") > 0, "request lookup_k: drafts counted")
st, _ = ask(plain.base, PROMPTS[0], lookup_k=33)
ok(st == 400, f"lookup_k 33: 400 ({st})")
plain.stop()

spec = Server(args=["--lookup-k", "5"])
ok(spec.ready(), "--lookup server up")
for i, p in enumerate(PROMPTS):
    st, j = ask(spec.base, p)
    ok(st == 200 and j["choices"][0]["message"]["content"] == want[i],
       f"prompt {i} alone: same text as without --lookup")
with concurrent.futures.ThreadPoolExecutor(3) as ex:
    got = list(ex.map(lambda p: ask(spec.base, p), PROMPTS))
for i, (st, j) in enumerate(got):
    ok(st == 200 and j["choices"][0]["message"]["content"] == want[i],
       f"prompt {i} in a batch of 3: same text as without --lookup")
m = metrics(spec.base)
drafts = metric(m, "vllm:spec_decode_num_drafts_total")
drafted = metric(m, "vllm:spec_decode_num_draft_tokens_total")
acc = metric(m, "vllm:spec_decode_num_accepted_tokens_total")
ok(drafts > 0 and drafted >= drafts and 0 < acc <= drafted,
   f"/metrics: {drafts:.0f} drafts, {drafted:.0f} draft tokens, {acc:.0f} accepted")
spec.stop()

# tern run: the same reply with --lookup; the figures in --json and -v
def run(*args):
    return subprocess.run([TERN, "run", "-m", MODEL, "-t", "1", "-n", "80", "--temp", "0",
                           "--no-history", *args, "-p", PROMPTS[1]],
                          capture_output=True, text=True, timeout=300)
a, b = run("--json"), run("--json", "--lookup-k", "4")
ja, jb = json.loads(a.stdout), json.loads(b.stdout)
ok(ja["reply"] == jb["reply"] and "spec_steps" not in ja["metrics"],
   "tern run --lookup-k 4: the same reply")
mb = jb["metrics"]
ok(mb.get("spec_steps", 0) > 0 and 0 < mb["spec_accepted_tokens"] <= mb["spec_draft_tokens"]
   and 0 < mb["spec_acceptance_rate"] <= 1 and mb["spec_tokens_per_step"] > 1,
   f"--json metrics: {dict((k, v) for k, v in mb.items() if k.startswith('spec'))}")
v = run("-v", "--lookup")
ok(v.returncode == 0 and "guessed tokens accepted" in v.stderr and "tokens/step" in v.stderr,
   "tern run -v --lookup prints the acceptance")
done()
