#!/usr/bin/env bash
# CUDA build and CPU fallback of the tern binary: in a CUDA build the kernels
# and the CUDA backend are linked in; on a machine without a GPU, --backend
# cuda fails naming the reason and --backend auto still answers (on the CPU).
. "$TERN_SRC/tests/app/tap.sh"
tern=${TERN_BIN:?}
build=${TERN_BUILD:?}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

have_cuda=$(sed -n 's/^#define TERN_HAVE_CUDA \([01]\)$/\1/p' "$build/tern_config.h")
[ -n "$have_cuda" ]; ok $? "tern_config.h says whether CUDA is built ($have_cuda)"
nm -C "$tern" > "$tmp/syms" 2>/dev/null; ok $? "nm reads the tern binary"
grep -q ' T backend_cuda_open' "$tmp/syms"; ok $? "backend_cuda_open is linked"
if [ "$have_cuda" = 1 ]; then
  for s in cu_matvec cu_attn_decode cu_attn_prefill cu_dequant_f16 cu_rope_store 'k_matvec<2, 1>' 'k_attn_prefill<128>' nvml_open; do
    grep -q "$s" "$tmp/syms"; ok $? "CUDA build links $s"
  done
  { grep -q 'cudaGetDeviceCount' "$tmp/syms" || ldd "$tern" | grep -q libcudart; }; ok $? "cudart is linked"
  { grep -q 'cublasGemmEx' "$tmp/syms" || ldd "$tern" | grep -q libcublas; }; ok $? "cuBLAS is linked"
else
  ! grep -q 'cu_matvec' "$tmp/syms"; ok $? "CPU-only build has no CUDA kernels"
fi

model=$("$TERN_SRC/packaging/fetch-model" --print-path); ok $? "default model available ($model)"
export XDG_DATA_HOME=$tmp/data
if [ ! -e /dev/nvidia0 ]; then
  "$tern" run -m "$model" --backend cuda -n 2 --temp 0 -p Hi > "$tmp/o" 2> "$tmp/e"; rc=$?
  [ $rc -ne 0 ]; ok $? "run --backend cuda without a GPU fails (rc $rc)"
  if [ "$have_cuda" = 1 ]; then
    grep -Eq 'no CUDA device|CUDA driver not found|CUDA not usable' "$tmp/e"; ok $? "and names the reason: $(head -c 200 "$tmp/e")"
  else
    grep -q 'built without CUDA' "$tmp/e"; ok $? "and says built without CUDA: $(head -c 200 "$tmp/e")"
  fi
  "$tern" run -m "$model" --backend auto -n 2 --temp 0 -p Hi > "$tmp/o" 2> "$tmp/e"; rc=$?
  ok $rc "run --backend auto without a GPU answers on the CPU (rc $rc)"
  [ -s "$tmp/o" ]; ok $? "and prints a reply"
  grep -q 'no usable GPU: .*; running on CPU' "$tmp/e"; ok $? "and says it fell back: $(head -c 200 "$tmp/e")"
  "$tern" info -m "$model" --gpu > "$tmp/o" 2> "$tmp/e"; rc=$?
  [ $rc -eq 1 ] && grep -q 'GPU plan (device 0)' "$tmp/o" && grep -q 'no usable GPU: ' "$tmp/o"
  ok $? "info --gpu without a GPU prints the model and says why there is no GPU plan (rc $rc)"
fi
tap_done
