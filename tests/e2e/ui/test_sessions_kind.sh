#!/bin/bash
# test_sessions_kind: one-shot runs are kept apart from chats (issue 35,
# wall 11). Two local `tern run hi` and two through a tern serve tenant
# limited to one request a minute (the second rejected with a 429) are
# stored as sessions of kind run: `tern history list` shows them (KIND run,
# the rejected one too). The real `tern chat` in tmux (80x24, then 100x30)
# starts a new session; F5 lists only the chat's sessions until `a` lists
# the runs too (marked run) and `a` again hides them; a second `tern chat`
# starts a new session again, and `tern chat -c` continues the newest chat
# session with its transcript (not a run's).
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/ui/tmux_lib.sh"
tmux_setup kinds
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

printf 'sekrit-key-1 tenant=alice rpm=1 burst=1\n' >"$TMP/keys"
P=$(free_port)
"$TERN_BIN" serve -m "$MODEL" --port "$P" --api-key-file "$TMP/keys" --no-history -t 1 \
    --access-log - >"$TMP/s.log" 2>&1 &
S=$!
trap 'kill $S 2>/dev/null; tmux -L "$SOCK" kill-server 2>/dev/null; rm -rf "$TMP"' EXIT
for ((i = 0; i < 300 * TIME_SCALE; i++)); do grep -q ready "$TMP/s.log" && break; sleep 0.2; done

"$TERN_BIN" run -m "$MODEL" -n 4 hi >/dev/null 2>&1; ok $? "tern run hi"
"$TERN_BIN" run -m "$MODEL" -n 4 hi >/dev/null 2>&1; ok $? "tern run hi, again"
U=http://127.0.0.1:$P/v1
"$TERN_BIN" run --url "$U" --api-key sekrit-key-1 -n 4 hi >/dev/null 2>&1; ok $? "tern run --url hi"
"$TERN_BIN" run --url "$U" --api-key sekrit-key-1 -n 4 hi >/dev/null 2>"$TMP/e"
ok $(( $? == 0 )) "tern run --url hi over the tenant's limit is rejected"
"$TERN_BIN" history list >"$TMP/l"
[ "$(grep -Ec '^ +[0-9]+ +[-0-9: ]+ +run +[0-9]+ .* hi$' "$TMP/l")" -eq 4 ]
ok $? "tern history list shows the four runs, KIND run (the rejected one too)"
diag "$(cat "$TMP/l")"
"$TERN_BIN" history list --json | python3 -c '
import json, sys
l = json.load(sys.stdin)
assert [s["kind"] for s in l] == ["run"] * 4, l'
ok $? "history list --json: kind run"

start() { # COLS ROWS [OPTIONS]
    T kill-server 2>/dev/null
    for ((i = 0; i < 20; i++)); do
        T new-session -d -x "$1" -y "$2" -s chat \
            "env TERM=xterm-256color LANG=C.UTF-8 XDG_DATA_HOME='$XDG_DATA_HOME' '$TERN_BIN' chat -m '$MODEL' --temp 0 --max-tokens 6 ${3:-}; echo TERN-EXITED rc=\$?; sleep 600" 2>/dev/null && break
        sleep 0.25
    done
    T set-option -t chat -g status off >/dev/null
    wait_for 'KV [0-9]+ blk' 120
}
# the sessions pane alone (its box's columns), rows joined by newlines
pane() {
    cap | python3 -c '
import sys
rows = sys.stdin.read().split("\n")
a = rows[0].index("┌─ sessions"); b = rows[0].index("┐", a) + 1
print("\n".join(r[a:b] for r in rows))'
}
quit() { keys C-c; wait_for 'TERN-EXITED rc=0' 20; }

start 80 24; ok $? "80x24: tern chat starts"
cap | grep -q '┌─ New chat' && ! cap | grep -q '▌ you'; ok $? "80x24: ... on a new session"
keys F5; wait_for '┌─ sessions' 5
! pane | grep -q 'hi'; ok $? "80x24: F5 lists no one-shot run"
keys Tab; text "Chat marker"; keys Enter
wait_for 'assistant · [0-9]+ tok' 60; ok $? "80x24: a chat reply"
keys Tab; sleep 0.3
pane | grep -q 'Chat marker' && [ "$(pane | grep -Ec '[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}')" -eq 1 ]
ok $? "80x24: the pane lists the chat's session alone"
show "80x24 sessions"
keys a; wait_for '┌─ sessions+runs' 5
[ "$(pane | grep -c '│  run: hi *│')" -eq 4 ]
ok $? "80x24: a lists the four runs too, each marked run"
cap | grep -q 'one-shot runs (tern run) listed too'; ok $? "80x24: ... and says so"
show "80x24 sessions+runs"
keys a; wait_for '┌─ sessions F5' 5
! pane | grep -q 'hi'; ok $? "80x24: a again hides them"
cap | grep -q '▌ you' && cap | grep -q 'Chat marker'; ok $? "80x24: the open session stays open"
quit; ok $? "80x24: quit"

start 100 30; ok $? "100x30: tern chat again"
cap | grep -q '┌─ New chat' && ! cap | grep -q 'Chat marker'; ok $? "100x30: ... starts a new session"
keys F5; wait_for '┌─ sessions' 5
pane | grep -q 'Chat marker' && ! pane | grep -q 'hi'
ok $? "100x30: F5 lists the earlier chat, no run"
quit
start 100 30 -c; ok $? "100x30: tern chat -c"
cap | grep -q '┌─ Chat marker' && cap | grep -q '▌ you' && cap | grep -Eq 'assistant · [0-9]+ tok'
ok $? "100x30: -c continues the newest chat session with its transcript"
show "100x30 -c"
quit
"$TERN_BIN" history list --json | python3 -c '
import json, sys
l = json.load(sys.stdin)
assert sorted(s["kind"] for s in l) == ["chat"] + ["run"] * 4, l'
ok $? "history: one chat, four runs"
tap_done
