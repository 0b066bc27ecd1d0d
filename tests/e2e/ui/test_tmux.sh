#!/bin/bash
# test_tmux: drives the real `tern chat` in a real terminal (tmux) on the
# default model: a streamed reply with TTFT/TPOT and the KV bar at 100x30,
# the parameters dialog, Esc cancelling a long reply, a resize while
# streaming, a Chinese and Russian round trip at 80x24 checked for
# alignment (tests/e2e/ui/check_screen.py), quit and restart showing the
# session and its transcript, sessions (switch, rename, delete), input
# editing, paste, scrollback, the help screen, and the terminal restored
# after SIGTERM and a crash. Replies are greedy (--temp 0), so one build
# gives the same text on every run. Captured screens are printed as TAP
# comments.
set -u
. "$TERN_SRC/tests/tap.sh"
# every check says when it passed (seconds into the run)
eval "tap_ok_plain() $(declare -f ok | tail -n +2)"
ok() { tap_ok_plain "$1" "$2 [${SECONDS}s]"; }

. "$TERN_SRC/tests/e2e/ui/tmux_lib.sh"
tmux_setup ui

start() { # COLS ROWS [OPTIONS]
    T new-session -d -x "$1" -y "$2" -s chat \
        "env TERM=xterm-256color LANG=C.UTF-8 '$TERN_BIN' chat -m '$MODEL' --temp 0 ${3:-}; echo TERN-EXITED rc=\$?; sleep 600"
    T set-option -t chat -g status off >/dev/null
    wait_for 'KV [0-9]+ blk' 120
}
# max_tokens N: the F4 dialog sets the session's reply length
max_tokens() { keys F4; sleep 0.3; keys Down Down C-u; text "$1"; keys Enter; sleep 0.3; }

# 1. 100x30: a streamed reply, the gauges, the KV bar
start 100 30
ok $? "chat starts at 100x30 and the model loads"
max_tokens 96
wait_for 'parameters set' 5
ok $? "F4 parameters dialog saves max tokens"
text "Hello! Who are you? Tell me a long story about your day."; keys Enter
wait_for 'assistant · (streaming|waiting|prefill)' 30
ok $? "reply starts streaming"
# sample the reply while it streams: it must be seen at several lengths
sizes=""
for ((i = 0; i < 1200; i++)); do
    scr=$(cap)
    grep -Eq 'assistant · [0-9]+ tok · ' <<<"$scr" && break
    if grep -q 'assistant · streaming' <<<"$scr"; then
        sizes="$sizes $(sed -n '/assistant · streaming/,/└/p' <<<"$scr" | tr -d ' │▍' | wc -c)"
    fi
    sleep 0.1
done
wait_for 'assistant · [0-9]+ tok · ' 5
ok $? "reply finishes with its token count"
n_sizes=$(tr ' ' '\n' <<<"$sizes" | grep . | sort -un | wc -l)
final=$(cap | sed -n '/assistant · [0-9]* tok · /,/└/p' | tr -d ' │▍' | wc -c)
first=$(tr ' ' '\n' <<<"$sizes" | grep . | sort -n | head -1)
[ "$n_sizes" -ge 1 ] && [ "${first:-0}" -lt "$final" ]
ok $? "reply seen growing while it streamed ($n_sizes partial lengths, ${first:-?} -> $final bytes)"
cap | grep -Eq 'TTFT +[0-9.]+ (µs|ms|s) ' ; ok $? "TTFT of the last reply shown"
cap | grep -Eq 'TPOT +[0-9.]+ (µs|ms|s) ' ; ok $? "TPOT of the last reply shown"
cap | grep -Eq '(█used [1-9][0-9]*|▒cached [1-9][0-9]*)' ; ok $? "KV bar numbers show blocks in use or cached"
cap | grep -Eq 'KV [█▒]+·*' ; ok $? "KV bar filled"
cap | "$CHECK" 100; ok $? "100x30 screen aligned (wcwidth oracle)"
show "100x30 after a reply"

