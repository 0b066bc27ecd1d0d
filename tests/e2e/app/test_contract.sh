#!/usr/bin/env bash
# test_contract: 'tern bench --contract' on the default model, for real: a
# contract that passes (exit 0) and one that fails (exit 1, the failing row
# named), a model that is not the contract's, every kind of mistake in a
# contract file (exit 2, the message naming file, line and key), the run
# stored with its environment and verdict, 'bench compare' of two runs
# whose environments differ, a bench --profile run's environment, and a
# short --sweep with its SVG. Workloads are a few short requests.
set -u
. "$TERN_SRC/tests/tap.sh"
T=$TERN_BIN
d=$(mktemp -d /tmp/tern-contract-XXXXXX)
trap 'rm -rf "$d"' EXIT
model=$("$TERN_SRC/packaging/fetch-model" --print-path 2>"$d/fetch") ||
  { echo "Bail out! no default model: $(tail -1 "$d/fetch")"; exit 1; }
sha=$(sha256sum "$model" | cut -d' ' -f1)
# no user config or history: every run names its --db or --no-save
export XDG_CONFIG_HOME=$d/cfg XDG_DATA_HOME=$d/data
texts=(--texts "$TERN_SHARED/texts")
cp "$TERN_SRC/docs/contracts/answers.jsonl" "$d/"

# A base contract (SHA, OUT: its model.sha256 and output-tokens); $1 = extra
# lines from line 10 on (targets), written to $d/$2.
mk() {
  cat >"$d/$2" <<EOC
# test contract
name = t
model.name = SmolLM2-135M-Instruct.Q4_1
model.sha256 = ${SHA:-$sha}
workload.requests = 4
workload.prompt-tokens = 8-16:50%, 24:50%   # short
workload.output-tokens = ${OUT:-6:100%}
workload.arrival = closed
workload.concurrency = 2
$1
EOC
}

# ---- the shipped examples: they check, the batch one passes, the docs show the chat one whole
for f in interactive-chat batch-summarisation; do
  "$T" bench --contract "$TERN_SRC/docs/contracts/$f.contract" --check >"$d/$f.chk" 2>&1
  ok $([ $? -eq 0 ] && grep -q ': ok: ' "$d/$f.chk"; echo $?) "docs/contracts/$f.contract checks ($(cat "$d/$f.chk"))"
done
"$T" bench --contract "$TERN_SRC/docs/contracts/batch-summarisation.contract" -m "$model" -t 2 --no-save \
  >"$d/ex.out" 2>&1
st=$?
ok $([ $st -eq 0 ] && grep -q 'quality.min-accuracy .* pass' "$d/ex.out"; echo $?) \
  "docs/contracts/batch-summarisation.contract passes on the default model, its gate included (status $st)"
[ $st -eq 0 ] || diag "$(cat "$d/ex.out")"
python3 - "$TERN_SRC" <<'PY'
import sys
src = sys.argv[1]
doc = open(src + "/docs/CONTRACT.md").read()
f = open(src + "/docs/contracts/interactive-chat.contract").read()
assert "```ini\n" + f + "```" in doc
PY
ok $? "docs/CONTRACT.md shows docs/contracts/interactive-chat.contract as it is"

# ---- a passing contract, stored with its environment
mk "target.ttft.p99 = 60s
target.tpot.p50 = 10s
target.e2e.p99 = 120s
target.error-rate = 0%
target.availability = 100%
target.slo-attainment = 50%
goodput.tpot = 10s
quality.prompts = answers.jsonl
quality.min-accuracy = 75%" pass.contract
"$T" bench --contract "$d/pass.contract" -m "$model" -t 2 "${texts[@]}" --db "$d/h.db" \
  --json "$d/pass.json" >"$d/pass.out" 2>"$d/pass.err"
