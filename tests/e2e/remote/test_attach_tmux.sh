#!/usr/bin/env bash
# test_attach_tmux: `tern chat --attach` in a real terminal (tmux) against a
# tern serve with two tenants: the instruments list the server's tenants
# (requests, median TTFT, tokens) and its recent requests (tenant, route,
# status, queue / TTFT / E2E, prompt/generated tokens) as /v1/tern/status
# has them, newest first, and the screen stays aligned.
set -u
. "$TERN_SRC/tests/tap.sh"
model=$("$TERN_SRC/packaging/fetch-model" --print-path 2>/dev/null)
[ -n "$model" ] && [ -r "$model" ] || { echo "Bail out! no default model"; exit 1; }
command -v tmux >/dev/null || { echo "Bail out! tmux not installed"; exit 1; }
out=$(mktemp -d)
SOCK="tern-attach-$$"
spid=
trap 'tmux -L "$SOCK" kill-server 2>/dev/null; [ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$out"' EXIT
printf '%s\n' 'key-editor-0123456789 tenant=editor priority=interactive' \
  'key-batch-0123456789 tenant=nightly priority=batch' >"$out/keys"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$TERN_BIN" serve -m "$model" --port "$port" --threads 1 --no-history --api-key-file "$out/keys" \
  --access-log "$out/access.log" >"$out/serve.log" 2>&1 &
spid=$!
B=http://127.0.0.1:$port
for _ in $(seq 300); do curl -sf "$B/ready" >/dev/null 2>&1 && break; sleep 0.1; done
curl -sf "$B/ready" >/dev/null || { echo "Bail out! tern serve not ready: $(tail -2 "$out/serve.log")"; exit 1; }
req() { # KEY ROUTE BODY
  curl -sf -H "Authorization: Bearer $1" -H 'Content-Type: application/json' "$B/v1/$2" -d "$3" >/dev/null
}
for i in 1 2 3; do req key-nightly-unused completions '{}' 2>/dev/null; done # 401s: not in recent
for i in 1 2 3; do req key-batch-0123456789 completions "{\"prompt\":\"Count to $i:\",\"max_tokens\":4}"; done
req key-editor-0123456789 chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3}'
req key-editor-0123456789 chat/completions '{"messages":[{"role":"user","content":"Bye"}],"max_tokens":5}'
curl -sf -H "Authorization: Bearer key-editor-0123456789" "$B/v1/tern/status" >"$out/status.json"
python3 - "$out/status.json" >"$out/want" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["recent"]
print(len(r), r[0]["tenant"], r[0]["prompt_tokens"], r[0]["generated_tokens"],
      sum(1 for x in r if x["tenant"] == "nightly"), sum(1 for x in r if x["tenant"] == "editor"))
PY
read -r n_recent t0 p0 g0 n_night n_edit <"$out/want"
diag "status: $n_recent recent, newest $t0 $p0/$g0; nightly $n_night, editor $n_edit"
. "$TERN_SRC/tests/e2e/ui/tmux_lib.sh"
export XDG_DATA_HOME="$out/data" XDG_CONFIG_HOME="$out/config"
T new-session -d -x 120 -y 44 -s chat \
  "env TERM=xterm-256color LANG=C.UTF-8 '$TERN_BIN' chat --attach='$B' --api-key key-editor-0123456789; echo TERN-EXITED rc=\$?; sleep 600"
T set-option -t chat -g status off >/dev/null
wait_for 'server recent' 30
ok $? "attach: the instruments show the server's recent requests"
scr=$(cap)
grep -Eq "│ *nightly +$n_night req +[0-9]+ms +[0-9.k]+ tok *│" <<<"$scr"
ok $? "attach: tenant 'nightly' with its $n_night requests, median TTFT and tokens"
grep -Eq "│ *editor +$n_edit req +[0-9]+ms +[0-9.k]+ tok *│" <<<"$scr"
ok $? "attach: tenant 'editor' with its $n_edit requests"
first=$(grep -A2 'server recent' <<<"$scr" | tail -1)
grep -Eq "│$t0 +(chat|cmpl) +(stop|len) +[0-9]+ +[0-9]+ $p0/$g0 *│" <<<"$first"
ok $? "attach: the newest recent row is the server's newest ($t0, $p0/$g0 tokens): $first"
rows=$(sed -n '/server recent/,/└/p' <<<"$scr" | grep -Ec '│ *(editor|nightly) +(chat|cmpl) ')
[ "$rows" -eq "$n_recent" ] || [ "$rows" -eq 8 ]
ok $? "attach: $rows recent rows for the server's $n_recent (at most 8)"
cap | python3 "$TERN_SRC/tests/e2e/ui/check_screen.py" 120
ok $? "attach: 120x44 screen aligned"
if [ $tap_failed -ne 0 ]; then cap | sed 's/^/# |/'; fi
tap_done
