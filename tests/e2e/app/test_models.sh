#!/bin/bash
# test_models: models by name. `tern models` lists the files of the models
# directory (text and strict JSON) with architecture, parameters, quant,
# size, context, chat template and the memory fit; -m takes a file name,
# a stem or a unique start ("smollm2"), lists the candidates of an
# ambiguous name and the files there for an unknown one. Uses a temporary
# models directory of symbolic links to the fetched files.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/model_env.sh"
D="$XDG_DATA_HOME/tern/models"
mkdir -p "$D"
ln -s "$MODEL" "$D/SmolLM2-135M-Instruct.Q4_1.gguf"
ln -s "$MODEL" "$D/SmolLM2-360M-Instruct.Q8_0.gguf"
GEMMA="$(dirname "$MODEL")/gemma-3-270m-q4_k_m.gguf"
[ -r "$GEMMA" ] && ln -s "$GEMMA" "$D/gemma-3-270m-q4_k_m.gguf"

"$TERN_BIN" models >"$TMP/out" 2>"$TMP/err"
ok $? "tern models exits 0"
grep -Eq '^SmolLM2-135M-Instruct.Q4_1 +llama +135M +Q4_1 +[0-9]+ MiB +8192 +chatml +(yes|no|–) +yes' "$TMP/out"
ok $? "a row per model: name, architecture, parameters, quant, size, context, template, GPU, RAM fit"
grep -Eq '^GPU: ' "$TMP/out"; ok $? "the GPU plan's verdict is said ($(grep '^GPU: ' "$TMP/out"))"
if [ -r "$GEMMA" ]; then
    grep -Eq '^gemma-3-270m-q4_k_m +gemma3 +268M +Q4_K_M .* none \(base\) ' "$TMP/out"
    ok $? "the base model shows no chat template"
fi
sed 's/^/  |/' "$TMP/out" | while IFS= read -r l; do diag "$l"; done
"$TERN_BIN" models --json >"$TMP/json"
python3 - "$TMP/json" <<'PY'
import json, sys
raw = open(sys.argv[1], 'rb').read()
d = json.loads(raw.decode('utf-8', errors='strict'))
m = {x['name']: x for x in d['models']}
s = m['SmolLM2-135M-Instruct.Q4_1']
assert s['architecture'] == 'llama' and s['quant'] == 'Q4_1' and s['context'] == 8192, s
assert s['chat_template'] is True and s['fits_in_ram'] is True and s['params'] > 1e8, s
assert s['active_params'] == s['params']
assert s['fits_in_gpu'] in (True, False, None) and isinstance(s['gpu_plan'], str), s
PY
ok $? "tern models --json: strict UTF-8 JSON with the same facts"

"$TERN_BIN" info -m SmolLM2-135M-Instruct.Q4_1.gguf | grep -q '^architecture  llama'
ok $? "-m takes a file name in the models directory"
"$TERN_BIN" info -m SmolLM2-135M-Instruct.Q4_1 | grep -q '^architecture  llama'
ok $? "-m takes a stem"
"$TERN_BIN" info -m smollm2-135 | grep -q "file .*SmolLM2-135M-Instruct.Q4_1.gguf"
ok $? "-m takes a unique start, case and punctuation ignored (smollm2-135)"
"$TERN_BIN" info -m smollm2 >/dev/null 2>"$TMP/err"
[ $? -ne 0 ] && grep -q "ambiguous" "$TMP/err" && grep -q 'SmolLM2-135M-Instruct.Q4_1.gguf' "$TMP/err" &&
    grep -q 'SmolLM2-360M-Instruct.Q8_0.gguf' "$TMP/err"
ok $? "an ambiguous name lists the candidates: $(cat "$TMP/err")"
rm "$D/SmolLM2-360M-Instruct.Q8_0.gguf"
"$TERN_BIN" info -m smollm2 | grep -q "file .*SmolLM2-135M"; ok $? "smollm2 alone resolves once unique"
if [ -r "$GEMMA" ]; then
    "$TERN_BIN" info -m gemma3-270m | grep -q "file .*gemma-3-270m-q4_k_m.gguf"
    ok $? "-m gemma3-270m resolves the Gemma file"
fi
"$TERN_BIN" run -m nosuchmodel -p hi >/dev/null 2>"$TMP/err"
[ $? -ne 0 ] && grep -q "no model 'nosuchmodel'" "$TMP/err" && grep -q 'there: .*SmolLM2' "$TMP/err"
ok $? "an unknown name says where it looked and what is there"
TERN_MODEL=smollm2 "$TERN_BIN" info | grep -q "file .*SmolLM2-135M"; ok $? "TERN_MODEL takes a name too"
tap_done
