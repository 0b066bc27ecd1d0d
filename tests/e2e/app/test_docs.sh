#!/usr/bin/env bash
# Issue 35 wall 5: every command (serve included) has a man page, is listed in
# tern(1) and completed by bash, zsh and fish; every option of every command's
# --help is in its man page and in its completions.
. "$(dirname "$0")/../../tap.sh"
tern=${TERN_BIN:?}
src=$(cd "$(dirname "$0")/../../.." && pwd)
man=$src/packaging/man comp=$src/packaging/completions
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/cfg XDG_DATA_HOME=$tmp/data TERN_MODEL=

cmds=$("$tern" --help | awk '/^  [a-z]+ /{print $1}')
echo "$cmds" | grep -qx serve; ok $? "tern --help lists serve"
for c in $cmds; do
  [ -s "$man/tern-$c.1.scd" ]; ok $? "tern-$c.1.scd exists"
  grep -q "'tern-$c'" "$src/packaging/meson.build"; ok $? "tern-$c is in packaging/meson.build's pages"
  grep -q "^\*$c\*" "$man/tern.1.scd"; ok $? "tern(1) lists $c"
  for f in tern.bash _tern tern.fish; do
    grep -E "cmds[=( ].*\b$c\b" "$comp/$f" > /dev/null; ok $? "$f completes the command $c"
  done
done

# options: those --help names (the remote and shared ones included)
opts_of() { "$tern" "$@" --help 2>/dev/null | grep -oE -- '(^|[ ,[])--[a-z][a-z0-9-]*' |
            grep -oE -- '--[a-z0-9-]+' | sort -u; }
for c in $cmds; do
  miss=
  for o in $(opts_of $c); do grep -qE -- "$o([^a-z0-9-]|$)" "$man/tern-$c.1.scd" || miss="$miss $o"; done
  [ -z "$miss" ]; ok $? "tern-$c(1) documents every option of tern $c --help${miss:+ (missing:$miss)}"
done
for o in --url --attach; do
  grep -lqE -- "$o([^a-z-]|$)" "$man"/*.scd; ok $? "$o is documented in a man page"
done

# tern(1) states each shared option's range as --help (the table) does
for c in run serve "bench --profile short"; do "$tern" $c --help; done 2>/dev/null |
  awk '/^                           [^ ]/ { sub(/^ +/, " "); line = line $0; next }
       { if (line != "") print line; line = $0 } END { print line }' |
  grep -oE -- '--[a-z-]+ [A-Z]+ .*\[[0-9.]+-[0-9.]+\]' |
  sed -E 's/^(--[a-z-]+) .*\[([^]]*)\]$/\1 \2/' | sort -u > "$tmp/ranges"
[ -s "$tmp/ranges" ]; ok $? "--help gives the shared options' ranges"
while read -r o r; do
  # the option's entry: its line and the indented lines after it
  awk -v o="$o" 'index($0, o "*") { on = 1; print; next } on && /^\t/ { print; next } { on = 0 }' \
    "$man/tern.1.scd" | grep -qF -- "$r"; ok $? "tern(1) gives $o the range $r"
done < "$tmp/ranges"

# bash: run the completion as bash would, with tern on PATH
export PATH=$(dirname "$tern"):$PATH
. "$comp/tern.bash"
for c in $cmds; do
  # history's first word is its subcommand
  if [ $c = history ]; then COMP_WORDS=(tern history list --); else COMP_WORDS=(tern "$c" --); fi
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _tern
  have=" ${COMPREPLY[*]} " miss=
  for o in $(opts_of $c); do [[ $have == *" $o "* ]] || miss="$miss $o"; done
  [ -z "$miss" ]; ok $? "bash completes every option of tern $c${miss:+ (missing:$miss)}"
done
COMP_WORDS=(tern se); COMP_CWORD=1; COMPREPLY=(); _tern
[[ " ${COMPREPLY[*]} " == *" serve "* ]]; ok $? "bash completes 'tern se' to serve"
# zsh and fish take the options from the same --help (not installed here to run)
grep -q -- '--help 2>/dev/null | grep -o' "$comp/_tern"; ok $? "zsh takes each command's options from its --help"
grep -q -- "--help 2>/dev/null | string match" "$comp/tern.fish"; ok $? "fish takes each command's options from its --help"
if command -v fish > /dev/null; then
  fish -n "$comp/tern.fish"; ok $? "tern.fish parses"
fi
if command -v zsh > /dev/null; then
  zsh -n "$comp/_tern"; ok $? "_tern parses"
fi
tap_done
