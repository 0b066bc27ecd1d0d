#!/bin/bash
# test_resume_chat: a chat reopened with -c skips its prefill (issue 39).
# 'tern chat' (headless: the real UI loop, engine and store) answers a
# ~1,200-token first turn and exits, leaving a KV entry in
# $XDG_DATA_HOME/tern/kvcache; 'tern chat -c' continues that session with a
# second turn, whose request row in the history database shows the prefix
# loaded from disk (cached_tokens), and whose reply (temperature 0) is the
# same text as the same two turns with --kv-disk 0 (no cache, cold
# prefill). A corrupted entry: the cold reply again, nothing reused, and one
# line on stderr when the chat ends.
# (TERN_BIN, TERN_SRC, TERN_SHARED from test_env)
. "$TERN_SRC/tests/tap.sh"
dir=$(mktemp -d /tmp/tern-resume-XXXXXX)
trap 'rm -rf "$dir"' EXIT
model=$("$TERN_SRC/packaging/fetch-model" --print-path)
ok $? "default model available"
export XDG_DATA_HOME=$dir/data XDG_CONFIG_HOME=$dir/config
long=$(head -c 5000 "$TERN_SHARED/texts/gpl-3.0.txt" | tr -s '\n\\{}' '    ')
first="{wait}Name one freedom this gives: $long\r{wait}"
# turn 1 in a new session; turn 2 continues it (-c) after a restart
chat() { # DB KVDISK KEYS [-c]
  "$TERN_BIN" chat -m "$model" -t 1 --size 80x24 --db "$1" --kv-disk "$2" --max-tokens 12 \
      --temp 0 --headless-frames 100000 --keys "$3" $4 > /dev/null 2>> "$dir/err"
}
last_req() { # DB: cached_tokens and the last reply's text
  python3 - "$1" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
r = c.execute("select cached_tokens, prompt_tokens from requests order by id desc limit 1").fetchone()
t = c.execute("select text from messages where role = 'assistant' order by id desc limit 1").fetchone()
print(f"{r[0]} {r[1]}\t{t[0]!r}")
PY
}
chat "$dir/a.db" 2G "$first"
ok $? "turn 1 answered"
n=$(ls "$XDG_DATA_HOME"/tern/kvcache/*.tkv 2>/dev/null | wc -l)
[ "$n" -ge 1 ]; ok $? "exit saved the session's KV ($n entries)"
chat "$dir/a.db" 2G '{wait}And another?\r{wait}' -c
ok $? "turn 2 after a restart (-c)"
warm=$(last_req "$dir/a.db")

chat "$dir/b.db" 0 "$first"
chat "$dir/b.db" 0 '{wait}And another?\r{wait}' -c
cold=$(last_req "$dir/b.db")
diag "warm: $warm"
diag "cold: $cold"
read -r wc wp <<< "${warm%%$'\t'*}"
read -r cc cp <<< "${cold%%$'\t'*}"
[ "$wc" -ge 1000 ] && [ "$cc" -eq 0 ] && [ "$wp" -eq "$cp" ]
ok $? "resumed: $wc of $wp prompt tokens from disk (cold: $cc)"
[ "${warm#*$'\t'}" = "${cold#*$'\t'}" ]; ok $? "the resumed reply is the cold reply"

# Corrupt every entry: ignored, the cold reply.
for f in "$XDG_DATA_HOME"/tern/kvcache/*.tkv; do
  python3 -c "import sys;p=sys.argv[1];d=bytearray(open(p,'rb').read());d[-999]^=4;open(p,'wb').write(d)" "$f"
done
cp "$dir/a.db" "$dir/c.db"
python3 - "$dir/c.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
m = c.execute("select max(id) from messages").fetchone()[0]
c.execute("delete from requests where message_id >= ?", (m - 1,))
c.execute("delete from messages where id >= ?", (m - 1,))  # drop turn 2
c.commit()
PY
: > "$dir/err"
chat "$dir/c.db" 2G '{wait}And another?\r{wait}' -c
bad=$(last_req "$dir/c.db")
n=$(grep -c "kv cache:" "$dir/err")
[ "$n" -eq 1 ] && grep -q "checksum mismatch" "$dir/err"
ok $? "corrupt entry: one line after exit: $(grep "kv cache:" "$dir/err")"
diag "corrupt: $bad"
read -r bc bp <<< "${bad%%$'\t'*}"
[ "$bc" -eq 0 ] && [ "${bad#*$'\t'}" = "${cold#*$'\t'}" ]
ok $? "corrupt entry: nothing reused, the cold reply"
tap_done
