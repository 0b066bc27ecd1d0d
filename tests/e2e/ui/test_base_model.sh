#!/bin/bash
# test_base_model: a base model (no chat template in the file, like the
# Gemma 3 270M file fetched here) is continued as plain text. `tern chat`
# says it is a base model and its reply continues the message; `tern run`
# warns; the default reply limit is 1024 or a quarter of the context, not
# the whole context. Skips when the Gemma file is not present.
set -u
. "$TERN_SRC/tests/tap.sh"
DIR=$(dirname "$("$TERN_SRC/packaging/fetch-model" --print-path 2>/dev/null)")
GEMMA="$DIR/gemma-3-270m-q4_k_m.gguf"
if [ ! -r "$GEMMA" ]; then
    echo "1..0 # SKIP no Gemma 3 270M file in $DIR (packaging/fetch-model --model gemma3-270m)"
    exit 0
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export XDG_DATA_HOME="$TMP/data" XDG_CONFIG_HOME="$TMP/config"
show() { sed 's/^/  |/' "$TMP/out" | while IFS= read -r l; do diag "$l"; done; }

# the plain continuation, as --raw gives it (greedy)
"$TERN_BIN" run -m "$GEMMA" --no-history --raw --temp 0 -n 8 -p "The capital of France is" >"$TMP/raw" 2>/dev/null
want=$(head -1 "$TMP/raw" | sed 's/^ *//' | cut -c1-24)
"$TERN_BIN" chat -m "$GEMMA" --size 100x30 --temp 0 --max-tokens 12 --headless-frames 3000 \
    --keys '{wait}The capital of France is\r{wait}' >"$TMP/out" 2>"$TMP/err"
ok $? "chat on a base model exits 0"
grep -q 'base model: plain completion' "$TMP/out"; ok $? "the instruments say it is a base model"
grep -Eq 'assistant · [0-9]+ tok' "$TMP/out"; ok $? "the reply finishes"
[ -n "$want" ] && grep -qF -- "$want" "$TMP/out"; ok $? "the reply continues the text as plain completion does ('$want')"
show

"$TERN_BIN" run -m "$GEMMA" --no-history --temp 0 -n 8 -p "The capital of France is" >"$TMP/out" 2>"$TMP/err"
ok $? "run on a base model succeeds"
grep -q 'is a base model (the file has no chat template)' "$TMP/err"; ok $? "run warns that it is a base model"
cmp -s "$TMP/out" "$TMP/raw"; ok $? "run continues the prompt as plain text, as --raw does: $(head -c 60 "$TMP/out" | tr "\n" " ")"
"$TERN_BIN" run -m "$GEMMA" --no-history --temp 0 --ignore-eos --ctx 256 -v -p "Once upon a time" >"$TMP/out" 2>"$TMP/err"
n=$(sed -n 's/^eval count: *\([0-9]*\) token.*/\1/p' "$TMP/err")
[ "${n:-0}" -ge 1 ] && [ "${n:-999}" -le 64 ]
ok $? "the default reply limit is a quarter of a 256-token context (${n:-?} tokens, at most 64)"
tap_done
