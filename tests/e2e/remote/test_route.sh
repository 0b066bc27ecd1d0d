#!/usr/bin/env bash
# test_route: fallback routes (engine/route, issue 37) on loopback, with real
# servers: fault_server.py (429 and 500 on purpose) and three tern serve
# instances on the default model: two replicas A and B, and R, a serve
# instance whose engine is the route A,B (a serve instance that falls back to
# a replica). Checked: a request moves on 429 and 500 (bench), on a stalled
# replica (A stopped with SIGSTOP: R's --route-ttft moves it) and on a killed
# one (A killed with SIGKILL: connection refused); no request is lost or
# duplicated (each server's own count of requests), the fallback span is in
# R's trace and tern:fallback_total in R's /metrics. Bounded: a handful of
# short requests, every wait capped.
set -u
. "$TERN_SRC/tests/tap.sh"
T=$TERN_BIN
out=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -CONT $p 2>/dev/null; kill $p 2>/dev/null; done; rm -rf "$out"' EXIT
model=$("$TERN_SRC/packaging/fetch-model" --print-path 2>"$out/fetch") ||
  { echo "Bail out! no default model: $(tail -1 "$out/fetch")"; exit 1; }
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# serve NAME PORT ARGS...: starts tern serve, waits until ready (30 s at most)
serve() {
  local name=$1 port=$2; shift 2
  local hist=(--no-history)
  [ "$name" = R ] && hist=(--db "$out/r.db")
  "$T" serve -m "$model" --port "$port" --threads 1 "${hist[@]}" --access-log "$out/$name.access" \
    "$@" >"$out/$name.log" 2>&1 &
  pids+=($!)
  eval "pid_$name=$!"
  for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "Bail out! tern serve $name not ready in 30 s: $(tail -2 "$out/$name.log" | tr '\n' ' ')"; exit 1
}
# submitted PORT: the requests a tern serve's engine took (warm-up included)
submitted() {
  curl -sf "http://127.0.0.1:$1/metrics" | awk '/^tern:engine_submitted_requests/ {print $2+0}'
}
chat() { # chat PORT: one short greedy chat request; prints the HTTP status
  curl -s -o "$out/chat.json" -w '%{http_code}' -m 30 "http://127.0.0.1:$1/v1/chat/completions" \
    -H 'Content-Type: application/json' \
    -d '{"messages":[{"role":"user","content":"Say hi."}],"max_tokens":4,"temperature":0}'
}

# --- the route's text form --------------------------------------------------------
"$T" bench --profile short --route "local,ftp://x" >/dev/null 2>"$out/e1"
ok $(grep -q "neither 'local' nor an http" "$out/e1"; echo $?) "--route: a bad target is named"
"$T" bench --profile short --route "local,,http://a" >/dev/null 2>"$out/e2"
ok $(grep -q "empty target" "$out/e2"; echo $?) "--route: an empty target is refused"

# --- 429 and 500 from a managed API stand-in: bench moves on, nothing lost ------------
python3 "$TERN_SRC/tests/engine/remote/fault_server.py" 0 >"$out/fs.out" 2>"$out/fs.err" &
pids+=($!)
for _ in $(seq 50); do [ -s "$out/fs.out" ] && break; sleep 0.1; done
fp=$(awk '{print $2; exit}' "$out/fs.out")
F=http://127.0.0.1:$fp
timeout 60 "$T" bench --profile short --requests 4 --concurrency 2 \
  --route "$F/429/v1,$F/500/v1,$F/ok/v1" --requests-out "$out/b429.jsonl" >"$out/b429" 2>&1
