#!/usr/bin/env bash
# test_tokenize: 'tern tokenize' on the real models gives the reference
# engine's ids (tests/tok/golden/*.ids) for files, arguments and stdin, with
# --special and --bos; usage errors exit 2, unreadable input exits 1.
. "$TERN_SRC/tests/app/tap.sh"
gold="$TERN_SRC/tests/tok/golden"
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
"$TERN_BIN" tokenize -m "$model" --ids --pieces x >/dev/null 2>&1; [ $? = 2 ]; ok $? "--ids with --pieces exits 2"
"$TERN_BIN" tokenize -m "$model" --bogus x >/dev/null 2>&1; [ $? = 2 ]; ok $? "unknown option exits 2"
"$TERN_BIN" tokenize -m "$model" --file /nonexistent/x >/dev/null 2>&1; [ $? = 1 ]; ok $? "unreadable --file exits 1"
err=$("$TERN_BIN" tokenize -m /nonexistent.gguf x 2>&1 >/dev/null); [ $? = 1 ] && [[ $err == *nonexistent.gguf* ]]
ok $? "missing model exits 1 naming the file"
tap_done
