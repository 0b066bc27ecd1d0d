#!/bin/bash
# test_safe_text: untrusted text is stored as it came and escaped where it
# leaves. A history holding ESC/OSC/BEL sequences, C1 controls and invalid
# UTF-8 (written with Python's sqlite3, as a model's or a paste's bytes
# would be) is listed, shown and exported to a pipe without one control
# byte reaching it; every --json output passes a strict UTF-8 JSON decoder;
# search finds Chinese and Japanese text and marks matches without
# corrupting code; the chat (headless) draws ESC as ␛ and bad bytes as U+FFFD.
set -u
. "$TERN_SRC/tests/tap.sh"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export XDG_DATA_HOME="$TMP/data" XDG_CONFIG_HOME="$TMP/config"
db=$TMP/h.db
"$TERN_BIN" history --db "$db" list >/dev/null 2>&1
ok $? "an empty history is created"
python3 - "$db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
t = 1700000000.0
c.execute("INSERT INTO sessions(id, title, model, created_at, updated_at) VALUES "
          "(1, CAST(X'6576696C1B5D303B70776E65640720C2' AS TEXT), 'm.gguf', ?, ?)", (t, t))
# text: ESC [31m red, OSC title, BEL, C1 CSI (U+009B), an invalid byte 0xFF, a lone 0xC3
c.execute("INSERT INTO messages(session_id, role, text, created_at, updated_at) VALUES "
          "(1, 'user', CAST(X'1B5B33316D7265641B5B306D201B5D323B68690720C29B33316D20FF7A20C3' AS TEXT), ?, ?)", (t, t))
c.execute("INSERT INTO messages(session_id, role, text, created_at, updated_at) VALUES "
          "(1, 'assistant', ?, ?, ?)", ("机器学习是人工智能的一个分支。東京は日本の首都です。", t + 1, t + 1))
c.execute("INSERT INTO messages(session_id, role, text, created_at, updated_at) VALUES "
          "(1, 'assistant', ?, ?, ?)", ("def power(a, b):\n    return a**b  # exponent", t + 2, t + 2))
c.commit()
PY
ok $? "rows with control sequences and invalid UTF-8 written"

noctl() { # no C0 control except newline/tab, no C1, valid UTF-8
    python3 -c '
import sys
b = open(sys.argv[1], "rb").read()
s = b.decode("utf-8", errors="strict")
bad = [c for c in s if (ord(c) < 32 and c not in "\n\t") or ord(c) == 127 or 0x80 <= ord(c) < 0xA0]
sys.exit(1 if bad else 0)' "$1"
}
"$TERN_BIN" history --db "$db" list >"$TMP/o" 2>&1; noctl "$TMP/o"
ok $? "history list: no control byte, valid UTF-8 ($(head -c 200 "$TMP/o" | tail -1))"
grep -q 'evil\\x1b\]0;pwned\\x07' "$TMP/o"; ok $? "the title's OSC shows as visible escapes"
"$TERN_BIN" history --db "$db" show 1 >"$TMP/o" 2>&1; noctl "$TMP/o"
ok $? "history show: no control byte, valid UTF-8"
grep -q '\\x1b\[31mred' "$TMP/o" && grep -q '\\u009b31m' "$TMP/o" && grep -q 'z �' "$TMP/o"
ok $? "ESC, C1 CSI and invalid bytes shown as \\x1b, \\u009b and U+FFFD"
"$TERN_BIN" history --db "$db" export 1 --markdown >"$TMP/o" 2>&1; noctl "$TMP/o"
ok $? "markdown export: no control byte, valid UTF-8"
for cmd in "list --json" "show 1 --json" "export 1 --json" "export --all --json" "search --json red" "search --json 机器"; do
    "$TERN_BIN" history --db "$db" $cmd >"$TMP/j" 2>"$TMP/e"
    python3 -c 'import json,sys; json.loads(open(sys.argv[1],"rb").read().decode("utf-8","strict"))' "$TMP/j"
    ok $? "history $cmd: strict UTF-8 JSON"
done
python3 - "$TMP/j" <<'PY'
import json, sys
# the stored text comes back as stored where valid; the bad bytes as U+FFFD
h = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
assert len(h) == 1 and "**机器**" in h[0]["snippet"], h
t, (a, b) = h[0]["text"], h[0]["highlights"][0]
assert t.encode()[a:b].decode() == "机器", (t, a, b)
PY
ok $? "search finds Chinese (机器): marked **机器**, with its byte range in the plain text"
"$TERN_BIN" history --db "$db" search 東京 >"$TMP/o"; grep -q '\*\*東京\*\*は日本の首都' "$TMP/o"
ok $? "search finds Japanese (東京)"
"$TERN_BIN" history --db "$db" search --json power >"$TMP/j"
python3 - "$TMP/j" <<'PY'
import json, sys
h = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
assert len(h) == 1 and "a**b" in h[0]["text"], h
t = h[0]["text"].encode()
assert [t[a:b].decode() for a, b in h[0]["highlights"]] == ["power"], h
PY
ok $? "a match in code: the plain text keeps a**b, the range marks only the match"
"$TERN_BIN" history --db "$db" search 'a**b' >"$TMP/o" 2>&1; noctl "$TMP/o"
ok $? "search output to a pipe has no control bytes"

MODEL=$("$TERN_SRC/packaging/fetch-model" --print-path 2>/dev/null)
if [ -n "$MODEL" ] && [ -r "$MODEL" ]; then
    "$TERN_BIN" chat -c -m "$MODEL" --db "$db" --size 100x30 --headless-frames 300 --keys '{wait}' >"$TMP/o" 2>/dev/null
    noctl "$TMP/o"; ok $? "the chat screen holds no control byte"
    grep -q '␛\[31mred␛\[0m' "$TMP/o" && grep -q 'z �' "$TMP/o"
    ok $? "the chat draws ESC as ␛ and invalid bytes as U+FFFD"
    sed 's/^/  |/' "$TMP/o" | head -12 | while IFS= read -r l; do diag "$l"; done
fi
python3 - "$db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.text_factory = bytes
t = c.execute("SELECT text FROM messages WHERE id = 1").fetchone()[0]
assert t == bytes.fromhex("1B5B33316D7265641B5B306D201B5D323B68690720C29B33316D20FF7A20C3"), t
PY
ok $? "the stored text is unchanged"
tap_done