rc=$?
n429=$(curl -sf "$F/429/count" | python3 -c 'import json,sys; print(json.load(sys.stdin)["posts"])')
n500=$(curl -sf "$F/500/count" | python3 -c 'import json,sys; print(json.load(sys.stdin)["posts"])')
nok=$(curl -sf "$F/ok/count" | python3 -c 'import json,sys; print(json.load(sys.stdin)["posts"])')
diag "posts: 429 $n429, 500 $n500, ok $nok" "$(grep 'route:' "$out/b429")"
python3 - "$out/b429.jsonl" "$F" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
F = sys.argv[2]
good = len(rows) == 4 and all(
    r["status"] == "stop" and r["served_by"] == F + "/ok/v1"
    and [h["reason"] for h in r["fallbacks"]] == ["rate-limited", "error"] for r in rows)
sys.exit(0 if good else 1)
EOF
ok $? "bench --route 429,500,ok: every request served by the third, after rate-limited and error moves"
ok $([ $rc = 0 ] && [ "$n429" = "$n500" ] && [ "$n500" = "$nok" ]; echo $?) \
  "no request lost or duplicated: each target saw each request once ($n429/$n500/$nok)"

# --- tern run: the move in -v, --json and its history row
"$T" run -m "$model" --threads 1 --db "$out/run.db" --route "$F/429/v1,local" -p "Say hi." -n 6 \
  --temp 0 -v >"$out/run.out" 2>"$out/run.err"
ok $(grep -q "^fallback: *$F/429/v1 -> local (rate-limited" "$out/run.err" &&
     grep -q "^served by: *local" "$out/run.err"; echo $?) "run --route -v: the fallback line and where it ran"
"$T" run -m "$model" --threads 1 --no-history --route "$F/429/v1,local" -p "Say hi." -n 6 --temp 0 \
  --json >"$out/run.json" 2>/dev/null
python3 - "$out/run.json" "$out/run.db" <<'EOF'
import json, sqlite3, sys
j = json.load(open(sys.argv[1]))
rows = sqlite3.connect(sys.argv[2]).execute("SELECT status, route FROM requests").fetchall()
ok = j["route"]["served_by"] == "local" and j["route"]["fallbacks"][0]["reason"] == "rate-limited"
ok = ok and len(rows) == 1 and json.loads(rows[0][1])["served_by"] == "local"
sys.exit(0 if ok else 1)
EOF
ok $? "run --route: --json has the route, the history row too"

# --- the config file's route = ... (and route-ttft), as the command line's
printf 'route = %s/429/v1, %s/ok/v1\nroute-ttft = 2000\n' "$F" "$F" >"$out/cfg"
timeout 60 "$T" bench --config "$out/cfg" --profile short --requests 2 >"$out/bcfg" 2>&1
ok $(grep -q "route: 2 of 2 requests moved.*/ok/v1 2" "$out/bcfg"; echo $?) \
  "config 'route = ...': bench goes through the route"

# --- the TUI (tern chat --route), off-screen: the reply, and its history row with the move
XDG_DATA_HOME=$out timeout 60 "$T" chat -m "$model" --route "$F/500/v1,$F/ok/v1" --db "$out/chat.db" \
  --size 140x50 --headless-frames 500 --keys '{wait}hi\r{wait}\eOR{wait}' >"$out/chat.screen" 2>&1
ok $(grep -q "fallback: $F/500/v1 -> $F/ok/v1 (error" "$out/chat.screen"; echo $?) \
  "chat --route: the F3 timeline shows the move and its reason"
python3 - "$out/chat.db" <<'EOF'
import json, sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute("SELECT status, route FROM requests").fetchall()
print("# chat history:", rows)
ok = len(rows) == 1 and rows[0][1] and [h["reason"] for h in json.loads(rows[0][1])["fallbacks"]] == ["error"]
sys.exit(0 if ok and json.loads(rows[0][1])["served_by"].endswith("/ok/v1") else 1)
EOF
ok $? "chat --route: the TUI's reply came from the second target, its history row has the move"

# --- a serve instance falling back to a replica -------------------------------------
pa=$(freeport); pb=$(freeport); pr=$(freeport)
serve A "$pa"
serve B "$pb"
serve R "$pr" --route "http://127.0.0.1:$pa/v1,http://127.0.0.1:$pb/v1" --route-ttft 1500 \
  --trace "$out/r.trace.json"
