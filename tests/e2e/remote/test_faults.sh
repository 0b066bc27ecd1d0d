#!/usr/bin/env bash
# test_faults: `tern run --url` against fault_server.py, a loopback server that
# misbehaves on purpose. Every case must end with a clear message and a
# non-zero exit (or the right text), quickly; nothing may hang (each run is
# bounded by timeout).
set -u
. "$TERN_SRC/tests/tap.sh"
T=$TERN_BIN
py=$TERN_SRC/tests/engine/remote/fault_server.py
out=$(mktemp -d)
python3 "$py" 0 >"$out/port" 2>"$out/server.log" &
spid=$!
trap 'kill $spid 2>/dev/null; rm -rf "$out"' EXIT
for _ in $(seq 50); do grep -q PORT "$out/port" 2>/dev/null && break; sleep 0.1; done
port=$(awk '/PORT/ {print $2}' "$out/port")
[ -n "$port" ] || { echo "Bail out! fault_server did not start: $(cat "$out/server.log")"; exit 1; }
U=http://127.0.0.1:$port

# run MODE [args...]: stdout in $out/o, stderr in $out/e, exit status in $rc
run() {
  local mode=$1; shift
  timeout 20 "$T" run --url "$U/$mode/v1" --no-history -p hi "$@" >"$out/o" 2>"$out/e"
  rc=$?
}
has() { grep -q -- "$1" "$out/$2"; }

run ok -v
ok $(( rc != 0 )) "ok: exit 0"
ok $(has 'Hello world!' o; echo $?) "ok: the streamed text"
ok $(has 'eval count: *3 token' e; echo $?) "ok: 3 tokens from usage"
ok $(has 'prompt eval count: *5 token(s) (2 reused' e; echo $?) "ok: prompt and cached tokens from usage"

run batch -v
ok $(has 'eval count: *3 token' e; echo $?) "batch: three tokens in one event counted as 3 (usage)"

run close
ok $(( rc == 0 )) "close mid-stream: non-zero exit"
ok $(has 'Hello world' o; echo $?) "close mid-stream: partial text kept"
ok $(has 'partial reply kept, marked interrupted' e; echo $?) "close mid-stream: says interrupted"

run eof
ok $(has 'closed the stream before its end' e; echo $?) "eof without finish: clear error"

t0=$(date +%s.%N)
run stall --read-timeout 1
t1=$(date +%s.%N)
ok $(has 'read timeout: no data' e; echo $?) "stall: read timeout error"
ok $(awk -v a="$t0" -v b="$t1" 'BEGIN {exit !(b - a < 5)}'; echo $?) "stall: ends within 5 s"

for code in 401 403 404 500; do
  run $code
  ok $(( rc == 0 )) "$code: non-zero exit"
  ok $(has "HTTP $code from .*the server says no ($code)" e; echo $?) "$code: status and the server's message"
done
run 429
ok $(has 'rejected: HTTP 429.*too many requests; retry after 7 s' e; echo $?) "429: rejected with Retry-After"

run malformed
ok $(has 'malformed stream' e; echo $?) "malformed SSE: clear error"
ok $(has 'Hel' o; echo $?) "malformed SSE: partial text kept"

# Connection refused: a port nothing listens on (bound and closed).
free_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
timeout 20 "$T" run --url "http://127.0.0.1:$free_port/v1" --no-history -p hi >"$out/o" 2>"$out/e"
rc=$?
ok $(( rc == 0 )) "refused: non-zero exit"
ok $(has "Couldn't connect to server" e; echo $?) "refused: says it cannot connect"
timeout 20 "$T" run --url "ftp://127.0.0.1/v1" --no-history -p hi >"$out/o" 2>"$out/e"
ok $(has 'must start with http:// or https://' e; echo $?) "bad scheme: refused at open"

