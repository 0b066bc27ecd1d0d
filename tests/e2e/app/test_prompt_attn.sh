#!/bin/bash
# test_prompt_attn: --prompt-attn bf16 (#38) reaches the kernels. On a CPU
# with AMX tiles the prompt's attention runs on bf16 tiles: the perplexity
# moves (not the f32 bits) and stays within 0.5 % of f32's; with TERN_ISA
# below amx (or a CPU without AMX) the f32 path runs, the perplexity is the
# f32 one to the digit and run -v says why in one line. bench --json records
# what ran; a bad value is refused by name.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/model_env.sh"
tern=$TERN_BIN
TEXT=$TERN_SRC/../shared/texts/gpl-3.0.txt
[ -r "$TEXT" ] || TEXT=/usr/share/common-licenses/GPL-3

ppl() { # isa attn -> the perplexity figure
    TERN_ISA=$1 "$tern" eval -m "$MODEL" --perplexity "$TEXT" --ctx 512 --chunks 2 -t 2 \
        --prompt-attn "$2" 2>&1 | sed -n 's/^perplexity \([0-9.]*\) .*/\1/p'
}

"$tern" run -m "$MODEL" --prompt-attn f8 -n 2 --no-history "Hi" >/dev/null 2>"$TMP/bad.err"
rc=$?
[ $rc -ne 0 ] && grep -q "prompt-attn: 'f8' is not f32 or bf16" "$TMP/bad.err"
ok $? "a bad --prompt-attn is refused by name (rc $rc: $(head -c 120 "$TMP/bad.err"))"

a=$(ppl avx512 f32); b=$(ppl avx512 bf16)
[ -n "$a" ] && [ "$a" = "$b" ]
ok $? "below amx, bf16 asks for the f32 path: the same perplexity ($a, $b)"
TERN_ISA=avx512 "$tern" run -m "$MODEL" --prompt-attn bf16 -v -n 2 -t 1 --no-history "Hi" \
    >/dev/null 2>"$TMP/v.err"
grep -q "bf16 prompt attention needs AMX tiles (ISA avx512): f32 used" "$TMP/v.err"
ok $? "run -v says so in one line ($(grep -m1 'bf16' "$TMP/v.err"))"

amx=no
"$tern" info -m "$MODEL" 2>/dev/null | grep -q 'CPU kernels: amx' && amx=amx
if [ $amx = amx ]; then
    f=$(ppl amx f32); g=$(ppl amx bf16)
    [ -n "$f" ] && [ -n "$g" ] && [ "$f" != "$g" ]
    ok $? "on AMX tiles the perplexity moves ($f f32, $g bf16): the option reaches the kernel"
    python3 -c "import sys; f, g = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(g - f) / f > 0.005)" "$f" "$g"
    ok $? "and stays within 0.5 % of f32's"
else
    tap_n=$((tap_n + 1)); echo "ok $tap_n - # SKIP no AMX tiles here: the bf16 path is not reachable"
    tap_n=$((tap_n + 1)); echo "ok $tap_n - # SKIP no AMX tiles here"
fi

"$tern" bench -m "$MODEL" --pp 32 --tg 2 -r 1 -t 1 --prompt-attn bf16 --json >"$TMP/b.json" 2>/dev/null
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(j['prompt_attn'] != ('bf16' if sys.argv[2] == 'amx' else 'f32'))" "$TMP/b.json" $amx
ok $? "bench --json records the prompt attention that ran (bf16 on AMX, else f32; here $amx)"
tap_done
