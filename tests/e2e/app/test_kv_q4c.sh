#!/bin/bash
# test_kv_q4c: --kv-type q4c (K per channel over each 16-token block: an f16
# min and step and 16 4-bit codes per dimension, 12 bytes; V per token as
# q5_0, 22 bytes per 32 values) in the app's planning paths: `tern info` and
# `tern models` count its real bytes per token (23/64 of f16's, for the
# default model 30 layers x 192 values x (12/16 + 22/32) = 8280), so it holds
# more tokens than q8_0 and fewer than q4_0; the config file's kv-type key
# and every command's help take it; an unknown type's error lists it.
# Generation with q4c is the engine's (tested there), not this script's.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/model_env.sh"
tern=$TERN_BIN

# tern info --kv-type: the plan's bytes per token and tokens that fit
for t in f16 q8_0 q4_0 q4c; do
    "$tern" info -m "$MODEL" --kv-type "$t" --mem 2G --json > "$TMP/info-$t.json" 2> "$TMP/info.err"
    ok $? "info --kv-type $t --json exits 0 ($(tail -c 200 "$TMP/info.err"))"
done
python3 - "$TMP" <<'PY'
import json, sys
d = sys.argv[1]
j = {t: json.load(open(f"{d}/info-{t}.json")) for t in ("f16", "q8_0", "q4_0", "q4c")}
m = {t: v["memory"] for t, v in j.items()}
a = j["q4c"]
L, kv = a["block_count"], a["head_count_kv"]
kd, vd = kv * a["key_length"], kv * a["value_length"]
# K: 12 bytes per dimension per 16-token block; V: q5_0 rows
want = L * (kd * 12 // 16 + vd // 32 * 22)
q = m["q4c"]
print(f"# info: L {L} kd {kd} vd {vd}: q4c {q['kv_bytes_per_token']} B/token (formula {want}), "
      + ", ".join(f"{t} {v['kv_tokens']} tokens" for t, v in m.items()))
assert q["kv_type"] == "Q4C", q
assert q["kv_bytes_per_token"] == want, (q, want)
assert q["kv_bytes_per_token"] * 64 == m["f16"]["kv_bytes_per_token"] * 23, m
assert q["kv_tokens"] == (q["budget_bytes"] - q["weight_bytes"]) // want, q
assert m["q8_0"]["kv_tokens"] < q["kv_tokens"] < m["q4_0"]["kv_tokens"], m
assert 2.7 <= q["kv_tokens"] / m["f16"]["kv_tokens"] <= 2.9, m
PY
ok $? "info --kv-type q4c: K 12/16 + V 22/32 bytes per value, q8_0 < q4c < q4_0 in tokens"

# the default model (SmolLM2-135M: 30 layers, 3 KV heads of 64): the figure itself
python3 - "$TMP/info-q4c.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
other = m["block_count"] != 30 or m["head_count_kv"] * m["key_length"] != 192
sys.exit(0 if other or m["memory"]["kv_bytes_per_token"] == 8280 else 1)
PY
ok $? "info --kv-type q4c: 8280 bytes per token for 30 layers x 192 values"

"$tern" info -m "$MODEL" --kv-type q4c --mem 2G > "$TMP/info-q4c.txt" 2>/dev/null
b=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["memory"]
["kv_bytes_per_token"])' "$TMP/info-q4c.json")
grep -q "KV cache Q4C: $b bytes per token" "$TMP/info-q4c.txt" &&
    grep -q "K per channel" "$TMP/info-q4c.txt"
ok $? "info --kv-type q4c (text): the plan's line \
($(grep -A1 'KV cache' "$TMP/info-q4c.txt" | tr '\n' ' '))"

# tern models --kv-type: the fit counts with the same bytes
mkdir -p "$XDG_DATA_HOME/tern/models"
ln -s "$MODEL" "$XDG_DATA_HOME/tern/models/"
for t in f16 q8_0 q4_0 q4c; do
    "$tern" models --kv-type "$t" --json > "$TMP/m-$t.json" 2> "$TMP/m.err"
    ok $? "models --kv-type $t --json exits 0 ($(tail -c 200 "$TMP/m.err"))"
