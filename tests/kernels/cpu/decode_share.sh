#!/bin/bash
# decode_share.sh TERN BENCH_MATMUL THREADS...: decode bandwidth share per
# model (issue 17): `tern info`'s decode bytes per token × tg128 tok/s,
# beside bench_matmul's streaming read (wall and per thread CPU-second)
# before and after the models. At 1 thread also tok/s per CPU-second:
# 256 tokens / (CPU of -r 3 − CPU of -r 1). Run alone (no other benchmark):
#   tests/kernels/cpu/decode_share.sh build/app/tern build/tests/kernels/cpu/bench_matmul 1
# MODELS overrides the list (default: the two small models and the 1B shapes).
tern=$1; bm=$2; shift 2
models=${MODELS:-"$HOME/.local/share/tern/models/SmolLM2-135M-Instruct.Q4_1.gguf $HOME/.local/share/tern/models/gemma-3-270m-q4_k_m.gguf $HOME/.cache/tern/models/llama1b-q4_0.gguf $HOME/.cache/tern/models/llama1b-q4_k_m.gguf"}
cpu_s() { /usr/bin/time -f "%U %S" "$@" 2>&1 >/dev/null | tail -1 | awk '{print $1 + $2}'; }
echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
for t in "$@"; do
  $bm -t "$t" -f NOMATCH -s 0.5 | grep streaming
  for m in $models; do
    bytes=$($tern info -m "$m" 2>/dev/null | grep 'decode reads' | sed 's/.*(\([0-9]*\) bytes).*/\1/')
    if [ "$t" = 1 ]; then
      a=$(cpu_s "$tern" bench -m "$m" --pp 0 --tg 128 -t 1 -r 1)
      b=$(cpu_s "$tern" bench -m "$m" --pp 0 --tg 128 -t 1 -r 3)
      cts=$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.2f", 256/(b-a)}')
    else cts=0; fi
    w=$($tern bench -m "$m" --pp 0 --tg 128 -t "$t" -r 2 --json 2>/dev/null |
        python3 -c 'import json,sys; print("%.2f"%json.load(sys.stdin)["tg_tok_s"])')
    echo "$(basename "$m") t=$t bytes/token=$bytes tg128 wall=$w tok/s cpu=$cts tok/cpu-s" \
         "-> wall $(awk -v b="$bytes" -v w="$w" 'BEGIN{printf "%.2f", b*w/1e9}') GB/s," \
         "cpu $(awk -v b="$bytes" -v w="$cts" 'BEGIN{printf "%.2f", b*w/1e9}') GB/s  load $(cut -d' ' -f1 /proc/loadavg)"
  done
  $bm -t "$t" -f NOMATCH -s 0.5 | grep streaming
done
