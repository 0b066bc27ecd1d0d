#!/usr/bin/env bash
# packaging/fetch-model places the default model with a verified hash; a second call does nothing.
. "$(dirname "$0")/../../tap.sh"
src=${TERN_SRC:?}
fm=$src/packaging/fetch-model
path=$("$fm" --print-path); rc=$?
ok $rc "fetch-model obtains the default model"
[ -f "$path" ]; ok $? "model file exists at $path"
want=$(awk '$2 == "SmolLM2-135M-Instruct.Q4_1.gguf" {print $1}' "$src/packaging/models.sha256")
have=$(sha256sum "$path" | cut -d' ' -f1)
[ "$have" = "$want" ]; ok $? "sha256 matches the recorded hash"
before=$(stat -c %Y "$path")
out=$("$fm" 2>&1); rc=$?
after=$(stat -c %Y "$path")
[ $rc -eq 0 ] && [ "$before" = "$after" ] && ! echo "$out" | grep -q downloading
ok $? "a second call finds the verified file and downloads nothing"
"$fm" --model nosuch > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ]; ok $? "an unknown model name is a usage error"
tmpd=$(mktemp -d); trap 'rm -rf "$tmpd"' EXIT
printf 'not a model' > "$tmpd/SmolLM2-135M-Instruct.Q4_1.gguf"
cp "$path" "$tmpd/real.gguf" 2>/dev/null
# A corrupt file in place is detected and replaced (by a verified copy).
out=$(PIP_NO_INDEX=1 PIP_FIND_LINKS=/nonexistent "$fm" --dir "$tmpd" 2>&1); rc=$?
echo "$out" | grep -q "expected $want"; ok $? "a file with the wrong hash is detected"
[ $rc -ne 0 ] && echo "$out" | grep -q "place the model by hand"; ok $? "a failed download says how to place the model by hand"
tap_done