st=$?
ok $([ $st -eq 0 ]; echo $?) "a contract whose targets hold exits 0 (status $st)"
[ $st -eq 0 ] || diag "$(cat "$d/pass.out" "$d/pass.err")"
ok $(grep -q '^verdict: PASS' "$d/pass.out" && [ "$(grep -c ' pass  margin' "$d/pass.out")" -eq 7 ]; echo $?) \
  "one row per target and one for the quality gate, each 'pass' with its margin"
python3 - "$d/pass.json" "$sha" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
rows = v["targets"]
assert [r["target"] for r in rows] == ["target.ttft.p99", "target.tpot.p50", "target.e2e.p99",
                                      "target.error-rate", "target.availability",
                                      "target.slo-attainment"], rows
for r in rows:
    assert r["pass"] and r["measured"] is not None and r["line"] > 0, r
    assert abs(r["margin"] - (r["limit"] - r["measured"] if r["bound"] == "max"
                              else r["measured"] - r["limit"])) < 1e-9, r
s = v["summary"]
assert s["requests"] == 4 and s["statuses"] == {"length": 4}, s
assert rows[0]["measured"] == s["ttft"]["p99"], (rows[0], s["ttft"])
q = v["quality"][0]
assert q["target"] == "quality.min-accuracy" and q["measured"] == 1.0 and q["pass"], q
e = v["environment"]
assert e["model"]["sha256"] == sys.argv[2], e["model"]
assert len(e["model"]["tokenizer_sha256"]) == 64 and len(e["model"]["chat_template_sha256"]) == 64
assert e["engine"]["kind"] == "local" and e["host"]["threads"] == 2, e
assert e["batching"]["step_tokens"] > 0 and e["batching"]["kv_blocks"] > 0, e["batching"]
assert e["tern"]["version"] and e["tern"]["commit"], e["tern"]
PY
ok $? "--json: targets with limit, measured, margin and line; the summary they came from; the gate; the environment (model SHA-256 = sha256sum's, tokenizer and template hashes, threads, batching)"

# ---- a failing contract: an impossible TTFT
mk "target.ttft.p50 = 1us
target.error-rate = 0%" fail.contract
"$T" bench --contract "$d/fail.contract" -m "$model" -t 1 --step-tokens 32 "${texts[@]}" \
  --db "$d/h.db" >"$d/fail.out" 2>"$d/fail.err"
st=$?
ok $([ $st -eq 1 ] && grep -q '^verdict: FAIL' "$d/fail.out" &&
     grep -q 'target.ttft.p50 .* FAIL' "$d/fail.out" && grep -q 'target.error-rate .* pass' "$d/fail.out"; echo $?) \
  "a contract with a target missed exits 1, the missed row FAIL and the other pass (status $st)"

# ---- stored runs: environment and verdict
python3 - "$d/h.db" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT id, kind, verdict, env, summary FROM runs ORDER BY id").fetchall()
assert [(r[1], r[2]) for r in rows] == [("contract", "pass"), ("contract", "fail")], rows
for r in rows:
    env = json.loads(r[3])
    assert env["model"]["sha256"] and env["host"]["isa"], env
    assert json.loads(r[4])["targets"], r[4]
PY
ok $? "both runs stored (schema v6): kind contract, verdict pass / fail, the environment beside the targets"

"$T" bench compare 1 2 --db "$d/h.db" >"$d/cmp.out" 2>"$d/cmp.err"
st=$?
ok $([ $st -eq 0 ] && grep -Eq '^  host.threads +2 -> 1' "$d/cmp.out" &&
     grep -Eq '^  batching.step_tokens +64 -> 32' "$d/cmp.out" && ! grep -q 'model.sha256' "$d/cmp.out"; echo $?) \
  "bench compare: the threads and the step budget changed, the model did not"
