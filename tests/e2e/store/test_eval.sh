#!/bin/bash
# test_eval: 'tern eval'. Perplexity of the default model on
# ../shared/texts/gpl-3.0.txt (context 512, first chunk) equals the reference
# engine's figure for the same chunk and scored positions (ppl_ref.json, made
# by make_ppl_ref.py with llama-cpp-python) within 0.5 %, tighter than an
# off-by-one in the scored window would allow (>= 0.7 %), and is stored; the
# strided method runs; a prompt set with malformed lines reports them by line number, skips them,
# writes JSONL with timings, and its exact-match accuracy agrees with the
# outputs; through the scheduler it equals the engine's own ppl_run figure;
# "prompt" lines get the chat template (--raw / "raw": true opt out), failed
# requests are reported by line, and the JSONL fields are documented.
# usage: test_eval.sh PPL_DIRECT   (TERN_BIN, TERN_SRC, TERN_SHARED from test_env)
. "$TERN_SRC/tests/tap.sh"
ppl_direct=$1
tern=$TERN_BIN
dir=$(mktemp -d /tmp/tern-eval-XXXXXX)
trap 'rm -rf "$dir"' EXIT
model=$("$TERN_SRC/packaging/fetch-model" --print-path)
ok $? "default model available"
text=$TERN_SHARED/texts/gpl-3.0.txt
[ -r "$text" ]; ok $? "shared text present ($text)"

"$tern" eval -m "$model" --perplexity "$text" --ctx 512 --chunks 1 --json --db "$dir/h.db" \
    > "$dir/ppl.json" 2> "$dir/err"
ok $? "eval --perplexity ran ($(tail -c 300 "$dir/err"))"
python3 - "$dir/ppl.json" "$TERN_SRC/tests/e2e/store/ppl_ref.json" "$dir/h.db" <<'PY'
import json, sqlite3, sys
got = json.load(open(sys.argv[1]))["result"]
ref = json.load(open(sys.argv[2]))
want = ref["llama_cpp"]["running"][0]  # the reference, chunk 1 alone
print(f"# tern {got['perplexity']:.4f}  reference {want:.4f}  "
      f"({100 * (got['perplexity'] / want - 1):+.2f} %)")
assert got["chunks"] == 1 and ref["ctx"] == 512
assert got["scored"] == 512 - 256 - 1  # llama-perplexity scores n_ctx - n_ctx/2 - 1 per chunk
assert abs(got["perplexity"] / want - 1) <= 0.005
row = sqlite3.connect(sys.argv[3]).execute(
    "select json_extract(summary, '$.perplexity'), json_extract(config, '$.ctx') from runs"
    " where kind = 'eval-perplexity'").fetchall()
assert len(row) == 1 and abs(row[0][0] - got["perplexity"]) < 1e-9 and row[0][1] == 512, row
PY
ok $? "perplexity equals the reference engine's within 0.5 % and is stored"

direct=$("$ppl_direct" "$model" "$text" 512 1)
python3 -c "
import json,sys
got=json.load(open(sys.argv[1]))['result']; d,n,e=sys.argv[2].split()
print(f'# through the scheduler {got[\"perplexity\"]:.6f} ± {got[\"perplexity_err\"]:.6f}, '
      f'ppl_run on the backend {float(d):.6f} ± {float(e):.6f}')
assert int(n)==got['scored'] and abs(got['perplexity']/float(d)-1) <= 1e-4
assert float(e) > 0 and abs(got['perplexity_err']/float(e)-1) <= 1e-3" "$dir/ppl.json" "$direct"
ok $? "equals the engine's own figure and standard error (engine/core/perplexity.h ppl_run) within 1e-4, 1e-3"
"$tern" eval -m "$model" --perplexity "$text" --ctx 128 --chunks 2 --no-save > "$dir/ppl.txt" 2>&1
grep -Eq '^perplexity [0-9.]+ ± [0-9.]+ over 2 chunks of 128 tokens \(126 scored\)' "$dir/ppl.txt"
ok $? "the text gives the perplexity with its standard error ($(grep -m1 '^perplexity' "$dir/ppl.txt"))"

# --kv-type q8_0: the same chunk with the quantized KV cache; the figure moves
# (the cache is not f16) but stays within 1 % (the issue's bound for q4_0;
# docs/PERFORMANCE.md has the whole-text figures beside the reference's)
"$tern" eval -m "$model" --perplexity "$text" --ctx 512 --chunks 1 --json --no-save --kv-type q8_0 \
    > "$dir/q8.json" 2> "$dir/err"
