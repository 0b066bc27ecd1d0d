#!/usr/bin/env bash
# tern run through the engine API, end to end on the default model: greedy
# replies (raw and chat) equal the reference engine's (fixtures/run_expected.json,
# from make_run_fixture.py with llama-cpp-python), stdin prompt, stop strings
# (the reference reply cut before the stop string), --verbose timings on stderr
# only, --json (one object: reply, usage, phases, metrics), --trace JSON,
# refusals and usage errors.
. "${TERN_SRC:?}/tests/tap.sh"
tern=${TERN_BIN:?}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/cfg
fx=$TERN_SRC/tests/e2e/app/fixtures/run_expected.json
model=$("$TERN_SRC/packaging/fetch-model" --print-path)
if [ -z "$model" ] || [ ! -r "$model" ]; then echo "Bail out! default model unavailable"; exit 1; fi
export XDG_DATA_HOME=$tmp/data   # history of these runs goes to a throw-away database
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d[sys.argv[2]][sys.argv[3]], end="")' "$fx" "$1" "$2"; }
run() { "$tern" run -m "$model" -t 1 --temp 0 -n 12 "$@"; }

# Raw prompt: the reply is printed as generated, then a newline.
run --raw -p "$(field raw prompt)" > "$tmp/raw" 2> "$tmp/raw.err"; rc=$?
ok $rc "raw run exits 0"
printf '%s\n' "$(field raw reply)" > "$tmp/raw.want"
cmp -s "$tmp/raw" "$tmp/raw.want"; ok $? "raw greedy reply equals the reference's"
[ $? -eq 0 ] || diag "got: $(cat "$tmp/raw")" "want: $(cat "$tmp/raw.want")"

# Chat template; the reply ends on end-of-turn like the reference's.
run -p "$(field chat prompt)" > "$tmp/chat" 2>/dev/null; ok $? "chat run exits 0"
printf '%s\n' "$(field chat reply)" > "$tmp/chat.want"
cmp -s "$tmp/chat" "$tmp/chat.want"; ok $? "chat greedy reply equals the reference's"
[ $? -eq 0 ] || diag "got: $(cat "$tmp/chat")" "want: $(cat "$tmp/chat.want")"

# --json: one object with the reply (the same greedy text), usage, every
# phase and the request's metrics; nothing else on stdout.
run -p "$(field chat prompt)" --json > "$tmp/json" 2> "$tmp/json.err"; ok $? "--json run exits 0"
python3 - "$tmp/json" "$tmp/chat.want" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, f"{len(lines)} lines on stdout"
j = json.loads(lines[0])
want = open(sys.argv[2]).read()[:-1]  # printed with a final newline
assert j["reply"] == want, (j["reply"], want)
assert j["status"] in ("stop", "length") and j["finish_reason"] in ("stop", "length"), j["status"]
assert j["chat_template"] is True and j["max_tokens"] == 12 and j["backend"] and j["model"]
u, p, m = j["usage"], j["phases"], j["metrics"]
assert u["completion_tokens"] == m["generated_tokens"] >= 1 and u["prompt_tokens"] == m["prompt_tokens"] > 0
assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
for k in ("load_s", "tokenize_s", "queue_s", "prefill_s", "ttft_s", "tpot_s", "decode_s", "e2e_s", "total_s"):
    assert isinstance(p[k], (int, float)) and p[k] >= 0, (k, p[k])
assert p["ttft_s"] <= p["e2e_s"] <= p["total_s"] and abs(p["e2e_s"] - m["e2e_s"]) < 1e-9
assert len(m["itl_s"]) == m["generated_tokens"] - 1
print(f"# reply {j['reply']!r}, {u}, ttft {p['ttft_s']:.4f} s")
PY
ok $? "--json: the same reply, usage, phases and metrics in one object"
"$tern" run -m "$model" -t 1 --json -n 2000000 -p hi > "$tmp/jfail" 2>/dev/null; rc=$?
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["status"]=="rejected" and "too large" in j["error"] and "usage" not in j, j' "$tmp/jfail" && [ $rc = 1 ]
ok $? "--json of a refused request: exit $rc, one object with status and error"

# Prompt from stdin.
field chat prompt | run > "$tmp/stdin" 2>/dev/null; ok $? "stdin run exits 0"
cmp -s "$tmp/stdin" "$tmp/chat.want"; ok $? "prompt read from stdin gives the same reply"

