#!/usr/bin/env bash
# check.sh: the GPU check of the CUDA backend, in one run (about 8 minutes on
# an H200). Builds with CUDA for sm_90 and runs
#   1. kernel tests: every CUDA kernel vs the CPU reference (test_cuda_kernels)
#   2. end to end: CPU vs CUDA greedy and teacher-forced on a cut SmolLM2
#      (build-model/smollm2-small.gguf, made by tests/gpu/make_small_model.py
#      before the trip: the GPU machine has no network)
#   3. benchmark: synthetic llama3-8b q4_0 / q8_0 / f16 generated on the device
#   4. compute-sanitizer memcheck of the kernel tests, when available
# and writes OUTDIR/summary.json plus every log, printing enough to diagnose
# a failure without a second run.
#   usage: tests/gpu/check.sh OUTDIR
# Before the trip (on a machine with the network and the `gguf` package):
#   tests/gpu/make_small_model.py "$(packaging/fetch-model --print-path)" \
#       build-model/smollm2-small.gguf --layers 10 --embd-type Q4_0
# then run this script on the GPU machine with build-model/ carried along
# (git-ignored, 38 MiB) and OUTDIR a folder that comes back.
set -u
out=${1:?usage: tests/gpu/check.sh OUTDIR}
mkdir -p "$out"
src=$(cd "$(dirname "$0")/../.." && pwd)
cd "$src"
build=build-gpu
model=${TERN_GPU_MODEL:-build-model/smollm2-small.gguf}
t0=$(date +%s)
export PATH=/usr/local/cuda/bin:$PATH
export TERN_SRC=$src TERN_BUILD=$src/$build TERN_BIN=$src/$build/app/tern

say() { echo "== [$(($(date +%s) - t0)) s] $*"; }
# tap_counts FILE -> "pass fail"
tap_counts() { echo "$(grep -c '^ok' "$1" 2>/dev/null || true) $(grep -c '^not ok' "$1" 2>/dev/null || true)"; }
json_tap() { # name file rc
  local c; c=$(tap_counts "$2"); set -- "$1" "$2" "$3" $c
  printf '"%s": {"rc": %s, "pass": %s, "fail": %s}' "$1" "$3" "${4:-0}" "${5:-0}"
}

say "environment"
{ uname -a; nvidia-smi 2>&1 | head -20; which nvcc meson ninja python3 compute-sanitizer; nvcc --version | tail -2; meson --version; } 2>&1 | tee "$out/env.txt"

# ---- build ----------------------------------------------------------------
say "build ($build, sm_90)"
build_rc=0
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" -Dcuda=enabled -Dcuda-arch=sm_90 > "$out/setup.log" 2>&1 || build_rc=$?
else
  meson configure "$build" -Dcuda=enabled -Dcuda-arch=sm_90 > "$out/setup.log" 2>&1 || build_rc=$?
fi
if [ $build_rc -eq 0 ]; then
  ninja -C "$build" -j "$(nproc)" app/tern engine/backend/libtern_cuda.so tests/cuda/test_cuda_kernels tests/cuda/test_cuda_e2e \
    tests/cuda/bench_cuda tests/cuda/test_cuda_host > "$out/build.log" 2>&1 || build_rc=$?
fi
if [ $build_rc -ne 0 ]; then
  say "BUILD FAILED (rc $build_rc)"; tail -60 "$out/setup.log" "$out/build.log"
fi

# ---- 1. kernel tests --------------------------------------------------------
k_rc=99
if [ $build_rc -eq 0 ]; then
  say "1. kernel tests"
  timeout 180 "$build/tests/cuda/test_cuda_kernels" > "$out/kernels.tap" 2>&1; k_rc=$?
  grep -E '^(not ok|#|Bail)' "$out/kernels.tap" | head -60
  say "kernels: rc $k_rc, pass/fail $(tap_counts "$out/kernels.tap")"
fi

