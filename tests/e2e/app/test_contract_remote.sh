#!/usr/bin/env bash
# test_contract_remote: 'tern bench --contract' through --url, against a
# server no one here wrote (llama.cpp's llama-server from
# packaging/build-reference, or $TERN_LLAMA_SERVER) and against tern serve,
# loopback only, a few short requests each: the verdict and its exit
# status, the model check (by the server's name; by SHA-256 when -m names
# the file), the server's own record in the environment (/props build and
# slots; tern serve's batching from /v1/tern/status), and 'bench compare'
# of a local run and a remote one. Fails, saying why, when a server cannot
# be had (never skips).
set -u
. "$TERN_SRC/tests/tap.sh"
T=$TERN_BIN
d=$(mktemp -d /tmp/tern-contract-remote-XXXXXX)
lpid= tpid=
trap '[ -n "$lpid" ] && kill $lpid 2>/dev/null; [ -n "$tpid" ] && kill $tpid 2>/dev/null; rm -rf "$d"' EXIT
model=$("$TERN_SRC/packaging/fetch-model" --print-path 2>"$d/fetch") ||
  { echo "Bail out! no default model: $(tail -1 "$d/fetch")"; exit 1; }
sha=$(sha256sum "$model" | cut -d' ' -f1)
# no user config or history: every run names its --db or --no-save
export XDG_CONFIG_HOME=$d/cfg XDG_DATA_HOME=$d/data
srv=${TERN_LLAMA_SERVER:-}
if [ -z "$srv" ]; then
  bin=$("$TERN_SRC/packaging/build-reference" 2>"$d/build") ||
    { echo "Bail out! llama-server cannot be built: $(tail -3 "$d/build" | tr '\n' ' ')"; exit 1; }
  srv=$bin/llama-server
fi
[ -x "$srv" ] || { echo "Bail out! $srv is not an executable"; exit 1; }
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
lport=$(freeport)
"$srv" -m "$model" --host 127.0.0.1 --port "$lport" --metrics -t 1 -c 2048 -np 2 >"$d/llama.log" 2>&1 &
lpid=$!
tport=$(freeport)
"$T" serve -m "$model" --port "$tport" --threads 1 --no-history >"$d/serve.log" 2>&1 &
tpid=$!
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$lport/health" >/dev/null 2>&1 && curl -sf "http://127.0.0.1:$tport/ready" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$lport/health" >/dev/null ||
  { echo "Bail out! llama-server did not start: $(tail -2 "$d/llama.log" | tr '\n' ' ')"; exit 1; }
curl -sf "http://127.0.0.1:$tport/ready" >/dev/null ||
  { echo "Bail out! tern serve did not start: $(tail -2 "$d/serve.log" | tr '\n' ' ')"; exit 1; }
L=http://127.0.0.1:$lport/v1
S=http://127.0.0.1:$tport/v1
texts=(--texts "$TERN_SHARED/texts")

mk() { # $1 = target lines, $2 = file, MODEL_LINE = the model line
  cat >"$d/$2" <<EOC
name = remote
${MODEL_LINE:-model.name = SmolLM2-135M-Instruct.Q4_1}
workload.requests = 4
workload.prompt-tokens = 8-24:100%
workload.output-tokens = 6:100%
workload.arrival = poisson
workload.rate = 4/s
workload.peak-concurrency = 2
$1
EOC
}
mk "target.ttft.p99 = 60s
target.e2e.p99 = 120s
target.error-rate = 0%" pass.contract
"$T" bench --contract "$d/pass.contract" --url "$L" "${texts[@]}" --db "$d/h.db" --json "$d/l.json" \
  >"$d/l.out" 2>"$d/l.err"
st=$?
ok $([ $st -eq 0 ] && grep -q '^verdict: PASS' "$d/l.out"; echo $?) "llama-server: a contract whose targets hold exits 0 (status $st)"
[ $st -eq 0 ] || diag "$(cat "$d/l.out" "$d/l.err")"
python3 - "$d/l.json" "$sha" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
assert v["summary"]["requests"] == 4 and v["summary"]["statuses"] == {"length": 4}, v["summary"]
e = v["environment"]
assert e["engine"]["kind"] == "remote", e["engine"]
s = e["engine"]["servers"][0]
assert s["props"]["build_info"] and s["props"]["total_slots"] == 2, s
assert s["models"][0]["id"].endswith("SmolLM2-135M-Instruct.Q4_1.gguf"), s["models"]
assert e["model"]["sha256"] is None and e["model"]["file"] is None, e["model"]
assert len(e["model"]["chat_template_sha256"]) == 64, e["model"]
assert any("model.sha256 not verified" in n for n in v["notes"]) is False  # the contract names no sha
PY
ok $? "llama-server: the environment has the server's build, slots and model (/props, /v1/models), no local file"

