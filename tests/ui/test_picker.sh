#!/bin/bash
# test_picker: the model picker of the real `tern chat` (tmux, 80x24). The
# chat starts on a model given by name (-m smollm2); F1 lists F6; F6 lists
# the models directory; Enter on the Gemma file reopens the engine on it
# without leaving the app (instruments and a base-model reply follow); the
# session made with SmolLM2 says so when reopened with Gemma loaded. Skips
# when the Gemma file is not present.
set -u
. "$TERN_SRC/tests/app/tap.sh"
MODEL=$("$TERN_SRC/packaging/fetch-model" --print-path 2>/dev/null)
GEMMA="$(dirname "${MODEL:-.}")/gemma-3-270m-q4_k_m.gguf"
if [ -z "$MODEL" ] || [ ! -r "$MODEL" ] || [ ! -r "$GEMMA" ]; then
    echo "1..0 # SKIP needs the SmolLM2 and Gemma 3 270M files (packaging/fetch-model)"
    exit 0
fi
. "$TERN_SRC/tests/ui/tmux_lib.sh"
tmux_setup pick
mkdir -p "$XDG_DATA_HOME/tern/models"
ln -s "$MODEL" "$XDG_DATA_HOME/tern/models/$(basename "$MODEL")"
ln -s "$GEMMA" "$XDG_DATA_HOME/tern/models/$(basename "$GEMMA")"

T new-session -d -x 80 -y 24 -s chat \
    "env TERM=xterm-256color LANG=C.UTF-8 XDG_DATA_HOME='$XDG_DATA_HOME' '$TERN_BIN' chat -m smollm2 --temp 0 --max-tokens 8; echo TERN-EXITED rc=\$?; sleep 600"
T set-option -t chat -g status off >/dev/null
wait_for 'KV [0-9]+ blk' 120; ok $? "chat starts on -m smollm2 (a name in the models directory)"
cap | grep -q 'SmolLM2-135M-Instruct'; ok $? "the instruments name the model"
text "Hi"; keys Enter
wait_for 'assistant · [0-9]+ tok' 60; ok $? "a reply from SmolLM2"
keys F1; wait_for 'keys · any key closes' 5
cap | grep -q 'F6, Alt-6, /model .*pick the model'; ok $? "F1 lists the model picker key"
keys q; sleep 0.3
keys F6
wait_for 'model · 2 in the models directory' 5; ok $? "F6 opens the picker"
cap | grep -q 'gemma-3-270m-q4_k_m.gguf' && cap | grep -q 'SmolLM2-135M-Instruct.Q4_1.gguf'
ok $? "the picker lists both files"
show "model picker"
keys Down Enter
wait_for 'gemma-3-270m' 10 && wait_for 'KV [0-9]+ blk' 120 && wait_for 'base model: plain completion' 10
ok $? "Enter reopens the engine on Gemma without leaving the app"
text "The capital of France is"; keys Enter
for ((i = 0; i < 300; i++)); do [ "$(cap | grep -Ec 'assistant · [0-9]+ tok')" -ge 2 ] && break; sleep 0.2; done
[ "$(cap | grep -Ec 'assistant · [0-9]+ tok')" -ge 2 ]; ok $? "a reply from Gemma in the same window"
show "after switching to Gemma"
keys C-n; sleep 0.3
keys F2 F5; sleep 0.3
keys Down Enter
wait_for 'made with SmolLM2-135M-Instruct.Q4_1.gguf; loaded: gemma-3-270m-q4_k_m.gguf' 5
ok $? "reopening the SmolLM2 session with Gemma loaded says so"
show "session of another model"
keys C-c
wait_for 'TERN-EXITED rc=0' 20; ok $? "quit"
tap_done