[ $st -eq 0 ] || diag "$(cat "$d/cmp.out" "$d/cmp.err")"
"$T" bench compare 1 2 --db "$d/h.db" --json >"$d/cmp.json" 2>&1
python3 - "$d/cmp.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
keys = {e["key"] for e in c["environment"]}
assert {"host.threads", "batching.step_tokens"} <= keys, keys
t = {r["target"]: r for r in c["targets"]}
assert "summary.ttft.p50" in t and t["summary.ttft.p50"]["a"] > 0 and t["summary.ttft.p50"]["b"] > 0, t
assert t["target.error-rate"]["a_pass"] and t["target.error-rate"]["b_pass"], t
assert all(r["direction"] in ("better", "worse", "same") for r in c["targets"] if "change_pct" in r)
PY
ok $? "bench compare --json: environment changes and every shared target of both runs"
"$T" bench compare --db "$d/h.db" >"$d/list" 2>&1
ok $([ $? -eq 0 ] && grep -Eq '^ +2 .* contract +fail +yes' "$d/list" && grep -Eq '^ +1 .* contract +pass +yes' "$d/list"; echo $?) \
  "bench compare without ids lists the runs with kind, verdict and whether the environment is there"
"$T" bench compare 1 9 --db "$d/h.db" >/dev/null 2>"$d/cmp9"
ok $([ $? -eq 1 ] && grep -q 'no run 9' "$d/cmp9"; echo $?) "bench compare of a run that is not there: status 1, naming it"

# ---- the model is not the contract's
mk "target.ttft.p99 = 60s" wrongsha.contract
sed -i "s/^model.sha256 = .*/model.sha256 = $(printf '0%.0s' $(seq 64))/" "$d/wrongsha.contract"
"$T" bench --contract "$d/wrongsha.contract" -m "$model" -t 1 "${texts[@]}" --no-save >/dev/null 2>"$d/ws.err"
st=$?
ok $([ $st -eq 1 ] && grep -q "wrongsha.contract:4: model.sha256: .*$sha" "$d/ws.err"; echo $?) \
  "a model file whose SHA-256 is not the contract's: status 1, file:line: key and both hashes ($(head -c 160 "$d/ws.err"))"
mk "target.ttft.p99 = 60s" wrongname.contract
sed -i "s/^model.name = .*/model.name = Llama-3-8B/" "$d/wrongname.contract"
"$T" bench --contract "$d/wrongname.contract" -m "$model" -t 1 "${texts[@]}" --no-save >/dev/null 2>"$d/wn.err"
ok $([ $? -eq 1 ] && grep -q "wrongname.contract:3: model.name: the contract names 'Llama-3-8B'" "$d/wn.err"; echo $?) \
  "a model by another name: status 1, file:line: key"

# ---- the model's hash is cached by path, size and modification time
cp "$model" "$d/m.gguf"
mk "target.e2e.p99 = 120s" cache.contract
sed -i '/^model.name/d' "$d/cache.contract" # the copy goes by another name
"$T" bench --contract "$d/cache.contract" -m "$d/m.gguf" -t 2 --no-save "${texts[@]}" >/dev/null 2>&1
st1=$?
cache=$XDG_DATA_HOME/tern/sha256-cache
line=$(grep " $d/m.gguf\$" "$cache")
ok $([ $st1 -eq 0 ] && [ "${line%% *}" = "$sha" ]; echo $?) "a run caches the model file's SHA-256 ($line)"
sed -i "s|^$sha \(.* $d/m.gguf\)\$|$(printf 'f%.0s' $(seq 64)) \1|" "$cache"
"$T" bench --contract "$d/cache.contract" -m "$d/m.gguf" -t 2 --no-save "${texts[@]}" >/dev/null 2>"$d/cache.err"
st2=$?
touch -d '2001-01-01' "$d/m.gguf"
"$T" bench --contract "$d/cache.contract" -m "$d/m.gguf" -t 2 --no-save "${texts[@]}" >/dev/null 2>&1
st3=$?
ok $([ $st2 -eq 1 ] && grep -q 'has ffff' "$d/cache.err" && [ $st3 -eq 0 ]; echo $?) \
  "the cached digest is used while size and time match (a forged one fails the check), and a touched file is hashed again ($st2, $st3)"

