#!/usr/bin/env bash
# bench_draft: speculative decoding with a draft model, interleaved with
# plain decoding and with the reference's llama-server --model-draft on the
# same pair (run by hand; figures in docs/PERFORMANCE.md section 7).
# The pair: the default model's weights as an F16 target (dequantized from
# Q4_1 by llama-quantize, so the target and the Q4_1 draft share weights)
# and the Q4_1 file as the draft; optionally (LLAMA1B=path-f16 and
# LLAMA1B_DRAFT=path-q4_0) the random-weight 1B shape of make_llama1b.py;
# TARGET=path replaces the target (make_widened.py: a 1B-class SmolLM2);
# N tokens (200) and THREADS ("1 2") narrow a run.
#   tests/e2e/bench/bench_draft.sh OUTDIR [ROUNDS]
set -eu
out=${1:?outdir}; rounds=${2:-3}
src=$(cd "$(dirname "$0")/../../.." && pwd)
T=${TERN_BIN:-$src/build/app/tern}
ref=$("$src/packaging/build-reference" | tail -1)
draft=$("$src/packaging/fetch-model" --print-path)
mkdir -p "$out"
target=${TARGET:-$out/smollm2-f16.gguf}
[ -s "$target" ] || "$ref/llama-quantize" --allow-requantize "$draft" "$target" F16 >/dev/null 2>&1
prompt="Write a long story about a lighthouse keeper and a storm."
n=${N:-200}
tern_rate() { # model threads [draft]
  local extra=""; [ -n "${3:-}" ] && extra="--draft-model $3"
  "$T" run -m "$1" --no-history --temp 0 -n $n --ignore-eos -t "$2" -p "$prompt" --json $extra \
    2>/dev/null | python3 -c 'import json,sys; j=json.load(sys.stdin); p=j["phases"]; print("%.1f" % p["gen_tok_s"], j.get("metrics",{}).get("spec_acceptance_rate", ""))'
}
ref_rate() { # model threads [draft]
  local port=$((20000 + RANDOM % 20000)) extra=""
  [ -n "${3:-}" ] && extra="-md $3 --spec-type draft-simple --spec-draft-n-max 4 --spec-draft-n-min 0 -td $2"
  "$ref/llama-server" -m "$1" $extra -t "$2" -c 2048 --port $port >"$out/srv.log" 2>&1 &
  local pid=$!
  for _ in $(seq 300); do curl -sf localhost:$port/health >/dev/null 2>&1 && break; sleep 0.2; done
  curl -s localhost:$port/v1/chat/completions -d "{\"messages\":[{\"role\":\"user\",\"content\":\"$prompt\"}],\"max_tokens\":$n,\"temperature\":0,\"ignore_eos\":true}" |
    python3 -c 'import json,sys; t=json.load(sys.stdin)["timings"]; print("%.1f" % t["predicted_per_second"], "%s/%s" % (t.get("draft_n_accepted",""), t.get("draft_n","")))'
  kill $pid; wait $pid 2>/dev/null || true
}
echo "# $(date -u +%FT%TZ) $(uptime | sed 's/.*load/load/') $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
for th in ${THREADS:-1 2}; do
  for r in $(seq "$rounds"); do
    echo "threads $th round $r: tern plain $(tern_rate "$target" $th) | tern draft $(tern_rate "$target" $th "$draft") | ref plain $(ref_rate "$target" $th) | ref draft $(ref_rate "$target" $th "$draft")"
  done
done
if [ -n "${LLAMA1B:-}" ]; then
  echo "1B shape, 1 thread: tern plain $(tern_rate "$LLAMA1B" 1) | tern draft $(tern_rate "$LLAMA1B" 1 "$LLAMA1B_DRAFT")"
fi
