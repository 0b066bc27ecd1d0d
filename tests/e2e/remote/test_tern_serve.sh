#!/usr/bin/env bash
# test_tern_serve: the remote engine against tern serve (the same binary) on
# the default model, loopback only: the live checks, then run and eval
# --prompts through --url give exactly the in-process greedy outputs, the
# server's phase block reaches the client, eval --perplexity through --url
# (echo + logprobs) gives the in-process figure, logprobs through the
# official openai client (test_logprobs.py), and the chat's context limit
# comes from the server's /v1/models.
# Under a sanitizer (TERN_TEST_TIME_SCALE > 1, tests/e2e/remote/meson.build) the
# model runs 20-50x slower (TSan): the perplexity is compared over 2 chunks
# of 64 tokens instead of 4 of 128 (the same assertion on less text; a
# 128-token chunk there outlasts the client's 60 s read timeout), and every
# child's stderr and the server's log must hold no sanitizer report.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/remote/live_checks.sh"
T=$TERN_BIN
S=${TERN_TEST_TIME_SCALE:-1}
ppl_args=(--ctx 128 --chunks 4)
[ "$S" != 1 ] && ppl_args=(--ctx 64 --chunks 2)
out=$(mktemp -d)
spid=
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$out"' EXIT
model=$("$TERN_SRC/packaging/fetch-model" --print-path 2>"$out/fetch") ||
  { echo "Bail out! no default model: $(tail -1 "$out/fetch")"; exit 1; }
"$T" serve --help >/dev/null 2>&1 || { echo "Bail out! this tern has no 'serve' command"; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$T" serve -m "$model" --port "$port" --threads 1 --no-history --access-log "$out/access.log" \
  >"$out/serve.log" 2>&1 &
spid=$!
U=http://127.0.0.1:$port/v1
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$port/ready" >/dev/null ||
  { echo "Bail out! tern serve not ready in 30 s: $(tail -2 "$out/serve.log" | tr '\n' ' ')"; exit 1; }

live_checks "$U"

p="Write one sentence about the sea."
"$T" run -m "$model" --threads 1 --no-history --temp 0 -n 24 -p "$p" >"$out/local" 2>"$out/locale"
"$T" run --url "$U" --no-history --temp 0 -n 24 -p "$p" -v >"$out/remote" 2>"$out/re"
ok $(cmp -s "$out/local" "$out/remote"; echo $?) "run --url: the same greedy reply as in-process"
ok $(grep -q 'prefill (server):' "$out/re"; echo $?) "run --url: tern's phase block (server-side prefill) reaches the client"
"$T" run --url "$U" --no-history --temp 0 -n 24 -p "$p" --json >"$out/rj" 2>/dev/null
python3 -c 'import json,sys
j=json.load(open(sys.argv[1])); p=j["phases"]; want=open(sys.argv[2]).read()[:-1]
print("# --json over --url: prefill (server) %s s, connect %s s" % (p["prefill_s"], p["connect_s"]))
sys.exit(not (j["reply"] == want and j["url"] and p["prefill_s"] is not None and p["connect_s"] >= 0
              and j["usage"]["completion_tokens"] == j["metrics"]["generated_tokens"]))' "$out/rj" "$out/local"
ok $? "run --url --json: the same reply, the server's prefill and the client's connect time"
printf '%s\n' '{"id":"a","prompt":"The capital of France is","max_tokens":12,"temperature":0}' \
  '{"id":"b","messages":[{"role":"user","content":"Name three colors."}],"max_tokens":16,"temperature":0}' \
  >"$out/p.jsonl"
"$T" eval --prompts "$out/p.jsonl" --no-save -m "$model" --threads 1 >"$out/el" 2>"$out/ele"
"$T" eval --prompts "$out/p.jsonl" --no-save --url "$U" >"$out/er" 2>"$out/ere"
python3 -c 'import json,sys
a=[json.loads(l)["output"] for l in open(sys.argv[1])]; b=[json.loads(l)["output"] for l in open(sys.argv[2])]
print("# local ", a); print("# remote", b); sys.exit(not (a == b and len(a) == 2))' "$out/el" "$out/er"
ok $? "eval --prompts --url: the same greedy outputs as in-process"
txt=${TERN_SHARED:-$TERN_SRC/../shared}/texts/gpl-3.0.txt   # the test data beside the clone
[ -r "$txt" ] || txt=$TERN_SRC/README.md
"$T" eval --perplexity "$txt" "${ppl_args[@]}" -m "$model" --threads 1 --no-save --json \
  >"$out/pl" 2>"$out/ple"
"$T" eval --perplexity "$txt" "${ppl_args[@]}" -m "$model" --url "$U" --no-save --json \
  >"$out/pr" 2>"$out/pre"
python3 -c 'import json,sys
a=json.load(open(sys.argv[1]))["result"]; b=json.load(open(sys.argv[2]))["result"]
print("# in-process ppl %.6f (%d scored), --url ppl %.6f (%d scored)" % (a["perplexity"], a["scored"], b["perplexity"], b["scored"]))
sys.exit(not ("%.4f" % a["perplexity"] == "%.4f" % b["perplexity"] and a["scored"] == b["scored"] > 0
              and a["perplexity_err"] > 0 and abs(b["perplexity_err"] / a["perplexity_err"] - 1) < 1e-3))' \
  "$out/pl" "$out/pr"
ok $? "eval --perplexity --url: the in-process perplexity (print precision) and standard error, the same tokens scored"
"$T" eval --perplexity "$txt" --url "$U" --no-save >/dev/null 2>"$out/pe"
ok $(grep -q 'needs -m MODEL' "$out/pe"; echo $?) "eval --perplexity --url without -m: asks for the tokenizer's model file"
while IFS= read -r line; do
  case $line in
    "ok "*) ok 0 "openai logprobs: ${line#* - }" ;;
    "not ok "*) ok 1 "openai logprobs: ${line#* - }" ;;
    "#"*) echo "$line" ;;
  esac
