# amx_switch.sh: the shared checks of an option that only AMX tiles honour
# (--prompt-attn bf16, --prefill-int8 w8a8; issue 38). Sourced after tap.sh
# and model_env.sh; then `amx_switch OPT OFF ON BAD TOL KEY WHAT`:
#   a bad value (BAD) is refused by name; below amx (TERN_ISA=avx512, which
#   is avx2 on a CPU without AVX-512) ON gives OFF's perplexity to the digit
#   and run -v says why in one line; on AMX tiles ON moves the perplexity and
#   stays within TOL (a fraction) of OFF's; bench --json's KEY records what ran.
#   WHAT names the path in the -v line ("w8a8 prefill", "bf16 prompt attention").
amx_switch() {
    local opt=$1 off=$2 on=$3 bad=$4 tol=$5 key=$6 what=$7
    local text=$TERN_SRC/../shared/texts/gpl-3.0.txt
    [ -r "$text" ] || text=/usr/share/common-licenses/GPL-3
    ppl() { # isa value -> the perplexity figure
        TERN_ISA=$1 "$TERN_BIN" eval -m "$MODEL" --perplexity "$text" --ctx 512 --chunks 2 -t 2 \
            "$opt" "$2" 2>&1 | sed -n 's/^perplexity \([0-9.]*\) .*/\1/p'
    }

    "$TERN_BIN" run -m "$MODEL" "$opt" "$bad" -n 2 --no-history "Hi" >/dev/null 2>"$TMP/bad.err"
    local rc=$?
    [ $rc -ne 0 ] && grep -q -- "${opt#--}: '$bad' is not $off or $on" "$TMP/bad.err"
    ok $? "a bad $opt is refused by name (rc $rc: $(head -c 120 "$TMP/bad.err"))"

    local a b
    a=$(ppl avx512 "$off"); b=$(ppl avx512 "$on")
    [ -n "$a" ] && [ "$a" = "$b" ]
    ok $? "below amx, $on asks for the $off path: the same perplexity ($a, $b)"
    TERN_ISA=avx512 "$TERN_BIN" run -m "$MODEL" "$opt" "$on" -v -n 2 -t 1 --no-history "Hi" \
        >/dev/null 2>"$TMP/v.err"
    grep -Eq "$what needs AMX tiles \(ISA (avx512|avxvnni|avx2|scalar)\): $off used" "$TMP/v.err"
    ok $? "run -v says so in one line ($(grep -m1 "$what" "$TMP/v.err"))"

    local amx=no
    "$TERN_BIN" info -m "$MODEL" 2>/dev/null | grep -q 'CPU kernels: amx' && amx=amx
    if [ $amx = amx ]; then
        local f g
        f=$(ppl amx "$off"); g=$(ppl amx "$on")
        [ -n "$f" ] && [ -n "$g" ] && [ "$f" != "$g" ]
        ok $? "on AMX tiles the perplexity moves ($f $off, $g $on): the option reaches the kernel"
        python3 -c "import sys; f, g, t = map(float, sys.argv[1:]); sys.exit(abs(g - f) / f > t)" "$f" "$g" "$tol"
        ok $? "and stays within $tol of $off's"
    else
        tap_n=$((tap_n + 1)); echo "ok $tap_n - # SKIP no AMX tiles here: the $on path is not reachable"
        tap_n=$((tap_n + 1)); echo "ok $tap_n - # SKIP no AMX tiles here"
    fi

    "$TERN_BIN" bench -m "$MODEL" --pp 32 --tg 2 -r 1 -t 1 "$opt" "$on" --json >"$TMP/b.json" 2>/dev/null
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(j[sys.argv[2]] != (sys.argv[4] if sys.argv[3] == 'amx' else sys.argv[5]))" \
        "$TMP/b.json" "$key" $amx "$on" "$off"
    ok $? "bench --json records what ran ($on on AMX, else $off; here $amx)"
}
