#!/usr/bin/env bash
# bench_vs_ref: tern bench and the reference's llama-bench side by side,
# interleaved (this machine is shared: compare ratios within one round).
#   tests/engine/bench_vs_ref.sh [BUILD_DIR] [ROUNDS]
# Prints one line per (model, threads, program, round) and the peak RSS.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$here/build}
rounds=${2:-1}
ref=${LLAMA_BENCH:-/tmp/ref/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin/llama-bench}
tern=$build/app/tern
for model in smollm2 gemma3-270m; do
  m=$("$here/packaging/fetch-model" --model "$model" --print-path)
  for t in 1 2; do
    for r in $(seq "$rounds"); do
      out=$( { /usr/bin/time -f "maxrss_kb=%M" "$tern" bench -m "$m" --pp 512 --tg 128 -r 5 -t "$t" --json; } 2>&1 )
      echo "tern $model t=$t round=$r: $(echo "$out" | grep -o '"pp_tok_s":[0-9.]*,.*"tg_sd":[0-9.]*' | tr -d '"') $(echo "$out" | grep -o 'maxrss_kb=[0-9]*')"
      out=$( { /usr/bin/time -f "maxrss_kb=%M" "$ref" -m "$m" -p 512 -n 128 -r 5 -t "$t" -o csv; } 2>&1 )
      echo "llama-bench $model t=$t round=$r: $(echo "$out" | grep -E '^"' | tail -2 | awk -F, '{print $(NF-7)"/"$(NF-6)" avg_ts="$(NF-1)" sd="$NF}' | tr '\n' ' ') $(echo "$out" | grep -o 'maxrss_kb=[0-9]*')"
    done
  done
done