# ---- 2. end to end ------------------------------------------------------------
e_rc=99
if [ $build_rc -eq 0 ]; then
  say "2. end to end on $model"
  if [ ! -f "$model" ] && command -v python3 > /dev/null; then
    m=$("$src/packaging/fetch-model" --print-path 2>/dev/null) &&
      python3 tests/gpu/make_small_model.py "$m" "$model" --layers 10 --embd-type Q4_0 2>&1 | tail -2
  fi
  if [ -f "$model" ]; then
    timeout 240 "$build/tests/cuda/test_cuda_e2e" "$model" > "$out/e2e.tap" 2>&1; e_rc=$?
    grep -E '^(not ok|#|Bail)' "$out/e2e.tap" | head -60
  else
    echo "Bail out! model $model missing (run tests/gpu/make_small_model.py before the trip)" > "$out/e2e.tap"
    cat "$out/e2e.tap"
  fi
  say "e2e: rc $e_rc, pass/fail $(tap_counts "$out/e2e.tap")"
  # the host-side suite on a GPU machine: fallback test now expects the GPU to open
  timeout 120 "$build/tests/cuda/test_cuda_host" > "$out/host.tap" 2>&1; h_rc=$?
  grep -E '^(not ok|Bail)' "$out/host.tap" | head -20
  say "host tests (informative; needs the default model for the shape test): rc $h_rc"
fi

# ---- 3. benchmark -------------------------------------------------------------
b_json=""
if [ $build_rc -eq 0 ]; then
  for t in q4_0 q8_0 f16; do
    say "3. bench llama3-8b $t"
    timeout 150 "$build/tests/cuda/bench_cuda" llama3-8b "$t" "$out/bench_$t.json" 2>&1 | tee "$out/bench_$t.log"
    rc=${PIPESTATUS[0]}
    [ -s "$out/bench_$t.json" ] || echo "{\"ok\": false, \"rc\": $rc}" > "$out/bench_$t.json"
    b_json="$b_json${b_json:+, }\"$t\": $(cat "$out/bench_$t.json")"
  done
  # crossover and ablations on q4_0 (decode only): cuBLAS path at batch 1/8/16,
  # matvec path without graphs, and without the fused q/k/v and gate/up kernels
  for v in "TERN_CUDA_MV_MAX=0:1,8,16" "TERN_CUDA_NO_GRAPHS=1:1,8" "TERN_CUDA_NO_FUSE=1:1,8"; do
    say "3b. bench q4_0 with ${v%%:*}, batches ${v#*:}"
    env "${v%%:*}" BENCH_BATCHES="${v#*:}" BENCH_NO_PREFILL=1 timeout 90 \
      "$build/tests/cuda/bench_cuda" llama3-8b q4_0 2>&1 | tee -a "$out/bench_ablation.log"
  done
  if "$build/app/tern" bench --help 2>&1 | grep -q -- --synthetic; then
    say "tern bench --synthetic llama3-8b --type q4_0 (the app's own command)"
    timeout 120 "$build/app/tern" bench --synthetic llama3-8b --type q4_0 --backend cuda 2>&1 | tail -30 | tee "$out/tern_bench.log"
  fi
fi

# ---- 4. memcheck ----------------------------------------------------------------
m_rc=99
if [ $build_rc -eq 0 ] && command -v compute-sanitizer > /dev/null; then
  left=$((470 - ($(date +%s) - t0)))
  if [ $left -gt 30 ]; then
    say "4. compute-sanitizer memcheck (up to $left s)"
    timeout "$left" compute-sanitizer --tool memcheck --error-exitcode 3 \
      "$build/tests/cuda/test_cuda_kernels" --no-bandwidth > "$out/memcheck.log" 2>&1; m_rc=$?
    grep -E 'ERROR SUMMARY|Invalid|not ok|Bail' "$out/memcheck.log" | head -30
    say "memcheck rc $m_rc (124 = ran out of time, 3 = memory errors)"
  else
    say "4. memcheck skipped: only $left s left"
  fi
fi

# ---- summary ---------------------------------------------------------------------
all_ok=false
[ $build_rc -eq 0 ] && [ $k_rc -eq 0 ] && [ $e_rc -eq 0 ] && all_ok=true
{
  printf '{"elapsed_s": %s, "build_rc": %s, ' "$(($(date +%s) - t0))" "$build_rc"
  json_tap kernels "$out/kernels.tap" "$k_rc"; printf ', '
  json_tap e2e "$out/e2e.tap" "$e_rc"; printf ', '
  printf '"memcheck_rc": %s, "bench": {%s}, "ok": %s}\n' "$m_rc" "$b_json" "$all_ok"
} > "$out/summary.json"
say "summary: $(cat "$out/summary.json")"
$all_ok
