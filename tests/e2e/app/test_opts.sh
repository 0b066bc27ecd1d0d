#!/usr/bin/env bash
# Issue 35 wall 4: the options shared by several commands (engine, sampling,
# remote) come from one table: every command's --help shows them with the
# same short form, argument and range, and every command takes and rejects
# them alike.
. "$(dirname "$0")/../../tap.sh"
tern=${TERN_BIN:?}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/cfg XDG_DATA_HOME=$tmp/data TERN_MODEL=

shared="threads ctx backend kv-mem kv-type step-tokens max-tokens temp top-k top-p min-p
        repeat-penalty seed system url api-key balance insecure read-timeout"
# help of each command, continuation lines joined to their option's line
help_of() {
  "$tern" "$@" --help 2>&1 | awk '
    /^                           [^ ]/ { sub(/^ +/, " "); line = line $0; next }
    { if (line != "") print line; line = $0 }
    END { if (line != "") print line }'
}
cmds="run chat eval serve bench"
for c in $cmds; do help_of $c > "$tmp/help.$c"; done
help_of bench --profile short > "$tmp/help.bench-profile"

# the flag (short form, long form, argument) and the [range] of an option's line
sig() { grep -E -- "^  (-[a-z], |    )--$2( |$)" "$tmp/help.$1" | head -1 |
        sed -E 's/^ +((-[a-z], )?--[a-z-]+( [A-Z]+)?) .*\[([^]]*)\].*/\1 [\4]/; t
                s/^ +((-[a-z], )?--[a-z-]+( [A-Z]+)?)( .*)?$/\1/'; }
for o in $shared; do
  first= firstc= bad=
  for c in $cmds bench-profile; do
    # serve's own --insecure is about binding without keys, not TLS
    [ "$o $c" = "insecure serve" ] && continue
    s=$(sig $c $o); [ -n "$s" ] || continue
    if [ -z "$first" ]; then first=$s firstc=$c
    elif [ "$s" != "$first" ]; then bad="$bad $c: '$s' vs $firstc: '$first';"; fi
  done
  [ -n "$first" ] && [ -z "$bad" ]; ok $? "--$o agrees in every command's help (${first:-absent})"
  [ -z "$bad" ] || diag "$bad"
done

# engine options every engine command takes
for c in run chat eval serve bench; do
  for o in threads backend; do
    grep -qE -- "--$o " "$tmp/help.$c"; ok $? "tern $c --help lists --$o"
  done
  grep -qE -- "^  -t, --threads N" "$tmp/help.$c"; ok $? "tern $c: -t is --threads"
done
for c in run chat eval serve bench-profile; do
  grep -qE -- "^      --ctx N .*\[16-4194304\]" "$tmp/help.$c"; ok $? "tern ${c/-/ --} --ctx: 16-4194304"
done

# -t and -n accepted alike (issue: chat and eval said "unknown option '-t'")
for c in run chat eval serve bench; do
  "$tern" $c -t 1 --help > /dev/null 2> "$tmp/e"; ok $? "tern $c -t 1 --help is accepted"
done
for c in run chat eval serve; do
  "$tern" $c -n 5 --help > /dev/null 2> "$tmp/e"; ok $? "tern $c -n 5 --help is accepted"
done
"$tern" eval -t 1 > /dev/null 2> "$tmp/e"
! grep -q "unknown option" "$tmp/e"; ok $? "tern eval -t 1: no 'unknown option' ($(head -1 "$tmp/e"))"

# the same bad value, the same message (but for the command's name)
for v in "--ctx 8" "--threads 0" "--temp -1" "--top-p 2" "--seed -3" "--backend tpu"; do
  msgs=
  for c in run chat eval serve "bench --profile short"; do
    case "$v $c" in --temp*[!nt]|--top-p*[!nt]|--temp*short|--top-p*short|--seed*eval|--seed*serve) continue ;; esac
    "$tern" $c $v > /dev/null 2> "$tmp/e"; rc=$?
    [ $rc -eq 2 ] || msgs="$msgs exit $rc in $c;"
    msgs="$msgs$(sed -E 's/^tern [a-z]+: //' "$tmp/e" | head -1)"$'\n'
  done
  n=$(printf '%s' "$msgs" | sort -u | grep -c .)
  [ "$n" = 1 ]; ok $? "'$v' is refused with one message everywhere ($(printf '%s' "$msgs" | head -1))"
  [ "$n" = 1 ] || diag "$msgs"
done

# a shared option in the config file is a known key
mkdir -p "$tmp/cfg/tern"; printf 'threads = 1\nread-timeout = 5\n' > "$tmp/cfg/tern/tern.conf"
"$tern" chat --help > /dev/null 2> "$tmp/e"
! grep -q "unknown key" "$tmp/e"; ok $? "shared options are config keys"
rm "$tmp/cfg/tern/tern.conf"
tap_done