done
python3 - "$TMP" <<'PY'
import json, sys
d = sys.argv[1]
j = {t: json.load(open(f"{d}/m-{t}.json")) for t in ("f16", "q8_0", "q4_0", "q4c")}
info = json.load(open(f"{d}/info-q4c.json"))["memory"]
assert j["q4c"]["kv_type"] == "Q4C", j["q4c"]["kv_type"]
ok = [m for m in j["f16"]["models"] if "kv_tokens_fit" in m]
assert ok
for x in ok:
    y = {t: next(m for m in v["models"] if m["name"] == x["name"]) for t, v in j.items()}
    c = y["q4c"]
    print(f"# {x['name']}: " + ", ".join(f"{t} {v['kv_bytes_per_token']} B/token "
                                         f"{v['kv_tokens_fit']} tokens" for t, v in y.items()))
    assert c["kv_bytes_per_token"] * 64 == x["kv_bytes_per_token"] * 23, (x, c)
    assert y["q8_0"]["kv_tokens_fit"] < c["kv_tokens_fit"] < y["q4_0"]["kv_tokens_fit"], y
    assert c["memory_needed_bytes"] < y["q8_0"]["memory_needed_bytes"], y
    # q4c is CPU only: no GPU plan says it fits
    assert c["fits_in_gpu"] is not True and c["gpu_plan"], c
# the one model linked is the default: the same bytes as info's plan
assert ok[0]["name"] and j["q4c"]["models"][0]["kv_bytes_per_token"] == info["kv_bytes_per_token"]
PY
ok $? "models --kv-type q4c: 23/64 of f16's bytes per token (info's), q8_0 < q4c < q4_0 in tokens"

"$tern" models --kv-type q4c > "$TMP/m-q4c.txt" 2>/dev/null
grep -q "fits: weights + Q4C KV cache" "$TMP/m-q4c.txt"
ok $? "models --kv-type q4c (text) names the type ($(grep 'fits:' "$TMP/m-q4c.txt" | head -c 120))"

# the config file's kv-type key, as the option, for info and models
mkdir -p "$XDG_CONFIG_HOME/tern"
printf 'kv-type = q4c\n' > "$XDG_CONFIG_HOME/tern/tern.conf"
"$tern" info -m "$MODEL" --mem 2G --json > "$TMP/conf-info.json" 2> "$TMP/conf.err"
"$tern" models --json > "$TMP/conf-models.json" 2>> "$TMP/conf.err"
python3 - "$TMP" <<'PY'
import json, sys
d = sys.argv[1]
a, b = json.load(open(f"{d}/conf-info.json")), json.load(open(f"{d}/info-q4c.json"))
m, n = json.load(open(f"{d}/conf-models.json")), json.load(open(f"{d}/m-q4c.json"))
assert a["memory"] == b["memory"], (a["memory"], b["memory"])
assert m["kv_type"] == "Q4C" and [x["kv_bytes_per_token"] for x in m["models"]] == \
    [x["kv_bytes_per_token"] for x in n["models"]], m
PY
ok $? "kv-type = q4c in tern.conf: info and models plan q4c ($(tail -c 200 "$TMP/conf.err"))"
rm "$XDG_CONFIG_HOME/tern/tern.conf"

# an unknown type is refused (exit 2) with the list, q4c in it
for c in run info models; do
    "$tern" $c $([ $c = models ] || echo -m "$MODEL") --kv-type q5_0 > /dev/null 2> "$TMP/bad.err"
    [ $? -eq 2 ] && grep -q "q4_0 or q4c" "$TMP/bad.err"
    ok $? "tern $c --kv-type q5_0: exit 2 and the list with q4c ($(head -c 200 "$TMP/bad.err"))"
done

# every command's help lists q4c beside the other types
for c in run chat eval serve bench embed info models; do
    "$tern" $c --help 2>&1 | grep -qw q4c
    ok $? "tern $c --help lists q4c"
done
tap_done
