#!/usr/bin/env bash
# bench_lookup: n-gram lookup (--lookup) against plain decoding on an editing
# workload, interleaved (run by hand; figures in docs/PERFORMANCE.md section 7).
# The workload: rewrite a 1.2 KB passage of the GPL word for word with one
# word replaced, greedy, at most N tokens (env N, default 400). The small
# models copy the passage for about 60 tokens and then repeat a line, which
# lookup guesses easily: N=64 measures the copying alone.
# WORKLOAD=code: rename a function in a 1.5 KB Python file and output the
# whole file (lookup_edit.py.txt, written for this bench, so no model has
# it memorised); N defaults to 300 tokens there, about one copy of the file.
#   [WORKLOAD=prose|code] tests/e2e/bench/bench_lookup.sh [MODEL] [ROUNDS]
# MODEL defaults to the default model; make_widened.py makes a 1B-class one.
set -eu
src=$(cd "$(dirname "$0")/../../.." && pwd)
T=${TERN_BIN:-$src/build/app/tern}
m=${1:-$("$src/packaging/fetch-model" --print-path)}; rounds=${2:-3}
if [ "${WORKLOAD:-prose}" = code ]; then
  N=${N:-300}
  P="Rename the function load_orders to read_orders in the following Python code. Output the whole code, unchanged otherwise.

\`\`\`python
$(cat "$src/tests/e2e/bench/lookup_edit.py.txt")
\`\`\`"
else
  P="Rewrite the following passage exactly, word for word, but replace the word \"software\" with \"code\":

$(sed -n 9,30p "$src/../shared/texts/gpl-3.0.txt")"
fi
rate() { # threads [--lookup]
  "$T" run -m "$m" -t "$1" -n "${N:-400}" --temp 0 --no-history --json ${2:-} -p "$P" 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin); p=j["phases"]; m=j.get("metrics",{})
print("%.1f" % p["gen_tok_s"], j["usage"]["completion_tokens"], m.get("spec_acceptance_rate", ""))'
}
echo "# ${WORKLOAD:-prose} $(date -u +%FT%TZ) $(uptime | sed 's/.*load/load/') $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) $(basename "$m")"
for th in 1 2; do
  for r in $(seq "$rounds"); do
    echo "threads $th round $r: plain $(rate "$th") | lookup $(rate "$th" --lookup)"
  done
done
