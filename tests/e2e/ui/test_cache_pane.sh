#!/bin/bash
# test_cache_pane: F7 lists the prompt cache (tmux, the real `tern chat`):
# before any reply it says nothing is cached; after a ~300-token message its
# prefix shows as a memory row (hash, tokens, size); any key closes it. On
# exit the session's KV goes to the disk cache; `tern chat -c` lists it as
# a disk row, and the next turn reuses it. No prompt text in the overlay.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/ui/tmux_lib.sh"
tmux_setup cachepane
start() {
    T new-session -d -x 100 -y 30 -s chat \
        "env TERM=xterm-256color LANG=C.UTF-8 '$TERN_BIN' chat -m '$MODEL' -t 1 --temp 0 --max-tokens 8 ${1:-}; echo TERN-EXITED rc=\$?; sleep 600"
    T set-option -t chat -g status off >/dev/null
    wait_for 'KV [0-9]+ blk' 120
}
overlay() { cap | sed -n '/prompt cache (F7)/,/memory: [0-9]/p'; }

start
ok $? "chat up"
keys F7
wait_for 'prompt cache \(F7\)' 10
ok $? "F7 opens the prompt cache overlay"
overlay | grep -q 'nothing cached yet'; ok $? "nothing cached before a reply"
keys x
sleep 0.5
! cap | grep -q 'prompt cache (F7)'; ok $? "any key closes it"
msg="Reply with one word. $(head -c 1200 "$TERN_SHARED/texts/gpl-3.0.txt" | tr -s '\n' ' ')"
text "$msg"; keys Enter
wait_for 'assistant · [0-9]+ tok · ' 120
ok $? "a reply"
keys F7
wait_for 'memory +[0-9a-f]{16} +[0-9]+' 10
ok $? "F7: the reply's prefix as a memory row"
row=$(overlay | grep -E 'memory +[0-9a-f]{16}' | head -1)
diag "row: $row"
tok=$(sed -E 's/.*memory +[0-9a-f]{16} +([0-9]+) .*/\1/' <<<"$row")
[ "${tok:-0}" -ge 256 ]; ok $? "its tokens ($tok) cover the message"
! overlay | grep -qiE 'licen|freedom'; ok $? "no prompt text in the overlay"
show "the cache overlay"
keys x
sleep 0.5
cap | "$CHECK" 100; ok $? "100x30 aligned after the overlay closed (nothing left behind)"
keys C-c; wait_for 'TERN-EXITED rc=0' 30
ok $? "chat exits"
n=$(ls "$XDG_DATA_HOME"/tern/kvcache/*.tkv 2>/dev/null | wc -l)
[ "$n" -ge 1 ]; ok $? "the session's KV saved at exit ($n files)"
T kill-server 2>/dev/null; sleep 0.5

start -c
ok $? "chat -c up"
keys F7
wait_for 'disk +[0-9a-f]{16} +[0-9]+' 10
ok $? "F7 after a restart: the saved prefix as a disk row"
show "the disk row"
keys x
text "Again."; keys Enter
wait_for 'assistant · [0-9]+ tok · .*' 120
sleep 1
keys F7
wait_for 'disk +[0-9a-f]{16} +[0-9]+ +[0-9.]+ [KMG]iB +1 ' 10
ok $? "the next turn loaded it: the disk row's hit counted"
show "after the hit"
keys x
keys C-c; wait_for 'TERN-EXITED rc=0' 30
T kill-server 2>/dev/null
tap_done
