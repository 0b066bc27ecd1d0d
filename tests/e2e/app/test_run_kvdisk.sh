#!/bin/bash
# test_run_kvdisk: `tern run --kv-disk SIZE` (#39), the disk prompt cache on
# run (opt-in; chat's directory and semantics). On the default model with
# a ~950-token prompt: the first run prefills it all and leaves a cache file;
# a second run with the same prompt restores it (--json: restored_tokens,
# computed_tokens under one block) and replies identically (greedy); -v
# says so; without --kv-disk nothing is restored; a corrupt cache file is
# ignored with one line and the reply is the same; a bad size and a bad --resume N are refused.
# `tern bench --resume N`: cold against restored TTFT, in text and --json,
# the user's own cache left alone.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/model_env.sh"
tern=$TERN_BIN
CACHE=$XDG_DATA_HOME/tern/kvcache
PROMPT=$(python3 -c "print(''.join('Fact %d: the lighthouse on island %d has %d steps and a red lamp. ' % (i, i, 100 + 7 * i) for i in range(1, 41)) + 'Which island has the most steps?')")

run() { # NAME OPTIONS...: --json to NAME.json, stderr to NAME.err
    local n=$1; shift
    "$tern" run -m "$MODEL" --temp 0 -n 24 -t 1 --no-history "$@" -p "$PROMPT" \
        > "$TMP/$n.json" 2> "$TMP/$n.err"
}
field() { # NAME KEY: the metric KEY of NAME.json
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(j['metrics'][sys.argv[2]])" \
        "$TMP/$1.json" "$2" 2>/dev/null
}
reply() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['reply'])" "$TMP/$1.json" 2>/dev/null; }

run cold --kv-disk 64M --json; ok $? "run --kv-disk 64M --json replies ($(tail -c 200 "$TMP/cold.err"))"
np=$(field cold prompt_tokens)
[ "${np:-0}" -gt 800 ] && [ "$(field cold restored_tokens)" = 0 ] && [ "$(field cold computed_tokens)" = "$np" ]
ok $? "the first run prefills its $np prompt tokens (restored $(field cold restored_tokens))"
ls "$CACHE"/*.tkv >/dev/null 2>&1; ok $? "it leaves a cache file in \$XDG_DATA_HOME/tern/kvcache"

run warm --kv-disk 64M --json; ok $? "a second run replies"
rs=$(field warm restored_tokens); cp=$(field warm computed_tokens)
[ "${rs:-0}" -ge $((np - 16)) ] && [ "${cp:-99}" -le 16 ]
ok $? "the second run restores the prompt from disk: $rs of $np tokens restored, $cp prefilled"
[ -n "$(reply cold)" ] && [ "$(reply warm)" = "$(reply cold)" ]; ok $? "the same reply (greedy)"
python3 - "$TMP/cold.json" "$TMP/warm.json" <<'PY'
import json, sys
c, w = (json.load(open(p))["phases"]["prefill_s"] for p in sys.argv[1:])
print("# prefill: cold %.3f s, restored %.3f s" % (c, w))
sys.exit(0 if w < c / 2 else 1)
PY
ok $? "the restored run's prefill is far shorter"

run verbose --kv-disk 64M -v
grep -Eq "prompt eval count: +$np token\(s\) \([0-9]+ reused from cache, [0-9]+ restored from disk\)" "$TMP/verbose.err"
ok $? "-v says how many tokens came from disk ($(grep 'prompt eval count' "$TMP/verbose.err"))"

run off --json
[ "$(field off restored_tokens)" = 0 ] && [ "$(field off computed_tokens)" = "$np" ]
ok $? "without --kv-disk nothing is restored (opt-in for run)"

f=$(ls "$CACHE"/*.tkv | head -1)
python3 - "$f" <<'PY'
import os, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(os.path.getsize(sys.argv[1]) // 2)
    f.write(b"\xff" * 64)
PY
run corrupt --kv-disk 64M --json; ok $? "with a corrupt cache file: replies"
[ "$(grep -c 'kv cache' "$TMP/corrupt.err")" = 1 ] && grep -q 'ignored' "$TMP/corrupt.err"
ok $? "the corrupt file is ignored with one line ($(grep 'kv cache' "$TMP/corrupt.err"))"
[ "$(field corrupt restored_tokens)" = 0 ] && [ "$(reply corrupt)" = "$(reply cold)" ]
ok $? "nothing restored from it and the same reply"

"$tern" run -m "$MODEL" --kv-disk lots -n 1 --no-history "Hi" > /dev/null 2> "$TMP/bad.err"
[ $? -ne 0 ] && grep -q -- '--kv-disk' "$TMP/bad.err"; ok $? "--kv-disk lots is refused ($(head -1 "$TMP/bad.err"))"

rm -rf "$CACHE"
"$tern" bench -m "$MODEL" --resume 300 -r 2 -t 1 --json > "$TMP/resume.json" 2> "$TMP/resume.err"
ok $? "bench --resume 300 -r 2 --json runs ($(tail -c 200 "$TMP/resume.err"))"
python3 - "$TMP/resume.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
c, w = j["cold_ttft"], j["restored_ttft"]
print("# cold p50 %.3f s, restored p50 %.3f s, %d tokens restored" % (c["p50"], w["p50"], j["restored_tokens"]))
good = (j["resume_tokens"] == 300 and j["rounds"] == 2 and 256 <= j["restored_tokens"] <= 300
        and all(k in c and k in w for k in ("p50", "p90", "p99", "max"))
        and 0 < w["p50"] < c["p50"] and abs(j["ratio_p50"] - w["p50"] / c["p50"]) < 1e-9
        and j["entry_bytes"] > 0)
sys.exit(0 if good else 1)
PY
ok $? "bench --resume --json: cold and restored TTFT percentiles, restored faster, tokens restored"
[ ! -e "$CACHE" ]; ok $? "bench --resume leaves the user's disk cache alone"
"$tern" bench -m "$MODEL" --resume 300 -r 1 -t 1 > "$TMP/resume.txt" 2>/dev/null
grep -Eq '^  restored +[0-9.]+ ms' "$TMP/resume.txt" && grep -Eq '^  cold +[0-9.]+ ms' "$TMP/resume.txt" &&
    grep -q 'restored from disk' "$TMP/resume.txt"
ok $? "bench --resume prints cold and restored rows ($(tail -1 "$TMP/resume.txt"))"
for bad in 0 abc -5 99999999; do
    "$tern" bench -m "$MODEL" --resume "$bad" -r 1 -t 1 > /dev/null 2> "$TMP/rbad.err"
    [ $? -ne 0 ] && grep -q -- '--resume' "$TMP/rbad.err"
    ok $? "bench --resume $bad is refused ($(head -1 "$TMP/rbad.err"))"
done
tap_done