# 1b. input box: counts, Alt-Enter and Ctrl-J newlines, bracketed paste, history recall
text "ab"; keys M-Enter; text "cd"; keys C-j; text "ef"
wait_for 'message · 8 chars · [0-9]+ tokens' 5
ok $? "Alt-Enter and Ctrl-J insert newlines; character and token counts shown"
inbox=$(cap | sed -n '/message · 8 chars/,/└/p')
grep -q '│ab ' <<<"$inbox" && grep -q '│cd ' <<<"$inbox" && grep -q '│ef ' <<<"$inbox"
ok $? "the input box shows the three lines"
keys C-u
T set-buffer -b p "$(printf 'pasted line one\npasted line two\npasted line three')"
T paste-buffer -p -b p -t chat
wait_for 'pasted line three' 5 && ! cap | grep -q 'assistant · (streaming|waiting)'
ok $? "a multi-line paste lands in the input box without sending"
cap | grep -q 'message · 49 chars'; ok $? "pasted text counted (49 characters)"
keys C-u Up
wait_for '│Hello! Who are you\? ' 5
ok $? "Up recalls the previous message"
keys C-u
keys F3
ntok=$(cap | sed -n 's/.*assistant · \([0-9]*\) tok · .*/\1/p' | head -1)
wait_for "prompt [0-9]+ tok: [0-9]+ cached \\+ [0-9]+ computed · gen ${ntok:-none}\\b" 5
ok $? "F3 timeline shows the reply's prompt tokens (cached + computed) and its ${ntok:-?} generated"
cap | grep -Eq 'queue [0-9.]+ (µs|ms|s)' && cap | grep -Eq 'prefill [0-9.]+ (µs|ms|s)' && cap | grep -Eq 'decode [0-9.]+ (µs|ms|s)'
ok $? "timeline durations of queue, prefill and decode"
show "timeline"
# a follow-up in the same session reuses the conversation's prefix from the KV cache
text "And what can you do?"; keys Enter
wait_for 'assistant · (streaming|waiting|prefill)' 30
for ((i = 0; i < 600; i++)); do
    [ "$(cap | grep -Ec 'assistant · [0-9]+ tok · ')" -ge 2 ] && break
    sleep 0.2
done
wait_for 'prompt [0-9]+ tok: [1-9][0-9]* cached \+ [0-9]+ computed · gen [0-9]+' 5
ok $? "follow-up reply: timeline shows prompt tokens reused from the cache"
sleep 1.5 # the gauges refresh at least once a second when idle
cap | grep -Eq 'prefix hit +[1-9][0-9]*%'; ok $? "instruments show a prefix hit rate above 0"
show "follow-up with prefix reuse"
keys M-Up
wait_for 'timeline F3 · reply 1 ' 5 && cap | grep -Eq 'prompt [0-9]+ tok: 0 cached'
ok $? "Alt-Up selects the first reply for the timeline"
keys M-Down
wait_for 'timeline F3 · reply 2 ' 5; ok $? "Alt-Down selects the next reply"
keys F3

# 2. a new session, a long reply; quit asks while streaming; resize; Esc cancels
keys C-n
max_tokens 2000
text "Write a very long story about a dragon who learns to paint."; keys Enter
wait_for 'assistant · streaming' 60
ok $? "long reply streaming in a new session"
keys C-n
wait_for 'a reply is streaming: wait, or Esc' 5
ok $? "Ctrl-N while a reply streams says to wait or cancel"
keys F10
wait_for 'Quit anyway' 5
ok $? "F10 while streaming asks before quitting"
keys n
sleep 0.5
T resize-window -t chat -x 80 -y 24
sleep 1.5
# (the reply's header may have scrolled out of view: the instruments say it runs)
cap | grep -q 'running 1' && cap | grep -q 'F1 help' && cap | "$CHECK" 80
ok $? "resize to 80x24 while streaming keeps a sane layout"
show "80x24 resized while streaming"
keys Escape
wait_for 'cancelled' 20
ok $? "Esc cancels the reply"
cap | grep -q 'partial reply kept'; ok $? "partial reply kept and marked cancelled"
show "after Esc"

# 3. Chinese and Russian at 80x24
keys C-n
max_tokens 16
text "你好，世界！Привет, мир! Ответь коротко."; keys Enter
wait_for 'assistant · [0-9]+ tok · ' 120
ok $? "reply to a Chinese and Russian message"
cap | grep -q '你好，世界！Привет, мир! Ответь коротко.'; ok $? "the message shows unchanged"
cap | "$CHECK" 80; ok $? "80x24 screen with CJK and Cyrillic aligned (wcwidth oracle)"
show "80x24 Chinese and Russian"

# 4. help
keys F1
wait_for 'keys · any key closes' 5
h=$(cap)
for k in Enter Alt-Enter Esc F2 F3 F4 F5 Ctrl-N PgUp Ctrl-C F10; do
    grep -q -- "$k" <<<"$h" || { diag "help lacks $k"; false; } || break
done
ok $? "help lists the keys"
show "help"
keys q

# 5. quit and restart with -c: the newest session and its transcript come back
keys C-c
wait_for 'TERN-EXITED rc=0' 20
ok $? "Ctrl-C quits with status 0 when nothing streams"
T kill-server 2>/dev/null
sleep 1
start 80 24 -c
ok $? "restart"
cap | grep -q '你好，世界！Привет, мир! Ответь коротко.' && cap | grep -Eq 'assistant · [0-9]+ tok'
ok $? "restart shows the last session with its transcript"
keys F2 F5
wait_for 'sessions F5' 5
sess=$(cap)
grep -q 'Hello! Who' <<<"$sess" && grep -q 'Write a very' <<<"$sess"
ok $? "sessions pane lists the earlier sessions"
show "restarted, sessions pane"
keys Down Down Enter
sleep 1
cap | grep -q 'And what can you do?' && cap | grep -Eq 'assistant · [0-9]+ tok'
ok $? "switching to the first session shows its transcript"
keys F4
wait_for 'max tokens +96 ' 5
ok $? "F4 shows the session's stored max tokens (96)"
keys Down Down C-u; text "20"; keys Enter
wait_for 'parameters saved with the session' 5
ok $? "F4 edit of an existing session is saved"
keys Tab r C-u; text "Renamed chat"; keys Enter
wait_for '│▶ Renamed chat' 5
ok $? "r renames the selected session"
keys Up
wait_for 'sessions F5' 2
keys d
wait_for 'Delete "Write a very' 5
ok $? "delete asks for confirmation"
keys y
sleep 0.5
! cap | grep -q 'Write a very'; ok $? "confirmed delete removes the session"

