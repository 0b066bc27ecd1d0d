#!/bin/bash
# test_gauges: the instruments tell the truth at every size (tmux, the real
# `tern chat`). At 80x24 no number is cut (rows take compact forms), the
# model name shortens in the middle, the machine without a GPU gets one
# calm line (and the status line no error), tok/s moves while a reply
# streams, pp tok/s is the last prefill's rate, F5 opens beside F2, the
# timeline shows a long prompt prefilling with its chunk count; a reopened
# reply keeps its stored rate; 100x30 and 200x50 stay aligned; run says
# the GPU fallback only with -v.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/ui/tmux_lib.sh"
tmux_setup gauge
# $3: the reply's token cap, $4 more options. The first session's reply must stream long
# enough for several tok/s readings: decode passes 290 tok/s here (AMX), so 400
# tokens lasted 1.4 s and a loaded CI machine caught one sample; 1200 (the model
# repeats itself to the cap) last about 4 s.
start() {
    T new-session -d -x "$1" -y "$2" -s chat \
        "env TERM=xterm-256color LANG=C.UTF-8 '$TERN_BIN' chat -m '$MODEL' --temp 0 --max-tokens ${3:-64} ${4:-}; echo TERN-EXITED rc=\$?; sleep 600"
    T set-option -t chat -g status off >/dev/null
    wait_for 'KV [0-9]+ blk' 120
}

start 80 24 1200
ok $? "chat at 80x24"
cap | grep -Eq '│CPU( ·)? ?[0-9]+ thr[^│]*no GPU[^│]*│'; ok $? "no GPU: one calm CPU line in the instruments"
! cap | tail -1 | grep -q 'no usable GPU'; ok $? "the status line keeps its key hints (no GPU error there)"
cap | grep -Eq '│SmolLM2-135M?[^│ ]*…[^│ ]*Q4_1\.gguf *│'; ok $? "the model name shortens in the middle (start and quant shown)"
text "Tell me a story about a robot."; keys Enter
rates=""
for ((i = 0; i < 300; i++)); do
    scr=$(cap)
    grep -Eq 'assistant · [0-9]+ tok · ' <<<"$scr" && break
    grep -q 'assistant · streaming' <<<"$scr" && rates="$rates $(sed -n 's/.*tok\/s *\([0-9.]*\) .*/\1/p' <<<"$scr" | head -1)"
    sleep 0.1
done
n=$(tr ' ' '\n' <<<"$rates" | grep -E '^[0-9]' | grep -v '^0\.0$' | sort -u | wc -l)
[ "$n" -ge 2 ]; ok $? "tok/s moves while the reply streams ($n distinct readings)"
wait_for 'assistant · [0-9]+ tok · ' 60
sleep 1.5
cap | grep -Eq '│pp +[0-9.]+k? tok/s *│'; ok $? "pp tok/s of the last prefill shown"
cap | grep -Eq '│█(used )?[0-9]+ ▒(cached )?[0-9]+ ·(free [0-9]+|[0-9]+ free) *│'
ok $? "the KV legend's numbers are whole"
cap | grep -Eq '│TPOT +[0-9.]+ (µs|ms|s) / [0-9.]+ (µs|ms|s) *│'; ok $? "the session TPOT p50 / p90 row is whole"
cap | "$CHECK" 80; ok $? "80x24 aligned"
show "80x24 after a reply"
keys F5
wait_for 'sessions F5' 5 && cap | grep -q 'instruments F2'
ok $? "F5 while F2 is open at 80x24: both panes show"
cap | grep -Eq '│(queue|q) [0-9]+ run[a-z]* [0-9]+ +reqs? [0-9.]+k? *│'; ok $? "the narrowed instruments use compact rows"
cap | "$CHECK" 80; ok $? "three panes at 80x24 aligned"
show "80x24 sessions beside instruments"
keys Escape; sleep 0.4; keys F5; sleep 0.3
# a long prompt: the timeline shows the reply prefilling
for i in $(seq 60); do printf 'Sentence number %d of a long pasted text about clocks. ' "$i"; done >"$TMP/long.txt"
T load-buffer -b long "$TMP/long.txt"; T paste-buffer -p -b long -t chat; sleep 0.5
keys F3 Enter
seen=0
for ((i = 0; i < 300; i++)); do
    scr=$(cap)
    if grep -q 'prefilling' <<<"$scr" && grep -Eq 'prefill [0-9.]+ (µs|ms|s) \([0-9]+ chunks?\)' <<<"$scr"; then seen=1; break; fi
    [ "$(grep -Ec 'assistant · [0-9]+ tok · ' <<<"$scr")" -ge 2 ] && break
    sleep 0.1
done
[ $seen = 1 ]; ok $? "the timeline shows the reply prefilling with its chunk count"
show "timeline while prefilling"
for ((i = 0; i < 600; i++)); do [ "$(cap | grep -Ec 'assistant · [0-9]+ tok · ')" -ge 2 ] && break; sleep 0.2; done
keys C-c; wait_for 'TERN-EXITED rc=0' 20
T kill-server 2>/dev/null; sleep 1

start 100 30 64 -c
cap | grep -Eq '│tok/s +[1-9][0-9]*\.[0-9] *│'; ok $? "a reopened reply shows its stored rate, not 0.0"
cap | "$CHECK" 100; ok $? "100x30 aligned"
keys C-c; wait_for 'TERN-EXITED rc=0' 20
T kill-server 2>/dev/null; sleep 1
start 200 50 64 -c
cap | "$CHECK" 200; ok $? "200x50 aligned"
cap | grep -q 'engine p50 / p90'; ok $? "a tall screen shows the engine-wide section too"
keys C-c; wait_for 'TERN-EXITED rc=0' 20

"$TERN_BIN" run -m "$MODEL" --no-history -n 2 -p hi >/dev/null 2>"$TMP/e"
! grep -q 'no usable GPU' "$TMP/e"; ok $? "run without -v does not print the GPU fallback"
"$TERN_BIN" run -m "$MODEL" --no-history -n 2 -v -p hi >/dev/null 2>"$TMP/e"
grep -q 'no usable GPU' "$TMP/e"; ok $? "run -v prints it"
tap_done