run auth
ok $(has 'HTTP 401.*api-key' e; echo $?) "auth: no key -> 401 names --api-key"
run auth --api-key sekrit
ok $(has 'Hello world!' o; echo $?) "auth: --api-key sent as Bearer"
TERN_API_KEY=sekrit run auth
ok $(has 'Hello world!' o; echo $?) "auth: TERN_API_KEY sent as Bearer"
mkdir -p "$out/cfg/tern"
printf 'url = %s/auth/v1\napi-key = sekrit\n' "$U" >"$out/cfg/tern/tern.conf"
XDG_CONFIG_HOME=$out/cfg timeout 20 "$T" run --no-history -p hi >"$out/o" 2>"$out/e"
ok $(has 'Hello world!' o; echo $?) "config: url = and api-key = keys"
run ok --insecure
ok $(has 'WARNING: --insecure' e; echo $?) "--insecure warns loudly"

for s in vllm sglang llamacpp; do
  run replay-$s -v
  ok $(has 'Hello there!' o; echo $?) "$s stream fixture: text"
  ok $(has 'prompt eval count: *12 token(s) (8 reused' e; echo $?) "$s stream fixture: prompt 12, cached 8"
  ok $(has 'eval count: *3 token' e; echo $?) "$s stream fixture: 3 generated"
done
ok $(has 'prefill (server): *6.00 ms' e; echo $?) "llamacpp timings: server-side prefill 6 ms"

# TLS: a self-signed certificate is refused (system CA store), --insecure
# skips the check and says so.
if openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -days 1 \
     -keyout "$out/key.pem" -out "$out/cert.pem" >/dev/null 2>&1; then
  python3 "$py" 0 "$out/cert.pem" "$out/key.pem" >"$out/tport" 2>"$out/tls.log" &
  tpid=$!
  for _ in $(seq 50); do grep -q PORT "$out/tport" 2>/dev/null && break; sleep 0.1; done
  tport=$(awk '/PORT/ {print $2}' "$out/tport")
  timeout 20 "$T" run --url "https://127.0.0.1:$tport/ok/v1" --no-history -p hi >"$out/o" 2>"$out/e"
  ok $(grep -qi 'certificate' "$out/e"; echo $?) "TLS: a self-signed certificate is refused ($(head -c 120 "$out/e"))"
  timeout 20 "$T" run --url "https://127.0.0.1:$tport/ok/v1" --insecure --no-history -p hi >"$out/o" 2>"$out/e"
  ok $(has 'Hello world!' o; echo $?) "TLS: --insecure streams over HTTPS"
  kill $tpid 2>/dev/null
else
  ok 1 "TLS: openssl could not make a test certificate"
fi

# Several endpoints: bench spreads the requests and reports each.
timeout 60 "$T" bench --profile short --requests 8 --url "$U/ok/v1" --url "$U/batch/v1" \
  --balance round-robin >"$out/b" 2>"$out/be"
ok $? "bench over two endpoints: exit 0"
ok $(grep -q 'endpoint 0: 4 requests' "$out/b" && grep -q 'endpoint 1: 4 requests' "$out/b"; echo $?) \
  "bench round-robin: 4 + 4 requests, reported per endpoint"
ok $(grep -q 'KV n/a from this server' "$out/b"; echo $?) "bench: KV blocks n/a (not exported), not 0/0"
grep 'endpoint' "$out/b" | sed 's/^/# /'

# bench honours Retry-After: the two 429s are retried after 1 s, all complete.
t0=$(date +%s.%N)
timeout 60 "$T" bench --profile short --requests 4 --url "$U/429once/v1" >"$out/b" 2>"$out/be"
t1=$(date +%s.%N)
ok $(grep -q '4 requests in .*: stop 4' "$out/b"; echo $?) "bench: 429 + Retry-After retried, 4 of 4 completed"
ok $(awk -v a="$t0" -v b="$t1" 'BEGIN {exit !(b - a >= 1)}'; echo $?) "bench: waited the Retry-After second"

# The history keeps the partial reply of a broken stream, with its error.
db=$out/h.db
timeout 20 "$T" run --url "$U/close/v1" --db "$db" -p hi >/dev/null 2>&1
st=$(sqlite3 "$db" "select status from messages where role='assistant' order by id desc limit 1" 2>&1)
txt=$(sqlite3 "$db" "select text from messages where role='assistant' order by id desc limit 1" 2>&1)
diag "history: status '$st', text '$txt'"
ok $([ "$txt" = "Hello world" ] && [ "$st" = interrupted ]; echo $?) "history: partial reply kept, marked interrupted"
tap_done
