#!/bin/bash
# test_residue: popups leave nothing behind (issue 35, wall 9). The real
# `tern chat` in tmux at 80x24 and 100x30 with Chinese text in the chat (a
# prompt and a reply of wide characters, lines that popup borders cut through
# the middle of a character): each popup (F4 parameters, F6 model picker, F1
# help, the sessions pane's delete question; one opened while a reply
# streams) is opened and closed, and the screen after it closed must equal
# the screen after a full redraw (Ctrl-L), cell for cell.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/ui/tmux_lib.sh"
tmux_setup residue
PROMPT='你好，请用中文介绍一下巴黎。巴黎是法国的首都，也是一座美丽的城市，有很多博物馆和咖啡馆。'

start() {
    T kill-server 2>/dev/null
    local i
    for ((i = 0; i < 20; i++)); do
        T new-session -d -x "$1" -y "$2" -s chat \
            "env TERM=xterm-256color LANG=C.UTF-8 XDG_DATA_HOME='$XDG_DATA_HOME' '$TERN_BIN' chat -m '$MODEL' --temp 0 --max-tokens 48; echo TERN-EXITED rc=\$?; sleep 600" 2>/dev/null && break
        sleep 0.25
    done
    T set-option -t chat -g status off >/dev/null
    wait_for 'KV [0-9]+ blk' 120
}
# replies done: the counts of finished replies reaches $1
replies() {
    local i
    for ((i = 0; i < 300 * TIME_SCALE; i++)); do
        [ "$(cap | grep -Ec 'assistant · [0-9]+ tok')" -ge "$1" ] && return 0
        sleep 0.2
    done
    return 1
}
# settle: the screen the same twice in a row (the instruments refresh once a second)
settle() {
    local a b i
    a=$(cap)
    for ((i = 0; i < 20; i++)); do
        sleep 0.7
        b=$(cap)
        [ "$a" = "$b" ] && return 0
        a=$b
    done
}
# same_as_redraw NAME: the screen now against the screen after Ctrl-L
# (blanks at a line's end are no difference: a full redraw clears them)
same_as_redraw() {
    local now fresh
    now=$(cap | sed 's/ *$//')
    keys C-l; sleep 0.5
    fresh=$(cap | sed 's/ *$//')
    if [ "$now" = "$fresh" ]; then
        ok 0 "$1: the screen equals a fresh redraw"
    else
        ok 1 "$1: the screen equals a fresh redraw"
        diag "after closing:" "$now" "after Ctrl-L:" "$fresh"
    fi
}

for size in 80x24 100x30; do
    start "${size%x*}" "${size#*x}"; ok $? "$size: chat starts"
    T send-keys -t chat -l "$PROMPT"; keys Enter
    replies 1; ok $? "$size: a reply"
    settle
    keys C-l; sleep 0.5
    cap | grep -q '巴黎'; ok $? "$size: Chinese text in the chat"
    for popup in F4 F6 F1; do
        keys "$popup"; sleep 0.5
        cap | grep -q '┌─ \(generation\|model\|keys\)'; ok $? "$size: $popup opens a popup"
        keys Escape; sleep 0.6
        same_as_redraw "$size: $popup closed"
    done
    # the sessions pane and its delete question, with the pane beside the chat
    keys F5; sleep 0.5; keys d; sleep 0.5
    cap | grep -q 'delete session'; ok $? "$size: the delete question opens"
    keys n; sleep 0.6
    same_as_redraw "$size: delete question closed"
    keys Tab F5; sleep 0.3
    # a popup open while a reply streams: what changed beneath it shows
    T send-keys -t chat -l "再介绍一下北京。"; keys Enter; sleep 0.3
    keys F4; sleep 0.5
    cap | grep -q '┌─ generation'; ok $? "$size: F4 opens while the reply streams"
    settle
    keys Escape; sleep 0.6
    replies 2; ok $? "$size: the second reply ended under the popup"
    settle
    same_as_redraw "$size: popup over a streaming reply closed"
    keys C-c
    wait_for 'TERN-EXITED rc=0' 20; ok $? "$size: quit"
done
tap_done
