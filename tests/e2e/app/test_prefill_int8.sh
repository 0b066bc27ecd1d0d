#!/bin/bash
# test_prefill_int8: --prefill-int8 w8a8 (#38) reaches the kernels. On a CPU
# with AMX tiles the prefill matmuls of packed Q4_0/Q4_1/Q8_0/Q4_K run W8A8
# on int8 tiles: the perplexity moves (not the exact bits) and stays within
# 2 % of exact's; with TERN_ISA below amx (or a CPU without AMX) the exact
# path runs, the perplexity is the exact one to the digit and run -v says
# why in one line. bench --json records what ran; a bad value is refused by
# name.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/model_env.sh"
tern=$TERN_BIN
TEXT=$TERN_SRC/../shared/texts/gpl-3.0.txt
[ -r "$TEXT" ] || TEXT=/usr/share/common-licenses/GPL-3

ppl() { # isa mode -> the perplexity figure
    TERN_ISA=$1 "$tern" eval -m "$MODEL" --perplexity "$TEXT" --ctx 512 --chunks 2 -t 2 \
        --prefill-int8 "$2" 2>&1 | sed -n 's/^perplexity \([0-9.]*\) .*/\1/p'
}

"$tern" run -m "$MODEL" --prefill-int8 int4 -n 2 --no-history "Hi" >/dev/null 2>"$TMP/bad.err"
rc=$?
[ $rc -ne 0 ] && grep -q "prefill-int8: 'int4' is not exact or w8a8" "$TMP/bad.err"
ok $? "a bad --prefill-int8 is refused by name (rc $rc: $(head -c 120 "$TMP/bad.err"))"

a=$(ppl avx512 exact); b=$(ppl avx512 w8a8)
[ -n "$a" ] && [ "$a" = "$b" ]
ok $? "below amx, w8a8 asks for the exact path: the same perplexity ($a, $b)"
TERN_ISA=avx512 "$tern" run -m "$MODEL" --prefill-int8 w8a8 -v -n 2 -t 1 --no-history "Hi" \
    >/dev/null 2>"$TMP/v.err"
grep -q "w8a8 prefill needs AMX tiles (ISA avx512): exact used" "$TMP/v.err"
ok $? "run -v says so in one line ($(grep -m1 'w8a8' "$TMP/v.err"))"

amx=no
"$tern" info -m "$MODEL" 2>/dev/null | grep -q 'CPU kernels: amx' && amx=amx
if [ $amx = amx ]; then
    f=$(ppl amx exact); g=$(ppl amx w8a8)
    [ -n "$f" ] && [ -n "$g" ] && [ "$f" != "$g" ]
    ok $? "on AMX tiles the perplexity moves ($f exact, $g w8a8): the option reaches the kernel"
    python3 -c "import sys; f, g = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(g - f) / f > 0.02)" "$f" "$g"
    ok $? "and stays within 2 % of exact's"
else
    tap_n=$((tap_n + 1)); echo "ok $tap_n - # SKIP no AMX tiles here: the w8a8 path is not reachable"
    tap_n=$((tap_n + 1)); echo "ok $tap_n - # SKIP no AMX tiles here"
fi

"$tern" bench -m "$MODEL" --pp 32 --tg 2 -r 1 -t 1 --prefill-int8 w8a8 --json >"$TMP/b.json" 2>/dev/null
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(j['prefill_int8'] != ('w8a8' if sys.argv[2] == 'amx' else 'exact'))" "$TMP/b.json" $amx
ok $? "bench --json records the prefill that ran (w8a8 on AMX, else exact; here $amx)"
tap_done