python3 -c "
import json,sys
a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))
pa, pb = a['result']['perplexity'], b['result']['perplexity']
print(f'# KV f16 {pa:.4f}, q8_0 {pb:.4f} ({100 * (pb / pa - 1):+.3f} %)')
assert b['config']['kv_type'] == 'q8_0' and a['config']['kv_type'] == 'f16'
assert pa != pb and abs(pb / pa - 1) <= 0.01" "$dir/ppl.json" "$dir/q8.json"
ok $? "--kv-type q8_0: a different figure within 1 % of f16, said in the config ($(tail -c 200 "$dir/err"))"

# --kv-type q4_0 (rotated as the reference's attn_rot): chunk 1 moves +2.8 %
# (the whole text +6.0 %, the reference's llama-perplexity -ctk q4_0 -ctv q4_0
# +5.9 %: docs/PERFORMANCE.md §8). 5 % here; unrotated it was +20 %.
"$tern" eval -m "$model" --perplexity "$text" --ctx 512 --chunks 1 --json --no-save --kv-type q4_0 \
    > "$dir/q4.json" 2> "$dir/err"
python3 -c "
import json,sys
a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))
pa, pb = a['result']['perplexity'], b['result']['perplexity']
print(f'# KV f16 {pa:.4f}, q4_0 {pb:.4f} ({100 * (pb / pa - 1):+.3f} %)')
assert b['config']['kv_type'] == 'q4_0'
assert pa != pb and abs(pb / pa - 1) <= 0.05" "$dir/ppl.json" "$dir/q4.json"
ok $? "--kv-type q4_0: a different figure within 5 % of f16, said in the config ($(tail -c 200 "$dir/err"))"

"$tern" eval -m "$model" --perplexity "$text" --ctx 128 --stride 64 --chunks 2 --json --no-save \
    > "$dir/s.json" 2>/dev/null
python3 -c "
import json,sys,math; r=json.load(open(sys.argv[1]))['result']
assert r['chunks']==2 and r['scored']==2*64 and 1 < r['perplexity'] < 1000, r" "$dir/s.json"
ok $? "--stride: windows every 64 tokens, their last 64 predictions scored"

head -c 300 "$text" > "$dir/short.txt"
"$tern" eval -m "$model" --perplexity "$dir/short.txt" --no-save 2> "$dir/err"; r=$?
[ $r = 1 ] && grep -q "needs at least 1024" "$dir/err"
ok $? "text too short for the context: status 1, says how many tokens are needed"

