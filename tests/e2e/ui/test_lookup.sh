#!/bin/bash
# test_lookup: speculative decoding by n-gram lookup from the real `tern
# chat` in tmux (issue 39). F4 has a "lookup guesses" field (0 = off, as
# without --lookup); set to 6, a reply that repeats the prompt's text is
# decoded with guesses and the instruments show how many were kept and the
# tokens a step, the F3 timeline the tokens that came as kept guesses; the
# session's stored parameters keep it; --lookup-k sets
# the field's default; a bad value is refused in the dialog. With a draft
# model (the default model as its own draft) the instruments say "draft",
# not "lookup": the guesses' source comes with the request's metrics.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/ui/tmux_lib.sh"
tmux_setup lookup
DB="$XDG_DATA_HOME/tern/history.db"
start() { # OPTIONS
    T kill-server 2>/dev/null
    for ((i = 0; i < 20; i++)); do
        T new-session -d -x 100 -y 36 -s chat \
            "env TERM=xterm-256color LANG=C.UTF-8 XDG_DATA_HOME='$XDG_DATA_HOME' '$TERN_BIN' chat -m '$MODEL' --temp 0 --max-tokens 60 ${1:-}; echo TERN-EXITED rc=\$?; sleep 600" 2>/dev/null && break
        sleep 0.25
    done
    T set-option -t chat -g status off >/dev/null
    wait_for 'model ready' 120
}
field() { cap | grep -E 'lookup guesses' | head -1; }

start; ok $? "tern chat starts"
keys F4; wait_for 'generation parameters' 5
field | grep -Eq 'lookup guesses +0 '; ok $? "F4: lookup guesses, 0 (off) without --lookup"
show "F4"
for i in 1 2 3 4 5; do keys Tab; done
keys C-u; text "99"; keys Enter; sleep 0.3
cap | grep -q 'lookup guesses: 0 (off) to 32'; ok $? "F4: 99 guesses refused, the dialog stays open"
keys C-u; text "6"; keys Enter; sleep 0.3
! cap | grep -q 'generation parameters'; ok $? "F4: 6 guesses saved"

text "Repeat this sentence twice, word for word: the quick brown fox jumps over the lazy dog near the river bank."
keys Enter
wait_for 'assistant · [0-9]+ tok' 90; ok $? "a reply"
wait_for 'lookup +[0-9]+% [0-9.]+ tok/step' 5
ok $? "the instruments: the guesses kept and the tokens a step"
show "reply with lookup"
keys F3; sleep 0.5
cap | grep -Eq 'gen [0-9]+ \([0-9]+ guessed\)'
ok $? "F3: the reply's timeline says how many tokens came as kept guesses"
show "timeline"
keys F3; sleep 0.3
sqlite3 "$DB" "SELECT params FROM sessions" | grep -q '"lookup_k":6'
ok $? "the session's stored parameters keep lookup_k 6"
keys C-c; wait_for 'TERN-EXITED rc=0' 20; ok $? "quits cleanly"

start "--lookup-k 4"; ok $? "tern chat --lookup-k 4 starts"
keys F4; wait_for 'generation parameters' 5
field | grep -Eq 'lookup guesses +4 '; ok $? "F4: --lookup-k 4 is the field's default"
keys Escape; sleep 0.3
keys C-c; wait_for 'TERN-EXITED rc=0' 20; ok $? "quits cleanly"

start "--draft-model '$MODEL'"; ok $? "tern chat --draft-model (the model as its own draft) starts"
text "Count from one to twenty in words."
keys Enter
wait_for 'assistant · [0-9]+ tok' 90; ok $? "a reply"
wait_for 'draft +[0-9]+% [0-9.]+ tok/step' 5
ok $? "the instruments: the guesses are the draft model's (labelled draft)"
! cap | grep -Eq 'lookup +[0-9]+% [0-9.]+ tok/step'; ok $? "... and not labelled lookup"
show "reply with a draft model"
keys C-c; wait_for 'TERN-EXITED rc=0' 20; ok $? "quits cleanly"
tap_done
