#!/bin/bash
# test_progress: a long prompt shows its progress. A ~3,000-token message
# in the real `tern chat` (tmux) shows a prefill bar with tokens done /
# total and the time left in the reply's header before the reply streams;
# `tern run -v` on a terminal (script(1) gives it a pty) rewrites a
# "prefill done/total" line while it prefills, and prints none when stderr
# is not a terminal.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/ui/tmux_lib.sh"
tmux_setup prog
for i in $(seq 80); do printf 'The quick brown fox number %d jumps over the lazy dog. ' "$i"; done >"$TMP/long.txt"

T new-session -d -x 100 -y 30 -s chat \
    "env TERM=xterm-256color LANG=C.UTF-8 '$TERN_BIN' chat -m '$MODEL' --temp 0 --max-tokens 8; echo TERN-EXITED rc=\$?; sleep 600"
T set-option -t chat -g status off >/dev/null
wait_for 'KV [0-9]+ blk' 120
T load-buffer -b long "$TMP/long.txt"
T paste-buffer -p -b long -t chat
sleep 1
T send-keys -t chat Enter
seen=""
for ((i = 0; i < 600 * TIME_SCALE; i++)); do
    scr=$(cap)
    if grep -Eq 'assistant · prefill ▕[█░]+▏ [0-9.]+k?/[0-9.]+k tok' <<<"$scr"; then
        seen=$(grep -Eo 'prefill ▕[█░]+▏ [^│]*' <<<"$scr" | head -1)
        grep -q 'left' <<<"$seen" && break
    fi
    grep -Eq 'assistant · [0-9]+ tok · ' <<<"$scr" && break
    sleep 0.1
done
[ -n "$seen" ]; ok $? "the reply header shows the prefill bar with done/total tokens (${seen:-none})"
grep -Eq '· [0-9.]+ (ms|s) left' <<<"$seen"; ok $? "and the time left"
show "prefilling"
wait_for 'assistant · [0-9]+ tok · ' 120; ok $? "the reply follows the prefill"
T send-keys -t chat C-c
T kill-server 2>/dev/null

script -qefc "'$TERN_BIN' run -m '$MODEL' -v --no-history --temp 0 -n 4 -p \"\$(cat '$TMP/long.txt')\"" \
    "$TMP/typescript" >/dev/null 2>&1 </dev/null
ok $? "tern run -v on a terminal succeeds"
n=$(tr '\r' '\n' <"$TMP/typescript" | grep -Ec '^prefill [0-9]+/[0-9]+ tok +[0-9]+%')
[ "$n" -ge 2 ]; ok $? "tern run -v rewrites a prefill progress line on a terminal ($n updates)"
tr '\r' '\n' <"$TMP/typescript" | grep -Eq '^prefill [0-9]+/[0-9]+ tok +[0-9]+%  ETA [0-9.]+ s'
ok $? "with an ETA"
"$TERN_BIN" run -m "$MODEL" -v --no-history --temp 0 -n 4 -p "$(cat "$TMP/long.txt")" >/dev/null 2>"$TMP/err"
! grep -q 'prefill [0-9]*/' "$TMP/err" && grep -q 'prompt eval count' "$TMP/err"
ok $? "no progress line when stderr is not a terminal (timings still printed)"
tap_done
