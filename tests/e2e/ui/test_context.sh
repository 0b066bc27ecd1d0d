#!/bin/bash
# test_context: a conversation never gets stuck on a full context. Drives
# the real `tern chat` in tmux with a 256-token context: the context gauge
# in the input box title, the truncate policy dropping the oldest turns
# (saying so in the chat) while every message still gets a reply, the
# prefix cache reused after a truncation, F4 showing the policy, and the
# reject policy refusing with the numbers, the failed turn kept with its
# message across a restart. Greedy replies (--temp 0).
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/ui/tmux_lib.sh"
tmux_setup ctx
start() { # start COLS ROWS EXTRA-OPTIONS
    T new-session -d -x "$1" -y "$2" -s chat \
        "env TERM=xterm-256color LANG=C.UTF-8 '$TERN_BIN' chat -m '$MODEL' --temp 0 --ctx 256 --max-tokens 40 $3; echo TERN-EXITED rc=\$?; sleep 600"
    T set-option -t chat -g status off >/dev/null
    wait_for 'KV [0-9]+ blk' 120
}
n_done() { cap | grep -Ec 'assistant · [0-9]+ tok · '; }
# say TEXT: sends and waits until no reply streams
say() {
    text "$1"; keys Enter
    sleep 0.5
    local i
    for ((i = 0; i < 300; i++)); do
        cap | grep -Eq 'assistant · (streaming|waiting|prefill)' || break
        sleep 0.2
    done
    sleep 0.5
}

start 100 30 ""
ok $? "chat starts with a 256-token context"
text "Hello there"
wait_for 'message · 11 chars · [0-9]+ tokens · context [0-9]+/256 ' 5
ok $? "the input box title shows the context gauge (next prompt / 256)"
cap | grep -Eq 'ctx [0-9]+ / 256'; ok $? "the instruments show the context gauge"
keys C-u
keys F4; sleep 0.3
wait_for 'context full +truncate' 5; ok $? "F4 shows the context policy (truncate by default)"
keys Escape; sleep 0.5
prompts=("Tell me about the sea." "What lives in it?" "Name a big fish." "And a small one?"
         "Why is the sea salty?" "What colour is it?" "Thank you, one more fact?")
fails=0
for p in "${prompts[@]}"; do say "$p"; done
show "after seven turns in 256 tokens"
! cap | grep -Eq 'context full|rejected|request too large'
ok $? "no message was refused"
T capture-pane -p -N -S -400 -t chat | grep -Eq '[0-9]+ earlier turns? (is|are) outside the context'
ok $? "the chat says that earlier turns are outside the context"
cap | grep -Eq 'ctx [0-9]+ / 256 +[0-9]+%  -[0-9]+ turns'; ok $? "the instruments count the dropped turns"
keys F3; sleep 0.5
wait_for 'prompt [0-9]+ tok: [1-9][0-9]* cached \+ [0-9]+ computed' 5
ok $? "after truncating, the kept prefix is still reused from the KV cache"
show "timeline after truncation"
keys F3
cap | "$CHECK" 100; ok $? "screen aligned (wcwidth oracle)"
keys C-c
wait_for 'TERN-EXITED rc=0' 20; ok $? "quit"
T kill-server 2>/dev/null; sleep 1

# reject: the conversation is refused once it cannot fit; the failed turn is
# stored with its status and message
start 100 30 "--context-policy reject"
ok $? "chat starts with --context-policy reject"
keys C-n; sleep 0.3
for p in "${prompts[@]}"; do
    say "$p"
    cap | grep -q 'context full' && break
done
wait_for 'context full: the conversation is [0-9]+ tokens' 5
ok $? "reject policy refuses with the numbers"
show "reject policy"
keys F4; sleep 0.3
wait_for 'context full +reject' 5; ok $? "F4 shows the session's policy (reject)"
keys Escape; sleep 0.5
keys C-c
wait_for 'TERN-EXITED rc=0' 20
T kill-server 2>/dev/null; sleep 1
start 100 30 -c
wait_for 'assistant · failed' 10 && cap | grep -q 'context full: the conversation is'
ok $? "after a restart the failed turn shows as failed with its message"
show "restarted: the failed turn"
keys C-c
wait_for 'TERN-EXITED rc=0' 20
tap_done
