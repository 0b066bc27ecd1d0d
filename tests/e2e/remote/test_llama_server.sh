#!/usr/bin/env bash
# test_llama_server: the remote engine against a server no one here wrote:
# llama.cpp's llama-server (packaging/build-reference, or $TERN_LLAMA_SERVER)
# on the default model, loopback only. Fails, saying why, when the server
# cannot be had or does not start (never skips).
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/remote/live_checks.sh"
T=$TERN_BIN
out=$(mktemp -d)
spid=
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$out"' EXIT
model=$("$TERN_SRC/packaging/fetch-model" --print-path 2>"$out/fetch") ||
  { echo "Bail out! no default model: $(tail -1 "$out/fetch")"; exit 1; }
srv=${TERN_LLAMA_SERVER:-}
if [ -z "$srv" ]; then
  bin=$("$TERN_SRC/packaging/build-reference" 2>"$out/build") ||
    { echo "Bail out! llama-server cannot be built: $(tail -3 "$out/build" | tr '\n' ' ')"; exit 1; }
  srv=$bin/llama-server
fi
[ -x "$srv" ] || { echo "Bail out! $srv is not an executable"; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$srv" -m "$model" --host 127.0.0.1 --port "$port" --metrics --slots -t 1 -c 2048 -np 2 \
  >"$out/server.log" 2>&1 &
spid=$!
U=http://127.0.0.1:$port/v1
up=1
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && { up=0; break; }
  kill -0 $spid 2>/dev/null || break
  sleep 0.1
done
if [ $up -ne 0 ]; then
  wait $spid; st=$?
  why="did not answer /health in 60 s"
  [ $st -eq 132 ] && why="died of SIGILL (illegal instruction): this build uses an instruction the machine refuses (AMX tiles under GGML_NATIVE on a VM that does not grant them?); rebuild it without AMX or point TERN_LLAMA_SERVER at a working one"
  [ $st -ne 0 ] && [ $st -ne 132 ] && why="exited with status $st"
  echo "Bail out! llama-server ($srv) $why; log: $(tail -2 "$out/server.log" | tr '\n' ' ')"
  exit 1
fi
diag "llama-server $srv on port $port ($( "$srv" --version 2>&1 | grep -m1 version))"

live_checks "$U"

# Greedy output against in-process tern on the same raw prompt (no chat
# template on either side, so both tokenize the same text with the same
# vocabulary; the first tokens must agree, later ones may part where the two
# engines' float sums differ at a near tie).
p="The capital of France is"
timeout 120 "$T" run --url "$U" --no-history --raw --temp 0 -n 12 -p "$p" >"$out/r" 2>"$out/re"
timeout 120 "$T" run -m "$model" --no-history --raw --temp 0 -n 12 -p "$p" -t 1 >"$out/l" 2>"$out/le"
diag "llama-server: $(cat "$out/r" | tr '\n' ' ')" "tern:         $(cat "$out/l" | tr '\n' ' ')"
common=$(python3 -c 'import sys; a=open(sys.argv[1]).read(); b=open(sys.argv[2]).read()
n=0
while n < min(len(a), len(b)) and a[n] == b[n]: n += 1
print(n, len(a), len(b))' "$out/r" "$out/l")
diag "common prefix (chars, remote, local): $common"
set -- $common
ok $([ "$1" -ge 16 ] && [ "$1" -eq "$2" -o "$1" -ge 24 ]; echo $?) "greedy raw completion through --url equals in-process tern (common prefix $1 chars)"

# Perplexity needs the prompt's log-probabilities, which llama-server does
# not give (n_probs covers generated tokens): a clear refusal naming it.
"$T" eval --perplexity "$TERN_SRC/README.md" --ctx 128 --chunks 1 -m "$model" --url "$U" \
  --no-save >/dev/null 2>"$out/pe"
st=$?
diag "eval --perplexity: $(head -c 300 "$out/pe")"
ok $([ $st -ne 0 ] && grep -q 'llama-server' "$out/pe" && grep -q 'n_probs' "$out/pe"; echo $?) \
  "eval --perplexity --url: refused, naming llama-server and why (no prompt log-probabilities)"
# The context gauge comes from /props (per-slot n_ctx: -c 2048 over -np 2).
nctx=$(curl -sf "http://127.0.0.1:$port/props" | python3 -c 'import json,sys; print(json.load(sys.stdin)["default_generation_settings"]["n_ctx"])')
lim=$(python3 -c "n=$nctx; print('%.1fk' % (n/1000) if n >= 1000 else n)")
export XDG_DATA_HOME=$out/data XDG_CONFIG_HOME=$out/config
timeout 120 "$T" chat --url "$U" --size 120x36 --headless-frames 200 --keys '{wait}hello' \
  >"$out/tui" 2>"$out/tuie"
ok $(tr -d ' ' <"$out/tui" | grep -q "context[0-9.k]*/$lim"; echo $?) \
  "chat --url: the context gauge shows llama-server's per-slot context from /props ($nctx)"

# llama-server's own view of the last request: /slots idle, /metrics parsed.
curl -sf "http://127.0.0.1:$port/metrics" >"$out/m"
ok $(grep -q '^llamacpp:' "$out/m"; echo $?) "llama-server /metrics exports llamacpp: metrics"
tap_done
