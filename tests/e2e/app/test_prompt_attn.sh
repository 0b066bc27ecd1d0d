#!/bin/bash
# test_prompt_attn: --prompt-attn bf16 (#38) reaches the kernels. On a CPU
# with AMX tiles the prompt's attention runs on bf16 tiles: the perplexity
# moves (not the f32 bits) and stays within 0.5 % of f32's; below amx the f32
# path runs (amx_switch.sh has the checks).
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/model_env.sh"
. "$TERN_SRC/tests/e2e/app/amx_switch.sh"
amx_switch --prompt-attn f32 bf16 f8 0.005 prompt_attn "bf16 prompt attention"
tap_done
