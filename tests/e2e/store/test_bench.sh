#!/bin/bash
# test_bench: every load profile on the default model with small counts
# gives complete, consistent JSON (percentiles ordered, counts adding up,
# cancellations and stalled consumers where the profile makes them, cached
# prompt tokens on later turns), --save stores the same summary, and
# --rate (Poisson arrivals) runs. Lengths are scaled down to stay fast.
# usage: test_bench.sh BENCH_DRIVER   (TERN_SRC, TERN_SHARED, TERN_BIN from test_env)
. "$TERN_SRC/tests/tap.sh"
bench=$1
dir=$(mktemp -d /tmp/tern-bench-XXXXXX)
trap 'rm -rf "$dir"' EXIT
model=$("$TERN_SRC/packaging/fetch-model" --print-path)
ok $? "default model available ($model)"
[ -d "$TERN_SHARED/texts" ]; ok $? "shared texts present ($TERN_SHARED/texts)"

"$bench" bench -m "$model" --profile all --requests 3 --concurrency 3 --scale 0.0625 --seed 7 \
    --texts "$TERN_SHARED/texts" --json "$dir/b.json" --save --db "$dir/h.db" \
    --trace "$dir/trace.json" --requests-out "$dir/req.jsonl" > "$dir/out.txt" 2> "$dir/err.txt"
r=$?
ok $r "bench --profile all ran (status $r)"
[ $r = 0 ] || diag "$(tail -5 "$dir/err.txt")"

python3 - "$dir/b.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
names = ["short", "long-prompt", "long-reply", "mixed-priority", "cancel", "slow-consumer", "multi-turn"]
assert sorted(b) == sorted(names), list(b)
keys = ["ttft", "tpot", "itl", "e2e", "requests", "statuses", "prompt_tokens", "cached_prompt_tokens",
        "generated_tokens", "duration_s", "goodput_rps", "kv_peak_blocks", "preemptions"]
for n in names:
    p = b[n]
    for k in keys:
        assert k in p, (n, k)
    for k in ("ttft", "tpot", "itl", "e2e"):
        v = [p[k][q] for q in ("p50", "p90", "p99", "max")]
        assert all(x is not None and x >= 0 for x in v), (n, k, v)
        assert v == sorted(v), (n, k, v)
    assert sum(p["statuses"].values()) == p["requests"], (n, p["statuses"])
    assert 0 <= p["cached_prompt_tokens"] <= p["prompt_tokens"], n
    assert p["duration_s"] > 0 and 0 <= p["goodput_rps"] <= p["request_throughput_rps"] + 1e-9, n
    assert 0 < p["kv_peak_blocks"] <= p["kv_total_blocks"], n
    assert p["slo_met"] == round(p["goodput_rps"] * p["duration_s"]), n
assert b["multi-turn"]["requests"] == 4
# Controlled lengths: long prompts of 1024 * 0.0625 = 64 tokens (cut just under).
lp = b["long-prompt"]["prompt_tokens"] / 3
assert 56 <= lp <= 64, lp
# long-reply: 384 * 0.0625 = 24 tokens each, EOS ignored.
assert b["long-reply"]["generated_tokens"] == 3 * 24 and b["long-reply"]["statuses"] == {"length": 3}
assert b["cancel"]["statuses"].get("cancelled", 0) == 1, b["cancel"]["statuses"]
assert b["slow-consumer"]["statuses"].get("consumer-stalled", 0) == 1, b["slow-consumer"]["statuses"]
t = b["multi-turn"]["by_turn"]
assert t[0]["cached_prompt_tokens"] == 0 and all(x["cached_prompt_tokens"] > 0 for x in t[1:]), t
assert set(b["mixed-priority"]["by_priority"]) == {"interactive", "batch"}
PY
ok $? "JSON complete and consistent for every profile"

python3 - "$dir/b.json" "$dir/req.jsonl" <<'PY'
import json, sys
import numpy as np
b = json.load(open(sys.argv[1]))
reqs = [json.loads(l) for l in open(sys.argv[2])]
done = ("ok", "stop", "length")
for name, p in b.items():
    r = [x for x in reqs if x["profile"] == name]
    assert len(r) == p["requests"], name
    for k in ("prompt_tokens", "cached_prompt_tokens", "generated_tokens", "preemptions"):
        assert sum(x[k] for x in r) == p[k], (name, k)
    series = {
        "ttft": [x["ttft_s"] for x in r if x["generated_tokens"] > 0],
        "tpot": [x["tpot_s"] for x in r if x["generated_tokens"] > 1],
        "itl": [v for x in r for v in x["itl_s"]],
        "e2e": [x["e2e_s"] for x in r if x["status"] in done],
    }
    for k, v in series.items():
        want = list(np.percentile(v, [50, 90, 99])) + [max(v)]
        got = [p[k][q] for q in ("p50", "p90", "p99", "max")]
        assert np.allclose(got, want, rtol=1e-9, atol=1e-12), (name, k, got, want)
PY
ok $? "percentiles equal numpy's over the per-request figures (--requests-out), sums agree"

python3 - "$dir/b.json" "$dir/h.db" <<'PY'
import json, sqlite3, sys
b = json.load(open(sys.argv[1]))
rows = sqlite3.connect(sys.argv[2]).execute("select kind, config, summary from runs").fetchall()
assert len(rows) == 1 and rows[0][0] == "bench", rows
assert json.loads(rows[0][2]) == b
assert json.loads(rows[0][1])["seed"] == 7
PY
ok $? "--save stored the run with the same summary"
python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$dir/trace.json" 2>/dev/null
ok $? "--trace wrote a JSON trace"
grep -q "short — short prompts" "$dir/out.txt" && grep -q "TTFT" "$dir/out.txt"
ok $? "report printed per profile"
[ ! -s "$dir/err.txt" ] || ! grep -q $'\r' "$dir/err.txt"
ok $? "no progress bar when stderr is not a terminal"

"$bench" bench -m "$model" --profile short --requests 4 --rate 50 --scale 0.0625 \
    --texts "$TERN_SHARED/texts" --json "$dir/r.json" -q > /dev/null 2>&1
python3 -c "
import json,sys; s=json.load(open(sys.argv[1]))['short']
assert s['requests']==4 and sum(s['statuses'].values())==4" "$dir/r.json"
ok $? "--rate: Poisson arrivals run"

"$TERN_BIN" bench -m "$model" --profile cancel --requests 3 --scale 0.0625 \
    --texts "$TERN_SHARED/texts" --json "$dir/t.json" -q > /dev/null 2>&1
python3 -c "
import json,sys; s=json.load(open(sys.argv[1]))['cancel']
assert s['requests']==3 and s['statuses'].get('cancelled')==1" "$dir/t.json"
ok $? "'tern bench --profile' runs the same profiles"

"$bench" bench --profile nope 2>/dev/null; [ $? = 2 ]
ok $? "unknown profile: usage error"
tap_done