mk "target.ttft.p50 = 1us" fail.contract
"$T" bench --contract "$d/fail.contract" --url "$L" "${texts[@]}" --no-save >"$d/f.out" 2>"$d/f.err"
st=$?
ok $([ $st -eq 1 ] && grep -q 'target.ttft.p50 .* FAIL' "$d/f.out"; echo $?) "llama-server: a missed target exits 1 (status $st)"

MODEL_LINE="model.sha256 = $sha" mk "target.ttft.p99 = 60s" sha.contract
"$T" bench --contract "$d/sha.contract" --url "$L" "${texts[@]}" --no-save >"$d/s1.out" 2>"$d/s1.err"
st1=$?
"$T" bench --contract "$d/sha.contract" --url "$L" -m "$model" "${texts[@]}" --no-save --json "$d/s2.json" \
  >"$d/s2.out" 2>"$d/s2.err"
st2=$?
ok $([ $st1 -eq 0 ] && grep -q 'note: model.sha256 not verified' "$d/s1.out" && [ $st2 -eq 0 ] &&
     ! grep -q 'not verified' "$d/s2.out" && grep -q "\"sha256\":[[:space:]]*\"$sha\"" "$d/s2.json"; echo $?) \
  "--url: model.sha256 unverified (said so) without -m, verified with -m FILE ($st1, $st2)"
MODEL_LINE="model.sha256 = $(printf 'a%.0s' $(seq 64))" mk "target.ttft.p99 = 60s" badsha.contract
"$T" bench --contract "$d/badsha.contract" --url "$L" -m "$model" "${texts[@]}" --no-save >/dev/null 2>"$d/bs.err"
ok $([ $? -eq 1 ] && grep -q 'badsha.contract:2: model.sha256' "$d/bs.err"; echo $?) "--url -m with another model's SHA-256: status 1, file:line: key"
MODEL_LINE="model.name = gemma-3-27b" mk "target.ttft.p99 = 60s" badname.contract
"$T" bench --contract "$d/badname.contract" --url "$L" "${texts[@]}" --no-save >/dev/null 2>"$d/bn.err"
ok $([ $? -eq 1 ] && grep -q "badname.contract:2: model.name: the contract names 'gemma-3-27b'.*SmolLM2" "$d/bn.err"; echo $?) \
  "--url: a server serving another model: status 1, naming what the server calls its model"

# tern serve: its batching policy recorded from /v1/tern/status
"$T" bench --contract "$d/pass.contract" --url "$S" "${texts[@]}" --db "$d/h.db" --json "$d/t.json" \
  >"$d/t.out" 2>"$d/t.err"
st=$?
python3 - "$d/t.json" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["environment"]
s = e["engine"]["servers"][0]
te = s["tern_engine"]
assert te["step_tokens_budget"] > 0 and te["max_running"] > 0 and te["kv_blocks"] > 0, te
assert s["tern_model"]["arch"] == "llama", s
PY
ok $([ $? -eq 0 ] && [ $st -eq 0 ]; echo $?) "tern serve: the server's step budget, max running and KV pool recorded (status $st)"

# compare: a local run against the remote ones
"$T" bench --contract "$d/pass.contract" -m "$model" -t 1 "${texts[@]}" --db "$d/h.db" >/dev/null 2>&1
"$T" bench compare 3 1 --db "$d/h.db" >"$d/cmp.out" 2>&1
ok $([ $? -eq 0 ] && grep -Eq '^  engine.kind +"local" -> "remote"' "$d/cmp.out" &&
     grep -Eq '^  target.ttft.p99 ' "$d/cmp.out" && ! grep -q '^  model.chat_template_sha256' "$d/cmp.out"; echo $?) \
  "bench compare local against llama-server: engine kind changed, same chat template, every target side by side"
diag "$(head -30 "$d/cmp.out")"
tap_done
