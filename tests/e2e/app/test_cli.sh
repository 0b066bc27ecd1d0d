#!/usr/bin/env bash
# CLI dispatch: help, version, unknown commands/options, per-command help, config file.
. "$(dirname "$0")/../../tap.sh"
tern=${TERN_BIN:?}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/cfg

out=$("$tern" --help); rc=$?
ok $rc "tern --help exits 0"
for c in chat run bench eval history info tokenize serve models pull version; do
  echo "$out" | grep -q "^  $c " ; ok $? "--help lists '$c'"
  "$tern" $c --help > "$tmp/h" 2>&1; ok $? "tern $c --help exits 0"
  grep -q "usage: tern $c" "$tmp/h"; ok $? "tern $c --help prints its usage"
done

"$tern" frobnicate > "$tmp/o" 2> "$tmp/e"; rc=$?
[ $rc -eq 2 ]; ok $? "unknown command exits 2 (got $rc)"
grep -q "unknown command 'frobnicate'" "$tmp/e"; ok $? "unknown command is named in the message"

"$tern" info --no-such-option > "$tmp/o" 2> "$tmp/e"; rc=$?
[ $rc -eq 2 ]; ok $? "unknown option exits 2 (got $rc)"
grep -q "unknown option '--no-such-option'" "$tmp/e"; ok $? "unknown option is named in the message"

"$tern" info -m > "$tmp/o" 2> "$tmp/e"; rc=$?
[ $rc -eq 2 ]; ok $? "-m without a value exits 2 (got $rc)"
grep -q "needs a value" "$tmp/e"; ok $? "missing value is explained"

v=$("$tern" --version); ok $? "tern --version exits 0"
echo "$v" | grep -Eq '^tern [0-9]+\.[0-9]+\.[0-9]+'; ok $? "--version prints 'tern X.Y.Z' ($v)"
"$tern" version | grep -q "CUDA backend"; ok $? "tern version reports the CUDA build state"

mkdir -p "$tmp/cfg/tern"
printf 'this line has no equals sign\n' > "$tmp/cfg/tern/tern.conf"
"$tern" version > "$tmp/o" 2> "$tmp/e"; rc=$?
[ $rc -eq 2 ] && grep -q "tern.conf:1: expected 'key = value'" "$tmp/e"; ok $? "a malformed config file is reported with file and line"
printf '# comment\nmodel = /nonexistent/model.gguf\n' > "$tmp/cfg/tern/tern.conf"
"$tern" version > /dev/null 2>&1; ok $? "config keys unknown to a command are ignored by it"
"$tern" --config "$tmp/missing.conf" version > "$tmp/o" 2> "$tmp/e"; rc=$?
[ $rc -eq 2 ] && grep -q "missing.conf: cannot open config" "$tmp/e"; ok $? "--config with a missing file is an error"
tap_done