# ---- bad files: every kind of mistake, file:line: key
# bad NAME 'LINES' 'EXPECTED STDERR (grep -E)'
bad() {
  mk "$2" "$1.contract"
  "$T" bench --contract "$d/$1.contract" -m "$model" --no-save >/dev/null 2>"$d/$1.err"
  local st=$?
  ok $([ $st -eq 2 ] && grep -Eq "$3" "$d/$1.err"; echo $?) "bad contract ($1): status 2, '$(head -c 150 "$d/$1.err")'"
}
bad unknown-key 'target.ttft.p99 = 1s
workload.requets = 4' "unknown-key.contract:11: workload.requets: unknown key"
bad duration 'target.ttft.p99 = 3 parsecs' "duration.contract:10: target.ttft.p99: '3 parsecs': unit 'parsecs' is not s, ms or us"
bad unit 'target.ttft.p99 = 3h' "unit.contract:10: target.ttft.p99: '3h': unit 'h' is not s, ms or us"
bad percentile 'target.ttft.p95 = 1s' "percentile.contract:10: target.ttft.p95: unknown percentile 'p95'"
bad target 'target.throughput = 1' "target.contract:10: target.throughput: unknown target"
bad share 'target.ttft.p99 = 1s
workload.cancelled = 150%' "share.contract:11: workload.cancelled: '150%' is not between 0 and 100%"
OUT='6:50%, 12:30%' bad buckets-sum 'target.ttft.p99 = 1s' \
  "buckets-sum.contract:7: workload.output-tokens: the shares add up to 80.0%, not 100%"
OUT='6:50%, x:50%' bad bucket 'target.ttft.p99 = 1s' \
  "bucket.contract:7: workload.output-tokens: bucket 'x' is not a token count or LO-HI range"
SHA=abc123 bad sha 'target.ttft.p99 = 1s' "sha.contract:4: model.sha256: 'abc123' is not a SHA-256"
bad twice 'target.ttft.p99 = 1s
target.ttft.p99 = 2s' "twice.contract:11: target.ttft.p99: given twice \(first on line 10\)"
bad no-equals 'target.ttft.p99 1s' "no-equals.contract:10: expected 'key = value'"
bad arrival 'target.ttft.p99 = 1s
workload.peak-concurrency = 3' "arrival.contract:11: workload.peak-concurrency: caps an open loop"
bad no-targets '' "no-targets.contract: target.\*: missing"
bad count 'target.ttft.p99 = 1s
workload.burst-size = many' "count.contract:11: workload.burst-size: 'many' is not a whole number"
bad tenant 'target.ttft.p99 = 1s
workload.tenants = a:urgent:100%' "tenant.contract:11: workload.tenants: tenant a: priority 'urgent'"
bad gate-pair 'target.ttft.p99 = 1s
model.revision = v1
quality.prompts = answers.jsonl' "gate-pair.contract:12: quality.prompts: needs quality.min-accuracy as well"
bad no-file 'target.ttft.p99 = 1s
quality.text = nowhere.txt
quality.max-perplexity = 20' "no-file.contract:11: quality.text: .*/nowhere.txt: No such file or directory"
bad tenant-target 'target.bob.ttft.p99 = 1s' "tenant-target.contract:10: target.bob.ttft.p99: no tenant 'bob' in workload.tenants"
bad tenant-metric 'target.bob.error-rate = 1%' "tenant-metric.contract:10: target.bob.error-rate: no tenant 'bob' in workload.tenants"
bad route 'target.ttft.p99 = 1s
fallback.route = local,ftp://example.org' "route.contract:11: fallback.route: .*ftp://example.org"
bad modality 'target.ttft.p99 = 1s
workload.modality = image' "modality.contract:11: workload.modality: 'image': tern serves text only"
bad prompts-both 'target.ttft.p99 = 1s
workload.prompts = answers.jsonl' "prompts-both.contract:[0-9]+: workload.prompt-tokens: give prompt lengths or workload.prompts, not both"
# open loop without a rate; no model; a bad prompt-set line; no file
cat >"$d/norate.contract" <<EOC
model.name = x
workload.requests = 2
workload.prompt-tokens = 8:100%
workload.output-tokens = 4:100%
workload.arrival = poisson
target.e2e.p99 = 1s
EOC
"$T" bench --contract "$d/norate.contract" --no-save >/dev/null 2>"$d/nr.err"
ok $([ $? -eq 2 ] && grep -q "norate.contract:5: workload.arrival: an open-loop arrival needs workload.rate" "$d/nr.err"; echo $?) \
  "bad contract (poisson without a rate): status 2, naming line 5 and the key"
