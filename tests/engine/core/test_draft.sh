#!/usr/bin/env bash
# test_draft.sh: makes the draft model of test_draft (the default model's
# weights requantized to Q4_0 by the reference's llama-quantize, once, in
# the build tree) and runs the test on it. Fails (never skips) when the
# reference or the model cannot be had.
set -u
model=$("$TERN_SRC/packaging/fetch-model" --print-path 2>/dev/null) ||
  { echo "Bail out! no default model (packaging/fetch-model)"; exit 1; }
draft=$TERN_BUILD/tests/engine/core/smollm2-draft-q4_0.gguf
if [ ! -s "$draft" ]; then
  bin=$("$TERN_SRC/packaging/build-reference" 2>/dev/null | tail -1) ||
    { echo "Bail out! the reference (llama-quantize) cannot be built"; exit 1; }
  "$bin/llama-quantize" --allow-requantize "$model" "$draft.tmp" Q4_0 >"$draft.log" 2>&1 ||
    { echo "Bail out! llama-quantize failed: $(tail -2 "$draft.log" | tr '\n' ' ')"; exit 1; }
  mv "$draft.tmp" "$draft"
fi
exec "$1" "$draft"
