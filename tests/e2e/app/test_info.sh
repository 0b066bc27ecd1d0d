#!/usr/bin/env bash
# test_info: `tern info` on both real models, checked against what the Python
# gguf package and the reference engine read from them (fixtures/models.json),
# and on malformed input (the reader's message, exit status 1).
set -u
. "$TERN_SRC/tests/tap.sh"
fix="$TERN_SRC/tests/engine/model/gguf/fixtures/models.json"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# compare NAME: the Python check prints one "ok"/"not ok" per field.
check_json() {
  python3 - "$fix" "$1" "$2" "$3" <<'PY'
import json, sys
want = json.load(open(sys.argv[1]))[sys.argv[2]]
got = json.load(open(sys.argv[3]))
budget = int(sys.argv[4])
kv = 2 * want["block_count"] * want["head_count_kv"] * want["key_length"] * 2  # f16
checks = [
    ("architecture", got["architecture"], want["architecture"]),
    ("gguf version", got["gguf_version"], want["version"]),
    ("parameters", got["parameters"], want["parameters"]),
    ("tensor count", got["tensors"], want["n_tensors"]),
    ("tensor types", {t["type"]: {"count": t["count"], "bytes": t["bytes"]} for t in got["tensor_types"]},
     want["tensor_types"]),
    ("context length", got["context_length"], want["context_length"]),
    ("layers", got["block_count"], want["block_count"]),
    ("kv heads", got["head_count_kv"], want["head_count_kv"]),
    ("head dim", got["key_length"], want["key_length"]),
    ("vocabulary size", got["vocabulary"]["size"], want["vocab_size"]),
    ("tokenizer model", got["vocabulary"]["model"], want["tokenizer_model"]),
    ("pre-tokenizer", got["vocabulary"]["pre"], want["tokenizer_pre"]),
    ("BOS", got["vocabulary"]["bos"], want["bos"]),
    ("EOS", got["vocabulary"]["eos"], want["eos"]),
    ("EOT is a reference candidate", got["vocabulary"]["eot"] in want["eot_candidates"] + [want["eot"]], True),
    ("weight bytes", got["memory"]["weight_bytes"], want["weight_bytes"]),
    ("KV bytes per token", got["memory"]["kv_bytes_per_token"], kv),
    ("budget", got["memory"]["budget_bytes"], budget),
    ("KV tokens in budget", got["memory"]["kv_tokens"], (budget - want["weight_bytes"]) // kv),
]
# Family: as the model's own template renders (jinja2); a file without a
# template gets a family chosen from its vocabulary, never the silent fallback.
if want["chat_template_family"] != "none":
    checks.append(("template family (jinja2 rendering)", got["chat_template"]["family"], want["chat_template_family"]))
    checks.append(("template not from vocabulary", got["chat_template"]["from_vocabulary"], False))
else:
    checks.append(("no template: family from vocabulary", got["chat_template"]["from_vocabulary"], True))
checks.append(("no ChatML fallback", got["chat_template"]["chatml_fallback"], False))
# The reference picks among several text matches in hash-map order; with one
# candidate (or an eot key) its answer is determined and must match.
if want["eot"] >= 0 or len(want["eot_candidates"]) <= 1:
    checks.append(("EOT equals the reference engine's", got["vocabulary"]["eot"], want["ref_eot"]))
else:
    print(f"# EOT {got['vocabulary']['eot']}; reference {want['ref_eot']} by hash order among {want['eot_candidates']}")
for name, g, w in checks:
    print(("ok" if g == w else "not ok") + f" {sys.argv[2]}: {name}")
    if g != w:
        print(f"# got {g!r}, want {w!r}")
PY
}

run_tap() { # re-number the Python lines into this script's TAP stream
  while read -r line; do
    case "$line" in
      "ok "*) ok 0 "${line#ok }" ;;
      "not ok "*) ok 1 "${line#not ok }" ;;
      *) echo "$line" ;;
    esac
  done
}