# Stop string: the reference reply cut before its first occurrence.
run --raw -p "$(field raw prompt)" --stop "Public" > "$tmp/stop" 2>/dev/null; ok $? "stop run exits 0"
want=$(field raw reply | python3 -c 'import sys; s=sys.stdin.read(); print(s[:s.index("Public")], end="")')
printf '%s\n' "$want" > "$tmp/stop.want"
cmp -s "$tmp/stop" "$tmp/stop.want"; ok $? "stop string cuts the reply and is not printed"
[ $? -eq 0 ] || diag "got: $(cat "$tmp/stop")" "want: $want"

# --verbose: timings on stderr, stdout unchanged.
run -p "$(field chat prompt)" --verbose > "$tmp/v" 2> "$tmp/v.err"; ok $? "verbose run exits 0"
cmp -s "$tmp/v" "$tmp/chat.want"; ok $? "--verbose leaves stdout to the reply"
for k in "load duration:" "prompt eval count:" "prompt eval duration:" "time to first token:" \
         "eval count:" "time per token:" "eval rate:"; do
  grep -q "^$k" "$tmp/v.err"; ok $? "--verbose prints '$k'"
done

# --trace: Chrome trace-event JSON with request and step tracks.
run -p "$(field chat prompt)" --trace "$tmp/trace.json" > /dev/null 2>&1; ok $? "trace run exits 0"
python3 - "$tmp/trace.json" <<'PY'; ok $? "trace is JSON with queue, prefill, decode and step spans"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
names = {(e["tid"] == 0, e["name"]) for e in ev if e["ph"] == "X"}
need = {(True, "step"), (False, "queue"), (False, "prefill"), (False, "decode")}
sys.exit(0 if need <= names and all(e["dur"] >= 0 for e in ev if e["ph"] == "X") else 1)
PY

# History: each run is a session of its own (user turn, reply, phase figures);
# --no-history records nothing.
"$tern" history list --json > "$tmp/h1.json"; ok $? "history lists the runs"
python3 - "$tmp/h1.json" "$tmp/data/tern/history.db" "$(cat "$tmp/chat.want")" <<'PY'; ok $? "a chat run is stored: user turn, reply text, status and phase figures"
import json, sqlite3, sys
sessions = json.load(open(sys.argv[1]))
assert len(sessions) >= 6, len(sessions)
db = sqlite3.connect(sys.argv[2])
msg, req = "messages", "requests"
want = sys.argv[3]
rows = db.execute(f"select role, text from {msg}").fetchall()
assert any(r[0] == "assistant" and r[1] == want for r in rows), rows[:4]
cols = [c[1] for c in db.execute(f"pragma table_info({req})")]
figs = [dict(zip(cols, r)) for r in db.execute(f"select * from {req}")]
assert figs and all(f["generated_tokens"] > 0 and f["ttft_s"] > 0 for f in figs), figs[:1]
PY
"$tern" history list > "$tmp/hl"
m=$(basename "$model" .gguf)
grep -q "  $m  " "$tmp/hl" && ! grep -q "$m\.g" "$tmp/hl"
ok $? "history list: the model column shows '$m' whole, not cut inside '.gguf'"
n_before=$("$tern" history list --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
run --no-history -p hi > /dev/null 2>&1; ok $? "--no-history run exits 0"
n_after=$("$tern" history list --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
[ "$n_before" = "$n_after" ]; ok $? "--no-history records nothing ($n_before = $n_after)"

# Refusals and usage errors.
"$tern" run -m "$model" -t 1 --ctx 32 -n 100 -p "$(field chat prompt)" > /dev/null 2> "$tmp/big"; rc=$?
[ $rc -eq 1 ] && grep -q "too large" "$tmp/big"; ok $? "oversized request: exit 1 with the reason (rc $rc)"
"$tern" run -m "$tmp/none.gguf" -p x > /dev/null 2> "$tmp/nomodel"; rc=$?
[ $rc -eq 1 ] && grep -q "none.gguf" "$tmp/nomodel"; ok $? "missing model file: exit 1 naming it (rc $rc)"
"$tern" run -m "$model" --temp abc -p x > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ]; ok $? "bad option value: exit 2 (rc $rc)"
"$tern" run -m "$model" --raw --system s -p x > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ]; ok $? "--system with --raw: exit 2 (rc $rc)"
tap_done
