#!/usr/bin/env bash
# CUDA build and CPU fallback of the tern binary: in a CUDA build the kernels
# and the CUDA backend are in the module libtern_cuda.so, which the binary
# loads only when a CUDA driver is present; on a machine without a GPU,
# --backend cuda fails naming the reason and --backend auto still answers
# (on the CPU).
. "$TERN_SRC/tests/tap.sh"
tern=${TERN_BIN:?}
build=${TERN_BUILD:?}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

have_cuda=$(sed -n 's/^#define TERN_HAVE_CUDA \([01]\)$/\1/p' "$build/tern_config.h")
[ -n "$have_cuda" ]; ok $? "tern_config.h says whether CUDA is built ($have_cuda)"
nm -C "$tern" > "$tmp/syms" 2>/dev/null; ok $? "nm reads the tern binary"
grep -q ' T backend_cuda_open' "$tmp/syms"; ok $? "backend_cuda_open is linked"
module=$build/engine/backend/libtern_cuda.so
if [ "$have_cuda" = 1 ]; then
  # The CUDA half is a module loaded only where a driver exists.
  [ -f "$module" ]; ok $? "CUDA build makes the module libtern_cuda.so"
  nm -C "$module" > "$tmp/msyms" 2>/dev/null; ok $? "nm reads the module"
  for s in cu_matvec cu_attn_decode cu_attn_prefill cu_dequant_f16 cu_rope_store 'k_matvec<2, 1, true>' 'k_matvec_q8<2, 1>' 'k_matvec<13, 1, true>' 'k_attn_prefill<128, 0>' 'k_attn_prefill<128, 2>' 'k_attn_decode<128, 1>' 'k_rope_store_q<1>' nvml_open; do
    grep -q "$s" "$tmp/msyms"; ok $? "the module links $s"
  done
  nm -D --defined-only "$module" | grep -q ' T tern_cuda_module_open$'; ok $? "the module exports tern_cuda_module_open"
  ldd "$module" | grep -q libcudart; ok $? "the module links cudart"
  ldd "$module" | grep -q libcublas; ok $? "the module links cuBLAS"
  ! ldd "$tern" | grep -Eq 'libcudart|libcublas'; ok $? "the tern binary does not map the CUDA libraries"
  ! grep -q ' cu_matvec' "$tmp/syms"; ok $? "the tern binary has no CUDA kernels of its own"
else
  ! grep -q 'cu_matvec' "$tmp/syms"; ok $? "CPU-only build has no CUDA kernels"
  [ ! -e "$module" ]; ok $? "CPU-only build makes no CUDA module"
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
  # -v: with backend auto, the fallback is said only when asked (issue #16: a calm CPU line)
  "$tern" run -v -m "$model" --backend auto -n 2 --temp 0 -p Hi > "$tmp/o" 2> "$tmp/e"; rc=$?
  ok $rc "run --backend auto without a GPU answers on the CPU (rc $rc)"
  [ -s "$tmp/o" ]; ok $? "and prints a reply"
  grep -q 'no usable GPU: .*; running on CPU' "$tmp/e"; ok $? "and says it fell back: $(head -c 200 "$tmp/e")"
  if [ "$have_cuda" = 1 ] && command -v cc > /dev/null; then
    # A stand-in driver library: the module is then loaded, and the reason
    # comes from the CUDA runtime inside it.
    mkdir -p "$tmp/drv" && echo 'int tern_stub_driver;' > "$tmp/drv/stub.c"
    cc -shared -fPIC -o "$tmp/drv/libcuda.so.1" "$tmp/drv/stub.c"
    LD_LIBRARY_PATH=$tmp/drv "$tern" run -m "$model" --backend cuda -n 2 -p Hi > "$tmp/o" 2> "$tmp/e"; rc=$?
    [ $rc -ne 0 ] && grep -q 'cudaGetDeviceCount' "$tmp/e"
    ok $? "with a driver library present the module loads and reports the runtime's reason: $(head -c 200 "$tmp/e")"
    LD_LIBRARY_PATH=$tmp/drv TERN_CUDA_MODULE=$module "$tern" info -m "$model" --gpu > "$tmp/o" 2>&1
    grep -q 'no usable GPU: .*cudaGetDeviceCount' "$tmp/o"; ok $? "TERN_CUDA_MODULE names the module; info --gpu goes through it"
  fi
  "$tern" info -m "$model" --gpu > "$tmp/o" 2> "$tmp/e"; rc=$?
  [ $rc -eq 1 ] && grep -q 'GPU plan (device 0)' "$tmp/o" && grep -q 'no usable GPU: ' "$tmp/o"
  ok $? "info --gpu without a GPU prints the model and says why there is no GPU plan (rc $rc)"
fi
tap_done