declare -A paths
for model in smollm2 gemma3-270m; do
  path=$("$TERN_SRC/packaging/fetch-model" --model "$model" --print-path)
  paths[$model]=$path
  if [ -z "$path" ]; then ok 1 "$model: fetch-model gives a path"; continue; fi
  "$TERN_BIN" info -m "$path" --mem 8G --json >"$tmp/$model.json" 2>"$tmp/err"
  ok $? "$model: info --json exits 0"
  run_tap < <(check_json "$model" "$tmp/$model.json" $((8 << 30)))
  "$TERN_BIN" info -m "$path" --mem 8G >"$tmp/$model.txt" 2>&1
  ok $? "$model: info exits 0"
  arch=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]["architecture"])' "$fix" "$model")
  grep -q "^architecture  $arch\$" "$tmp/$model.txt"; ok $? "$model: text names the architecture"
  grep -q "KV tokens fit beside the weights" "$tmp/$model.txt"; ok $? "$model: text has the memory plan"
  grep -q "^CPU kernels: " "$tmp/$model.txt"; ok $? "$model: text names the CPU kernels' ISA"
  # AMX said in one line: used, or not and why; a cap below amx says so
  amx=$(grep '^AMX int8 tiles: ' "$tmp/$model.txt")
  case $amx in
    "AMX int8 tiles: used for prefill products")
      TERN_ISA=avx512 "$TERN_BIN" info -m "$path" --mem 8G 2>&1 | grep -q "^AMX int8 tiles: available, not used (TERN_ISA caps below amx)$"
      ok $? "$model: AMX used natively, and TERN_ISA=avx512 says it is not" ;;
    "AMX int8 tiles: not used ("*")") ok 0 "$model: no AMX here, and why: $amx" ;;
    *) ok 1 "$model: an AMX line ($amx)" ;;
  esac
  # the F16/BF16 prefill in one line; under TERN_ISA=avx2 the f32 FMA path
  grep -Eq "^F16/BF16 prefill: (AMX-BF16 tiles|AVX512_BF16 vdpbf16ps|f32 FMA)$" "$tmp/$model.txt"
  ok $? "$model: text names the F16/BF16 prefill"
  TERN_ISA=avx2 "$TERN_BIN" info -m "$path" --mem 8G 2>&1 | grep -q "^F16/BF16 prefill: f32 FMA$"
  ok $? "$model: TERN_ISA=avx2 keeps the F16/BF16 prefill on f32 FMA"
  "$TERN_BIN" info -m "$path" --mem 8G --kv-type q8_0 --json >"$tmp/q8.json" 2>&1
  [ "$(jq .memory.kv_bytes_per_token "$tmp/q8.json")" = \
    "$(( $(jq .memory.kv_bytes_per_token "$tmp/$model.json") / 2 * 34 / 32 ))" ]
  ok $? "$model: q8_0 KV is 34/64 of f16"
done

# mini_gguf PATH [TEMPLATE]: a valid file with one IQ2_XXS tensor (a type the
# engine cannot run), a 3-token vocabulary and optionally a chat template.
mini_gguf() {
  python3 - "$@" <<'PY'
import struct, sys
s = lambda b: struct.pack("<Q", len(b)) + b
kvs = [s(b"general.architecture") + struct.pack("<I", 8) + s(b"test"),
       s(b"tokenizer.ggml.model") + struct.pack("<I", 8) + s(b"gpt2"),
       s(b"tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 3) + s(b"a") + s(b"b") + s(b"c")]
if len(sys.argv) > 2:
    kvs.append(s(b"tokenizer.chat_template") + struct.pack("<I", 8) + s(sys.argv[2].encode()))
body = b"GGUF" + struct.pack("<IQQ", 3, 1, len(kvs)) + b"".join(kvs)
body += s(b"w") + struct.pack("<IQIQ", 1, 256, 16, 0)
body += bytes(-len(body) % 32) + bytes(66)
open(sys.argv[1], "wb").write(body)
PY
}
mini_gguf "$tmp/q2k.gguf"
"$TERN_BIN" info -m "$tmp/q2k.gguf" --mem 1G --json >"$tmp/q2k.json" 2>&1
ok $? "IQ2_XXS file: info exits 0"
[ "$(jq -c '.tensor_types' "$tmp/q2k.json")" = '[{"type":"IQ2_XXS","count":1,"bytes":66,"supported":false}]' ]
ok $? "IQ2_XXS file: type listed as unsupported"
"$TERN_BIN" info -m "$tmp/q2k.gguf" --mem 1G 2>&1 | grep -q "IQ2_XXS .*not supported by tern's engine"
ok $? "IQ2_XXS file: text flags the type"

"$TERN_BIN" info -m "${paths[smollm2]}" --mem 50M >"$tmp/small.txt" 2>&1
grep -q "budget 50.0 MiB: the weights alone do not fit" "$tmp/small.txt"
ok $? "budget below the weights: said so"

mini_gguf "$tmp/odd.gguf" '{% for m in messages %}[[{{ m.content }}]]{% endfor %}'
"$TERN_BIN" info -m "$tmp/odd.gguf" --mem 1G >"$tmp/odd.txt" 2>&1
grep -q "^chat template unknown, using ChatML fallback" "$tmp/odd.txt"
ok $? "unrecognised template: info shows the ChatML fallback"
"$TERN_BIN" info -m "$tmp/odd.gguf" --mem 1G --json | jq -e '.chat_template.chatml_fallback' >/dev/null
ok $? "unrecognised template: JSON flags the fallback"

# Malformed and missing files: the reader's message, exit 1.
printf 'GGUF\001\000\000\000' >"$tmp/v1.gguf"
"$TERN_BIN" info -m "$tmp/v1.gguf" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "v1.gguf: byte 4: unsupported version 1" "$tmp/err" && [ ! -s "$tmp/out" ]
ok $? "v1 file: reader message, exit 1"
head -c 100000 "${paths[smollm2]}" >"$tmp/cut.gguf"
"$TERN_BIN" info -m "$tmp/cut.gguf" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "cut.gguf: byte [0-9]*: .*longer than the file" "$tmp/err"
ok $? "truncated model: reader message, exit 1"
diag "$(cat "$tmp/err")"
"$TERN_BIN" info -m "$tmp/none.gguf" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "none.gguf: cannot open" "$tmp/err"
ok $? "missing file: exit 1"
"$TERN_BIN" info -m "$tmp/v1.gguf" --kv-type q4 >/dev/null 2>&1
[ $? -eq 2 ]; ok $? "bad --kv-type: exit 2"
tap_done