cat > "$dir/in.jsonl" <<'JL'
{"id": "cap", "prompt": "The capital of France is", "max_tokens": 4, "answer": "Paris"}
{"id": "broken", "prompt": "oops"
{"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 6}

{"id": 4, "max_tokens": 3}
[1, 2]
{"prompt": "1, 2, 3, 4,", "max_tokens": 5, "answer": "5, 6, 7"}
{"messages": [{"role": "user"}]}
JL
"$tern" eval -m "$model" --prompts "$dir/in.jsonl" --concurrency 2 --out "$dir/out.jsonl" \
    --db "$dir/h.db" 2> "$dir/err"
ok $? "eval --prompts ran despite bad lines"
for l in 2 5 6 8; do
    grep -q "in.jsonl:$l: .*skipped" "$dir/err"; ok $? "bad line $l reported by number"
done
python3 - "$dir/out.jsonl" "$dir/h.db" <<'PY'
import json, sqlite3, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["line"] for r in rows] == [1, 3, 7], rows
for r in rows:
    assert set(r["timings"]) == {"queue_s", "prefill_s", "ttft_s", "tpot_s", "decode_s", "e2e_s"}
    assert r["timings"]["ttft_s"] <= r["timings"]["e2e_s"]
    assert r["generated_tokens"] >= 1 and r["prompt_tokens"] >= 1
graded = [r for r in rows if "expected" in r]
assert len(graded) == 2
for r in graded:
    assert r["match"] == (r["output"].strip() == r["expected"].strip())
s = json.loads(sqlite3.connect(sys.argv[2]).execute(
    "select summary from runs where kind = 'eval-prompts'").fetchone()[0])
assert s["requests"] == 3 and s["skipped_lines"] == 4
assert [b["line"] for b in s["bad_lines"]] == [2, 5, 6, 8]
assert s["exact_match"] == sum(r["match"] for r in graded) and s["with_answer"] == 2
assert abs(s["accuracy"] - s["exact_match"] / 2) < 1e-12
PY
ok $? "JSONL outputs with timings in input order; accuracy agrees with the outputs; run stored"

# "prompt" lines of a chat model go through its chat template, as tern run
# sends a prompt (raw, SmolLM2-Instruct answers this with nothing at all);
# --raw or "raw": true send them as plain text; failures name their line
cat > "$dir/chat.jsonl" <<'JL'
{"id": "p", "prompt": "What is the capital of France? Answer with one word.", "max_tokens": 16}
{"id": "m", "messages": [{"role": "user", "content": "What is the capital of France? Answer with one word."}], "max_tokens": 16}
{"id": "r", "prompt": "What is the capital of France? Answer with one word.", "max_tokens": 16, "raw": true}
{"id": "big", "prompt": "Hi", "max_tokens": 1000000}
{"id": "s", "prompt": "What is the capital of France?", "system": "Answer in one word.", "max_tokens": 16}
JL
"$tern" eval -m "$model" --prompts "$dir/chat.jsonl" --no-save > "$dir/chat.out" 2> "$dir/chat.err"
ok $? "eval --prompts with a failing line: status 0 ($(tail -1 "$dir/chat.err"))"
"$tern" eval -m "$model" --prompts "$dir/chat.jsonl" --no-save --raw > "$dir/raw.out" 2> "$dir/raw.err"
python3 - "$dir/chat.out" "$dir/raw.out" <<'PY'
import json, sys
t = {r["id"]: r for r in map(json.loads, open(sys.argv[1]))}
w = {r["id"]: r for r in map(json.loads, open(sys.argv[2]))}
for k in "pmr":
    print(f"# {k}: template {t[k]['chat_template']} {t[k]['output']!r}; --raw: {w[k]['chat_template']} {w[k]['output']!r}")
assert t["p"]["chat_template"] and "Paris" in t["p"]["output"], t["p"]
assert t["p"]["output"] == t["m"]["output"], "a prompt line = the same question as messages"
assert t["s"]["chat_template"] and t["s"]["output"].strip(), t["s"]
assert not t["r"]["chat_template"] and t["r"]["output"] != t["p"]["output"], t["r"]
assert not w["p"]["chat_template"] and w["p"]["output"] == t["r"]["output"], "--raw = \"raw\": true"
assert w["m"]["chat_template"] and w["m"]["output"] == t["m"]["output"], "messages keep the template"
assert "s" not in w, "a system message needs the template: skipped with --raw"
assert t["big"]["status"] == "rejected" and t["big"]["message"], t["big"]
PY
ok $? "a \"prompt\" line gets the chat template (the answer names Paris, as its messages form); --raw and \"raw\": true send it plain"
grep -q 'chat.jsonl:4 (id "big"): failed: rejected: request too large' "$dir/chat.err"
ok $? "a failed request is reported with its line, id and status"
grep -q '5 prompts: 4 completed, 1 failed, 0 bad lines skipped' "$dir/chat.err"
ok $? "the summary counts completed and failed ($(tail -1 "$dir/chat.err"))"
grep -q 'chat.jsonl:5: "system" needs the chat template' "$dir/raw.err"
ok $? "--raw: a line with a system message is reported and skipped"
# the new fields of untrusted JSONL with the wrong types: each line named and skipped
cat > "$dir/badf.jsonl" <<'JL'
{"id": "a", "prompt": "Hi", "raw": "yes"}
{"id": "b", "prompt": "Hi", "system": 5}
{"id": "c", "messages": [{"role": "user", "content": "Hi"}], "raw": true}
{"id": "d", "messages": [{"role": "user", "content": "Hi"}], "system": "x"}
{"id": "e", "prompt": "Hi", "max_tokens": 2}
JL
"$tern" eval -m "$model" --prompts "$dir/badf.jsonl" --no-save > /dev/null 2> "$dir/badf.err"
ok $? "lines with wrongly typed raw/system fields do not stop the run"
grep -q 'badf.jsonl:1: "raw" must be true or false' "$dir/badf.err" &&
  grep -q 'badf.jsonl:2: "system" must be a string' "$dir/badf.err" &&
  grep -q 'badf.jsonl:3: "raw" is for "prompt" lines' "$dir/badf.err" &&
  grep -q 'badf.jsonl:4: has both "system" and "messages"' "$dir/badf.err" &&
  grep -q '1 completed, 0 failed, 4 bad lines skipped' "$dir/badf.err"
ok $? "each bad line is named with its reason and counted as skipped ($(tail -1 "$dir/badf.err"))"
echo '{"id": "big", "prompt": "Hi", "max_tokens": 1000000}' > "$dir/fail.jsonl"
"$tern" eval -m "$model" --prompts "$dir/fail.jsonl" --no-save >/dev/null 2>&1; [ $? = 1 ]
ok $? "no request completed: status 1"
help=$("$tern" help eval 2>&1)
for f in '"prompt"' '"messages"' '"system"' '"answer"' '"expected"' '"max_tokens"' '"raw"' '--raw'; do
    grep -qF -- "$f" <<<"$help" && grep -qF -- "$f" "$TERN_SRC/packaging/man/tern-eval.1.scd"
    ok $? "tern help eval and tern-eval(1) document $f"
done

"$tern" eval --prompts "$dir/none.jsonl" --no-save 2>/dev/null; [ $? = 1 ]
ok $? "missing prompt file: status 1"
"$tern" eval 2>/dev/null; [ $? = 2 ]
ok $? "no mode: usage error"
tap_done
