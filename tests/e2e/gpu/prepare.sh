#!/usr/bin/env bash
# prepare.sh: makes build-trip/, the one ignored folder the GPU trip carries
# (tests/e2e/gpu/trip.sh; docs/GPU.md). Run here, with the network, before the
# trip; the GPU machine has CUDA, meson and ninja but no network and maybe
# none of the -dev packages. build-trip/ holds
#   deps/include/pcre2.h, deps/lib/libpcre2-8.a   PCRE2, the one library the
#                                                  engine needs besides CUDA
#   smollm2-small.gguf                             the default model cut to its
#                                                  first 10 layers (real weights)
#   MANIFEST                                       what is there, sizes, sha256
# usage: tests/e2e/gpu/prepare.sh [OUTDIR (build-trip)]
set -euo pipefail
src=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:-$src/build-trip}
mkdir -p "$out/deps/include" "$out/deps/lib"

# PCRE2 from the system's libpcre2-dev (static: nothing to find at run time)
inc=$(pkg-config --variable=includedir libpcre2-8)
lib=$(pkg-config --variable=libdir libpcre2-8)
[ -f "$lib/libpcre2-8.a" ] || { echo "prepare: $lib/libpcre2-8.a missing (apt-get install libpcre2-dev)" >&2; exit 1; }
cp "$inc/pcre2.h" "$out/deps/include/"
cp "$lib/libpcre2-8.a" "$out/deps/lib/"

# the cut model (the whole one is 3x larger than the trip may carry)
model=$out/smollm2-small.gguf
if [ ! -s "$model" ]; then
  full=$("$src/packaging/fetch-model" --print-path)
  python3 "$src/tests/e2e/gpu/make_small_model.py" "$full" "$model.tmp" --layers 10 --embd-type Q4_0
  mv "$model.tmp" "$model"
fi

(cd "$out" && find . -type f ! -name MANIFEST -printf '%s %p\n' | sort -k2 &&
  find . -type f ! -name MANIFEST -print0 | sort -z | xargs -0 sha256sum) > "$out/MANIFEST"
total=$(du -sb "$out" | cut -f1)
tree=$(cd "$src" && git ls-files -z --cached --others --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
echo "prepare: $out ready ($((total / 1048576)) MiB; with the working tree $(((total + tree) / 1048576)) MiB of the 64 MiB a trip carries)"
[ $((total + tree)) -lt $((64 * 1048576)) ] || { echo "prepare: over the 64 MiB limit" >&2; exit 1; }
