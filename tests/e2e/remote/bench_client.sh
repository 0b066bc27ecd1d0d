#!/usr/bin/env bash
# bench_client: the remote engine's own CPU per streamed token (issue 14's
# "the client must not be the bottleneck"). A loopback fault_server in mode
# `fast` streams FAST_TOKENS one-token events per request, each its own chunk;
# `tern bench --profile short --url` runs N requests at concurrency C on the
# one worker thread. CPU per token = (user+sys of the N-request run - that of a
# 1-request run, which holds start-up and prompt cutting) / tokens streamed.
#   tests/e2e/remote/bench_client.sh [BUILD_DIR] [N] [C]
set -euo pipefail
here=$(cd "$(dirname "$0")/../../.." && pwd)
build=${1:-$here/build}; n=${2:-256}; c=${3:-256}
export FAST_TOKENS=${FAST_TOKENS:-128}
T=$build/app/tern
out=$(mktemp -d); trap 'kill $srv 2>/dev/null; rm -rf "$out"' EXIT
python3 "$here/tests/engine/remote/fault_server.py" 0 >"$out/port" 2>"$out/log" & srv=$!
for _ in $(seq 50); do grep -q PORT "$out/port" 2>/dev/null && break; sleep 0.1; done
port=$(awk '/PORT/ {print $2}' "$out/port")
U=http://127.0.0.1:$port/fast/v1
run() {   # requests concurrency -> "user+sys wall maxrss_kib"
  /usr/bin/time -f "%U %S %e %M" "$T" bench --profile short --requests "$1" --concurrency "$2" \
    --url "$U" >"$out/b$1" 2>"$out/t$1" || { cat "$out/t$1" >&2; exit 1; }
  tail -1 "$out/t$1" | awk '{print $1 + $2, $3, $4}'
}
# How the N requests ended: at bench's event limit (16 undrained events) a
# burst the consumer has not drained yet pauses the transfer (backpressure);
# only a consumer that reads nothing for REMOTE_STALL_S ends consumer-stalled.
read -r c1 w1 m1 < <(run 1 1)
read -r cn wn mn < <(run "$n" "$c")
gen=$(grep -o "generated [0-9]*" "$out/b$n" | awk '{s += $2} END {print s + 0}')
python3 - "$n" "$c" "$FAST_TOKENS" "$c1" "$cn" "$wn" "$mn" "$gen" <<'PY'
import sys
n, c, k = map(int, sys.argv[1:4]); c1, cn, wn, mn = map(float, sys.argv[4:8]); gen = int(sys.argv[8])
tok = gen * (n - 1) / n   # tokens received, less the 1-request run's share
print("requests=%d concurrency=%d tokens/request=%d wall=%.2fs client_cpu=%.3fs (1-request run %.3fs)"
      % (n, c, k, wn, cn, c1))
print("client CPU per token: %.1f us; aggregate stream rate %.0f tok/s; max RSS %.1f MiB"
      % ((cn - c1) / tok * 1e6, gen / wn, mn / 1024))
PY
grep -h "requests in" "$out/b$n" | sed "s/^ */ended: /"
