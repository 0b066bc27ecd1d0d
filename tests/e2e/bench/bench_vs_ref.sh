#!/usr/bin/env bash
# bench_vs_ref: tern bench and the reference's llama-bench side by side,
# interleaved test by test (this machine may be shared: compare the ratios
# within one round). One line per (model, threads, test, round):
#   MODEL t=N TEST isa=ISA round=R tern=TOK/S ref=TOK/S±SD ratio=X load=L
#   tests/e2e/bench/bench_vs_ref.sh [BUILD_DIR] [ROUNDS]
# Environment (defaults in brackets):
#   MODELS   model names for packaging/fetch-model or .gguf paths [smollm2 gemma3-270m]
#   THREADS  [1 2]    PP  prompt lengths [512 2048]    TG  decode steps [128]
#   DEPTH    context before a decode test, 0 = none [4096]; DTG its steps [32]
#   REPS     repetitions per test [3]
#   TERN_ISA caps tern's kernels (scalar|avx2|avxvnni|avx512|amx); LLAMA_BENCH the
#   reference binary [$(packaging/build-reference)/llama-bench]; for an AVX2
#   reference on an AVX-512 machine: TERN_REF_ISA=avx2 packaging/build-reference
#   CPUTIME=1  on a machine others load (1 thread only): tok/s per CPU-second
#              instead of per wall second. Each program runs with -r 1 and with
#              -r 1+REPS under /usr/bin/time; the difference of the two user+sys
#              times is REPS runs' work alone (model load and warm-up cancel), so
#              the figure does not depend on the share of the CPU this process got.
set -euo pipefail
here=$(cd "$(dirname "$0")/../../.." && pwd)
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

cputime=${CPUTIME:-0}
# user+sys seconds of one command (its output discarded)
cpu_s() { /usr/bin/time -f "%U %S" "$@" 2>&1 >/dev/null | tail -1 | awk '{print $1 + $2}'; }
# tok/s per CPU-second: N tokens × REPS runs / (cpu(-r 1+REPS) - cpu(-r 1))
cpu_ts() {   # ntok prog args...
  local n=$1; shift
  local a b
  a=$(cpu_s "$@" -r 1)
  b=$(cpu_s "$@" -r $((1 + reps)))
  python3 -c "import sys; n,r,a,b=map(float,sys.argv[1:]); print('%.1f' % (n*r/(b-a)))" "$n" "$reps" "$a" "$b"
}

run_pair() {   # name m t label tern-args -- ref-args
  local name=$1 m=$2 t=$3 label=$4 r=$5; shift 5
  local targs=() rargs=()
  while [ "$1" != -- ]; do targs+=("$1"); shift; done; shift
  rargs=("$@")
  local a b
  if [ "$cputime" = 1 ]; then
    local n=${label#pp}; n=${n#tg}; n=${n%@*}
    a=$(cpu_ts "$n" "$tern" bench -m "$m" -t "$t" "${targs[@]}") || a=fail
    b=$(cpu_ts "$n" "$ref" -m "$m" -t "$t" "${rargs[@]}") || b=fail
  else
    a=$("$tern" bench -m "$m" -t "$t" --json "${targs[@]}" -r "$reps" 2>/dev/null | tern_ts) || a=fail
    b=$("$ref" -m "$m" -t "$t" -o jsonl "${rargs[@]}" -r "$reps" 2>/dev/null | ref_ts) || b=fail
  fi
  local ratio
  ratio=$(python3 -c "import sys; a,b=sys.argv[1],sys.argv[2].split('±')[0]; print('%.2f' % (float(a)/float(b)))" "$a" "$b" 2>/dev/null || echo "?")
  local unit=wall; [ "$cputime" = 1 ] && unit=cpu
  echo "$name t=$t $label isa=$isa $unit round=$r tern=$a ref=$b ratio=${ratio}x load=$(cut -d' ' -f1 /proc/loadavg)"
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
        run_pair "$name" "$m" "$t" "pp$p" "$r" --pp "$p" --tg 0 -- -p "$p" -n 0
      done
      if [ "$tg" != 0 ]; then
        run_pair "$name" "$m" "$t" "tg$tg" "$r" --pp 0 --tg "$tg" -- -p 0 -n "$tg"
      fi
      if [ "$depth" != 0 ]; then
        run_pair "$name" "$m" "$t" "tg$dtg@d$depth" "$r" --pp 0 --tg "$dtg" -d "$depth" -- \
          -p 0 -n "$dtg" -d "$depth"
      fi
    done
  done
done