grep -v '^model' "$d/norate.contract" | sed 's/poisson/closed/' >"$d/nomodel.contract"
"$T" bench --contract "$d/nomodel.contract" --no-save >/dev/null 2>"$d/nm.err"
ok $([ $? -eq 2 ] && grep -q "nomodel.contract: model.name: missing" "$d/nm.err"; echo $?) \
  "bad contract (no model named): status 2, naming the key"
printf '{"prompt": "hello", "max_tokens": 4}\n{"conversations": 3}\n' >"$d/set.jsonl"
sed 's/^workload.prompt-tokens.*/workload.prompts = set.jsonl/; /output-tokens/d' "$d/nomodel.contract" |
  sed '1i model.name = x' >"$d/set.contract"
"$T" bench --contract "$d/set.contract" --no-save >/dev/null 2>"$d/set.err"
ok $([ $? -eq 2 ] && grep -q "set.jsonl:2: neither a \"prompt\" string" "$d/set.err"; echo $?) \
  "bad prompt set line: status 2, naming the set's file and line ($(head -c 120 "$d/set.err"))"
"$T" bench --contract "$d/none.contract" --no-save >/dev/null 2>"$d/none.err"
ok $([ $? -eq 2 ] && grep -q "none.contract: cannot open" "$d/none.err"; echo $?) "a contract file that is not there: status 2, naming it"

# ---- a prompt-set workload (ShareGPT lines), non-streamed clients, batch tenant
cp "$TERN_SRC/docs/contracts/summarise.jsonl" "$d/"
cat >"$d/batch.contract" <<EOC
model.name = SmolLM2-135M-Instruct.Q4_1
workload.requests = 5
workload.prompts = summarise.jsonl
workload.arrival = closed
workload.concurrency = 5
workload.streamed = 0%
workload.tenants = nightly:batch:100%
target.e2e.p99 = 120s
target.goodput = 0.001/s
goodput.ttft = 120s
goodput.tpot = 60s
EOC
"$T" bench --contract "$d/batch.contract" -m "$model" -t 2 --no-save --json "$d/batch.json" \
  --requests-out "$d/batch.req" >/dev/null 2>"$d/batch.err"
st=$?
python3 - "$d/batch.json" "$d/batch.req" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
s = v["summary"]
assert s["requests"] == 5 and v["pass"], v
reqs = [json.loads(l) for l in open(sys.argv[2])]
assert len(reqs) == 5 and all(r["priority"] == "batch" for r in reqs), reqs
# the set's max_tokens (24, 32, 48, 24) and the ShareGPT reply's length
assert [r["generated_tokens"] for r in reqs[:4]] == [24, 32, 48, 24], [r["generated_tokens"] for r in reqs]
# a non-streaming client sees its first token with the whole reply
assert all(abs(r["ttft_s"] - r["e2e_s"]) < 1e-9 for r in reqs), reqs
PY
ok $? "a prompt-set workload: the set's lengths, batch tenant, non-streamed clients' TTFT = E2E (status $st)"

