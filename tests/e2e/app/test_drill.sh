#!/usr/bin/env bash
# test_drill: every failure drill of `tern bench --drill` (issue 37) runs on
# loopback with its own tern serve replicas and reports: no request lost,
# a time to fall back where the route moved requests, a time to recover,
# every request in the history with the right status. Bounded: 4 requests
# per drill, about 20 s in all.
set -u
. "$TERN_SRC/tests/tap.sh"
T=$TERN_BIN
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
model=$("$TERN_SRC/packaging/fetch-model" --print-path 2>"$out/fetch") ||
  { echo "Bail out! no default model: $(tail -1 "$out/fetch")"; exit 1; }
"$T" bench -m "$model" --drill no-such >/dev/null 2>"$out/e"
ok $(grep -q "'no-such' is not a drill" "$out/e"; echo $?) "--drill: an unknown name is refused"
timeout 240 "$T" bench -m "$model" --drill all --requests 4 --db "$out/h.db" --json "$out/d.json" \
  >"$out/d.txt" 2>"$out/d.err"
rc=$?
diag "$(cat "$out/d.txt")"
ok $rc "bench --drill all exits 0 (nothing lost, every history row right)"
while IFS= read -r line; do
  case $line in
    "PASS "*) ok 0 "${line#PASS }" ;;
    "FAIL "*) ok 1 "${line#FAIL }" ;;
  esac
done < <(python3 - "$out/d.json" <<'PY' 2>&1 || echo "FAIL the drill report is unreadable"
import json, sys
ds = {d["drill"]: d for d in json.load(open(sys.argv[1]))}
want = ["bad-model", "invalid-config", "replica-killed", "queue-saturation",
        "stalled-dependency", "client-disconnect"]
n = 0
def ok(c, name):
    global n
    print(("PASS " if c else "FAIL ") + name)
for w in want:
    d = ds.get(w)
    ok(d is not None and d["lost"] == 0 and d["history_ok"] and d["history_rows"] == d["requests"],
       "%s: reported, 0 lost, %s/%s history rows with the right status" %
       (w, d and d["history_rows"], d and d["requests"]))
    if d and w != "client-disconnect":
        ok(d["fallbacks"] > 0 and d["time_to_fall_back_s"] >= 0, "%s: requests fell back (%d, %.3f s)" %
           (w, d["fallbacks"], d["time_to_fall_back_s"]))
    ok(d is not None and d["time_to_recover_s"] is not None and d["time_to_recover_s"] > 0,
       "%s: time to recover %s s" % (w, d and d["time_to_recover_s"]))
d = ds.get("stalled-dependency")
ok(d and d["time_to_fall_back_s"] >= 1.0, "stalled-dependency: moved after the 1 s TTFT deadline")
d = ds.get("client-disconnect")
ok(d and d["cancelled_on_purpose"] == 2 and "counted 2 client disconnects" in d["note"],
   "client-disconnect: the server counted each closed stream (%s)" % (d and d["note"]))
PY
)
tap_done
