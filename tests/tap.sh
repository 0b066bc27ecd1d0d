# tap.sh: TAP helpers for shell tests (sourced).
tap_n=0; tap_failed=0
# ok STATUS NAME: one TAP line (newlines in NAME are printed as \n)
ok() {
  tap_n=$((tap_n+1)); local name=${2//$'\n'/\\n}
  if [ "$1" = 0 ]; then echo "ok $tap_n - $name"; else echo "not ok $tap_n - $name"; tap_failed=$((tap_failed+1)); fi
}
# check NAME CMD...: passes when CMD exits 0
check() { local name=$1; shift; if "$@" >/dev/null 2>&1; then ok 0 "$name"; else ok 1 "$name"; fi; }
# diag TEXT...: a TAP comment; every line of a multi-line TEXT is prefixed
# (an unprefixed line is a TAP error)
diag() { printf '%s\n' "$@" | sed 's/^/# /'; }
tap_done() { echo "1..$tap_n"; [ $tap_failed -eq 0 ]; }