code=$(chat "$pr")
ok $([ "$code" = 200 ]; echo $?) "serve --route: a request through the route answers ($code)"
b0=$(submitted "$pb")

# stalled: A stopped (its socket still accepts): no first token in 1.5 s moves it
kill -STOP "$pid_A"
t0=$(date +%s.%N)
code=$(chat "$pr")
t1=$(date +%s.%N)
kill -CONT "$pid_A"
b1=$(submitted "$pb")
diag "stalled replica: HTTP $code in $(python3 -c "print('%.2f' % ($t1 - $t0))") s; B took $((b1 - b0))"
ok $([ "$code" = 200 ] && [ $((b1 - b0)) = 1 ]; echo $?) \
  "stalled replica: the request moved to B after the TTFT deadline, B saw it once"

# killed: A gone; R's connection is refused: moves at once
kill -KILL "$pid_A"
wait "$pid_A" 2>/dev/null
code=$(chat "$pr")
b2=$(submitted "$pb")
ok $([ "$code" = 200 ] && [ $((b2 - b1)) = 1 ]; echo $?) \
  "killed replica: the request moved to B (HTTP $code), B saw it once"

# a replica down when the route opened is tried again (every 3 s) and then used
pc=$(freeport); p2=$(freeport)
serve R2 "$p2" --route "http://127.0.0.1:$pc/v1,http://127.0.0.1:$pb/v1"
code=$(chat "$p2")
bb=$(submitted "$pb")
serve C "$pc"
sleep 4
c0=$(submitted "$pc")
code2=$(chat "$p2")
ok $([ "$code" = 200 ] && [ "$code2" = 200 ] && [ $(( $(submitted "$pc") - c0 )) = 1 ] &&
     [ "$(submitted "$pb")" = "$bb" ]; echo $?) \
  "a replica started after the route opened takes requests once it is up (reopened)"
kill "$pid_R2" "$pid_C"

curl -sf "http://127.0.0.1:$pr/metrics" >"$out/r.metrics"
diag "$(grep '^tern:fallback_total' "$out/r.metrics")"
ok $(grep -q "^tern:fallback_total{.*from=\"http://127.0.0.1:$pa/v1\",to=\"http://127.0.0.1:$pb/v1\",reason=\"ttft-deadline\"} [1-9]" "$out/r.metrics"; echo $?) \
  "/metrics: tern:fallback_total counts the TTFT move"
ok $(grep -q "^tern:fallback_total{.*reason=\"error\"} [1-9]" "$out/r.metrics"; echo $?) \
  "/metrics: tern:fallback_total counts the move off the killed replica"
kill -TERM "$pid_R"
wait "$pid_R" 2>/dev/null
python3 - "$out/r.trace.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
fb = [e for e in t["traceEvents"] if e.get("name") == "fallback"]
# (a loaded machine may add a TTFT move of the first request: at least these two)
sys.exit(0 if len(fb) >= 2 and {e["args"]["reason"] for e in fb} == {"ttft-deadline", "error"} else 1)
EOF
ok $? "trace: a fallback span per move, with its reason"
python3 - "$out/r.db" <<'EOF'
import json, sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute("SELECT status, route FROM requests").fetchall()
print("# history rows:", [(s, [h["reason"] for h in json.loads(r)["fallbacks"]] if r else None) for s, r in rows])
reasons = [h["reason"] for s, r in rows if r for h in json.loads(r)["fallbacks"]]
ok = len(rows) >= 3 and all(r for s, r in rows) and all(s in ("stop", "length") for s, r in rows)
sys.exit(0 if ok and set(reasons) == {"error", "ttft-deadline"} else 1)
EOF
ok $? "history: every request of R has a row with its status and its route (the moves and reasons)"
tap_done
