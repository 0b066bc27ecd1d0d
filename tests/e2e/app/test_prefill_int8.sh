#!/bin/bash
# test_prefill_int8: --prefill-int8 w8a8 (#38) reaches the kernels. On a CPU
# with AMX tiles the prefill matmuls of packed weights run W8A8 on int8
# tiles: the perplexity moves (not the exact bits) and stays within 2 % of
# exact's; below amx the exact path runs (amx_switch.sh has the checks).
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/model_env.sh"
. "$TERN_SRC/tests/e2e/app/amx_switch.sh"
amx_switch --prefill-int8 exact w8a8 int4 0.02 prefill_int8 "w8a8 prefill"
tap_done
