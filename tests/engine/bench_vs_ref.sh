#!/usr/bin/env bash
# bench_vs_ref: tern bench and the reference's llama-bench side by side,
# interleaved test by test (this machine may be shared: compare the ratios
# within one round). One line per (model, threads, test, round):
#   MODEL t=N TEST isa=ISA round=R tern=TOK/S ref=TOK/S±SD ratio=X load=L
#   tests/engine/bench_vs_ref.sh [BUILD_DIR] [ROUNDS]
# Environment (defaults in brackets):
#   MODELS   model names for packaging/fetch-model or .gguf paths [smollm2 gemma3-270m]
#   THREADS  [1 2]    PP  prompt lengths [512 2048]    TG  decode steps [128]
#   DEPTH    context before a decode test, 0 = none [4096]; DTG its steps [32]
#   REPS     repetitions per test [3] (depth tests: 1)
#   TERN_ISA caps tern's kernels (scalar|avx2|avx512); LLAMA_BENCH the
#   reference binary [$(packaging/build-reference)/llama-bench]; for an AVX2
#   reference on an AVX-512 machine: TERN_REF_ISA=avx2 packaging/build-reference
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$here/build}
rounds=${2:-1}
ref=${LLAMA_BENCH:-$("$here/packaging/build-reference")/llama-bench}
tern=$build/app/tern
models=${MODELS:-smollm2 gemma3-270m}
threads=${THREADS:-1 2}
pps=${PP:-512 2048}
tg=${TG:-128}
depth=${DEPTH:-4096}
dtg=${DTG:-32}
reps=${REPS:-3}
isa=${TERN_ISA:-native}

# tok/s (median) from tern bench --json; mean±sd from llama-bench -o jsonl
tern_ts() { python3 -c 'import json,sys; j=json.loads(sys.stdin.read().strip().splitlines()[-1]); print("%.1f" % (j["pp_tok_s"] if j["pp"] else j["tg_tok_s"]))'; }
ref_ts() { python3 -c 'import json,sys; j=json.loads(sys.stdin.read().strip().splitlines()[-1]); print("%.1f±%.1f" % (j["avg_ts"], j["stddev_ts"]))'; }

run_pair() {   # name m t label tern-args -- ref-args
  local name=$1 m=$2 t=$3 label=$4 r=$5; shift 5
  local targs=() rargs=()
  while [ "$1" != -- ]; do targs+=("$1"); shift; done; shift
  rargs=("$@")
  local a b
  a=$("$tern" bench -m "$m" -t "$t" --json "${targs[@]}" 2>/dev/null | tern_ts) || a=fail
  b=$("$ref" -m "$m" -t "$t" -o jsonl "${rargs[@]}" 2>/dev/null | ref_ts) || b=fail
  local ratio
  ratio=$(python3 -c "import sys; a,b=sys.argv[1],sys.argv[2].split('±')[0]; print('%.2f' % (float(a)/float(b)))" "$a" "$b" 2>/dev/null || echo "?")
  echo "$name t=$t $label isa=$isa round=$r tern=$a ref=$b ratio=${ratio}x load=$(cut -d' ' -f1 /proc/loadavg)"
}

echo "# $(date -u +%FT%TZ) $(nproc) cpus, tern $(git -C "$here" rev-parse --short HEAD), ref $ref"
for model in $models; do
  case $model in
    *.gguf) m=$model ;;
    *) m=$("$here/packaging/fetch-model" --model "$model" --print-path) ;;
  esac
  name=$(basename "$m" .gguf)
  for t in $threads; do
    for r in $(seq "$rounds"); do
      for p in $pps; do
        run_pair "$name" "$m" "$t" "pp$p" "$r" --pp "$p" --tg 0 -r "$reps" -- -p "$p" -n 0 -r "$reps"
      done
      if [ "$tg" != 0 ]; then
        run_pair "$name" "$m" "$t" "tg$tg" "$r" --pp 0 --tg "$tg" -r "$reps" -- -p 0 -n "$tg" -r "$reps"
      fi
      if [ "$depth" != 0 ]; then
        run_pair "$name" "$m" "$t" "tg$dtg@d$depth" "$r" --pp 0 --tg "$dtg" -d "$depth" -r 1 -- \
          -p 0 -n "$dtg" -d "$depth" -r 1
      fi
    done
  done
done