# ---- cancelling and slow-reading clients: planned, so neither errors nor missed goodput
OUT='40:100%' mk "target.error-rate = 0%
target.slo-attainment = 100%
workload.cancelled = 40%
workload.slow-readers = 30%
goodput.ttft = 60s
goodput.tpot = 10s" mixed.contract
sed -i 's/^workload.requests = 4/workload.requests = 10/' "$d/mixed.contract"
"$T" bench --contract "$d/mixed.contract" -m "$model" -t 2 --no-save --json "$d/mixed.json" "${texts[@]}" \
  >"$d/mixed.out" 2>&1
st=$?
python3 - "$d/mixed.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
s = v["summary"]
st = s["statuses"]
assert st.get("cancelled", 0) >= 1 and st.get("consumer-stalled", 0) >= 1, st
assert s["planned_incomplete"] == st["cancelled"] + st["consumer-stalled"], s
assert st.get("length", 0) == 10 - s["planned_incomplete"], st
rows = {r["target"]: r for r in v["targets"]}
assert rows["target.error-rate"]["measured"] == 0 and rows["target.slo-attainment"]["measured"] == 1, rows
PY
ok $([ $? -eq 0 ] && [ $st -eq 0 ]; echo $?) "cancelled and slow-reading clients: they end cancelled and consumer-stalled, counted as planned, not as errors (status $st)"

# ---- tenants: each one's priority and its own figures
mk "target.e2e.p99 = 120s
target.chat.ttft.p99 = 60s
target.nightly.e2e.p50 = 120s
target.chat.error-rate = 50%
target.nightly.availability = 50%
target.chat.goodput = 0.001/s
target.nightly.slo-attainment = 0%
workload.tenants = chat:interactive:50%, nightly:batch:50%" tenants.contract
sed -i 's/^workload.requests = 4/workload.requests = 8/' "$d/tenants.contract"
"$T" bench --contract "$d/tenants.contract" -m "$model" -t 2 --no-save --json "$d/ten.json" \
  --requests-out "$d/ten.req" "${texts[@]}" >"$d/ten.out" 2>&1
st=$?
python3 - "$d/ten.json" "$d/ten.req" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
bt = v["summary"]["by_tenant"]
rows = {r["target"]: r for r in v["targets"]}
assert rows["target.chat.ttft.p99"]["measured"] == bt["chat"]["ttft"]["p99"], (rows, bt)
assert rows["target.nightly.e2e.p50"]["measured"] == bt["nightly"]["e2e"]["p50"], (rows, bt)
# a tenant's error rate, availability, goodput and attainment: its own requests
def errs(t):
    return sum(bt[t].get("statuses", {}).get(k, 0) for k in ("rejected", "error", "timeout"))
assert rows["target.chat.error-rate"]["measured"] == errs("chat") / bt["chat"]["requests"], rows
assert rows["target.nightly.availability"]["measured"] == 1 - errs("nightly") / bt["nightly"]["requests"], rows
assert rows["target.chat.goodput"]["measured"] == bt["chat"]["goodput_rps"], (rows, bt)
att = bt["nightly"]["slo_met"] / (bt["nightly"]["requests"] - bt["nightly"]["planned_incomplete"])
assert rows["target.nightly.slo-attainment"]["measured"] == att, (rows, bt)
assert sum(bt[t]["slo_met"] for t in bt) == v["summary"]["slo_met"], bt
reqs = [json.loads(l) for l in open(sys.argv[2])]
assert set(bt) == {"chat", "nightly"}, bt
assert bt["chat"]["requests"] + bt["nightly"]["requests"] == 8, bt
assert bt["nightly"]["requests"] == sum(r["priority"] == "batch" for r in reqs) > 0, (bt, reqs)
assert all(bt[t]["e2e"]["p99"] > 0 for t in bt if bt[t]["requests"]), bt
PY
ok $([ $? -eq 0 ] && [ $st -eq 0 ] && grep -q '^  tenant nightly' "$d/ten.out"; echo $?) \
  "tenants: each request at its tenant's priority, each tenant's own figures in the summary and the report, and judged by its own targets (latencies, error rate, availability, goodput, attainment)"

