#!/bin/bash
# test_kv_types: --kv-type f16|q8_0|q4_0 counted in real bytes (#39). For
# the same --kv-mem, `tern run -v` reports the pool's capacity: q8_0 holds
# about 2x and q4_0 about 3.5x the tokens of f16 (34/32 and 18/32 bytes per
# value against 2); `tern info --kv-type` plans the same bytes per token,
# `tern models --kv-type` fits with them; q4_0 replies on run and chat;
# the config file's kv-type key works as the option; a bad type is refused
# with the list.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/model_env.sh"
tern=$TERN_BIN

# run -v: "KV cache: N tokens, X MiB, B bytes per token"
for t in f16 q8_0 q4_0; do
    "$tern" run -m "$MODEL" --kv-type "$t" --kv-mem 8M -v -n 4 -t 1 --no-history "Hi" \
        > "$TMP/$t.out" 2> "$TMP/$t.err"
    ok $? "run --kv-type $t --kv-mem 8M replies ($(tail -c 200 "$TMP/$t.err"))"
done
python3 - "$TMP" <<'PY'
import re, sys
d = sys.argv[1]
kv = {}
for t in ("f16", "q8_0", "q4_0"):
    m = re.search(r"KV cache:\s+(\d+) tokens, ([\d.]+) MiB, (\d+) bytes per token", open(f"{d}/{t}.err").read())
    assert m, t
    kv[t] = (int(m[1]), float(m[2]), int(m[3]))
print("# " + ", ".join(f"{t}: {v[0]} tokens, {v[2]} B/token" for t, v in kv.items()))
f, q8, q4 = kv["f16"], kv["q8_0"], kv["q4_0"]
# bytes per token exactly 34/64 and 18/64 of f16's (2 bytes per value)
assert q8[2] * 64 == f[2] * 34 and q4[2] * 64 == f[2] * 18, kv
# the same 8 MiB holds ~1.9x and ~3.6x the tokens (whole blocks of 16)
assert 1.8 <= q8[0] / f[0] <= 2.0 and 3.3 <= q4[0] / f[0] <= 3.7, kv
assert all(7.0 <= v[1] <= 8.0 for v in kv.values()), kv
PY
ok $? "run -v: the same --kv-mem holds ~1.9x (q8_0) and ~3.6x (q4_0) the tokens of f16"

# tern info --kv-type: the plan's bytes per token and tokens that fit
for t in f16 q4_0; do
    "$tern" info -m "$MODEL" --kv-type "$t" --mem 2G --json > "$TMP/info-$t.json" 2>/dev/null
done
python3 - "$TMP/info-f16.json" "$TMP/info-q4_0.json" "$TMP/f16.err" <<'PY'
import json, re, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def find(o, k):
    if isinstance(o, dict):
        if k in o: return o[k]
        for v in o.values():
            r = find(v, k)
            if r is not None: return r
    return None
fa, fb = find(a, "kv_bytes_per_token"), find(b, "kv_bytes_per_token")
ta, tb = find(a, "kv_tokens"), find(b, "kv_tokens")
print(f"# info: f16 {fa} B/token {ta} tokens, q4_0 {fb} B/token {tb} tokens")
run_f16 = int(re.search(r"(\d+) bytes per token", open(sys.argv[3]).read())[1])
assert fa == run_f16 and fb * 64 == fa * 18 and tb > 3.4 * ta, (fa, fb, ta, tb, run_f16)
PY
ok $? "info --kv-type q4_0: 18/64 of f16's bytes per token (the engine's figure), ~3.5x the tokens"

