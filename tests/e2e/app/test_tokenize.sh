#!/usr/bin/env bash
# test_tokenize: 'tern tokenize' on the real models gives the reference
# engine's ids (tests/engine/model/tok/golden/*.ids) for files, arguments and stdin, with
# --special and --bos; the default view and --pieces show each token's text
# (partial UTF-8 as bytes), --vocab the stored entries; usage errors exit 2,
# unreadable input exits 1.
. "$TERN_SRC/tests/tap.sh"
TMPDIR_T=$(mktemp -d); trap 'rm -rf "$TMPDIR_T"' EXIT
gold="$TERN_SRC/tests/engine/model/tok/golden"
for pair in smollm2:smollm2 gemma3:gemma3-270m; do
  key=${pair%%:*}; fetch=${pair#*:}
  if ! model=$("$TERN_SRC/packaging/fetch-model" --model "$fetch" --print-path); then
    ok 1 "$key: fetch-model could not provide the model"; continue
  fi
  # own inputs with their ids listed in the golden file (512 ids or fewer)
  while read -r src name flags n rest; do
    [ "$src" = own ] || continue
    [ "${rest:0:1}" = "#" ] && continue
    opts=()
    [[ $flags == *s* ]] && opts+=(--special)
    [[ $flags == *b* ]] && opts+=(--bos)
    got=$("$TERN_BIN" tokenize -m "$model" --ids "${opts[@]}" --file "$gold/inputs/$name")
    if [ "$got" = "$rest" ]; then ok 0 "$key $name [$flags] --file"; else
      ok 1 "$key $name [$flags] --file"; diag "got:  $got" "want: $rest"; fi
  done < "$gold/$key.ids"
  want=$(awk '$1=="own" && $2=="code-py.txt" && $3=="-" {$1=$2=$3=$4=""; sub(/^ +/, ""); print}' "$gold/$key.ids")
  got=$("$TERN_BIN" tokenize -m "$model" --ids < "$gold/inputs/code-py.txt")
  [ "$got" = "$want" ]; ok $? "$key: standard input gives the same ids as --file"
  got=$("$TERN_BIN" tokenize -m "$model" --ids "$(cat "$gold/inputs/contractions.txt")")
  want=$(awk '$1=="own" && $2=="contractions.txt" && $3=="-" {$1=$2=$3=$4=""; sub(/^ +/, ""); print}' "$gold/$key.ids")
  [ "$got" = "$want" ]; ok $? "$key: TEXT argument"
  lines=$("$TERN_BIN" tokenize -m "$model" --file "$gold/inputs/code-c.txt" | wc -l)
  n=$(awk '$1=="own" && $2=="code-c.txt" && $3=="-" {print $4}' "$gold/$key.ids")
  [ "$lines" = "$n" ]; ok $? "$key: default output has one line per token ($lines, want $n)"
done
model=$("$TERN_SRC/packaging/fetch-model" --print-path)
# the default view shows each token's text: a CJK character split over
# byte-level tokens as its bytes (\xNN, never U+FFFD), the completing token
# naming the character; --pieces the same texts quoted; --vocab the stored
# entries (Ġ, Ċ); control bytes never raw
txt=$(printf '你好 start\nline\033[31m')
"$TERN_BIN" tokenize -m "$model" "$txt" >"$TMPDIR_T/view" 2>&1
python3 - "$TMPDIR_T/view" <<'PY'
import sys
out = open(sys.argv[1], "rb").read().decode("utf-8")
lines = out.splitlines()
for l in lines: print("# " + l)
assert "\ufffd" not in out and "\x1b" not in out.replace("\\x1b", ""), "no U+FFFD, no raw ESC"
assert any(l.endswith("'\\xa0' -> '你'") for l in lines), "the token completing 你 names it"
assert any(l.endswith("'\\xbd' -> '好'") for l in lines), "the token completing 好 names it"
assert any(l.endswith("'\\xe4\\xbd'") for l in lines), "a partial sequence shown as bytes"
assert any(l.endswith("' start'") for l in lines) and any(l.endswith("'\\n'") for l in lines)
assert any("\\x1b" in l for l in lines), "ESC escaped"
PY
ok $? "default view: each token's text, partial UTF-8 as \\xNN, the completed character shown"
p=$("$TERN_BIN" tokenize -m "$model" --pieces "$(printf '你好 start\nx')")
[ "$p" = "'\xe4\xbd' '\xa0' '\xe5\xa5' '\xbd' ' start' '\n' 'x'" ]; ok $? "--pieces: the tokens' texts, quoted ($p)"
v=$("$TERN_BIN" tokenize -m "$model" --vocab "$(printf ' start\nx')")
[ "$v" = "Ġstart Ċ x" ]; ok $? "--vocab: the vocabulary entries as stored ($v)"
"$TERN_BIN" tokenize -m "$model" --ids --pieces x >/dev/null 2>&1; [ $? = 2 ]; ok $? "--ids with --pieces exits 2"
"$TERN_BIN" tokenize -m "$model" --pieces --vocab x >/dev/null 2>&1; [ $? = 2 ]; ok $? "--pieces with --vocab exits 2"
"$TERN_BIN" tokenize -m "$model" --bogus x >/dev/null 2>&1; [ $? = 2 ]; ok $? "unknown option exits 2"
"$TERN_BIN" tokenize -m "$model" --file /nonexistent/x >/dev/null 2>&1; [ $? = 1 ]; ok $? "unreadable --file exits 1"
err=$("$TERN_BIN" tokenize -m /nonexistent.gguf x 2>&1 >/dev/null); [ $? = 1 ] && [[ $err == *nonexistent.gguf* ]]
ok $? "missing model exits 1 naming the file"
tap_done