# ---- the fallback route decided in the contract: a replica that is down
# (a refused port) first, the local engine second; every request is served
# by the local engine after a move, none lost, and the verdict still holds
mk "target.e2e.p99 = 120s
target.error-rate = 0%
fallback.route = http://127.0.0.1:9,local" route-ok.contract
"$T" bench --contract "$d/route-ok.contract" -m "$model" -t 2 --no-save --json "$d/route.json" \
  "${texts[@]}" >"$d/route.out" 2>&1
st=$?
python3 - "$d/route.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
r = v["summary"]["route"]
assert r["served_by"].get("local") == 4, r
assert r["moved_requests"] == 4, r
assert v["summary"]["statuses"].get("error", 0) == 0, v["summary"]["statuses"]
PY
ok $([ $? -eq 0 ] && [ $st -eq 0 ]; echo $?) "a contract's fallback.route: the down replica's requests served by the local engine, none lost (status $st)"

# ---- an open loop capped at one in flight: the wait in the client is in TTFT
OUT='24:100%' mk "target.e2e.p99 = 120s" cap.contract
sed -i 's/^workload.arrival = closed/workload.arrival = constant\nworkload.rate = 100\nworkload.peak-concurrency = 1/; /^workload.concurrency/d' "$d/cap.contract"
"$T" bench --contract "$d/cap.contract" -m "$model" -t 2 --no-save --requests-out "$d/cap.req" "${texts[@]}" \
  >"$d/cap.out" 2>&1
st=$?
python3 - "$d/cap.req" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
assert len(r) == 4, r
# all four arrive 10 ms apart; one at a time, each waits for the one before to finish
for a, b in zip(r, r[1:]):
    assert b["ttft_s"] > a["e2e_s"] - 0.02, [(x["ttft_s"], x["e2e_s"]) for x in r]
assert all(x["queue_s"] <= x["ttft_s"] <= x["e2e_s"] for x in r), r
PY
ok $([ $? -eq 0 ] && [ $st -eq 0 ]; echo $?) "an open loop over its peak concurrency: a request's wait in the client counts in its queue time, TTFT and E2E"

# ---- a short sweep: open loop, three rates, chart and SVG
mk "target.ttft.p99 = 1us" sweep.contract
sed -i 's/^workload.arrival = closed/workload.arrival = constant\nworkload.rate = 4/; /concurrency/d' "$d/sweep.contract"
sed -i 's/^target.ttft.p99 = 1us/target.e2e.p99 = 60s/' "$d/sweep.contract"
"$T" bench --contract "$d/sweep.contract" -m "$model" -t 2 --sweep --sweep-steps 3 --svg "$d/s.svg" \
  --db "$d/sw.db" --json "$d/sweep.json" "${texts[@]}" >"$d/sweep.out" 2>"$d/sweep.err"
st=$?
python3 - "$d/sweep.json" "$d/s.svg" <<'PY'
import json, sys, xml.dom.minidom
v = json.load(open(sys.argv[1]))
steps = v["sweep"]["steps"]
assert [round(s["rate"], 3) for s in steps] == [4, 6, 9], steps
assert v["sweep"]["max_rate_passing"] == 9 and v["pass"], v["sweep"]
svg = xml.dom.minidom.parse(sys.argv[2])
assert len(svg.getElementsByTagName("polyline")) == 2
PY
ok $([ $? -eq 0 ] && [ $st -eq 0 ] && grep -q 'highest rate that holds: 9.000' "$d/sweep.out"; echo $?) \
  "--sweep: rates x1.5 (4, 6, 9/s), the highest that holds, a terminal chart and an SVG that parses"
