#!/bin/bash
# test_thinking: a reply's <think>…</think> (Qwen3, the DeepSeek-R1
# distills) folded in the real `tern chat` in tmux (issue 36). A stored
# few-shot conversation whose assistant turns open with <think> (written
# into the real history database) is continued with `tern chat -c`; the
# default model (greedy) thinks in kind. Folded, each reply shows one line
# ("▸ thought for 0.3 s · 12 tok" for the live one, "▸ thought" for the
# stored ones) and its answer, never the thought; Alt-T unfolds every
# thought under a bar, and folds them again; F2's instruments time the
# thinking apart; Ctrl-Y copies the answer without the thought; the
# history keeps the thinking's time and tokens, shown again when reopened.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/ui/tmux_lib.sh"
tmux_setup think
DB="$XDG_DATA_HOME/tern/history.db"

"$TERN_BIN" run -m "$MODEL" -n 2 --system \
    "Think first inside <think></think>, then answer with one word." "Color of the sky?" \
    >/dev/null 2>&1
ok $? "tern run stores a first exchange"
# the exchange becomes a chat session with crafted thinking turns
sqlite3 "$DB" "
UPDATE sessions SET kind = 'chat';
UPDATE messages SET text = '<think>The sky is blue on a clear day.</think>Blue'
  WHERE role = 'assistant';
INSERT INTO messages(session_id, role, text, status, created_at, updated_at)
  SELECT id, 'user', 'Color of grass?', 'ok', created_at + 1, created_at + 1 FROM sessions;
INSERT INTO messages(session_id, role, text, status, created_at, updated_at)
  SELECT id, 'assistant', '<think>Grass is green.</think>Green', 'ok', created_at + 2,
         created_at + 2 FROM sessions;"
ok $? "the few-shot turns written into the history"

for ((i = 0; i < 20; i++)); do
    T new-session -d -x 100 -y 36 -s chat \
        "env TERM=xterm-256color LANG=C.UTF-8 XDG_DATA_HOME='$XDG_DATA_HOME' '$TERN_BIN' chat -c -m '$MODEL' --temp 0 --max-tokens 40; echo TERN-EXITED rc=\$?; sleep 600" 2>/dev/null && break
    sleep 0.25
done
T set-option -t chat -g status off >/dev/null
wait_for 'KV [0-9]+ blk' 120; ok $? "tern chat -c starts on the stored conversation"
[ "$(cap | grep -c '▸ thought  (Alt-T shows it)')" -eq 2 ] && cap | grep -q 'Green' &&
    ! cap | grep -q 'Grass is green'
ok $? "the stored replies: their thinking folded to one line, the answers shown"
show "folded"

wait_for 'model ready' 60
text "Color of snow?"; keys Enter
wait_for '▸ thought for [0-9.]+ (ms|s) · [0-9]+ tok' 90
ok $? "the new reply's thinking folded, with its time and tokens"
[ "$(cap | grep -c '▌ assistant · [0-9]* tok')" -ge 1 ] && ! cap | grep -q 'Snow is'
ok $? "the new reply's answer shown, its thought not"
show "new reply"

keys M-t; sleep 0.5
cap | grep -q '│ The sky is blue on a clear day.' && cap | grep -q '│ Grass is green.' &&
    [ "$(cap | grep -c '▾ thought')" -eq 3 ]
ok $? "Alt-T shows every thought under a bar"
show "shown"
keys M-t; sleep 0.5
! cap | grep -q 'Grass is green' && [ "$(cap | grep -c '▸ thought')" -eq 3 ]
ok $? "Alt-T again folds them"

cap | grep -Eq 'think +[0-9.]+ (ms|s) [0-9]+ tok'
ok $? "the instruments (F2, shown at 100 columns) time the last reply's thinking apart"
show "instruments"

keys C-y; sleep 0.3
cap | grep -Eq 'copied the reply \([0-9]+ bytes\)'
ok $? "Ctrl-Y copies the reply"
keys C-c; wait_for 'TERN-EXITED rc=0' 20; ok $? "quits cleanly"

# the history keeps the thinking's time and tokens (store v9): reopened,
# the new reply's fold says them again; the stored few-shot turns (never
# timed) say "thought"
row=$(sqlite3 "$DB" "SELECT think_tokens, think_s FROM requests ORDER BY id DESC LIMIT 1")
tok=${row%%|*}
[ -n "$tok" ] && [ "$tok" -gt 0 ] && [ "$(sqlite3 "$DB" "SELECT COUNT(*) FROM requests WHERE think_tokens IS NULL")" -ge 1 ]
ok $? "the history row has the thinking's tokens and seconds ($row); a reply without them NULL"
T kill-server 2>/dev/null
for ((i = 0; i < 20; i++)); do
    T new-session -d -x 100 -y 36 -s chat \
        "env TERM=xterm-256color LANG=C.UTF-8 XDG_DATA_HOME='$XDG_DATA_HOME' '$TERN_BIN' chat -c -m '$MODEL' --temp 0 --max-tokens 40; echo TERN-EXITED rc=\$?; sleep 600" 2>/dev/null && break
    sleep 0.25
done
wait_for 'model ready' 60
cap | grep -Eq "▸ thought for [0-9.]+ (ms|s) · $tok tok" && [ "$(cap | grep -c '▸ thought  (Alt-T shows it)')" -eq 2 ]
ok $? "reopened: the stored reply's fold has its time and $tok tokens again"
show "reopened"
keys C-c; wait_for 'TERN-EXITED rc=0' 20; ok $? "quits cleanly"
tap_done
