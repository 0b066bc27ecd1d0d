#!/bin/bash
# test_roofline: the instruments show the last reply's decode speed as GB/s
# of weights read and its share of this machine's streaming read (the
# limits of kernels/cpu/limits.h, measured by the loader when not cached),
# whole at 100x30 and 80x24 (tmux, the real `tern chat`); the model picker
# says what those limits allow each local model. Sanity ranges
# only: no speed target.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/ui/tmux_lib.sh"
tmux_setup roofline
export XDG_STATE_HOME="$TMP/state" # the limits measured once, into this test's folder
mkdir -p "$XDG_DATA_HOME/tern/models" # the picker's list: the default model
ln -s "$MODEL" "$XDG_DATA_HOME/tern/models/$(basename "$MODEL")"
start() {
    T new-session -d -x "$1" -y "$2" -s chat \
        "env TERM=xterm-256color LANG=C.UTF-8 '$TERN_BIN' chat -m '$MODEL' --temp 0 --max-tokens 48 ${3:-}; echo TERN-EXITED rc=\$?; sleep 600"
    T set-option -t chat -g status off >/dev/null
    wait_for 'KV [0-9]+ blk' 120
}

start 100 30
ok $? "chat at 100x30"
! cap | grep -q 'GB/s'; ok $? "no GB/s before a reply"
text "Name three colours."; keys Enter
wait_for 'assistant · [0-9]+ tok · ' 120
ok $? "a reply"
sleep 0.5
row=$(cap | grep -E '│GB/s +[0-9]+\.[0-9] · [0-9]+% of read *│' | head -1)
[ -n "$row" ]; ok $? "decode GB/s and its % of the streaming read shown (${row//│/})"
gbs=$(sed -n 's/.*GB\/s *\([0-9.]*\) .*/\1/p' <<<"$row")
pct=$(sed -n 's/.* \([0-9]*\)% of read.*/\1/p' <<<"$row")
awk -v g="${gbs:-0}" 'BEGIN { exit !(g > 0.05 && g < 500) }'; ok $? "GB/s $gbs in a sane range"
# a model that sits in the cache can pass the streaming read: a wide range
awk -v p="${pct:-0}" 'BEGIN { exit !(p >= 1 && p <= 400) }'; ok $? "$pct % of the limit in a sane range"
ls "$TMP"/state/tern/limits-*.txt >/dev/null 2>&1; ok $? "the limits were cached in the state directory"
# at a longer context the decode also reads every earlier token's K and V
# (SmolLM2: 23,040 bytes a token in f16 beside 96.6 MB of weights): a
# prompt of some 700 tokens makes that about a sixth more than the weights
long=$(for i in $(seq 1 60); do printf 'Line %d of a long note about the colours of birds. ' "$i"; done)
text "Summarise this in one sentence: $long"; keys Enter
# the row goes when the request is sent and comes back as the reply decodes;
# the reply is done when the row holds still for a second
gbrow() { cap | grep -E '│GB/s +[0-9]' | head -1; }
prev=
for ((i = 0; i < 120 * TIME_SCALE; i++)); do
    cur=$(gbrow)
    [ -n "$cur" ] && [ "$cur" != "$row" ] && [ "$cur" = "$prev" ] && break
    prev=$cur
    sleep 1
done
wb=$("$TERN_BIN" models --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["models"][0]["bytes_per_token"])')
row2=$(cap | grep -E '│GB/s +[0-9]+\.[0-9] · [0-9]+% of read *│' | head -1)
ts=$(cap | sed -n 's/.*│tok\/s *\([0-9.]*\) *│.*/\1/p' | head -1)
gbs2=$(sed -n 's/.*GB\/s *\([0-9.]*\) .*/\1/p' <<<"$row2")
awk -v g="${gbs2:-0}" -v t="${ts:-0}" -v w="${wb:-0}" \
    'BEGIN { r = t * w > 0 ? g * 1e9 / (t * w) : 0; print "# GB/s " g ", tok/s " t ", weights " w ": x" r;
             exit !(r > 1.05 && r < 1.6) }'
ok $? "at a long context the GB/s counts K and V beside the weights (${row2//│/}, tok/s $ts)"
cap | "$CHECK" 100; ok $? "100x30 aligned"
show "100x30 after a reply"
keys C-c; wait_for 'TERN-EXITED rc=0' 20
T kill-server 2>/dev/null; sleep 1

start 80 24 -c
ok $? "chat at 80x24 (the reply reopened, limits from the cache)"
cap | grep -Eq '│(GB/s +[0-9]+\.[0-9] · [0-9]+% (of )?read|[0-9]+\.[0-9] GB/s [0-9]+%) *│'
ok $? "the reopened reply's GB/s and % whole at 80x24"
cap | "$CHECK" 80; ok $? "80x24 aligned"
show "80x24 reopened"
# the model picker: what the limits allow each local model
keys F6
wait_for 'in the models directory' 10
# the dialog's columns only (64 wide, centred): the panes beside it share its lines
flat=$(cap | python3 -c 'import sys; print(" ".join(l[8:72] for l in sys.stdin.read().splitlines()))' |
    tr -d '│' | tr -s ' ' ' ')
grep -Eq 'This machine allows \(prefill / decode tok/s\): SmolLM2-135M-Instruct.Q4_1 [0-9.]+k? / [0-9.]+' <<<"$flat"
ok $? "the picker says the predicted prefill / decode tok/s of the default model"
show "80x24 picker"
keys Escape; sleep 0.3
keys C-c; wait_for 'TERN-EXITED rc=0' 20
tap_done
