#!/usr/bin/env bash
# trip.sh: the GPU trip in one command (docs/GPU.md). Run as is on the GPU
# machine, with build-trip/ (tests/e2e/gpu/prepare.sh) carried along:
#   tests/e2e/gpu/trip.sh OUTDIR
# Steps, most valuable first, under one global deadline (TRIP_DEADLINE
# seconds, default 540): each gets the lesser of its own limit and the time
# left, and OUTDIR/summary.json is rewritten after every step, so a trip cut
# short still says what it found.
#   env       nvidia-smi (clocks, power), toolchain versions
#   build     meson -Dengine-only (PCRE2 from build-trip/deps; no -dev
#             packages, no network), sm_90, the GPU targets in one ninja call
#   kernels   every CUDA kernel against the CPU references
#   e2e       CPU vs CUDA greedy and teacher-forced on the cut SmolLM2
#   lowbit_e2e  IQ4_XS, IQ4_NL, Q3_K, Q2_K through the backend against the CPU's
#             (synthetic Llama-3.2-1B, 2 layers)
#   kvq       the quantized KV cache (q8_0, q4_0) against the CPU backend
#             with the same type, every layer's hidden state
#   kvio      the disk prompt cache's block reads and writes (kv_block_io):
#             the CPU's byte layout, bit-identical logits after a round trip,
#             and a short resume (a fresh backend restores the prompt's blocks
#             from a kvdisk file: restored tokens, the cold run's greedy reply)
#             for f16, q8_0 and q4_0
#   kv4k_*    decode from position 4096 with the KV cache in f16, q8_0, q4_0
#   bench_*   synthetic Llama-3-8B: decode at batch 1/8/32/64 against the
#             copy bandwidth, prefill 512/4096 against cuBLAS's f16 GEMM rate,
#             the kernels alone, the decode graph's node count
#   memcheck  compute-sanitizer on the kernel tests and a short end-to-end run
#   ncu       Nsight Compute's counters of the batch-1 decode matvecs
#   ablation  decode without CUDA graphs
#   bench_{iq4_xs,iq4_nl,q3_k,q2_k}  the low-bit formats of downloaded GGUFs,
#             on the GPU since issue 40's third session (TRIP_LOWBIT picks them)
#   ab_*      decode without programmatic dependent launch (TERN_CUDA_NO_PDL),
#             on the f32 matvec (TERN_CUDA_MV_Q8=0), and the q8 matvec on a
#             persistent grid prefetching each warp's next pair (TERN_CUDA_MV_PERSIST=1),
#             and software-pipelined (TERN_CUDA_MV_PIPE=1: ab_mv_pipe_q4_0 runs
#             right after bench_q4_0; the summary's mv_pipe sets them side by side)
#   ctx4k     decode from position 4096 (Q4_0, Q8_0; batch 1 and 8)
#   ncu_step  one batch-1 decode step profiled kernel by kernel: time per kernel name
# Detailed logs travel in OUTDIR/logs.tgz (a trip brings back at most 8 files);
# the compact summary is printed last. Without a GPU (here) every step after
# the build says "skipped: no GPU" and summary.json is still valid.
set -u
out=${1:?usage: tests/e2e/gpu/trip.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
src=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$src" || exit 1
deadline=${TRIP_DEADLINE:-540}
trip=${TRIP_DIR:-$src/build-trip}
build=${TRIP_BUILD:-$src/build-gpu}
logs=$build/trip-logs
model=$trip/smollm2-small.gguf
types=${TRIP_TYPES:-q4_0 q8_0 q4_k q5_k q6_k f16}
lowbit=${TRIP_LOWBIT-iq4_xs iq4_nl q3_k q2_k}  # set and empty: none
t0=$(date +%s)
export PATH=/usr/local/cuda/bin:$PATH
command -v nvcc > /dev/null || for d in /usr/local/cuda-*/bin; do [ -x "$d/nvcc" ] && PATH=$d:$PATH; done
export TERN_SRC=$src TERN_BUILD=$build PIP_NO_INDEX=1 src build trip
mkdir -p "$logs"
: > "$logs/steps.tsv"

elapsed() { echo $(($(date +%s) - t0)); }
left() { echo $((deadline - $(elapsed))); }
say() { echo "== [$(elapsed) s] $*"; }
summary() {
  python3 "$src/tests/e2e/gpu/trip_summary.py" "$logs" "$out/summary.json" > /dev/null 2>&1 ||
    echo "{\"ok\": false, \"error\": \"trip_summary.py failed\", \"elapsed_s\": $(elapsed)}" > "$out/summary.json"
  tar -czf "$out/logs.tgz" -C "$build" trip-logs 2>/dev/null
}
# step NAME LIMIT CMD...: runs CMD with min(LIMIT, time left) into logs/NAME.log
step() {
  local name=$1 limit=$2 rc s0; shift 2
  local l; l=$(left)
  if [ "$l" -lt 10 ]; then   # not run: what depends on it must not run either
    printf '%s\t%s\t%s\t%s\n' "$name" skipped 0 "deadline" >> "$logs/steps.tsv"; say "$name: skipped (deadline)"; return 124
  fi
  [ "$limit" -gt "$l" ] && limit=$l
  say "$name (limit $limit s)"
  s0=$(date +%s)
  # bash -c runs the exported shell functions (envinfo, setup) as well as programs
  timeout -k 5 "$limit" bash -c '"$@"' _ "$@" > "$logs/$name.log" 2>&1; rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(($(date +%s) - s0))" "$limit" >> "$logs/steps.tsv"
  grep -E '^(not ok|Bail)|ERROR SUMMARY|error' "$logs/$name.log" | head -15
  say "$name: rc $rc in $(($(date +%s) - s0)) s"
  summary
  return $rc
}
skip() { printf '%s\t%s\t%s\t%s\n' "$1" skipped 0 "$2" >> "$logs/steps.tsv"; say "$1: skipped ($2)"; }

# ---- env -----------------------------------------------------------------------
gpu=0
nvidia-smi -L > /dev/null 2>&1 && gpu=1
envinfo() {
  date -u; uname -a; nproc; free -g | head -2
  nvidia-smi; nvidia-smi -q -d CLOCK,POWER,PERFORMANCE,MEMORY
  nvcc --version; meson --version; ninja --version; python3 --version
  command -v pkg-config || echo "no pkg-config"; command -v compute-sanitizer || echo "no compute-sanitizer"
  ls /usr/include/pcre2.h 2>&1; git -C "$src" log -1 --format='commit %H %s' 2>/dev/null
  cat "$trip/MANIFEST"
}
export -f envinfo
step env 30 envinfo
say "GPU: $([ $gpu = 1 ] && nvidia-smi -L | head -1 || echo none)"

# ---- build ---------------------------------------------------------------------
setup() {
  if [ -f "$build/build.ninja" ]; then
    meson configure "$build" -Dengine-only=true -Ddeps-dir="$trip/deps" -Dcuda=enabled -Dcuda-arch=sm_90
  else
    meson setup "$build" -Dengine-only=true -Ddeps-dir="$trip/deps" -Dcuda=enabled -Dcuda-arch=sm_90 \
      --buildtype=release
  fi
}
export -f setup
# the GPU targets alone, in one call: nothing else can fail them
gpu_targets="engine/backend/libtern_cuda.so tests/kernels/cuda/test_cuda_kernels tests/engine/backend/test_cuda_e2e tests/engine/backend/test_cuda_embed tests/engine/backend/test_cuda_kvq tests/engine/backend/test_cuda_lowbit tests/engine/backend/test_cuda_kvio tests/kernels/cuda/bench_cuda"
# shellcheck disable=SC2086
step setup 90 setup && step build 300 ninja -C "$build" -j "$(nproc)" $gpu_targets
build_rc=$?
if [ $build_rc -ne 0 ]; then
  tail -40 "$logs/setup.log" "$logs/build.log" 2>/dev/null
fi

# ---- GPU steps -------------------------------------------------------------------
bin=$build/tests/kernels/cuda        # test_cuda_kernels, bench_cuda
bin_e2e=$build/tests/engine/backend  # test_cuda_e2e, test_cuda_embed, test_cuda_kvq, test_cuda_kvio
if [ $build_rc -ne 0 ]; then
  for s in kernels e2e embed kvq kvio lowbit_e2e bench memcheck ablation; do skip $s "build failed"; done
elif [ $gpu = 0 ]; then
  for s in kernels e2e embed kvq kvio lowbit_e2e bench memcheck ablation; do skip $s "no GPU"; done
else
  step kernels 120 "$bin/test_cuda_kernels"
  step e2e 150 "$bin_e2e/test_cuda_e2e" "$model"
  # embeddings' hidden-state rows against the CPU backend's, every layer
  step embed 90 "$bin_e2e/test_cuda_embed" "$model"
  # the quantized KV cache (q8_0, q4_0) against the CPU's, the hidden state of every depth
  step kvq 90 "$bin_e2e/test_cuda_kvq" "$model"
  # the disk prompt cache on the GPU: block I/O per KV type and a 200-token resume, every layer
  step kvio 60 "$bin_e2e/test_cuda_kvio" "$model" 0 200
  # the low-bit formats through the backend (before: refused, the model on the CPU)
  step lowbit_e2e 60 "$bin_e2e/test_cuda_lowbit" 2 4
  step bench_q4_0 120 "$bin/bench_cuda" llama3-8b q4_0 "$logs/bench_q4_0.json"
  # the software-pipelined int8 matvec (TERN_CUDA_MV_PIPE=1) right after it, on the same machine:
  # the summary's mv_pipe puts its decode beside bench_q4_0's
  step ab_mv_pipe_q4_0 40 env TERN_CUDA_MV_PIPE=1 BENCH_BATCHES=1,8 BENCH_NO_PREFILL=1 BENCH_NO_KERNELS=1 \
    "$bin/bench_cuda" llama3-8b q4_0 "$logs/mv_pipe_q4_0.json"
  # decode from position 4096 with the KV cache in f16 and q8_0, side by side (Q4_0 weights)
  for kv in f16 q8_0; do
    step "kv4k_$kv" 45 env BENCH_KV="$kv" BENCH_CTX=4096 BENCH_BATCHES=1,8 BENCH_NO_PREFILL=1 BENCH_NO_KERNELS=1 \
      "$bin/bench_cuda" llama3-8b q4_0 "$logs/kv4k_$kv.json"
  done
  if command -v compute-sanitizer > /dev/null; then
    step memcheck_kernels 120 compute-sanitizer --tool memcheck --error-exitcode 3 \
      "$bin/test_cuda_kernels" --no-bandwidth
    # through the backend: upload, graphs, cuBLAS, logits (2 prompts, 6 tokens, 4 layers)
    step memcheck_e2e 120 compute-sanitizer --tool memcheck --error-exitcode 3 \
      "$bin_e2e/test_cuda_e2e" "$model" 2 6 4
  else
    skip memcheck "no compute-sanitizer"
  fi
  # the decode kernels' own counters: the first q/k/v, gate/up and down matvecs of batch 1
  ncu=$(command -v ncu || find /opt/nvidia/nsight-compute /usr/local/cuda/bin -name ncu -type f 2>/dev/null | head -1)
  if [ -n "$ncu" ]; then
    step ncu_matvec 60 env BENCH_BATCHES=1 BENCH_NO_PREFILL=1 BENCH_NO_KERNELS=1 "$ncu" --kernel-name regex:k_matvec \
      --launch-count 3 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
      --section LaunchStats --section WarpStateStats "$bin/bench_cuda" llama3-8b q4_0
  else
    skip ncu_matvec "no ncu"
  fi
  for t in $types; do
    [ "$t" = q4_0 ] && continue
    step "bench_$t" 100 "$bin/bench_cuda" llama3-8b "$t" "$logs/bench_$t.json"
  done
  # the low-bit formats (before: the whole model on the CPU): decode and
  # prefill 512 (their f16 copies feed cuBLAS as every format's do)
  for t in $lowbit; do
    step "bench_$t" 60 env BENCH_BATCHES=1,8,64 "$bin/bench_cuda" llama3-8b "$t" "$logs/bench_$t.json"
  done
  step ablation_no_graphs 60 env TERN_CUDA_NO_GRAPHS=1 BENCH_BATCHES=1,8 BENCH_NO_PREFILL=1 \
    BENCH_NO_KERNELS=1 "$bin/bench_cuda" llama3-8b q4_0
  # what this session's decode changes bring, each against the default:
  # programmatic dependent launch off, and the f32 matvec instead of int8 activations
  step ab_no_pdl_q4_0 40 env TERN_CUDA_NO_PDL=1 BENCH_BATCHES=1,8 BENCH_NO_PREFILL=1 BENCH_NO_KERNELS=1 \
    "$bin/bench_cuda" llama3-8b q4_0
  step ab_no_pdl_q4_k 40 env TERN_CUDA_NO_PDL=1 BENCH_BATCHES=1 BENCH_NO_PREFILL=1 BENCH_NO_KERNELS=1 \
    "$bin/bench_cuda" llama3-8b q4_k
  for t in q4_0 q4_k q6_k iq4_xs; do
    step "ab_f32_mv_$t" 40 env TERN_CUDA_MV_Q8=0 BENCH_BATCHES=1,8 BENCH_NO_PREFILL=1 BENCH_NO_KERNELS=1 \
      "$bin/bench_cuda" llama3-8b "$t"
  done
  # decode from position 4096: what a long chat's reply costs (weights + 4k of KV a step)
  for t in q4_0 q8_0; do
    step "ctx4k_$t" 40 env BENCH_CTX=4096 BENCH_BATCHES=1,8 BENCH_NO_PREFILL=1 BENCH_NO_KERNELS=1 \
      "$bin/bench_cuda" llama3-8b "$t"
  done
  step kv4k_q4_0 45 env BENCH_KV=q4_0 BENCH_CTX=4096 BENCH_BATCHES=1,8 BENCH_NO_PREFILL=1 BENCH_NO_KERNELS=1 \
    "$bin/bench_cuda" llama3-8b q4_0 "$logs/kv4k_q4_0.json"
  # the same with up to 32 key splits (the decode attention kernel had 1 block of 4 warps per SM at 4k)
  step ctx4k_splits32_q4_0 40 env TERN_CUDA_ATTN_SPLITS=32 BENCH_CTX=4096 BENCH_BATCHES=1,8 BENCH_NO_PREFILL=1 \
    BENCH_NO_KERNELS=1 "$bin/bench_cuda" llama3-8b q4_0
  # ... and with a lane per key (k_attn_decode_lk), alone and with 32 splits
  step ctx4k_lanes_q4_0 40 env TERN_CUDA_ATTN_LANES=1 BENCH_CTX=4096 BENCH_BATCHES=1,8 BENCH_NO_PREFILL=1 \
    BENCH_NO_KERNELS=1 "$bin/bench_cuda" llama3-8b q4_0
  step ctx4k_lanes_splits32_q4_0 40 env TERN_CUDA_ATTN_LANES=1 TERN_CUDA_ATTN_SPLITS=32 BENCH_CTX=4096 \
    BENCH_BATCHES=1,8 BENCH_NO_PREFILL=1 BENCH_NO_KERNELS=1 "$bin/bench_cuda" llama3-8b q4_0
  step ab_mv_persist_q4_0 40 env TERN_CUDA_MV_PERSIST=1 BENCH_BATCHES=1,8 BENCH_NO_PREFILL=1 BENCH_NO_KERNELS=1 \
    "$bin/bench_cuda" llama3-8b q4_0
  step ab_mv_persist_q8_0 40 env TERN_CUDA_MV_PERSIST=1 BENCH_BATCHES=1 BENCH_NO_PREFILL=1 BENCH_NO_KERNELS=1 \
    "$bin/bench_cuda" llama3-8b q8_0
  step ab_mv_pipe_q8_0 40 env TERN_CUDA_MV_PIPE=1 BENCH_BATCHES=1 BENCH_NO_PREFILL=1 BENCH_NO_KERNELS=1 \
    "$bin/bench_cuda" llama3-8b q8_0 "$logs/mv_pipe_q8_0.json"
  # where a decode step's time goes, kernel by kernel: one batch-1 step (its
  # graph's nodes profiled one by one, caches and clocks left alone)
  if [ -n "$ncu" ]; then
    step ncu_step 90 env BENCH_BATCHES=1 BENCH_NO_PREFILL=1 BENCH_NO_KERNELS=1 BENCH_PROFILE_STEP=24 "$ncu" \
      --profile-from-start off --graph-profiling node --cache-control none --clock-control none \
      --metrics gpu__time_duration.sum --csv "$bin/bench_cuda" llama3-8b q4_0
  fi
fi

# ---- summary -------------------------------------------------------------------------
[ $gpu = 1 ] && step env_after 15 nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv
summary
say "done"
python3 "$src/tests/e2e/gpu/trip_summary.py" "$logs" "$out/summary.json" --print
