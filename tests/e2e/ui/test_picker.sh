#!/bin/bash
# test_picker: the model picker of the real `tern chat` (tmux, 80x24 and
# 100x30; issue 35, wall 8). The chat starts on a model given by name
# (-m smollm2); F1 lists F6; F6 lists the models directory, the loaded file
# marked, each with its kind (chat, or base: no chat template), quant, size
# and trained context. Picking the base Gemma mid-chat asks first: Esc
# keeps all as it was, Enter loads it in a new session (the SmolLM2 chat
# stays under F5, nothing sent to Gemma); picking SmolLM2 back mid
# base-session asks too, and k keeps the session. Skips when the Gemma file
# is not present.
set -u
. "$TERN_SRC/tests/tap.sh"
MODEL=$("$TERN_SRC/packaging/fetch-model" --print-path 2>/dev/null)
GEMMA="$(dirname "${MODEL:-.}")/gemma-3-270m-q4_k_m.gguf"
if [ -z "$MODEL" ] || [ ! -r "$MODEL" ] || [ ! -r "$GEMMA" ]; then
    echo "1..0 # SKIP needs the SmolLM2 and Gemma 3 270M files (packaging/fetch-model)"
    exit 0
fi
. "$TERN_SRC/tests/e2e/ui/tmux_lib.sh"
tmux_setup pick
mkdir -p "$XDG_DATA_HOME/tern/models"
ln -s "$MODEL" "$XDG_DATA_HOME/tern/models/$(basename "$MODEL")"
ln -s "$GEMMA" "$XDG_DATA_HOME/tern/models/$(basename "$GEMMA")"

start() { # COLS ROWS
    T kill-server 2>/dev/null
    local i
    for ((i = 0; i < 20; i++)); do
        T new-session -d -x "$1" -y "$2" -s chat \
            "env TERM=xterm-256color LANG=C.UTF-8 XDG_DATA_HOME='$XDG_DATA_HOME' '$TERN_BIN' chat -m smollm2 --temp 0 --max-tokens 8; echo TERN-EXITED rc=\$?; sleep 600" 2>/dev/null && break
        sleep 0.25
    done
    T set-option -t chat -g status off >/dev/null
}
n_replies() { cap | grep -Ec 'assistant · [0-9]+ tok'; }

start 80 24
wait_for 'KV [0-9]+ blk' 120; ok $? "chat starts on -m smollm2 (a name in the models directory)"
cap | grep -q 'SmolLM2-135M-Instruct'; ok $? "the instruments name the model"
text "Hi"; keys Enter
wait_for 'assistant · [0-9]+ tok' 60; ok $? "a reply from SmolLM2"
keys F1; wait_for 'keys · any key closes' 5
cap | grep -q 'F6, Alt-6, /model .*pick the model'; ok $? "F1 lists the model picker key"
keys q; sleep 0.3
keys F6
wait_for 'model · 2 in the models directory' 5; ok $? "F6 opens the picker"
cap | grep -Eq '│ +kind +quant +size +ctx +│'; ok $? "the picker heads its columns: kind, quant, size, ctx"
cap | grep -Eq '│  ● SmolLM2-135M-Instruct.Q4_1 +chat +Q4_1 +94 MiB +8.2k +│'
ok $? "the loaded model is marked (●): chat, Q4_1, 94 MiB, 8.2k context, its name whole"
cap | grep -Eq '│    gemma-3-270m-q4_k_m +base +Q4_K_M +241 MiB +32.8k +│'
ok $? "the other: base, Q4_K_M, 241 MiB, 32.8k context"
cap | grep -q 'base: no chat template'; ok $? "the footer says what base means"
show "model picker"
# a base model mid-chat: asked first; Esc keeps everything as it was
keys Down Enter
wait_for 'switch to a base model' 5; ok $? "picking the base model mid-chat asks first"
flat=$(cap | tr -d '│' | tr -s ' \n' '  ')
grep -q 'gemma-3-270m-q4_k_m is a base model (no chat template): it continues plain text' <<<"$flat" &&
    grep -q 'Enter: new session k: keep this chat Esc: cancel' <<<"$flat"
ok $? "the question says what will happen and the three answers"
show "switch question"
keys Escape; sleep 0.5
cap | grep -q '│SmolLM2-135M-' && [ "$(n_replies)" -eq 1 ] && ! cap | grep -q 'switch to a'
ok $? "Esc cancels: SmolLM2 still loaded, the chat as it was"
# Enter: Gemma in a new session; the SmolLM2 chat stays under F5
keys F6; wait_for 'model · 2' 5; keys Down Enter; wait_for 'switch to a base model' 5
keys Enter
wait_for 'gemma-3-270m' 10 && wait_for 'KV [0-9]+ blk' 120 && wait_for 'base model: plain completion' 10
ok $? "Enter reopens the engine on Gemma without leaving the app"
cap | grep -q '┌─ New chat' && [ "$(n_replies)" -eq 0 ]; ok $? "... in a new session"
text "The capital of France is"; keys Enter
wait_for 'assistant · [0-9]+ tok' 60; ok $? "a reply from Gemma in the new session"
! cap | grep -q '▌ you  *$' || cap | grep -q 'The capital of France is'
show "after switching to Gemma"
keys F5; sleep 0.3
cap | grep -q '│  Hi ' && cap | grep -q 'The capital of Fr'; ok $? "the SmolLM2 chat stays under F5"
keys Tab F5; sleep 0.3
# back to the chat model mid base-session: asked; k keeps the session
keys F6; wait_for 'model · 2' 5
cap | grep -Eq '│  ● gemma-3-270m-q4_k_m +base'; ok $? "the picker marks Gemma as loaded now"
keys Up Enter
wait_for 'switch to a chat model' 5; ok $? "picking a chat model mid base-session asks too"
keys k
wait_for 'KV [0-9]+ blk' 120 && wait_for '│SmolLM2-135M-' 20 && ! cap | grep -q 'base model: plain'
ok $? "k: SmolLM2 loads"
cap | grep -q 'The capital of France is' && [ "$(n_replies)" -eq 1 ]; ok $? "... in the same session"
keys F5; sleep 0.3
keys Down Enter
wait_for 'made with gemma-3-270m-q4_k_m.gguf; loaded: SmolLM2-135M-Instruct.Q4_1.gguf' 5 ||
    wait_for 'Hi' 5
keys Tab F5; sleep 0.3
keys C-c
wait_for 'TERN-EXITED rc=0' 20; ok $? "quit"

# 100x30: the rows whole, the loaded one selected
start 100 30
wait_for 'KV [0-9]+ blk' 120
keys F6; wait_for 'model · 2 in the models directory' 5
cap | grep -Eq '│  ● SmolLM2-135M-Instruct.Q4_1 +chat +Q4_1 +94 MiB +8.2k +│' &&
    cap | grep -Eq '│    gemma-3-270m-q4_k_m +base +Q4_K_M +241 MiB +32.8k +│'
ok $? "100x30: both rows whole with their details"
show "100x30 picker"
keys Escape; sleep 0.3
keys C-c
wait_for 'TERN-EXITED rc=0' 20; ok $? "100x30: quit"
tap_done
