#!/bin/bash
# test_kill_chat: the durability promise end to end. 'tern chat' (headless,
# the real UI loop and engine) streams a long reply into a history database
# and is killed with SIGKILL mid-reply. Reopened with 'tern history': the
# session and the user's message are intact, the reply is marked
# interrupted and holds at least the text another process had already read
# from the database before the kill (so nothing committed was lost).
# (TERN_BIN, TERN_SRC from test_env)
. "$TERN_SRC/tests/tap.sh"
dir=$(mktemp -d /tmp/tern-kill-XXXXXX)
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$dir"' EXIT
model=$("$TERN_SRC/packaging/fetch-model" --print-path)
ok $? "default model available"
db=$dir/h.db
export XDG_DATA_HOME=$dir/data XDG_CONFIG_HOME=$dir/config
# A prompt whose greedy reply runs for many seconds (thousands of tokens).
prompt='Write a very long story about a dragon, with many chapters.'

"$TERN_BIN" chat -m "$model" --size 80x24 --db "$db" --max-tokens 4000 --temp 0 \
    --headless-frames 100000000 --keys "{wait}$prompt\r" > /dev/null 2> "$dir/err" &
pid=$!

# The reply text as another process sees it (WAL: no waiting on the writer).
peek() {
    python3 - "$db" <<'PY' 2>/dev/null
import sqlite3, sys
c = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True, timeout=5)
r = c.execute("select status, text from messages where role = 'assistant' order by id desc limit 1").fetchone()
print(r[0] + "\t" + r[1].replace("\n", "\\n") if r else "")
PY
}
seen=
for i in $(seq 1 900); do     # up to 3 minutes for the model to load and stream
    seen=$(peek)
    case $seen in streaming$'\t'?????????????*) break ;; esac
    kill -0 $pid 2>/dev/null || break
    sleep 0.2
done
case $seen in streaming$'\t'*) r=0 ;; *) r=1 ;; esac
ok $r "reply streaming into the database (${#seen} bytes seen)"
sleep 1.5
before=$(peek)
kill -9 $pid
wait $pid 2>/dev/null
pid=
ok 0 "tern chat killed with SIGKILL mid-reply"

"$TERN_BIN" history --db "$db" list --json > "$dir/list.json"
ok $? "history opens the database after the kill"
sid=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[0]['id'])" "$dir/list.json")
"$TERN_BIN" history --db "$db" show "$sid" --json > "$dir/t.json"
python3 - "$dir/t.json" "$prompt" "$before" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
prompt, before = sys.argv[2], sys.argv[3]
status, _, text = before.partition("\t")
text = text.replace("\\n", "\n")
users = [m for m in t["messages"] if m["role"] == "user"]
reply = [m for m in t["messages"] if m["role"] == "assistant"][-1]
assert users and users[-1]["text"] == prompt, users
assert reply["status"] == "interrupted", reply["status"]
assert status == "streaming" and reply["text"].startswith(text), (before[:80], reply["text"][:80])
print(f"# text read before the kill: {len(text)} bytes; stored after: {len(reply['text'])} bytes")
PY
ok $? "user message intact; reply interrupted, keeping all text committed before the kill"
tap_done
