#!/bin/bash
# test_kv_q4c_gen: generation on a q4c KV cache (#39: K per channel over each
# block, the block a query is in read from its f16 staging, V per token as
# q5_0) through every front end, on the default model:
# - eval: the perplexity within 2 % of f16's and below q4_0's; the same bits
#   batched, token by token and 5 at a time (a query reads its own block from
#   staging however the tokens are batched); run -v's pool counts 8280 bytes
#   per token, info's figure;
# - run: greedy speculative decoding (--lookup: verifications whose tokens
#   are taken back rewrite closed blocks) replies token for token as plain
#   decoding; a long prompt (several blocks) replies;
# - bench, chat (off-screen) and serve (two identical greedy requests, and
#   two at once: the staging shared by sequences) take it.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/model_env.sh"
tern=$TERN_BIN
text=$TERN_SRC/../shared/texts/gpl-3.0.txt
[ -r "$text" ] || text=/usr/share/common-licenses/GPL-3

# eval: quality and batch invariance
for run in "f16 0" "q4_0 0" "q4c 0" "q4c 1" "q4c 5"; do
    set -- $run
    "$tern" eval -m "$MODEL" --perplexity "$text" --ctx 256 --chunks 4 -t 2 --no-save --json \
        --kv-type $1 $([ $2 != 0 ] && echo --step-tokens $2) \
        > "$TMP/ppl-$1-$2.json" 2> "$TMP/ppl.err"
    ok $? "eval --kv-type $1 --step-tokens $2 ($(tail -c 150 "$TMP/ppl.err"))"
done
python3 - "$TMP" <<'PY'
import json, sys
d = sys.argv[1]
p = {k: json.load(open(f"{d}/ppl-{k}.json"))["result"]["perplexity"]
     for k in ("f16-0", "q4_0-0", "q4c-0", "q4c-1", "q4c-5")}
print("# " + ", ".join(f"{k} {v:.4f}" for k, v in p.items()))
assert abs(p["q4c-0"] / p["f16-0"] - 1) < 0.02, p
assert p["q4c-0"] < p["q4_0-0"], p
assert p["q4c-0"] != p["f16-0"], p           # the cache is really quantized
# the same logits: only the sums' order may differ
assert all(abs(p[k] / p["q4c-0"] - 1) < 1e-9 for k in ("q4c-1", "q4c-5")), p
PY
ok $? "eval: q4c within 2 % of f16 and below q4_0; batched = one by one = 5 at a time, bit for bit"

"$tern" run -m "$MODEL" --kv-type q4c --kv-mem 8M -v -n 4 -t 1 --no-history "Hi" \
    > /dev/null 2> "$TMP/run.err"
grep -Eq "KV cache: +[0-9]+ tokens, [0-9.]+ MiB, 8280 bytes per token" "$TMP/run.err"
ok $? "run -v --kv-type q4c: 8280 bytes per token ($(grep 'KV cache' "$TMP/run.err"))"

# greedy speculative decoding over q4c: the same reply as plain decoding
prompt="Repeat this list exactly, then continue it: alpha beta gamma delta epsilon zeta eta"
prompt+=" theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega"
prompt+=" alpha beta gamma delta"
"$tern" run -m "$MODEL" --kv-type q4c --temp 0 -n 96 -t 1 --no-history "$prompt" \
    > "$TMP/plain.txt" 2> "$TMP/plain.err"
ok $? "run --kv-type q4c (plain) replies"
"$tern" run -m "$MODEL" --kv-type q4c --temp 0 -n 96 -t 1 --no-history --lookup -v "$prompt" \
    > "$TMP/look.txt" 2> "$TMP/look.err"
ok $? "run --kv-type q4c --lookup replies"
cmp -s "$TMP/plain.txt" "$TMP/look.txt"
ok $? "q4c: --lookup's greedy reply is plain decoding's, token for token \
($(wc -c < "$TMP/plain.txt") bytes)"
[ "$(wc -c < "$TMP/plain.txt")" -gt 100 ]
ok $? "the reply is long enough to cross blocks"

long=$(head -c 3000 "$text")
"$tern" run -m "$MODEL" --kv-type q4c --temp 0 -n 16 -t 2 --no-history "Summarise: $long" \
    > "$TMP/long.txt" 2> "$TMP/long.err"
[ $? -eq 0 ] && [ -s "$TMP/long.txt" ]
ok $? "run --kv-type q4c: a prompt of ~700 tokens replies ($(tail -c 150 "$TMP/long.err"))"

"$tern" bench -m "$MODEL" --kv-type q4c --pp 64 --tg 8 -r 1 -t 1 > "$TMP/bench.out" 2> "$TMP/bench.err"
[ $? -eq 0 ] && grep -q "tg8" "$TMP/bench.out"
ok $? "bench --kv-type q4c runs ($(tail -c 150 "$TMP/bench.err"))"

"$tern" chat -m "$MODEL" --kv-type q4c -t 1 --size 100x30 --temp 0 --max-tokens 8 \
    --headless-frames 3000 --keys '{wait}Hi\r{wait}' > "$TMP/chat.out" 2> "$TMP/chat.err"
grep -Eq 'assistant · [0-9]+ tok' "$TMP/chat.out"
ok $? "chat --kv-type q4c: the reply finishes"

# serve: two identical greedy requests, then two at once
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$tern" serve -m "$MODEL" --kv-type q4c --port "$port" --threads 1 --no-history \
    > "$TMP/serve.log" 2>&1 &
spid=$!
trap 'kill $spid 2>/dev/null; wait $spid 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$port/ready" > /dev/null 2>&1 && break
    sleep 0.1
done
req='{"model":"SmolLM2-135M-Instruct.Q4_1","messages":[{"role":"user","content":"Count from one to twenty in words."}],"max_tokens":48,"temperature":0}'
for i in 1 2; do
    curl -sf -m 120 "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
        -d "$req" > "$TMP/s$i.json"
done
curl -sf -m 120 "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
    -d "$req" > "$TMP/s3.json" &
c3=$!
curl -sf -m 120 "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
    -d "$req" > "$TMP/s4.json"
wait $c3
python3 - "$TMP" <<'PY'
import json, sys
d = sys.argv[1]
r = [json.load(open(f"{d}/s{i}.json"))["choices"][0]["message"]["content"] for i in (1, 2, 3, 4)]
print(f"# {r[0][:60]!r}")
assert len(r[0]) > 20, r
assert r[0] == r[1] == r[2] == r[3], r
PY
ok $? "serve --kv-type q4c: greedy replies identical, one after another and two at once"
tap_done