mkdir -p "$XDG_DATA_HOME/tern/models"
ln -s "$MODEL" "$XDG_DATA_HOME/tern/models/"
"$tern" models --kv-type q4_0 --json > "$TMP/m4.json" 2>/dev/null
"$tern" models --json > "$TMP/m16.json" 2>/dev/null
python3 - "$TMP/m16.json" "$TMP/m4.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["kv_type"] == "F16" and b["kv_type"] == "Q4_0", (a["kv_type"], b["kv_type"])
ok = [m for m in a["models"] if "kv_tokens_fit" in m]
assert ok
for x in ok:
    y = next(m for m in b["models"] if m["name"] == x["name"])
    assert y["kv_bytes_per_token"] * 64 == x["kv_bytes_per_token"] * 18, (x, y)
    assert y["kv_tokens_fit"] > 3.4 * x["kv_tokens_fit"], (x, y)
PY
ok $? "models --kv-type q4_0: the fit counts 18/64 of f16's KV bytes per token"

# chat (the real loop off-screen) takes q4_0 too
"$tern" chat -m "$MODEL" --kv-type q4_0 -t 1 --size 100x30 --temp 0 --max-tokens 8 \
    --headless-frames 3000 --keys '{wait}Hi\r{wait}' > "$TMP/chat.out" 2> "$TMP/chat.err"
ok $? "chat --kv-type q4_0 exits 0 ($(tail -c 200 "$TMP/chat.err"))"
grep -Eq 'assistant · [0-9]+ tok' "$TMP/chat.out"
ok $? "chat --kv-type q4_0: the reply finishes"

# the config file's kv-type key, as the option
mkdir -p "$XDG_CONFIG_HOME/tern"
printf 'kv-type = q4_0\n' > "$XDG_CONFIG_HOME/tern/tern.conf"
"$tern" run -m "$MODEL" --kv-mem 8M -v -n 2 -t 1 --no-history "Hi" > /dev/null 2> "$TMP/conf.err"
grep -Eq "KV cache: +[0-9]+ tokens, [0-9.]+ MiB, $(grep -Eo '[0-9]+ bytes per token' "$TMP/q4_0.err")" "$TMP/conf.err"
ok $? "kv-type = q4_0 in tern.conf: the q4_0 pool ($(grep 'KV cache' "$TMP/conf.err"))"
rm "$XDG_CONFIG_HOME/tern/tern.conf"

# eval --step-tokens 1: every prompt token through the decode path (the
# cache's last block filled a token at a time, as a reply reads it); on f16
# the same perplexity as the batched prefill, on q4_0 the quantized cache's
text=$TERN_SRC/../shared/texts/gpl-3.0.txt
[ -r "$text" ] || text=/usr/share/common-licenses/GPL-3
for run in "f16 0" "f16 1" "q4_0 1"; do
    set -- $run
    "$tern" eval -m "$MODEL" --perplexity "$text" --ctx 128 --chunks 3 -t 2 --no-save --json \
        --kv-type $1 $([ $2 = 1 ] && echo --step-tokens 1) > "$TMP/ppl-$1-$2.json" 2> "$TMP/ppl.err"
done
python3 - "$TMP" <<'PY'
import json, sys
r = {k: json.load(open(f"{sys.argv[1]}/ppl-{k}.json")) for k in ("f16-0", "f16-1", "q4_0-1")}
p = {k: v["result"]["perplexity"] for k, v in r.items()}
print(p)
assert r["f16-1"]["config"]["step_tokens"] == 1 and r["f16-0"]["config"]["step_tokens"] == 0
assert abs(p["f16-1"] - p["f16-0"]) / p["f16-0"] < 1e-3
assert p["q4_0-1"] != p["f16-1"] and abs(p["q4_0-1"] - p["f16-1"]) / p["f16-1"] < 0.25
PY
ok $? "eval --step-tokens 1: f16 gives the batched perplexity, q4_0 its own; the JSON records it"

"$tern" run -m "$MODEL" --kv-type q5_0 -n 1 "Hi" > /dev/null 2> "$TMP/bad.err"
[ $? -ne 0 ] && grep -q "q4_0" "$TMP/bad.err"
ok $? "an unknown --kv-type is refused with the list ($(head -c 200 "$TMP/bad.err"))"
tap_done
