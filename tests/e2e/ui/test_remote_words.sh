#!/bin/bash
# test_remote_words: what tern says about a remote engine (issue 35, wall
# 12), against a real `tern serve` on loopback. `tern run --url -v` names the
# server once ("server: URL (tern)", never "(remote, remote: ...)"); a
# tenant over its rate limit is told when to retry once (the server's "retry
# in N s", not again as "retry after N s"); an unreachable server is called
# that, with its URL and curl's reason, by run and by the chat (not "model
# load failed: .../v1/models"); and in tmux at 80x24 and 100x30 the attach
# panel reads "remote · tern" above host:port/v1 (never "remote remote:"),
# its server rows whole, and F1 explains sTTFT and sITL.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/ui/tmux_lib.sh"
tmux_setup rwords
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# a server with one tenant of one request a minute, and one open to all
printf 'sekrit-key-1 tenant=alice rpm=1 burst=1\n' >"$TMP/keys"
P1=$(free_port); P2=$(free_port)
"$TERN_BIN" serve -m "$MODEL" --port "$P1" --api-key-file "$TMP/keys" --no-history -t 1 \
    --access-log - >"$TMP/s1.log" 2>&1 &
S1=$!
"$TERN_BIN" serve -m "$MODEL" --port "$P2" --no-history -t 1 --access-log - >"$TMP/s2.log" 2>&1 &
S2=$!
trap 'kill $S1 $S2 2>/dev/null; tmux -L "$SOCK" kill-server 2>/dev/null; rm -rf "$TMP"' EXIT
for ((i = 0; i < 300 * TIME_SCALE; i++)); do
    grep -q ready "$TMP/s1.log" && grep -q ready "$TMP/s2.log" && break
    sleep 0.2
done
ok $(grep -q ready "$TMP/s2.log"; echo $?) "two tern serve on loopback"

U1=http://127.0.0.1:$P1/v1
"$TERN_BIN" run --url "$U1" --api-key sekrit-key-1 --no-history -n 4 -v hi >"$TMP/o" 2>"$TMP/e"
ok $? "run --url -v"
grep -Eq "^server: +$U1 \(tern\)$" "$TMP/e"; ok $? "-v names the server once: server: URL (tern)"
! grep -q 'remote, remote\|remote: http' "$TMP/e"; ok $? "-v says remote once"
"$TERN_BIN" run --url "$U1" --api-key sekrit-key-1 --no-history -n 4 hi >"$TMP/o" 2>"$TMP/e"
ok $(( $? == 0 )) "a second request over the tenant's rate limit fails"
grep -q 'HTTP 429 .*retry in [0-9]* s' "$TMP/e"; ok $? "the 429 says when to retry"
[ "$(grep -o -i 'retry' "$TMP/e" | wc -l)" -eq 1 ]; ok $? "... once (no 'retry in N s; retry after N s')"
diag "$(cat "$TMP/e")"

P0=$(free_port)
"$TERN_BIN" run --url "http://127.0.0.1:$P0/v1" --no-history hi >"$TMP/o" 2>"$TMP/e"
ok $(( $? == 0 )) "an unreachable server: run fails"
grep -q "server unreachable at http://127.0.0.1:$P0/v1 (.*connect" "$TMP/e"
ok $? "run says the server is unreachable, with the URL and the reason"
! grep -q '/v1/models' "$TMP/e"; ok $? "... not as a failed GET /v1/models"
diag "$(cat "$TMP/e")"

# the chat box alone (from the first row's ┌ to its first ┐), rows joined,
# spaces and borders dropped: wrapped text reads as one string
chat_flat() {
    cap | python3 -c '
import sys
rows = sys.stdin.read().split("\n")
a, b = rows[0].index("┌"), rows[0].index("┐") + 1
print("".join(r[a:b] for r in rows))' | tr -d ' │─┌┐└┘'
}
# the help box's text, rows joined with spaces squeezed
help_text() {
    cap | python3 -c '
import sys
rows = sys.stdin.read().split("\n")
top = next(i for i, r in enumerate(rows) if "keys · " in r)
a = rows[top].index("┌─ keys"); b = rows[top].index("┐", a) + 1
print(" ".join(r[a + 1:b - 1] for r in rows[top + 1:] if len(r) > a and r[a] == "│"))' | tr -s ' ' ' '
}
start() { # COLS ROWS URL
    T kill-server 2>/dev/null
    for ((i = 0; i < 20; i++)); do
        T new-session -d -x "$1" -y "$2" -s chat \
            "env TERM=xterm-256color LANG=C.UTF-8 XDG_DATA_HOME='$XDG_DATA_HOME' '$TERN_BIN' chat --attach='$3' --max-tokens 12; echo TERN-EXITED rc=\$?; sleep 600" 2>/dev/null && break
        sleep 0.25
    done
    T set-option -t chat -g status off >/dev/null
}
for size in 80x24 100x30; do
    start "${size%x*}" "${size#*x}" "http://127.0.0.1:$P0"
    wait_for 'cannot attach' 20
    ok $? "$size: attaching to nothing says 'cannot attach'"
    flat=$(chat_flat)
    grep -q "cannotattach:serverunreachableathttp://127.0.0.1:$P0/v1(" <<<"$flat"
    ok $? "$size: ... that the server is unreachable, with its URL"
    grep -q "Starttheserver(ternserve)" <<<"$flat"; ok $? "$size: ... and what to do"
    ! grep -q 'model load failed' <<<"$flat"; ok $? "$size: not 'model load failed'"

    start "${size%x*}" "${size#*x}" "http://127.0.0.1:$P2"
    wait_for 'attached to' 30; ok $? "$size: attached"
    text "hi"; keys Enter
    wait_for 'sITL +[0-9.]+ ms' 60; ok $? "$size: a reply; the server's latencies show"
    sleep 1.5
    scr=$(cap)
    grep -q "remote · tern" <<<"$scr"; ok $? "$size: the panel says remote · tern"
    grep -q "127.0.0.1:$P2/v1" <<<"$scr"; ok $? "$size: ... above the server's host:port/v1, whole"
    ! grep -q 'remote remote\|remote: htt' <<<"$scr"; ok $? "$size: never 'remote remote:'"
    grep -Eq 'queue [0-9]+ +run(ning)? [0-9]+ +preempt [0-9]+ *│' <<<"$scr"
    ok $? "$size: the server's queue row is whole"
    [ $tap_failed -ne 0 ] && show "$size attached"
    keys F1; sleep 0.3
    for ((i = 0; i < 40; i++)); do keys Down; done; sleep 0.4
    help=$(help_text | tr -d '│' | tr -s ' ' ' ')
    grep -q "sTTFT, sITL attached to a server: its own TTFT and inter-token latency" <<<"$help"
    ok $? "$size: F1 explains sTTFT and sITL"
    grep -q "TTFT time to first token" <<<"$help"; ok $? "$size: ... and TTFT"
    keys q; sleep 0.3
    keys C-c
    wait_for 'TERN-EXITED rc=0' 20; ok $? "$size: quit"
done
tap_done
