#!/bin/bash
# test_cli_like: the command line behaves like its neighbours. A positional
# prompt, `tern help CMD`, run's sampling flags on chat, --limit, --threads
# above the core count warned and capped, config file mistakes reported
# with file:line, an unwritable --trace refused up front, one Ctrl-D
# ending stdin (in tmux, a real terminal), `bench --help` with the profile
# options, `run -c` continuing the newest session, one-shot runs not
# taking over the session the chat opens with, and the instruments' CPU line
# with --threads 1.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/model_env.sh"
SOCK="tern-cli-$$"
trap 'tmux -L "$SOCK" kill-server 2>/dev/null; rm -rf "$TMP"' EXIT
R() { "$TERN_BIN" run -m "$MODEL" --temp 0 -n 6 "$@"; }

a=$(R --no-history "Say hello." 2>/dev/null); b=$(R --no-history -p "Say hello." 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ]; ok $? "tern run \"prompt\" equals -p (greedy: '$a')"
"$TERN_BIN" help run | grep -q '^usage: tern run'; ok $? "tern help run shows run's help"
"$TERN_BIN" help nosuch >/dev/null 2>&1; [ $? -eq 2 ]; ok $? "tern help of an unknown command: exit 2"
h=$("$TERN_BIN" chat --help)
for f in --temp --top-p --top-k --min-p --repeat-penalty --seed --max-tokens --system; do
    grep -q -- "$f" <<<"$h" || { diag "chat lacks $f"; false; } || break
done
ok $? "chat takes every sampling flag of run"
"$TERN_BIN" bench --help | grep -q 'long-prompt' ; ok $? "bench --help shows the profile options"
cores=$(nproc)
R --no-history -t $((cores + 30)) "Hi" >/dev/null 2>"$TMP/e"
[ $? -eq 0 ] && grep -q "more than the $cores cores here: using $cores" "$TMP/e"
ok $? "--threads above the core count: warned and capped ($(cat "$TMP/e" | head -1))"
R --no-history --trace /nonexistent/dir/t.json "Hi" >/dev/null 2>"$TMP/e"; rc=$?
[ $rc -eq 1 ] && grep -q -- '--trace /nonexistent/dir/t.json: No such file' "$TMP/e"
ok $? "an unwritable trace path is an error at once (rc $rc)"

mkdir -p "$XDG_CONFIG_HOME/tern"
printf '# test\nthread = 2\n' >"$XDG_CONFIG_HOME/tern/tern.conf"
R --no-history "Hi" >/dev/null 2>"$TMP/e"
grep -q "tern.conf:2: unknown key 'thread'" "$TMP/e"; ok $? "an unknown config key is reported with file:line"
printf 'temp = hot\n' >"$XDG_CONFIG_HOME/tern/tern.conf"
R --no-history "Hi" >/dev/null 2>"$TMP/e"; rc=$?
[ $rc -eq 2 ] && grep -q "'hot' is not a number" "$TMP/e" && grep -q 'tern.conf:1' "$TMP/e"
ok $? "a bad config value is reported with file:line (rc $rc)"
rm "$XDG_CONFIG_HOME/tern/tern.conf"

# one Ctrl-D after text ends stdin on a terminal
T() { tmux -L "$SOCK" "$@"; }
T new-session -d -x 100 -y 20 -s t "'$TERN_BIN' run -m '$MODEL' --no-history --temp 0 -n 4; echo RUN-EXITED rc=\$?; sleep 60"
sleep 1.5
T send-keys -t t -l "Say hi"; T send-keys -t t C-d
for ((i = 0; i < 100; i++)); do T capture-pane -p -t t | grep -q 'RUN-EXITED rc=0' && break; sleep 0.2; done
T capture-pane -p -t t | grep -q 'RUN-EXITED rc=0'; ok $? "one Ctrl-D after text ends the prompt on a terminal"
T kill-server 2>/dev/null

# the chat's session first, then one-shot runs
"$TERN_BIN" chat -m "$MODEL" --temp 0 --max-tokens 4 --headless-frames 2000 --keys '{wait}Chat session marker\r{wait}' >/dev/null 2>&1
R "My name is Zorblax. Remember it." >/dev/null 2>&1
n1=$("$TERN_BIN" history list --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
R -v -c "What is my name?" >/dev/null 2>"$TMP/e"; ok $? "run -c continues"
p=$(sed -n 's/^prompt eval count: *\([0-9]*\).*/\1/p' "$TMP/e")
R -v --no-history "What is my name?" >/dev/null 2>"$TMP/e2"
p0=$(sed -n 's/^prompt eval count: *\([0-9]*\).*/\1/p' "$TMP/e2")
[ "${p:-0}" -gt "${p0:-0}" ]; ok $? "run -c sends the earlier turns ($p prompt tokens, $p0 alone)"
"$TERN_BIN" history list --json >"$TMP/l.json"
python3 - "$TMP/l.json" "$n1" <<'PY'
import json, sys
l = json.load(open(sys.argv[1]))
assert len(l) == int(sys.argv[2]), (len(l), sys.argv[2])
assert l[0]["messages"] == 4 and l[0]["title"].startswith("My name is Zorblax"), l[0]
PY
ok $? "run -c stored its turn in that session (no new one)"
"$TERN_BIN" history list --limit 1 | tail -n +2 | wc -l | grep -qx 1; ok $? "history list --limit 1 lists one session"
"$TERN_BIN" chat -m "$MODEL" --size 100x30 --headless-frames 300 --keys '{wait}' >"$TMP/o" 2>/dev/null
grep -q '─ New chat ─' "$TMP/o" && ! grep -q 'Chat session marker' "$TMP/o" && ! grep -q 'Zorblax' "$TMP/o"
ok $? "the chat starts a new session"
"$TERN_BIN" chat -c -m "$MODEL" --size 100x30 --headless-frames 300 --keys '{wait}' >"$TMP/o" 2>/dev/null
grep -q 'Chat session marker' "$TMP/o" && ! grep -q 'Zorblax' "$TMP/o"
ok $? "chat -c continues its own newest session, not the one-shot run's"
# --threads 1: the device says "1 thread" (singular); the instruments still
# read it as the README shows them, "CPU · N thr · ISA", not a bare "CPU"
"$TERN_BIN" chat -m "$MODEL" --threads 1 --size 100x30 --headless-frames 300 --keys '{wait}' >"$TMP/o1" 2>/dev/null
grep -Eq '│CPU · 1 thr(ead)? · [A-Za-z0-9_.+-]+' "$TMP/o1" && ! grep -q 'CPU; no GPU found' "$TMP/o1"
ok $? "--threads 1: the instruments show CPU · 1 thr · ISA ($(grep -ao 'CPU[^│]*' "$TMP/o1" | head -1))"
tap_done