"$T" bench compare 1 1 --db "$d/sw.db" >"$d/swc.out" 2>&1
ok $([ $? -eq 0 ] && grep -q 'environment: 0 changes' "$d/swc.out" &&
     grep -Eq '^  sweep.max_rate_passing +9.000/s +9.000/s' "$d/swc.out"; echo $?) \
  "a stored sweep: compare shows its highest passing rate as a figure"
"$T" bench --contract "$d/pass.contract" --sweep --no-save >/dev/null 2>"$d/swclosed"
ok $([ $? -eq 2 ] && grep -q 'has a closed loop' "$d/swclosed"; echo $?) "--sweep of a closed-loop contract: status 2, saying why"
mk "target.ttft.p99 = 1us" sweepfail.contract
sed -i 's/^workload.arrival = closed/workload.arrival = poisson\nworkload.rate = 4/; /concurrency/d' "$d/sweepfail.contract"
"$T" bench --contract "$d/sweepfail.contract" -m "$model" -t 2 --sweep --sweep-steps 3 --no-save \
  "${texts[@]}" >"$d/sf.out" 2>&1
st=$?
ok $([ $st -eq 1 ] && grep -q 'no rate holds' "$d/sf.out"; echo $?) "--sweep whose first rate fails: status 1, saying no rate holds"

# ---- bench --profile --save keeps the environment too
"$T" bench --profile short --requests 2 --concurrency 2 --scale 0.25 -m "$model" -t 1 "${texts[@]}" \
  --save --db "$d/h.db" -q >/dev/null 2>"$d/prof.err"
python3 - "$d/h.db" "$sha" <<'PY'
import json, sqlite3, sys
r = sqlite3.connect(sys.argv[1]).execute("SELECT kind, env FROM runs ORDER BY id DESC LIMIT 1").fetchone()
env = json.loads(r[1])
assert r[0] == "bench" and env["model"]["sha256"] == sys.argv[2] and env["host"]["threads"] == 1, r
PY
ok $? "bench --profile --save: the run keeps its environment"
"$T" bench --profile short --requests 2 --concurrency 2 --scale 0.25 -m "$model" -t 2 "${texts[@]}" \
  --save --db "$d/h.db" -q >/dev/null 2>"$d/prof.err"
"$T" bench compare 3 4 --db "$d/h.db" >"$d/cmp4.out" 2>&1
ok $([ $? -eq 0 ] && grep -Eq '^  host.threads +1 -> 2' "$d/cmp4.out" &&
     grep -Eq '^  short.ttft.p50 .*(better|worse|same)' "$d/cmp4.out"; echo $?) \
  "bench compare of two --profile runs: threads 1 -> 2, and each profile's figures side by side"
"$T" bench compare 1 3 --db "$d/h.db" >"$d/cmp3.out" 2>&1
ok $([ $? -eq 0 ] && grep -q 'no target or figure in common (contract run against bench run)' "$d/cmp3.out"; echo $?) \
  "bench compare of a contract run and a bench run: the environment, and says they share no figure"
# ---- raw pp/tg runs keep their environment too
"$T" bench -m "$model" --pp 32 --tg 8 -r 1 -t 1 --save --db "$d/raw.db" >/dev/null 2>&1
"$T" bench -m "$model" --pp 32 --tg 8 -r 1 -t 2 --save --db "$d/raw.db" >/dev/null 2>&1
"$T" bench compare 1 2 --db "$d/raw.db" >"$d/raw.cmp" 2>&1
ok $([ $? -eq 0 ] && grep -Eq '^  host.threads +1 -> 2' "$d/raw.cmp" && grep -Eq '^  pp_tok_s +[0-9.]+ +[0-9.]+ ' "$d/raw.cmp" &&
     grep -Eq '^  tg_tok_s ' "$d/raw.cmp"; echo $?) "bench --pp/--tg --save: stored with the environment (kind bench-raw); compare shows threads and pp/tg speeds"
tap_done
