#!/bin/bash
# test_markdown: replies people can read and reuse. A stored reply in
# Markdown is rendered in the real `tern chat` (md4c): headings, bold and
# italic (checked as terminal attributes in tmux), inline code, nested
# lists, numbered lists, a quote, a fenced code block with its language
# (its ** kept), a table with padded columns, a rule, a right margin;
# Ctrl-Y copies the reply and Alt-Y its code block through OSC 52 (tmux's
# clipboard buffer receives them); Ctrl-R regenerates the reply (the old one
# leaves the history too); Alt-E takes the last message back for editing.
set -u
. "$TERN_SRC/tests/tap.sh"
. "$TERN_SRC/tests/e2e/ui/tmux_lib.sh"
tmux_setup md
db=$TMP/h.db
"$TERN_BIN" history --db "$db" list >/dev/null
python3 - "$db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1]); t = 1700000000.0
c.execute("INSERT INTO sessions(id,title,model,created_at,updated_at) VALUES (1,'md','m',?,?)", (t, t))
c.execute("INSERT INTO messages(session_id,role,text,created_at,updated_at) VALUES (1,'user','Show markdown',?,?)", (t, t))
md = """# Title here

Some **bold** and *italic* text with `inline code` and a [link](http://x.y).

## Steps

- first item
- second item with **strong**
  - nested item
1. one
2. two

> a quoted line
> that continues

```python
def f(a, b):
    return a**b
```

| name | value |
|------|-------|
| alpha | 1 |
| beta | 22 |

---
The end."""
c.execute("INSERT INTO messages(session_id,role,text,created_at,updated_at) VALUES (1,'assistant',?,?,?)", (md, t + 1, t + 1))
c.commit()
PY
"$TERN_BIN" chat -c -m "$MODEL" --db "$db" --size 100x45 --headless-frames 200 --keys '{wait}\x1bOQ' >"$TMP/o" 2>/dev/null
sed 's/^/  |/' "$TMP/o" | head -34 | while IFS= read -r l; do diag "$l"; done
has() { grep -Eq -- "$1" "$TMP/o"; }
has '│  Title here +│' && ! has '# Title'; ok $? "a heading without its #"
has 'Some bold and italic text with inline code and a link\.' && ! has '\*\*bold'
ok $? "bold, italic, inline code and a link without their markers"
has '│  • first item' && has '│    • nested item' && has '│  1\. one' && has '│  2\. two'
ok $? "bullets, a nested list and a numbered list"
has '│  │ a quoted line that continues'; ok $? "a block quote with its bar"
has '│  ┌─ python ─+ +│' && has '│┊ +return a\*\*b'; ok $? "a fenced code block with its language, its text verbatim"
has '│  name  │ value' && has '│  ──────┼──────' && has '│  alpha │ 1 ' && has '│  beta  │ 22'
ok $? "a table with padded columns and a header rule"
has '│  ─+ │$'; ok $? "a rule, ending before the right margin"
python3 - "$TMP/o" <<'PY'
import sys
# every reply line leaves a blank column before the border (the right margin)
rows = [l.rstrip("\n") for l in open(sys.argv[1], encoding="utf-8") if l.startswith("│")]
assert all(r.endswith(" │") or r.endswith("│") and r[-2] == " " for r in rows[:-1]), rows
PY
ok $? "a right margin on every line"

T -f /dev/null new-session -d -x 100 -y 45 -s chat \
    "env TERM=xterm-256color LANG=C.UTF-8 '$TERN_BIN' chat -c -m '$MODEL' --db '$db' --temp 0 --max-tokens 8; echo TERN-EXITED rc=\$?; sleep 600"
T set-option -g set-clipboard on
T set-option -t chat -g status off >/dev/null
wait_for 'KV [0-9]+ blk' 120; ok $? "chat opens the session in tmux"
T capture-pane -p -e -t chat | grep -q $'\e\[1mbold' ; ok $? "bold drawn bold (SGR 1)"
T capture-pane -p -e -t chat | grep -Eq $'\e\\[(3|[0-9;]*;3)mitalic'; ok $? "italic drawn italic (SGR 3)"
T send-keys -t chat C-y
wait_for 'copied the reply' 5 && sleep 0.5
T show-buffer 2>/dev/null >"$TMP/clip"
python3 - "$db" "$TMP/clip" <<'PY'
import sqlite3, sys
want = sqlite3.connect(sys.argv[1]).execute("SELECT text FROM messages WHERE id=2").fetchone()[0]
got = open(sys.argv[2], encoding="utf-8").read()
assert got == want, (got[:80], want[:80])
PY
ok $? "Ctrl-Y: the reply's Markdown reaches the clipboard (OSC 52, tmux buffer)"
T send-keys -t chat M-y
wait_for 'copied the code block' 5 && sleep 0.5
[ "$(T show-buffer)" = $'def f(a, b):\n    return a**b' ]; ok $? "Alt-Y: the code block alone"
T send-keys -t chat C-r
wait_for 'assistant · [0-9]+ tok' 60 && ! cap | grep -q 'Title here'
ok $? "Ctrl-R regenerates the reply in place"
sleep 1
n=$("$TERN_BIN" history --db "$db" show 1 --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["messages"]))')
[ "$n" = 2 ]; ok $? "the old reply left the history ($n messages)"
T send-keys -t chat M-e
wait_for 'message · 13 chars' 5 && ! cap | grep -q '▌ you'
ok $? "Alt-E takes the last message back into the input box"
T send-keys -t chat -l " please"; T send-keys -t chat Enter
wait_for 'Show markdown please' 10 && wait_for 'assistant · [0-9]+ tok' 60; ok $? "and Enter sends the edited one"
T send-keys -t chat C-c
wait_for 'TERN-EXITED rc=0' 20; ok $? "quit"
tap_done
