#!/bin/bash
# test_paste: a bracketed paste is text, whatever it holds (tmux, the real
# `tern chat` at 100x30). Escape sequences (a colour, a cursor key's bytes)
# and control characters (Ctrl-A, Ctrl-C) pasted into the input box land
# there whole, shown as control pictures (never sent to the terminal), are
# not taken as keys (no cursor move, no quit), and the message sent and
# stored is the pasted text byte for byte.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/ui/tmux_lib.sh"
tmux_setup paste
T new-session -d -x 100 -y 30 -s chat \
    "env TERM=xterm-256color LANG=C.UTF-8 '$TERN_BIN' chat -m '$MODEL' --temp 0 --max-tokens 4; echo TERN-EXITED rc=\$?; sleep 600"
T set-option -t chat -g status off >/dev/null
wait_for 'KV [0-9]+ blk' 120; ok $? "chat at 100x30"
printf 'A\033[31mred\033[0m B\033[A C\001D\003E' >"$TMP/buf"
T load-buffer -b p "$TMP/buf"
T paste-buffer -p -b p -t chat
wait_for 'A␛\[31mred␛\[0m B␛\[A C␁D␃E' 5
ok $? "the paste lands whole, escapes and controls as control pictures"
cap | grep -q 'message · 24 chars'; ok $? "all 24 characters counted ($(cap | grep -o 'message · [0-9]* chars'))"
! cap | grep -q TERN-EXITED; ok $? "a pasted Ctrl-C does not quit"
# typed keys still work after the paste: the marker ended it
text "Z"; keys End
wait_for 'A␛\[31mred␛\[0m B␛\[A C␁D␃EZ' 5; ok $? "typing goes on after the paste (it ended)"
keys Enter
wait_for 'assistant · [0-9]+ tok' 60; ok $? "the message is sent and answered"
python3 - "$TMP/data/tern/history.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = [r[0] for r in db.execute("select text from messages where role = 'user'")]
want = "A\x1b[31mred\x1b[0m B\x1b[A C\x01D\x03EZ"
print(f"# stored {rows!r}")
sys.exit(0 if want in rows else 1)
PY
ok $? "the stored message is the pasted text byte for byte"
[ $? -eq 0 ] || show "after the paste"
tap_done