done < <(timeout 120 python3 "$TERN_SRC/tests/e2e/remote/test_logprobs.py" "$U" 2>&1 || echo "not ok 0 - test_logprobs.py exited $?")
# tern chat --attach: the real TUI loop off-screen, chatting through the
# server and showing its engine in the instruments.
export XDG_DATA_HOME=$out/data XDG_CONFIG_HOME=$out/config
timeout 120 "$T" chat --attach="http://127.0.0.1:$port" --size 120x36 --headless-frames 600 \
  --keys '{wait}Say hi in one word.\r{wait}' >"$out/tui" 2>"$out/tuie"
ok $? "chat --attach: the headless TUI exits 0"
flat=$(tr -d ' ' <"$out/tui")
ok $(grep -q 'assistant·[0-9]*tok' <<<"$flat"; echo $?) "chat --attach: a reply streamed through the server"
ok $(grep -q 'servertern' <<<"$flat" && grep -q 'clientp50/p90' <<<"$flat"; echo $?) \
  "chat --attach: instruments show the server's engine beside the client's figures"
ok $(grep -q "uphttp://127.0.0.1:$port/v1" <<<"$flat"; echo $?) "chat --attach: the endpoint listed healthy"
ctxlim=$(curl -sf "http://127.0.0.1:$port/v1/models" | python3 -c 'import json,sys; n=json.load(sys.stdin)["data"][0]["context_length"]; print("%.1fk" % (n/1000) if n >= 1000 else n)')
ok $(grep -q "context[0-9.k]*/$ctxlim" <<<"$flat"; echo $?) "chat --attach: the context gauge shows the server's context_length ($ctxlim)"
# The server exits clean on SIGTERM (ASan's leak check runs then); no
# sanitizer report anywhere (clients' stderr and the server's log).
kill -TERM "$spid"; wait "$spid"; src=$?; spid=
ok $([ $src -eq 0 ]; echo $?) "tern serve exits 0 on SIGTERM (got $src)"
reports=$(grep -lE 'ThreadSanitizer|AddressSanitizer|LeakSanitizer|runtime error:' "$out"/* 2>/dev/null | xargs -r -n1 basename | tr '\n' ' ')
ok $([ -z "$reports" ]; echo $?) "no sanitizer report from the server or the clients${reports:+ (in: $reports)}"
tap_done