# 6. quit (the SIGTERM case is section 9, on a reply long enough to be
# caught streaming)
keys C-c
wait_for 'TERN-EXITED rc=0' 20
ok $? "Ctrl-C quits again"
T kill-server 2>/dev/null
sleep 1

# 7. the deleted session stays deleted and the renamed one keeps its name
start 80 24 -c
keys F2 F5
wait_for 'Renamed chat' 5 && ! cap | grep -q 'Write a very'
ok $? "rename and delete persist across a restart"
keys F4
wait_for 'max tokens +20 ' 5
ok $? "the edited max tokens (20) came back with the session"
keys Escape
sleep 0.5   # a key right after Esc would be read as Alt-key (ESCDELAY)
show "after rename and delete"

# 7b. scrollback: a 40-line message, Ctrl-Home, the mouse wheel, PgUp, End
keys F5 C-n
T set-buffer -b long "$(seq -f 'scroll line %g' 1 40)"
T paste-buffer -p -b long -t chat
keys Enter
# The session's replies are 20 tokens long: wait for this one to end.
wait_for 'assistant · [0-9]+ tok' 60
keys C-Home
wait_for '↓ [0-9]+ more' 5 && cap | grep -q 'scroll line 1 *│'
ok $? "Ctrl-Home scrolls to the top of the transcript"
up=$(cap | sed -n 's/.*↓ \([0-9]*\) more.*/\1/p')
text $'\e[<65;10;5M'   # mouse wheel down (SGR mouse report)
sleep 0.5
down=$(cap | sed -n 's/.*↓ \([0-9]*\) more.*/\1/p')
[ -n "$up" ] && [ "${down:-0}" -eq $((up - 3)) ]
ok $? "mouse wheel scrolls three lines ($up -> ${down:-0} lines below)"
keys PPage
sleep 0.3
again=$(cap | sed -n 's/.*↓ \([0-9]*\) more.*/\1/p')
[ "${again:-0}" -gt "${down:-0}" ]; ok $? "PgUp scrolls back up (${again:-0} lines below)"
show "scrolled back"
keys End
sleep 0.3
! cap | grep -q '↓ [0-9]* more' && ! cap | grep -q 'scroll line 1 *│'
ok $? "End (nothing typed) returns to the newest lines"
keys C-c
wait_for 'TERN-EXITED rc=0' 20
ok $? "quit again"
T kill-server 2>/dev/null
sleep 1

# 8. a crash (SIGSEGV) still leaves the terminal usable
T new-session -d -x 80 -y 24 -s chat \
    "ulimit -c 0; env TERM=xterm-256color LANG=C.UTF-8 '$TERN_BIN' chat -m '$MODEL' --temp 0; echo TERN-EXITED rc=\$?; sleep 600"
wait_for 'KV [0-9]+ blk' 120
pid=$(pgrep -P "$(T display -p -t chat '#{pane_pid}')" -x tern)
[ -n "$pid" ] && kill -SEGV "$pid"
wait_for 'TERN-EXITED rc=139' 20
ok $? "SIGSEGV kills tern (status 139)"
[ "$(T display -p -t chat '#{alternate_on}#{cursor_flag}#{mouse_any_flag}')" = "010" ]
ok $? "terminal restored after the crash: main screen, cursor shown, mouse off"
T kill-server 2>/dev/null
sleep 1

# 9. SIGTERM while streaming: the terminal is restored. The reply may run
# 2,000 tokens so it still streams when the signal comes (a 20-token one
# ends within one 0.2 s poll at today's decode speed).
start 80 24
keys C-n
max_tokens 2000
text "Write a very long story about a lighthouse keeper."; keys Enter
wait_for 'assistant · streaming' 60
ok $? "a long reply streams"
pid=$(pgrep -P "$(T display -p -t chat '#{pane_pid}')" -x tern)
[ -n "$pid" ] && cap | grep -q 'assistant · streaming' && kill -TERM "$pid"
ok $? "SIGTERM sent while the reply streams"
wait_for 'TERN-EXITED rc=0' 20
ok $? "SIGTERM ends tern with status 0"
[ "$(T display -p -t chat '#{alternate_on}#{cursor_flag}#{mouse_any_flag}')" = "010" ]
ok $? "terminal restored: main screen, cursor shown, mouse off"
tap_done
